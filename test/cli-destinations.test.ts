import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { newSecretsKey, parseSecretsKeys, SecretBox } from '../src/domain/secret-box.js';
import { openStore } from '../src/store/open-store.js';
import { runCli, runCliJson, TEST_SECRETS_KEY } from './support/processes.js';

/**
 * Destinations from the command line, on a SQLite file: create (the signing secret printed
 * once, headers sealed), list, pause, resume, replay and delete, each audited as the
 * operating-system user; refusals are one line on stderr with a non-zero exit.
 */

const dir = mkdtempSync(join(tmpdir(), 'intake-cli-destinations-'));
const databaseUrl = `sqlite:${join(dir, 'intake.db')}`;
const env = { INTAKE_DATABASE_URL: databaseUrl, INTAKE_SECRETS_KEY: TEST_SECRETS_KEY };
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A dozen CLI runs one after another, each a Node start: 0.7 s on a quiet machine, seconds on a busy one. */
const CLI_RUNS_TIMEOUT_MS = 90_000;

test('create, list, pause, resume, replay, delete', async () => {
  const company = String((await runCliJson(['company', 'create', '--name', 'CLI destinations'], env)).json.id);
  const integration = String((await runCliJson(['integration', 'create', '--company', company, '--name', 'Shop'], env)).json.id);

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

  const list = (await runCliJson(['destination', 'list', '--company', company], env)).json as { data: Array<Record<string, unknown>> };
  expect(list.data.map((d) => d.id)).toEqual([id]);
  expect(JSON.stringify(list)).not.toContain(String(destination.signing_secret));
  const text = await runCli(['destination', 'list', '--company', company], env);
  expect(text.stdout).toMatch(new RegExp(`^${id}\\s+active\\s+Orders\\s+https://orders\\.example\\.invalid/hooks$`, 'm'));

  const paused = (await runCliJson(['destination', 'pause', '--destination', id], env)).json;
  expect(paused).toEqual({ id, status: 'paused' });
  const resumed = (await runCliJson(['destination', 'resume', '--destination', id], env)).json;
  expect(resumed).toEqual({ id, status: 'active' });
  const replayed = (await runCliJson(['destination', 'replay', '--destination', id, '--state', 'failed', '--since', '2026-01-01T00:00:00Z'], env)).json;
  expect(replayed).toEqual({ replayed: 0, more: false });

  // What the store holds: the secret and the header sealed, openable with the key; the audit names the operator.
  const store = openStore(databaseUrl, { poolSize: 1 });
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
  const file = new Database(join(dir, 'intake.db'), { readonly: true });
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
  const after = new Database(join(dir, 'intake.db'), { readonly: true });
  try {
    const row = after.prepare('select secret_sealed, headers_sealed from destinations where id = ?').get(id) as { secret_sealed: string; headers_sealed: string };
    const onlyNew = new SecretBox(parseSecretsKeys(newKey));
    expect(onlyNew.open(row.secret_sealed)).toBe(destination.signing_secret);
    expect(JSON.parse(onlyNew.open(row.headers_sealed))).toEqual({ Authorization: 'Bearer cli-header-value', 'X-Team': 'shop' });
  } finally {
    after.close();
  }

  // Without --rate, the service's default; `none` is no limit.
  const byDefault = (await runCliJson(['destination', 'create', '--company', company, '--name', 'Default rate', '--url', 'https://d.example.invalid/'], env)).json;
  expect(byDefault).toMatchObject({ rate_per_second: 100 });
  const unlimited = (await runCliJson(['destination', 'create', '--company', company, '--name', 'No limit', '--url', 'https://n.example.invalid/', '--rate', 'none'], env)).json;
  expect(unlimited).toMatchObject({ rate_per_second: null });
  for (const extra of [byDefault, unlimited]) await runCliJson(['destination', 'delete', '--destination', String(extra.id)], env);

  const deleted = (await runCliJson(['destination', 'delete', '--destination', id], env)).json;
  expect(deleted).toEqual({ id, deleted: true });
  expect((await runCliJson(['destination', 'list', '--company', company], env)).json).toEqual({ data: [] });
}, CLI_RUNS_TIMEOUT_MS);

test('refusals: one line on stderr naming what is wrong, exit 1, nothing stored', async () => {
  const company = String((await runCliJson(['company', 'create', '--name', 'CLI refusals'], env)).json.id);
  for (const [args, message] of [
    [['--url', 'http://127.0.0.1:8080/'], /^intake: url: 127\.0\.0\.1 is a loopback address\.$/],
    [['--url', 'https://ok.example.invalid/', '--header', 'Host: evil'], /^intake: headers: Host belongs to the connection/],
    [['--url', 'https://ok.example.invalid/', '--rate', 'fast'], /^intake: "fast" is not a whole number\.$/],
    [['--url', 'https://ok.example.invalid/', '--header', 'no colon'], /^intake: --header must be "Name: value"/],
    [['--url', 'https://ok.example.invalid/', '--timeout-ms', '10'], /^intake: timeout_ms must be a whole number from 1000 to 60000/],
    [['--url', 'https://ok.example.invalid/', '--integration', 'int_0000000000000000000000'], /^intake: integration_ids: no integration/],
  ] as const) {
    const run = await runCli(['destination', 'create', '--company', company, '--name', 'Refused', ...args, '--json'], env);
    expect(run.code, run.stdout).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr.trim()).toMatch(message);
  }
  expect((await runCliJson(['destination', 'list', '--company', company], env)).json).toEqual({ data: [] });
  const missing = await runCli(['destination', 'pause', '--destination', 'dst_0000000000000000000000'], env);
  expect(missing.code).toBe(1);
  expect(missing.stderr).toMatch(/^intake: No destination with id dst_0000000000000000000000\.\n$/);
}, CLI_RUNS_TIMEOUT_MS);
