import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { waitFor } from '../helpers.js';
import { freshDatabase, type TestDatabase } from '../support/databases.js';
import { cleanupAll, runCliJson, startServer, type ServerProcess } from '../support/processes.js';
import { WebhookLoad } from '../support/webhook-load.js';

/**
 * Two nodes on one PostgreSQL database (contract: "several nodes can share it"), with the
 * CLI as a third process beside them: a revocation reaches the other node within 1 second
 * (contract, "API keys"), so does disabling, an idempotency key holds across nodes, and
 * every 202 either node gave is one row of the shared database.
 */

/** The contract's bound on a revocation (and a disable) reaching every node. */
const BOUND_MS = 1_000;
const NODE_ENV = { LOG_LEVEL: 'warn' };

let db: TestDatabase;
let nodes: [ServerProcess, ServerProcess];
let tenant: { companyId: string; integrationId: string; integrationKey: string; apiKey: string };
/** uuid → raw body of every 202 either node gave. */
const acknowledged = new Map<string, string>();

beforeAll(async () => {
  db = await freshDatabase({ dialect: 'postgres' });
  const started = await Promise.all([0, 1].map(() => startServer({ databaseUrl: db.databaseUrl, env: NODE_ENV })));
  nodes = [started[0]!, started[1]!];
});
afterAll(async () => {
  await cleanupAll();
  await db?.cleanup();
});

const NAMES = ['A', 'B'] as const;

interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
  /** performance.now() when it was sent. */
  sentAt: number;
}

async function post(node: ServerProcess, apiKey: string, body: string, headers: Record<string, string> = {}): Promise<Answer> {
  const sentAt = performance.now();
  const response = await fetch(node.url(`/api/webhooks/${tenant.integrationKey}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey, ...headers },
    body,
    signal: AbortSignal.timeout(10_000),
  });
  const answer = { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown>, sentAt };
  if (answer.status === 202) acknowledged.set(answer.body.uuid as string, body);
  return answer;
}

/**
 * Sends to `node` back to back until `done(answer)` holds and returns the milliseconds from
 * `since` to the sending of that answer (the state the node was in when it got it). Throws
 * on an answer `allowed` refuses, or once `boundMs` from `since` have passed.
 */
async function untilAnswer(
  node: ServerProcess,
  apiKey: string,
  since: number,
  boundMs: number,
  done: (answer: Answer) => boolean,
  allowed: (answer: Answer) => boolean,
): Promise<number> {
  for (let n = 0; ; n++) {
    const answer = await post(node, apiKey, `{"event":"probe","data":{"n":${n}}}`);
    if (done(answer)) return answer.sentAt - since;
    if (!allowed(answer)) throw new Error(`unexpected answer: ${answer.status} ${JSON.stringify(answer.body)}`);
    if (performance.now() - since > boundMs) {
      throw new Error(`not within ${boundMs} ms; last answer: ${answer.status} ${JSON.stringify(answer.body)}`);
    }
  }
}

function parsed(text: string): Record<string, unknown> {
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    return {};
  }
}

const isInvalidKey = (answer: Pick<Answer, 'status' | 'body'>) =>
  answer.status === 401 &&
  answer.body.error === 'Invalid API key' &&
  answer.body.message === 'The provided API key is not valid or has been revoked.';
const isDisabled = (answer: Answer) => answer.status === 403 && answer.body.error === 'Integration disabled';

describe.sequential('two nodes on one PostgreSQL database', () => {
  test('the CLI sets up a company and an integration that both nodes accept at once', async () => {
    const [a] = nodes;
    const company = (await runCliJson(['company', 'create', '--name', 'Two nodes'], a.cliEnv)).json as { id: string };
    const integration = (await runCliJson(['integration', 'create', '--company', company.id, '--name', 'shared'], a.cliEnv))
      .json as Record<string, string>;
    tenant = {
      companyId: company.id,
      integrationId: integration.id!,
      integrationKey: integration.integration_key!,
      apiKey: integration.api_key!,
    };
    for (const node of nodes) expect((await post(node, tenant.apiKey, '{"event":"setup"}')).status).toBe(202);
  });

  test('under load on both nodes, a key revoked with the CLI is refused by the other node within 1 s of the CLI exiting', async () => {
    const [a, b] = nodes;
    // A second key, with its id, to revoke; the first one keeps working through the grace period.
    const rotated = (await runCliJson(['key', 'rotate', '--integration', tenant.integrationId, '--grace', '3600'], a.cliEnv))
      .json as { id: string; api_key: string };

    const answers: Array<{ node: number; status: number; text: string; sentAt: number }> = [];
    /** Answers other than a 202 or the contract's 401 for an invalid key. */
    const unexpected: string[] = [];
    const acksPerNode = [0, 0];
    const load = new WebhookLoad({
      concurrency: 16,
      targets: nodes.map((node) => ({ address: node.url(`/api/webhooks/${tenant.integrationKey}`), apiKey: rotated.api_key })),
      onAnswer: (answer) => {
        const node = answer.loop % nodes.length;
        answers.push({ node, status: answer.status, text: answer.text, sentAt: answer.sentAt });
        if (answer.status !== 202 && !isInvalidKey({ ...answer, body: parsed(answer.text) })) {
          unexpected.push(`node ${NAMES[node]}: ${answer.status} ${answer.text.slice(0, 200)}`);
        }
        if (answer.status === 202) acksPerNode[node]!++;
      },
    });
    const lastAccepted = (node: number) =>
      Math.max(-Infinity, ...answers.filter((x) => x.node === node && x.status === 202).map((x) => x.sentAt));
    /** The first refusal no acceptance followed: from then on the node refuses the key. */
    const refusedFrom = (node: number) =>
      Math.min(Infinity, ...answers.filter((x) => x.node === node && x.status === 401 && x.sentAt > lastAccepted(node)).map((x) => x.sentAt));

    let revoked: Awaited<ReturnType<typeof runCliJson>>;
    try {
      await until(() => acksPerNode.every((count) => count >= 100), 'both nodes to take load', 15_000);
      // The CLI runs while both nodes are under load (with node A's variables; B is the other node).
      revoked = await runCliJson(['key', 'revoke', '--key', rotated.id], a.cliEnv);
      const cliEnded = revoked.run.endedAt;
      // Each node has refused a request sent after the CLI exited, and accepted none since.
      const refusedSince = (node: number, since: number) =>
        answers.some((x) => x.node === node && x.status === 401 && x.sentAt > since);
      await until(
        () => [0, 1].every((node) => refusedSince(node, Math.max(cliEnded, lastAccepted(node)))),
        'both nodes to refuse the revoked key',
        10_000,
      );
    } finally {
      load.stop();
      await load.done;
      for (const [uuid, body] of load.acked) acknowledged.set(uuid, body);
    }

    const cliEnded = revoked.run.endedAt;
    const revokedAtWall = Date.parse(revoked.json.revoked_at as string);
    const wallOf = (at: number) => performance.timeOrigin + at;
    const figures = [0, 1].map((node) => ({
      node: NAMES[node]!,
      refusedAfterCliMs: Math.round(refusedFrom(node) - cliEnded),
      refusedAfterRevokedAtMs: Math.round(wallOf(refusedFrom(node)) - revokedAtWall),
      lastAcceptedAfterCliMs: Math.round(lastAccepted(node) - cliEnded),
      accepted: acksPerNode[node],
    }));
    console.log(
      `revocation under load: node B (the other node) refuses the key from ${figures[1]!.refusedAfterCliMs} ms after the CLI exited ` +
        `(${figures[1]!.refusedAfterRevokedAtMs} ms after revoked_at); node A from ${figures[0]!.refusedAfterCliMs} ms ` +
        `(${figures[0]!.refusedAfterRevokedAtMs} ms); ${JSON.stringify(figures)}`,
    );

    expect(load.failures).toEqual([]);
    expect(unexpected.slice(0, 5)).toEqual([]);
    const cliStarted = cliEnded - revoked.run.durationMs;
    for (const [node, figure] of figures.entries()) {
      // The nodes took the key while the CLI ran: the figures measure the change, not a key refused all along.
      expect(lastAccepted(node), `node ${figure.node}`).toBeGreaterThan(cliStarted);
      expect(figure.refusedAfterCliMs, `node ${figure.node}`).toBeLessThanOrEqual(BOUND_MS);
      expect(figure.lastAcceptedAfterCliMs, `node ${figure.node}`).toBeLessThanOrEqual(BOUND_MS);
    }
    // Stays refused on both nodes; the integration's other key is untouched.
    for (const node of [b, a]) {
      expect(isInvalidKey(await post(node, rotated.api_key, '{"event":"after.revoke"}'))).toBe(true);
      expect((await post(node, tenant.apiKey, '{"event":"other.key"}')).status).toBe(202);
    }
  });

  test('integration disable with the CLI gives 403 on both nodes within 1 s; enable brings 202s back', async () => {
    const [a, b] = nodes;
    const disabled = await runCliJson(['integration', 'disable', '--integration', tenant.integrationId], b.cliEnv);
    expect(disabled.json).toEqual({ id: tenant.integrationId, enabled: false });
    const took = await Promise.all(
      nodes.map((node) => untilAnswer(node, tenant.apiKey, disabled.run.endedAt, BOUND_MS, isDisabled, (x) => x.status === 202)),
    );
    console.log(`integration disable: 403 on node A ${took[0]!.toFixed(0)} ms, node B ${took[1]!.toFixed(0)} ms after the CLI exited`);

    const enabled = await runCliJson(['integration', 'enable', '--integration', tenant.integrationId], a.cliEnv);
    expect(enabled.json).toEqual({ id: tenant.integrationId, enabled: true });
    // Only disabling is bound to a second; enabling just has to happen (bounded wait).
    await Promise.all([a, b].map((node) => untilAnswer(node, tenant.apiKey, enabled.run.endedAt, 10_000, (x) => x.status === 202, isDisabled)));
  });

  test('one Idempotency-Key sent to both nodes at once stores one webhook; both answers carry its uuid', async () => {
    const KEYS = 8;
    const acceptedBy = { A: 0, B: 0 };
    for (let i = 0; i < KEYS; i++) {
      const key = `idem-${randomBytes(6).toString('hex')}`;
      const body = `{"event":"idempotent","data":{"n":${i},"key":"${key}"}}`;
      // A, B, A, B in the same tick: the claims race across nodes and within each node.
      const answers = await Promise.all([0, 1, 0, 1].map((n) => post(nodes[n]!, tenant.apiKey, body, { 'idempotency-key': key })));

      const statuses = answers.map((x) => x.status);
      expect(statuses.filter((s) => s === 202), `statuses ${statuses}`).toHaveLength(1);
      expect(statuses.filter((s) => s === 200), `statuses ${statuses}`).toHaveLength(answers.length - 1);
      const original = answers.find((x) => x.status === 202)!;
      acceptedBy[NAMES[answers.indexOf(original) % 2]!]++;
      expect(original.headers.get('idempotent-replayed')).toBeNull();
      for (const replay of answers.filter((x) => x.status === 200)) {
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
        expect(replay.body).toEqual(original.body);
      }
      const rows = await db.query<{ uuid: string }>('select uuid from webhooks where integration_id = $1 and idempotency_key = $2', [
        tenant.integrationId,
        key,
      ]);
      expect(rows.map((row) => row.uuid)).toEqual([original.body.uuid]);

      // The same key with another body, on either node.
      const reused = await Promise.all(nodes.map((node) => post(node, tenant.apiKey, '{"event":"idempotent","data":{"other":true}}', { 'idempotency-key': key })));
      for (const answer of reused) {
        expect(answer.status).toBe(422);
        expect(answer.body).toMatchObject({ error: 'Idempotency key reused', message: expect.any(String) });
      }
      const after = await db.query('select 1 from webhooks where integration_id = $1 and idempotency_key = $2', [tenant.integrationId, key]);
      expect(after).toHaveLength(1);
    }
    console.log(`idempotency across nodes: ${KEYS} keys, the stored webhook came through node A ${acceptedBy.A} times, node B ${acceptedBy.B}`);
  });

  test('every webhook either node acknowledged is one row of the shared database, with its raw body', async () => {
    const rows = await db.query<{ uuid: string; raw_body: Buffer }>('select uuid, raw_body from webhooks where integration_id = $1', [
      tenant.integrationId,
    ]);
    const count = new Map<string, number>();
    const differing: string[] = [];
    for (const row of rows) {
      count.set(row.uuid, (count.get(row.uuid) ?? 0) + 1);
      if (acknowledged.has(row.uuid) && row.raw_body.toString('utf8') !== acknowledged.get(row.uuid)) differing.push(row.uuid);
    }
    const missing = [...acknowledged.keys()].filter((uuid) => !count.has(uuid));
    const twice = [...count].filter(([, n]) => n > 1).map(([uuid]) => uuid);
    console.log(`two nodes: ${acknowledged.size} acknowledged, ${rows.length} rows, ${missing.length} missing, ${twice.length} stored twice`);
    expect(missing).toEqual([]);
    expect(twice).toEqual([]);
    expect(differing).toEqual([]);
    // Nothing was refused with a 503 or left unanswered, so nothing else may be stored.
    expect(rows).toHaveLength(acknowledged.size);

    for (const node of nodes) expect(await node.stop()).toEqual({ code: 0, signal: null });
  });
});

/** waitFor on a condition over state this test keeps. */
function until(condition: () => boolean, what: string, timeoutMs: number): Promise<true> {
  return waitFor(async () => (condition() ? true : undefined), what, timeoutMs);
}
