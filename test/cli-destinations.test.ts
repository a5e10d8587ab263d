import Database from 'better-sqlite3';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { newSecretsKey, parseSecretsKeys, SecretBox } from '../src/domain/secret-box.js';
import { openStore } from '../src/store/open-store.js';
import { freshDatabase, type TestDatabase } from './support/databases.js';
import { operator } from './support/operator.js';
import { runCli, runCliJson, TEST_SECRETS_KEY } from './support/processes.js';

/**
 * Destinations from the command line, on a SQLite file: create (the signing secret printed
 * once, headers sealed), list, pause, resume, replay and delete, each audited as the
 * operating-system user. The refusals: test/cli-destinations-refusals.test.ts, a file of its
 * own so the suite's two workers run the two at once. The company and its integration are
 * made in process (support/operator.ts): `company create` and `integration create` have
 * their CLI tests in test/e2e.test.ts.
 */

let database: TestDatabase;
let env: Record<string, string>;
let databaseFile: string;
let company: string;
let integration: string;
beforeAll(async () => {
  database = await freshDatabase({ dialect: 'sqlite' });
  env = { INTAKE_DATABASE_URL: database.databaseUrl, INTAKE_SECRETS_KEY: TEST_SECRETS_KEY };
  databaseFile = database.databaseUrl.slice('sqlite:'.length);
  const { management } = operator(database.store);
  company = (await management.createCompany('CLI destinations')).id;
  integration = (await management.createIntegration(company, { name: 'Shop' })).integration.id;
});
afterAll(() => database.cleanup());

/** A dozen CLI runs, each a Node start: 0.7 s on a quiet machine, seconds on a busy one. */
const CLI_RUNS_TIMEOUT_MS = 90_000;

test('create, list, pause, resume, replay, delete', async () => {
  const created = await runCli(
    [
      'destination', 'create', '--company', company, '--name', 'Orders', '--url', 'https://orders.example.invalid/hooks',
      '--integration', integration, '--event', 'order.*', '--event', '*.failed',
      '--header', 'Authorization: Bearer cli-header-value', '--header', 'X-Team:  shop',
      '--timeout-ms', '5000', '--rate', '20', '--max-in-flight', '3', '--json',
    ],
    env,
  );
  expect(created.code, created.stderr).toBe(0);
  expect(created.stdout.trim().split('\n')).toHaveLength(1);
  const destination = JSON.parse(created.stdout) as Record<string, unknown>;
  expect(destination).toMatchObject({
    id: expect.stringMatching(/^dst_/),
    name: 'Orders',
    url: 'https://orders.example.invalid/hooks',
    status: 'active',
    integration_ids: [integration],
    event_patterns: ['order.*', '*.failed'],
    header_names: ['Authorization', 'X-Team'],
    timeout_ms: 5000,
    rate_per_second: 20,
    max_in_flight: 3,
    signing_secret: expect.stringMatching(/^whsec_/),
  });
  const id = String(destination.id);

  // Runs that change nothing go side by side: each is a Node start.
  const [listed, text] = await Promise.all([runCliJson(['destination', 'list', '--company', company], env), runCli(['destination', 'list', '--company', company], env)]);
  const list = listed.json as { data: Array<Record<string, unknown>> };
  expect(list.data.map((d) => d.id)).toEqual([id]);
  expect(JSON.stringify(list)).not.toContain(String(destination.signing_secret));
  expect(text.stdout).toMatch(new RegExp(`^${id}\\s+active\\s+Orders\\s+https://orders\\.example\\.invalid/hooks$`, 'm'));

  const paused = (await runCliJson(['destination', 'pause', '--destination', id], env)).json;
  expect(paused).toEqual({ id, status: 'paused' });
  const resumed = (await runCliJson(['destination', 'resume', '--destination', id], env)).json;
  expect(resumed).toEqual({ id, status: 'active' });
  const replayed = (await runCliJson(['destination', 'replay', '--destination', id, '--state', 'failed', '--since', '2026-01-01T00:00:00Z'], env)).json;
  expect(replayed).toEqual({ replayed: 0, more: false });
  // Deliveries named one by one; a bad id or a range beside them is refused in words.
  const [named, badId, withRange] = await Promise.all([
    runCliJson(['destination', 'replay', '--destination', id, '--delivery', 'dlv_0000000000000000000000', 'dlv_0000000000000000000001'], env),
    runCli(['destination', 'replay', '--destination', id, '--delivery', 'not-a-delivery'], env),
    runCli(['destination', 'replay', '--destination', id, '--delivery', 'dlv_0000000000000000000000', '--since', '2026-01-01T00:00:00Z'], env),
  ]);
  expect(named.json).toEqual({ replayed: 0, more: false });
  expect(badId.code).toBe(1);
  expect(badId.stderr).toMatch(/^intake: delivery_ids must name 1 to 100 deliveries/);
  expect(withRange.code).toBe(1);
  expect(withRange.stderr).toMatch(/^intake: Name deliveries \(delivery_ids\) or give a range/);

  // What the store holds: the secret and the header sealed, openable with the key; the audit names the operator.
  const store = openStore(database.databaseUrl, { poolSize: 1 });
  try {
    const stored = await store.getDestination(company, id);
    expect(stored).toMatchObject({ headerNames: ['Authorization', 'X-Team'], status: 'active' });
    const audit = await store.listAuditLog(company, { limit: 50 });
    const mine = audit.filter((record) => record.targetId === id);
    expect(mine.map((record) => record.action).sort()).toEqual(['destination.create', 'destination.pause', 'destination.resume']);
    expect(mine.every((record) => record.actor.type === 'cli')).toBe(true);
    expect(JSON.stringify(audit)).not.toContain('cli-header-value');
    expect(JSON.stringify(audit)).not.toContain(String(destination.signing_secret));
  } finally {
    await store.close();
  }
  const file = new Database(databaseFile, { readonly: true });
  try {
    const row = file.prepare('select secret_sealed, headers_sealed from destinations where id = ?').get(id) as { secret_sealed: string; headers_sealed: string };
    const box = new SecretBox(parseSecretsKeys(TEST_SECRETS_KEY));
    expect(box.open(row.secret_sealed)).toBe(destination.signing_secret);
    expect(JSON.parse(box.open(row.headers_sealed))).toEqual({ Authorization: 'Bearer cli-header-value', 'X-Team': 'shop' });
  } finally {
    file.close();
  }

  // `intake secrets rotate` reseals the destination's secret and headers too, so the old key can go.
  const newKey = newSecretsKey();
  const rotated = (await runCliJson(['secrets', 'rotate'], { ...env, INTAKE_SECRETS_KEY: `${newKey},${TEST_SECRETS_KEY}` })).json;
  expect(rotated).toMatchObject({ resealed: 2, unopenable: 0 });
  const after = new Database(databaseFile, { readonly: true });
  try {
    const row = after.prepare('select secret_sealed, headers_sealed from destinations where id = ?').get(id) as { secret_sealed: string; headers_sealed: string };
    const onlyNew = new SecretBox(parseSecretsKeys(newKey));
    expect(onlyNew.open(row.secret_sealed)).toBe(destination.signing_secret);
    expect(JSON.parse(onlyNew.open(row.headers_sealed))).toEqual({ Authorization: 'Bearer cli-header-value', 'X-Team': 'shop' });
  } finally {
    after.close();
  }

  // Without --rate, the service's default; `none` is no limit.
  const [byDefault, unlimited] = (
    await Promise.all([
      runCliJson(['destination', 'create', '--company', company, '--name', 'Default rate', '--url', 'https://d.example.invalid/'], env),
      runCliJson(['destination', 'create', '--company', company, '--name', 'No limit', '--url', 'https://n.example.invalid/', '--rate', 'none'], env),
    ])
  ).map((run) => run.json);
  expect(byDefault).toMatchObject({ rate_per_second: 100 });
  expect(unlimited).toMatchObject({ rate_per_second: null });
  const deletions = await Promise.all([byDefault, unlimited, destination].map((each) => runCliJson(['destination', 'delete', '--destination', String(each!.id)], env)));
  expect(deletions.map((run) => run.json)).toEqual([byDefault, unlimited, destination].map((each) => ({ id: each!.id, deleted: true })));

  expect((await runCliJson(['destination', 'list', '--company', company], env)).json).toEqual({ data: [] });
}, CLI_RUNS_TIMEOUT_MS);

test('rules from files and flags: create with them, replace them, clear them; a bad filter is refused naming its part', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'intake-cli-rules-'));
  writeFileSync(join(dir, 'filter.json'), JSON.stringify({ body: { data: { livemode: true } } }));
  writeFileSync(join(dir, 'transform.js'), 'function transform(request) { request.headers["x-cli"] = "1"; return request; }');
  writeFileSync(join(dir, 'bad.json'), JSON.stringify({ body: { amount: { $regex: 'x' } } }));
  const { json: created } = await runCliJson(
    [
      'destination', 'create', '--company', company, '--name', 'Ruled', '--url', 'https://r.example.invalid/',
      '--filter', join(dir, 'filter.json'), '--transform', join(dir, 'transform.js'),
      '--dedupe', 'body.id', '--dedupe-window', '120', '--delay', '30', '--retry', 'linear:2:60',
    ],
    env,
  );
  expect(created.rules).toEqual({
    version: 1,
    filter: { body: { data: { livemode: true } } },
    transformation: { code: 'function transform(request) { request.headers["x-cli"] = "1"; return request; }' },
    deduplicate: { fields: ['body.id'], window_seconds: 120 },
    delay_seconds: 30,
    retry: { strategy: 'linear', attempts: 2, interval_seconds: 60, max_age_seconds: null },
  });
  const { json: replaced } = await runCliJson(['destination', 'rules', '--destination', String(created.id), '--retry', 'exponential:10:30:86400'], env);
  expect(replaced.rules).toMatchObject({ version: 2, filter: null, transformation: null, retry: { strategy: 'exponential', attempts: 10, interval_seconds: 30, max_age_seconds: 86400 } });
  const { json: cleared } = await runCliJson(['destination', 'rules', '--destination', String(created.id), '--clear'], env);
  expect(cleared.rules).toMatchObject({ version: 3, filter: null, retry: null, delay_seconds: 0 });

  const refused = await runCli(['destination', 'rules', '--destination', String(created.id), '--filter', join(dir, 'bad.json')], env);
  expect(refused.code).not.toBe(0);
  expect(refused.stderr).toMatch(/rules\.filter\.body\.amount/);
  const { json: unchanged } = await runCliJson(['destination', 'list', '--company', company], env);
  expect((unchanged.data as Array<Record<string, any>>).find((d) => d.id === created.id)!.rules.version).toBe(3);
  rmSync(dir, { recursive: true, force: true });
}, CLI_RUNS_TIMEOUT_MS);
