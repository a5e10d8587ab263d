import { expect } from 'vitest';
import type { sendWebhook, TestApp, TestTenant } from '../helpers.js';

/**
 * What the intake fuzz tests (intake-fuzz.test.ts and intake-fuzz-tcp.test.ts) ask of every
 * answer: a status the contract names, errors as JSON, nothing on Object.prototype, and an
 * accepted body read back byte for byte.
 */

/**
 * The environment of the app or server under test. The failed-authentication limit per IP
 * is off: every request comes from 127.0.0.1 and most carry junk keys.
 */
export const FUZZ_ENV = { INTAKE_AUTH_FAILURE_LIMIT: '0' };

/** fast-check runs per property; together they keep each fuzz file well under 30 s. */
export const RUNS = {
  bodies: 300,
  valid: 200,
  evilKeys: 200,
  events: 150,
  nesting: 60,
  invalidUtf8: 150,
  paths: 300,
  headers: 150,
  reads: 200,
  timeFilters: 120,
  isolation: 80,
  managementBodies: 100,
  managementReads: 150,
  rawSocket: 200,
} as const;

/** Statuses the contract names for the intake addresses and their reads. */
export const INTAKE_STATUSES = new Set([200, 202, 400, 401, 403, 404, 405, 413, 414, 415, 422, 429]);
/** What the HTTP layer itself may answer before a route runs: too slow, too long, an Expect it cannot meet. */
export const TRANSPORT_STATUSES = new Set([408, 414, 417, 431]);
const SNAKE_CASE = /^[a-z][a-z0-9_]*$/;

/** An answer of app.inject, as sendWebhook returns it. */
export type Response = Awaited<ReturnType<typeof sendWebhook>>;

/** An error answer: JSON, with non-empty string `error` and `message`, and a snake_case `code` if any. */
export function expectJsonError(status: number, contentType: string | undefined, text: string, what: string): void {
  expect(String(contentType ?? ''), `${what}: ${status} without a JSON Content-Type: ${text.slice(0, 300)}`).toMatch(
    /^application\/json/i,
  );
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new Error(`${what}: ${status} with a body that is not JSON: ${JSON.stringify(text.slice(0, 300))}`);
  }
  expect(typeof body === 'object' && body !== null && !Array.isArray(body), `${what}: ${text.slice(0, 300)}`).toBe(true);
  const { error, message, code } = body as { error?: unknown; message?: unknown; code?: unknown };
  expect(typeof error === 'string' && error.length > 0, `${what}: "error" in ${text.slice(0, 300)}`).toBe(true);
  expect(typeof message === 'string' && message.length > 0, `${what}: "message" in ${text.slice(0, 300)}`).toBe(true);
  if (code !== undefined) expect(code, `${what}: code in ${text.slice(0, 300)}`).toMatch(SNAKE_CASE);
}

/** JSON.stringify of a parsed document: the same text for the same JSON value, whatever its keys. */
const canonical = (value: unknown) => JSON.stringify(value);

/** What the expectations below read when they run: both are set in a beforeAll. */
export interface FuzzContext {
  /** The app under test. */
  app(): TestApp;
  /** Object.prototype's own property names, sorted, before the run. */
  prototypeBefore(): readonly string[];
}

/** The expectations that look at the app under test or at Object.prototype before the run. */
export function fuzzExpectations(context: FuzzContext) {
  /** Object.prototype is as it was: no property added, none polluted. */
  function expectNoPollution(): void {
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(context.prototypeBefore());
    const probe = {} as Record<string, unknown>;
    for (const name of ['polluted', 'event', 'data', 'isAdmin']) expect(probe[name], `Object.prototype.${name}`).toBeUndefined();
  }

  /** The properties every answer keeps, whatever the request. */
  function expectContractAnswer(response: Response, allowed: ReadonlySet<number> = INTAKE_STATUSES): void {
    const what = `${response.statusCode}: ${response.body.slice(0, 300)}`;
    expect(allowed.has(response.statusCode), `status ${what}`).toBe(true);
    if (response.statusCode >= 300) expectJsonError(response.statusCode, response.headers['content-type'] as string, response.body, 'answer');
    if (response.statusCode === 429) expect(Number(response.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(response.headers['x-injected'], 'a header sent by the client came back').toBeUndefined();
    expectNoPollution();
  }

  /** A 200 or 202 names a webhook whose stored body is exactly the bytes sent. */
  async function expectReadBack(tenant: TestTenant, response: Response, sent: Buffer): Promise<void> {
    const t = context.app();
    if (response.statusCode !== 200 && response.statusCode !== 202) return;
    const { uuid } = response.json() as { uuid: string };
    if (response.statusCode === 200) expect(response.headers['idempotent-replayed']).toBe('true');
    const stored = await t.store.getWebhook(tenant.companyId, tenant.integrationId, uuid);
    expect(stored, `webhook ${uuid} not stored`).toBeDefined();
    // A replay (200) names the first body, which had the same SHA-256: the same bytes.
    expect(stored!.rawBody.equals(sent), 'stored raw body differs from the bytes sent').toBe(true);

    const read = await t.app.inject({
      method: 'GET',
      url: `/api/webhooks/${tenant.integrationKey}/${uuid}`,
      headers: { 'x-api-key': tenant.apiKey },
    });
    expect(read.statusCode, read.body.slice(0, 300)).toBe(200);
    expect(Buffer.from((read.json() as { raw_body: string }).raw_body, 'utf8').equals(sent), 'raw_body read back differs').toBe(true);
  }

  /**
   * An accepted webhook reads back with the event and data it was sent with (as JSON.parse
   * reads the raw body): no key dropped, no prototype swapped in on the way out.
   */
  async function expectSameDocument(tenant: TestTenant, response: Response, sent: Buffer): Promise<void> {
    const t = context.app();
    expect(response.statusCode, response.body.slice(0, 300)).toBe(202);
    const { uuid } = response.json() as { uuid: string };
    const document = JSON.parse(sent.toString('utf8').replace(/^\ufeff/, '')) as { event: string; data?: unknown };
    const read = await t.app.inject({
      method: 'GET',
      url: `/api/webhooks/${tenant.integrationKey}/${uuid}`,
      headers: { 'x-api-key': tenant.apiKey },
    });
    expect(read.statusCode, read.body.slice(0, 300)).toBe(200);
    const item = JSON.parse(read.body) as { event: string; data: unknown };
    expect(item.event, 'event read back').toBe(document.event);
    expect(canonical(item.data), 'data read back').toBe(canonical(document.data ?? {}));
  }

  return { expectNoPollution, expectContractAnswer, expectReadBack, expectSameDocument };
}
