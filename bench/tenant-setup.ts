import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { LoadTarget } from './closed-loop.js';
import { sleep } from './processes.js';
import type { ReaderAuth } from './tenant-attacks.js';

/** The two companies of a run: the victim sends webhooks, the attacker's viewer reads. */
export interface Tenants {
  victim: LoadTarget;
  /** The attacker's own intake address, for the big webhooks its reads then chew on. */
  attackerIntake: LoadTarget;
  /** For what the attacker's company is given by the operator (a destination of its own). */
  attackerCompanyId: string;
  reader: ReaderAuth;
  /** Why the reads use a key when a viewer session was asked for (a failed sign-in), else null. */
  readerNote: string | null;
}

/** Bytes of each of the attacker's big webhooks: just under the default body limit of 1 MiB. */
export const BIG_WEBHOOK_BYTES = 1_000_000;
const VIEWER_PASSWORD = 'bench-viewer-password-1';

/** Runs `node <dist>/cli/main.js args… --json` with the service's env and returns its one JSON object. */
export async function runIntakeCli(dist: string, env: Record<string, string>, args: string[]): Promise<Record<string, string>> {
  const { stdout } = await promisify(execFile)(process.execPath, [`${dist}/cli/main.js`, ...args, '--json'], {
    env: { ...process.env, ...env },
  });
  return JSON.parse(stdout) as Record<string, string>;
}

/**
 * Both companies made with the CLI, as an operator would: each with an integration, and for
 * the attacker a viewer and a management key with `logs:read`. The reads sign in as the
 * viewer (`reader: 'viewer'`), or use the key (`'key'`, or when the sign-in fails).
 */
export async function setUpTenants(
  dist: string,
  env: Record<string, string>,
  baseUrl: string,
  reader: 'viewer' | 'key',
): Promise<Tenants> {
  const cli = (args: string[]) => runIntakeCli(dist, env, args);
  const companyWithIntake = async (name: 'victim' | 'attacker') => {
    const company = await cli(['company', 'create', '--name', name]);
    const integration = await cli(['integration', 'create', '--company', String(company.id), '--name', 'bench']);
    const target: LoadTarget = {
      name,
      url: `${baseUrl}/api/webhooks/${integration.integration_key}`,
      headers: { 'content-type': 'application/json', 'x-api-key': String(integration.api_key) },
      body: Buffer.alloc(0),
    };
    return { companyId: String(company.id), target };
  };
  const victim = (await companyWithIntake('victim')).target;
  const { companyId: attackerId, target: attackerIntake } = await companyWithIntake('attacker');

  const email = 'viewer@attacker.example';
  await cli(['user', 'create', '--company', attackerId, '--email', email, '--password', VIEWER_PASSWORD, '--role', 'viewer']);
  const key = await cli(['key', 'create', '--company', attackerId, '--scope', 'logs:read']);
  const keyAuth: ReaderAuth = { kind: 'management key', headers: { 'x-api-key': String(key.api_key) } };

  victim.body = Buffer.from(
    JSON.stringify({ event: 'order.created', data: { id: 'ord_1', amount: 1200, currency: 'eur', customer: 'cus_1' } }),
  );
  const both = { victim, attackerIntake, attackerCompanyId: attackerId };
  if (reader === 'key') return { ...both, reader: keyAuth, readerNote: null };
  const session = await signIn(baseUrl, email, VIEWER_PASSWORD);
  if (typeof session === 'string') return { ...both, reader: keyAuth, readerNote: session };
  return { ...both, reader: session, readerNote: null };
}

/** The viewer's session cookie, or why there is none. */
async function signIn(baseUrl: string, email: string, password: string): Promise<ReaderAuth | string> {
  const response = await fetch(`${baseUrl}/api/v1/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password }),
  });
  const cookie = response.headers
    .getSetCookie()
    .map((header) => header.split(';')[0] ?? '')
    .find((pair) => pair.startsWith('intake_session='));
  if (response.status !== 200 || cookie === undefined) {
    return `the viewer's sign-in answered ${response.status} ${(await response.text()).slice(0, 200)}`;
  }
  return { kind: 'viewer session', headers: { cookie } };
}

/**
 * A valid webhook of BIG_WEBHOOK_BYTES: `event` and a `data` of ten thousand small records,
 * the shape of a batch export (parsing it costs what a real one does, unlike one long string).
 */
export function bigWebhookBody(): Buffer {
  const rows = [];
  for (let i = 0; rows.length < 10_000; i++) {
    rows.push({ id: `row_${i}`, sku: `SKU-${(i * 7919) % 100_000}`, quantity: i % 17, note: 'restocked at the north warehouse' });
  }
  const document = { event: 'inventory.snapshot', data: { rows, pad: '' } };
  const unpadded = Buffer.byteLength(JSON.stringify(document));
  if (unpadded > BIG_WEBHOOK_BYTES) throw new Error(`the big webhook is ${unpadded} B before padding`);
  document.data.pad = 'x'.repeat(BIG_WEBHOOK_BYTES - unpadded);
  return Buffer.from(JSON.stringify(document));
}

/**
 * Posts `count` copies of `target.body`, `concurrency` at a time, retrying a 503 or 429 after
 * its Retry-After (at most 2 s) until `deadline` (a Date.now() time); returns the final
 * answers by status (`not sent` for those the deadline left unsent).
 */
export async function postWebhooks(
  target: LoadTarget,
  count: number,
  concurrency: number,
  deadline: number,
): Promise<Record<string, number>> {
  const statuses: Record<string, number> = {};
  let next = 0;
  const postOne = async (): Promise<string> => {
    let last = 'not sent';
    while (Date.now() < deadline) {
      try {
        const response = await fetch(target.url, {
          method: 'POST',
          headers: target.headers,
          body: target.body,
          signal: AbortSignal.timeout(Math.max(1, Math.min(30_000, deadline - Date.now()))),
        });
        await response.arrayBuffer();
        last = String(response.status);
        if (response.status !== 503 && response.status !== 429) return last;
        await sleep(Math.min(2_000, 1000 * Number(response.headers.get('retry-after') ?? 1)));
      } catch (error) {
        last = (error as Error).name === 'TimeoutError' ? 'timeout' : `error ${(error as Error).name}`;
        await sleep(500);
      }
    }
    return last;
  };
  const worker = async () => {
    while (next < count) {
      next++;
      const status = await postOne();
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return statuses;
}
