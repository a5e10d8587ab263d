import type { Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  cleanupAll,
  listAllWebhooks,
  makeTempDir,
  runCli,
  runCliJson,
  runNode,
  SERVER_ENTRY,
  serverEnv,
  sleep,
  startServer,
  freePort,
  type ServerProcess,
} from './support/processes.js';
import { freshDatabase, testDialect, type TestDatabase } from './support/databases.js';
import { openConnection } from './support/raw-http.js';
import { MIGRATION_NAMES } from '../src/store/migrations/index.js';

/**
 * The product from the outside, as an operator and a sender meet it: `node dist/main.js`
 * (what `npm start` runs) on a fresh database, the `intake` CLI beside it, and HTTP. Runs
 * in both projects: on a SQLite file, and with INTAKE_DATABASE_URL=postgres://….
 */

const SETUP_LINK = /\/admin\/setup\?token=[A-Za-z0-9_-]{20,}/;
const DEV_KEY = /^whk_dev_[0-9A-Za-z]{34}$/;
const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
/** The contract's revocation bound, measured from the moment the CLI has exited. */
const PROPAGATION_BOUND_MS = 1_000;
const POLL_EVERY_MS = 50;

interface Tenant {
  companyId: string;
  integrationId: string;
  integrationKey: string;
  apiKey: string;
}

let server: ServerProcess;
let tenant: Tenant;
const sent: Array<{ uuid: string; body: string }> = [];
let rotated: { id: string; api_key: string };

/** A database nobody has migrated yet: the server's first start does it. */
async function freshDatabaseUrl(): Promise<string | undefined> {
  if (testDialect() === 'sqlite') return undefined; // startServer makes a SQLite file
  const fresh = await freshDatabase({ migrate: false });
  databases.push(fresh);
  return fresh.databaseUrl;
}
const databases: TestDatabase[] = [];

beforeAll(async () => {
  server = await startServer({ databaseUrl: await freshDatabaseUrl() });
});
afterAll(async () => {
  await cleanupAll();
  for (const fresh of databases) await fresh.cleanup();
});

function post(integrationKey: string, apiKey: string | undefined, body: string, path = '/api/webhooks') {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (apiKey !== undefined) headers['x-api-key'] = apiKey;
  return fetch(server.url(`${path}/${integrationKey}`), {
    method: 'POST',
    headers,
    body,
    signal: AbortSignal.timeout(10_000),
  });
}

async function getJson(path: string, apiKey: string): Promise<{ status: number; body: any }> {
  const response = await fetch(server.url(path), { headers: { 'x-api-key': apiKey }, signal: AbortSignal.timeout(10_000) });
  return { status: response.status, body: await response.json() };
}

async function send(apiKey: string, body: string, path = '/api/webhooks') {
  const response = await post(tenant.integrationKey, apiKey, body, path);
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/**
 * Polls every POLL_EVERY_MS from `since` until `attempt` succeeds; returns the milliseconds
 * it took, or throws once `boundMs` have passed (with the last answer seen).
 */
async function withinBound(
  since: number,
  attempt: () => Promise<{ ok: boolean; seen: unknown }>,
  boundMs = PROPAGATION_BOUND_MS,
): Promise<number> {
  let last: unknown;
  for (;;) {
    const startedAt = performance.now();
    const { ok, seen } = await attempt();
    last = seen;
    // The answer reflects the server's state when the request was sent, not when it arrived.
    if (ok) return startedAt - since;
    if (performance.now() - since > boundMs) {
      throw new Error(`not within ${boundMs} ms of the CLI exiting; last answer: ${JSON.stringify(last)}`);
    }
    await sleep(POLL_EVERY_MS);
  }
}

describe.sequential('intake end to end, as npm start runs it', () => {
  test('a first run prints exactly one setup link, and the link answers with an HTML page', async () => {
    await server.waitForStdout(SETUP_LINK);
    const linkLines = server.stdoutLines().filter((line) => SETUP_LINK.test(line));
    expect(linkLines).toHaveLength(1);
    const link = /https?:\/\/\S+\/admin\/setup\?token=[A-Za-z0-9_-]+/.exec(linkLines[0]!)?.[0];
    expect(link, `a full link in: ${linkLines[0]}`).toBeDefined();
    const url = new URL(link!);
    const response = await fetch(server.url(url.pathname + url.search), { signal: AbortSignal.timeout(10_000) });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await response.text()).toMatch(/<html/i);
  });

  test('the CLI creates a company, its owner and an integration', async () => {
    const company = await runCliJson(['company', 'create', '--name', 'Acme Inc', '--json'], server.cliEnv);
    expect(Object.keys(company.json).sort()).toEqual(['id', 'name']);
    expect(company.json).toMatchObject({ id: expect.any(String), name: 'Acme Inc' });
    const companyId = company.json.id as string;

    const user = await runCliJson(
      ['user', 'create', '--company', companyId, '--email', 'owner@acme.test', '--password', 'correct horse battery', '--role', 'owner', '--json'],
      server.cliEnv,
    );
    expect(Object.keys(user.json).sort()).toEqual(['email', 'id']);
    expect(user.json).toMatchObject({ id: expect.any(String), email: 'owner@acme.test' });

    const integration = await runCliJson(['integration', 'create', '--company', companyId, '--name', 'Shop', '--json'], server.cliEnv);
    expect(Object.keys(integration.json).sort()).toEqual(['api_key', 'id', 'integration_key', 'webhook_url']);
    const { id, integration_key, api_key, webhook_url } = integration.json as Record<string, string>;
    expect(api_key).toMatch(DEV_KEY);
    expect(integration_key).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(webhook_url).toBe(`${server.baseUrl}/api/webhooks/${integration_key}`);
    tenant = { companyId, integrationId: id!, integrationKey: integration_key!, apiKey: api_key! };
  });

  test('webhooks are accepted with 202 on both address shapes', async () => {
    const bodies = [
      '{"event":"order.created","data":{"id":1,"total":10.50,"name":"Zoë 🚀"},"extra":"kept"}',
      '{ "event" : "order.paid" ,\n  "data" : { "id" : 1 , "list" : [1, 2.0, 3e2] } , "source": "shop" }\n',
    ];
    for (const [i, path] of ['/api/webhooks', '/api/webhook'].entries()) {
      const response = await post(tenant.integrationKey, tenant.apiKey, bodies[i]!, path);
      expect(response.status, path).toBe(202);
      const answer = (await response.json()) as { uuid: string; received_at: string };
      expect(Object.keys(answer).sort()).toEqual(['received_at', 'uuid']);
      expect(answer.uuid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      expect(answer.received_at).toMatch(ISO_8601);
      sent.push({ uuid: answer.uuid, body: bodies[i]! });
    }
  });

  test('the key reads its webhooks back: the list newest first, and each one with its raw body byte for byte', async () => {
    for (const prefix of ['/api/webhooks', '/api/webhook']) {
      const list = await getJson(`${prefix}/${tenant.integrationKey}`, tenant.apiKey);
      expect(list.status, prefix).toBe(200);
      expect(list.body.next_cursor).toBeNull();
      expect(list.body.data.map((item: { uuid: string }) => item.uuid)).toEqual([sent[1]!.uuid, sent[0]!.uuid]);
      expect(list.body.data[1]).toMatchObject({
        uuid: sent[0]!.uuid,
        event: 'order.created',
        data: { id: 1, total: 10.5, name: 'Zoë 🚀' },
        received_at: expect.stringMatching(ISO_8601),
      });
    }
    const page = await getJson(`/api/webhooks/${tenant.integrationKey}?limit=1`, tenant.apiKey);
    expect(page.body.data).toHaveLength(1);
    expect(page.body.next_cursor).toEqual(expect.any(String));

    for (const [i, prefix] of ['/api/webhooks', '/api/webhook'].entries()) {
      const { uuid, body } = sent[i]!;
      const one = await getJson(`${prefix}/${tenant.integrationKey}/${uuid}`, tenant.apiKey);
      expect(one.status).toBe(200);
      expect(one.body.uuid).toBe(uuid);
      expect(one.body.raw_body).toBe(body);
      expect(one.body.event).toBe(JSON.parse(body).event);
      expect(one.body.data).toEqual(JSON.parse(body).data);
      expect(one.body.headers).toEqual(expect.any(Object));
    }
  });

  test('requests without a valid key get the contract errors', async () => {
    const body = '{"event":"x"}';
    const missing = await post(tenant.integrationKey, undefined, body);
    expect(missing.status).toBe(401);
    expect(await missing.json()).toMatchObject({
      error: 'Missing API key',
      message: 'API key is required in the X-API-Key header.',
    });
    const invalid = await post(tenant.integrationKey, 'whk_dev_not-a-key', body);
    expect(invalid.status).toBe(401);
    expect(await invalid.json()).toMatchObject({
      error: 'Invalid API key',
      message: 'The provided API key is not valid or has been revoked.',
    });
  });

  test('key create makes a company management key, which cannot use an integration address', async () => {
    const created = await runCliJson(['key', 'create', '--company', tenant.companyId, '--scope', 'integrations:manage', '--json'], server.cliEnv);
    expect(Object.keys(created.json).sort()).toEqual(['api_key', 'id']);
    expect(created.json.api_key).toMatch(DEV_KEY);
    expect(created.json.id).toEqual(expect.any(String));
    const response = await post(tenant.integrationKey, created.json.api_key as string, '{"event":"x"}');
    expect(response.status).toBe(403);
    expect(await response.json()).toMatchObject({ error: 'Insufficient permissions' });
  });

  test('key rotate issues a new key and the old one keeps working through the grace period', async () => {
    const before = Date.now();
    const result = await runCliJson(['key', 'rotate', '--integration', tenant.integrationId, '--grace', '60', '--json'], server.cliEnv);
    const after = Date.now();
    expect(Object.keys(result.json).sort()).toEqual(['api_key', 'id', 'previous_key_expires_at']);
    rotated = result.json as { id: string; api_key: string };
    expect(rotated.api_key).toMatch(DEV_KEY);
    expect(rotated.api_key).not.toBe(tenant.apiKey);
    const expiresAt = result.json.previous_key_expires_at as string;
    expect(expiresAt).toMatch(ISO_8601);
    expect(Date.parse(expiresAt)).toBeGreaterThanOrEqual(before + 60_000 - 1_000);
    expect(Date.parse(expiresAt)).toBeLessThanOrEqual(after + 60_000 + 1_000);

    const withNew = await send(rotated.api_key, '{"event":"after.rotate","data":{"key":"new"}}');
    expect(withNew.status).toBe(202);
    const withOld = await send(tenant.apiKey, '{"event":"after.rotate","data":{"key":"old"}}');
    expect(withOld.status).toBe(202);
  });

  test('integration disable refuses webhooks with 403 within a second; enable accepts them again', async () => {
    const disabled = await runCliJson(['integration', 'disable', '--integration', tenant.integrationId, '--json'], server.cliEnv);
    expect(disabled.json).toEqual({ id: tenant.integrationId, enabled: false });
    const tookMs = await withinBound(disabled.run.endedAt, async () => {
      const answer = await send(rotated.api_key, '{"event":"while.disabling"}');
      return { ok: answer.status === 403 && answer.body.error === 'Integration disabled', seen: answer };
    });
    console.log(`integration disable took effect within ${tookMs.toFixed(0)} ms of the CLI exiting`);

    const enabled = await runCliJson(['integration', 'enable', '--integration', tenant.integrationId, '--json'], server.cliEnv);
    expect(enabled.json).toEqual({ id: tenant.integrationId, enabled: true });
    // Only disabling is bound to a second; enabling just has to happen (bounded wait).
    await withinBound(
      enabled.run.endedAt,
      async () => {
        const answer = await send(rotated.api_key, '{"event":"after.enable"}');
        return { ok: answer.status === 202, seen: answer };
      },
      10_000,
    );
  });

  test('key revoke takes effect on the running server within 1 second of the CLI exiting', async () => {
    // Warm the server's key cache with the key about to be revoked.
    expect((await send(rotated.api_key, '{"event":"before.revoke"}')).status).toBe(202);

    const revoked = await runCliJson(['key', 'revoke', '--key', rotated.id, '--json'], server.cliEnv);
    expect(Object.keys(revoked.json).sort()).toEqual(['id', 'revoked_at']);
    expect(revoked.json.id).toBe(rotated.id);
    expect(revoked.json.revoked_at).toMatch(ISO_8601);

    let refusedAt = 0;
    const tookMs = await withinBound(revoked.run.endedAt, async () => {
      refusedAt = Date.now();
      const answer = await send(rotated.api_key, '{"event":"after.revoke"}');
      const ok =
        answer.status === 401 &&
        answer.body.error === 'Invalid API key' &&
        answer.body.message === 'The provided API key is not valid or has been revoked.';
      return { ok, seen: answer };
    });
    console.log(
      `revocation took effect within ${tookMs.toFixed(0)} ms of the CLI exiting ` +
        `(${refusedAt - Date.parse(revoked.json.revoked_at as string)} ms after revoked_at)`,
    );

    // Revoking the new key does not end the old key's grace period.
    expect((await send(tenant.apiKey, '{"event":"old.key.still.in.grace"}')).status).toBe(202);
  });

  test('migrate --json lists nothing on a migrated database and the initial migration on a fresh one', async () => {
    const freshUrl = (await freshDatabaseUrl()) ?? `sqlite:${join(makeTempDir(), 'fresh.db')}`;
    // Two databases, so the two runs (a Node start each) go side by side.
    const [again, fresh] = await Promise.all([
      runCliJson(['migrate', '--json'], server.cliEnv),
      runCliJson(['migrate', '--json'], { INTAKE_DATABASE_URL: freshUrl }),
    ]);
    expect(again.json).toEqual({ applied: [] });
    expect(fresh.json).toEqual({ applied: MIGRATION_NAMES });
  });

  test.each([
    ['a missing required option', ['company', 'create', '--json']],
    ['an unknown company', ['integration', 'create', '--company', 'cmp_0000000000000000000000', '--name', 'x', '--json']],
    ['an unknown company (user create)', ['user', 'create', '--company', 'cmp_nope', '--email', 'a@b.test', '--password', 'long enough password', '--json']],
  ])('a CLI error (%s) exits non-zero with one line on stderr and nothing on stdout', async (_name, args) => {
    const run = await runCli(args, server.cliEnv);
    expect(run.code).not.toBe(0);
    expect(run.code).not.toBeNull();
    expect(run.stdout).toBe('');
    expect(run.stderr.endsWith('\n')).toBe(true);
    expect(run.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(run.stderr.trim()).not.toBe('');
  });

  test('a bad configuration stops the start, naming every bad variable', async () => {
    const dbPath = join(makeTempDir(), 'never.db');
    const run = await runNode(SERVER_ENTRY, [], { ...serverEnv(await freePort(), dbPath), PORT: 'abc', INTAKE_ENV: 'prod' }, { timeoutMs: 15_000 });
    expect(run.code).not.toBe(0);
    expect(run.code).not.toBeNull();
    expect(run.stderr).toContain('PORT');
    expect(run.stderr).toContain('INTAKE_ENV');
    const problemLines = run.stderr.split('\n').filter((line) => /PORT|INTAKE_ENV/.test(line));
    expect(problemLines.some((line) => line.includes('PORT') && line.includes('abc'))).toBe(true);
    expect(problemLines.some((line) => line.includes('INTAKE_ENV') && line.includes('prod'))).toBe(true);
  });

  test('SIGTERM with requests in flight: exit 0, and every 202 given is in the database', async () => {
    const acked = new Set<string>();
    const address = tenant.integrationKey;
    let stopSending = false;
    let signalled = false;
    let inFlight = 0;
    let inFlightAtSignal = 0;
    let acksAfterSignal = 0;
    const victim = server;

    const unexpected: string[] = [];
    const sender = async (loop: number) => {
      for (let seq = 0; !stopSending && victim.running; seq++) {
        inFlight++;
        try {
          const response = await post(address, tenant.apiKey, `{"event":"shutdown.test","data":{"loop":${loop},"seq":${seq}}}`);
          const text = await response.text();
          if (response.status === 202) {
            acked.add((JSON.parse(text) as { uuid: string }).uuid);
            if (signalled) acksAfterSignal++;
            if (acked.size >= 100 && !signalled) {
              signalled = true;
              inFlightAtSignal = inFlight - 1;
              victim.child.kill('SIGTERM');
            }
          } else {
            // After SIGTERM a closing server may answer 503; before it, nothing but 202 is expected.
            if (!signalled) unexpected.push(`${response.status} before SIGTERM: ${text}`);
            break;
          }
        } catch (error) {
          // After SIGTERM: refused or closed connections end this sender.
          if (!signalled) unexpected.push(`request failed before SIGTERM: ${String((error as Error).cause ?? error)}`);
          break;
        } finally {
          inFlight--;
        }
      }
    };
    const senders = Promise.all(Array.from({ length: 16 }, (_, loop) => sender(loop)));
    const deadline = setTimeout(() => (stopSending = true), 20_000);
    try {
      await senders;
    } finally {
      stopSending = true;
      clearTimeout(deadline);
    }
    expect(unexpected).toEqual([]);
    expect(signalled).toBe(true);
    // Bounded by Kubernetes' default grace period (30 s): past it an orchestrator SIGKILLs, and
    // so does stop(). The data is checked either way; the exit is asserted last.
    const exit = await victim.stop(30_000).catch((error: Error) => error.message.split('; stdout:')[0]!);
    console.log(`SIGTERM: ${inFlightAtSignal} requests in flight, ${acksAfterSignal} acknowledged after the signal, ${acked.size} in all`);
    expect(inFlightAtSignal).toBeGreaterThan(0);

    server = await startServer({ databaseUrl: victim.databaseUrl });
    const listed = new Set((await listAllWebhooks(server.baseUrl, tenant.integrationKey, tenant.apiKey)).map((item) => item.uuid));
    const missing = [...acked].filter((uuid) => !listed.has(uuid));
    expect(missing).toEqual([]);
    for (const { uuid } of sent) expect(listed.has(uuid)).toBe(true);

    // A user exists now: no setup link on this start (all of stdout is read once it has exited).
    expect(await server.stop()).toEqual({ code: 0, signal: null });
    expect(server.stdout).not.toMatch(SETUP_LINK);

    expect(exit, 'the SIGTERMed server exits 0 by itself').toEqual({ code: 0, signal: null });
  }, 90_000);

  test('SIGTERM with a connection held mid-request: closed after the grace period, exit 0', async () => {
    const held = await startServer({ databaseUrl: await freshDatabaseUrl(), env: { INTAKE_SHUTDOWN_GRACE_MS: '1000' } });
    const sockets: Socket[] = [];
    try {
      // Half a request, as a client that stalls (or an aborted fetch) leaves it: before the
      // grace period, this waited out the 30-second request timeout.
      const connection = await openConnection(held.port, sockets);
      connection.socket.write(`POST /api/webhooks/${tenant.integrationKey} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"event":`);
      await sleep(200);
      expect(await held.stop(10_000)).toEqual({ code: 0, signal: null });
      await connection.closed;
      expect(held.stdout).toContain('closing connections still busy');
    } finally {
      for (const socket of sockets) socket.destroy();
      await held.kill();
    }
  }, 30_000);
});
