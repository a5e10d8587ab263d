import { afterAll, beforeAll, expect, test } from 'vitest';
import { freshDatabase, type TestDatabase } from './support/databases.js';
import { operator } from './support/operator.js';
import { cleanupAll, runCli, runCliJson, startServer, type RunResult, type ServerProcess } from './support/processes.js';

/**
 * Erasure by data subject from the command line (issue 40), beside a running server on a
 * SQLite file: `create` without --yes refuses and erases nothing; a preview restricted to
 * one integration counts its matches and changes nothing; confirmed, they become tombstones
 * (read back through the server) and the other integration's copy stays; the report says
 * so. The value is in no output of any run. The company and its integrations are made in
 * process (support/operator.ts); the webhooks go through the server's intake.
 */

const PERSON = 'Jane.Doe@Example.com';
/** However the value is written, this is what must appear in no output. */
const PERSON_AS_OUTPUT_MAY_SHOW_IT = /jane\.doe/i;

/** A dozen CLI runs, each a Node start: 0.7 s on a quiet machine, seconds on a busy one. */
const CLI_RUNS_TIMEOUT_MS = 120_000;

interface Integration {
  id: string;
  integrationKey: string;
  apiKey: string;
}

let database: TestDatabase;
let server: ServerProcess;
let env: Record<string, string>;
let company: string;
let shop: Integration;
let billing: Integration;
/** The shop's webhooks holding the value (in three spellings), the shop's others, and billing's copy. */
const matching: string[] = [];
const others: string[] = [];
let billingCopy: string;
const runs: RunResult[] = [];

beforeAll(async () => {
  database = await freshDatabase({ dialect: 'sqlite' });
  const { management } = operator(database.store);
  company = (await management.createCompany('CLI erasures')).id;
  const integration = async (name: string): Promise<Integration> => {
    const created = await management.createIntegration(company, { name });
    return { id: created.integration.id, integrationKey: created.integration.integrationKey, apiKey: created.apiKey };
  };
  shop = await integration('Shop');
  billing = await integration('Billing');
  server = await startServer({ databaseUrl: database.databaseUrl });
  env = server.cliEnv;

  const spellings = [
    JSON.stringify({ event: 'customer.updated', data: { customer: { email: 'jane.doe@example.com' } } }),
    JSON.stringify({ event: 'order.created', data: { note: 'Ship to JANE.DOE@EXAMPLE.COM' } }),
    '{"event":"customer.updated","data":{"email":"jane.doe\\u0040example.com"}}',
  ];
  for (let i = 0; i < 9; i++) {
    const body = i % 3 === 0 ? spellings[i / 3]! : JSON.stringify({ event: 'order.created', data: { email: 'someone.else@example.com', i } });
    (i % 3 === 0 ? matching : others).push(await send(shop, body));
  }
  billingCopy = await send(billing, spellings[0]!);
}, 60_000);
afterAll(async () => {
  await cleanupAll();
  await database?.cleanup();
});

async function send(integration: Integration, body: string): Promise<string> {
  const response = await fetch(server.url(`/api/webhooks/${integration.integrationKey}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': integration.apiKey },
    body,
    signal: AbortSignal.timeout(10_000),
  });
  expect(response.status).toBe(202);
  return ((await response.json()) as { uuid: string }).uuid;
}

/** A webhook as its integration's key reads it from the server. */
async function readBack(integration: Integration, uuid: string): Promise<{ raw_body: string; data: unknown }> {
  const response = await fetch(server.url(`/api/webhooks/${integration.integrationKey}/${uuid}`), {
    headers: { 'x-api-key': integration.apiKey },
    signal: AbortSignal.timeout(10_000),
  });
  expect(response.status).toBe(200);
  return (await response.json()) as { raw_body: string; data: unknown };
}

async function cli(args: string[]): Promise<RunResult> {
  const run = await runCli(args, env);
  runs.push(run);
  return run;
}

async function cliJson(args: string[]): Promise<Record<string, any>> {
  const { json, run } = await runCliJson(args, env);
  runs.push(run);
  return json;
}

test('create without --yes refuses; a preview counts; confirmed, the matches are tombstones; the report says so; the value is never printed', async () => {
  const refused = await cli(['erasure', 'create', '--company', company, '--value', PERSON, '--json']);
  expect(refused.code).toBe(1);
  expect(refused.stdout).toBe('');
  expect(refused.stderr).toMatch(/^intake: .*cannot be undone.*--yes/);
  expect(await cliJson(['erasure', 'list', '--company', company])).toEqual({ data: [] });
  expect((await readBack(shop, matching[0]!)).raw_body).toContain('jane.doe@example.com');

  const since = new Date(Date.now() - 3_600_000).toISOString();
  const preview = await cliJson(['erasure', 'preview', '--company', company, '--value', PERSON, '--integration', shop.id, '--since', since, '--wait']);
  expect(preview).toMatchObject({
    id: expect.stringMatching(/^ers_/),
    state: 'previewed',
    dry_run: true,
    value_hint: 'J•••@Example.com',
    criteria: { since, integration_ids: [shop.id], paths: [] },
    scanned: matching.length + others.length,
    counts: { webhooks: matching.length, deliveries: 0, attempts: 0, request_log: matching.length },
    requested_by: { type: 'cli' },
  });
  expect(preview.sample.map((s: { uuid: string }) => s.uuid).sort()).toEqual([...matching].sort());
  const id = String(preview.id);
  // A preview changes nothing.
  for (const uuid of matching) expect((await readBack(shop, uuid)).raw_body.toLowerCase()).toMatch(/jane\.doe(@|\\u0040)example\.com/);

  const shown = await cli(['erasure', 'show', '--erasure', id]);
  expect(shown.code, shown.stderr).toBe(0);
  expect(shown.stdout).toMatch(/^state: previewed$/m);
  expect(shown.stdout).toMatch(new RegExp(`^webhooks: ${matching.length}$`, 'm'));
  expect(shown.stdout).toContain(`intake erasure confirm --erasure ${id}`);

  const erased = await cliJson(['erasure', 'confirm', '--erasure', id, '--wait']);
  expect(erased).toMatchObject({
    id,
    state: 'completed',
    dry_run: false,
    confirmed_by: { type: 'cli' },
    counts: { webhooks: matching.length, deliveries: 0, attempts: 0, request_log: matching.length },
  });
  for (const uuid of matching) {
    const read = await readBack(shop, uuid);
    expect(read.data).toEqual({ erased: { erasure_id: id, erased_at: expect.any(String), erased_by: expect.stringMatching(/^cli /) } });
    expect(read.raw_body).not.toMatch(PERSON_AS_OUTPUT_MAY_SHOW_IT);
  }
  for (const uuid of others) expect((await readBack(shop, uuid)).raw_body).toContain('someone.else@example.com');
  // Outside the integrations named: untouched.
  expect((await readBack(billing, billingCopy)).raw_body).toContain('jane.doe@example.com');

  const report = await cli(['erasure', 'report', '--erasure', id]);
  expect(report.code, report.stderr).toBe(0);
  expect(report.stdout).toContain(`Erasure report ${id}`);
  expect(report.stdout).toContain('Value searched for: J•••@Example.com');
  expect(report.stdout).toContain(`Webhooks erased: ${matching.length}`);
  expect(report.stdout).toMatch(/^State: completed at /m);

  // A key with the new scope sees, through the server's API, the erasure the CLI made.
  const key = await cliJson(['key', 'create', '--company', company, '--scope', 'data:erase']);
  const listed = await fetch(server.url('/api/v1/erasures'), { headers: { 'x-api-key': String(key.api_key) }, signal: AbortSignal.timeout(10_000) });
  expect(listed.status).toBe(200);
  expect(((await listed.json()) as { data: Array<Record<string, unknown>> }).data).toMatchObject([{ id, state: 'completed' }]);

  const list = await cli(['erasure', 'list', '--company', company]);
  expect(list.stdout).toMatch(new RegExp(`^${id}\\s+completed\\s+erasure\\s+J•••@Example\\.com\\s+${matching.length} webhooks\\s`, 'm'));

  for (const run of runs) {
    expect(run.stdout, 'stdout').not.toMatch(PERSON_AS_OUTPUT_MAY_SHOW_IT);
    expect(run.stderr, 'stderr').not.toMatch(PERSON_AS_OUTPUT_MAY_SHOW_IT);
  }
}, CLI_RUNS_TIMEOUT_MS);
