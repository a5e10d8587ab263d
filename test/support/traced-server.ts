import { expect } from 'vitest';
import { freshDatabase, type TestDatabase } from './databases.js';
import { operator } from './operator.js';
import { startOtlpReceiver, type ExportedSpan, type OtlpReceiver } from './otlp-receiver.js';
import { killAll, sleep, startServer, type ServerProcess } from './processes.js';
import { okReceiver, type Receiver } from './receivers.js';

/**
 * What test/tracing.test.ts and test/tracing-off.test.ts share: a real server with the
 * OTEL variables of a test, a company whose webhooks go to a loopback receiver, an OTLP
 * receiver, and the requests they send. Call `closeTracedServers` in afterEach.
 */

export const WEBHOOK_ROUTE = 'POST /api/webhooks/:integration_key';
/** A sender's trace, sampled: what a hostile sender would send to have everything traced in its own trace ids. */
export const SENDER_TRACE_ID = 'feedfacefeedfacefeedfacefeedface';
export const SENDER_SPAN_ID = 'badc0ffee0ddf00d';
export const SENDER_TRACEPARENT = `00-${SENDER_TRACE_ID}-${SENDER_SPAN_ID}-01`;

const otlps: OtlpReceiver[] = [];
const receivers: Receiver[] = [];
const databases: TestDatabase[] = [];

/** Kills the servers, then closes the receivers and removes the databases of the test. */
export async function closeTracedServers(): Promise<void> {
  await killAll();
  for (const each of otlps.splice(0)) await each.close();
  for (const each of receivers.splice(0)) await each.close();
  for (const each of databases.splice(0)) await each.cleanup();
}

export interface Tenant {
  server: ServerProcess;
  integrationKey: string;
  apiKey: string;
  managementKey: string;
  destinationId: string;
  signingSecret: string;
  receiver: Receiver;
}

/**
 * A server with `env`, and a company with an integration whose webhooks go to a loopback
 * receiver through a destination (with a header and a query token of its own), and a
 * management key to read the request log. The company is made in the store by the
 * services `intake … create` runs (support/operator.ts), before the server starts on it.
 */
export async function tenant(env: Record<string, string>, marker = 'none'): Promise<Tenant> {
  const receiver = await okReceiver();
  receivers.push(receiver);
  const database = await freshDatabase();
  databases.push(database);
  const allow = { INTAKE_DESTINATION_ALLOW: '127.0.0.1/32' };
  const { management, destinations } = operator(database.store, allow);
  const company = (await management.createCompany('Traced')).id;
  const integration = await management.createIntegration(company, { name: 'Shop' });
  const destination = await destinations.create(company, {
    name: 'Orders',
    url: `${receiver.url}?token=${marker}`,
    headers: { Authorization: `Bearer ${marker}` },
    ratePerSecond: null,
  });
  const managementKey = await management.createManagementKey(company, ['logs:read']);
  const server = await startServer({ databaseUrl: database.databaseUrl, env: { ...allow, ...env } });
  return {
    server,
    integrationKey: integration.integration.integrationKey,
    apiKey: integration.apiKey,
    managementKey: managementKey.apiKey,
    destinationId: destination.destination.id,
    signingSecret: destination.signingSecret,
    receiver,
  };
}

export async function otlpReceiver(): Promise<OtlpReceiver> {
  const receiver = await startOtlpReceiver();
  otlps.push(receiver);
  return receiver;
}

export function send(t: Tenant, body: string, headers: Record<string, string> = {}, apiKey = t.apiKey): Promise<Response> {
  return fetch(t.server.url(`/api/webhooks/${t.integrationKey}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey, ...headers },
    body,
    signal: AbortSignal.timeout(10_000),
  });
}

export interface LoggedRequest {
  status: number;
  error_code: string | null;
  webhook_uuid: string | null;
  trace_id: string | null;
}

export async function requestLog(t: Tenant): Promise<LoggedRequest[]> {
  const response = await fetch(t.server.url('/api/v1/requests?limit=200'), { headers: { 'x-api-key': t.managementKey } });
  expect(response.status).toBe(200);
  return ((await response.json()) as { data: LoggedRequest[] }).data;
}

export async function delivered(receiver: Receiver, count: number): Promise<void> {
  const deadline = performance.now() + 15_000;
  while (receiver.received.length < count) {
    if (performance.now() > deadline) throw new Error(`${receiver.received.length} of ${count} deliveries came`);
    await sleep(25);
  }
}

export function webhookSpans(spans: ExportedSpan[]): ExportedSpan[] {
  return spans.filter((span) => span.name === WEBHOOK_ROUTE);
}
