import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { newSecretsKey, parseSecretsKeys, SecretBox } from '../src/domain/secret-box.js';
import { openStore } from '../src/store/open-store.js';
import { runCli, runCliJson, TEST_SECRETS_KEY } from './support/processes.js';

/**
 * Sources from the command line, on a SQLite file: an integration made with a provider
 * source, its source changed, and `intake secrets rotate` resealing every secret with the
 * first of INTAKE_SECRETS_KEY's keys, after which the old key can go.
 */

const dir = mkdtempSync(join(tmpdir(), 'intake-cli-sources-'));
const databaseUrl = `sqlite:${join(dir, 'intake.db')}`;
const env = { INTAKE_DATABASE_URL: databaseUrl, INTAKE_SECRETS_KEY: TEST_SECRETS_KEY };
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('create with --source, edit the source, then rotate the secrets key', async () => {
  const company = (await runCliJson(['company', 'create', '--name', 'CLI sources'], env)).json;
  const github = (
    await runCliJson(['integration', 'create', '--company', String(company.id), '--name', 'GitHub', '--source', 'github'], env)
  ).json;
  expect(github).toMatchObject({ source_type: 'github', source_secret: expect.any(String), api_key: expect.stringMatching(/^whk_dev_/) });

  const plain = (await runCliJson(['integration', 'create', '--company', String(company.id), '--name', 'Plain'], env)).json;
  expect(Object.keys(plain).sort()).toEqual(['api_key', 'id', 'integration_key', 'webhook_url']);
  // What it redacts before storing, as the API takes it; a bad path is refused in words.
  const [redacting, badRedaction] = await Promise.all([
    runCliJson(['integration', 'create', '--company', String(company.id), '--name', 'Redacting', '--redaction', '{"paths":["$..email"],"headers":["X-Email"]}'], env),
    runCli(['integration', 'create', '--company', String(company.id), '--name', 'Bad', '--redaction', '{"paths":["a..b"]}'], env),
  ]);
  expect(redacting.json).toMatchObject({ redaction_paths: ['$..email'], redaction_headers: ['x-email'] });
  expect(badRedaction.code).toBe(1);
  expect(badRedaction.stderr).toMatch(/^intake: "a\.\.b" is not a path/);
  // Its own retention, at most the company's (30 days); longer is refused naming it.
  const [retaining, tooLong] = await Promise.all([
    runCliJson(['integration', 'create', '--company', String(company.id), '--name', 'Payments', '--retention-days', '7'], env),
    runCli(['integration', 'create', '--company', String(company.id), '--name', 'Hoarding', '--retention-days', '31'], env),
  ]);
  expect(retaining.json).toMatchObject({ retention_days: 7 });
  expect(tooLong.code).toBe(1);
  expect(tooLong.stderr).toMatch(/^intake: An integration's retention .* 30 days/);
  // Both changed afterwards with edit: the redaction from now on (hashing), the retention back to the company's.
  const settingsEdited = (
    await runCliJson(['integration', 'edit', '--integration', String(retaining.json.id), '--redaction', '{"paths":["data.email"],"mode":"hash"}', '--retention-days', 'company'], env)
  ).json;
  expect(settingsEdited).toMatchObject({ id: retaining.json.id, redaction: { paths: ['data.email'], headers: [], mode: 'hash' }, retention_days: null });
  const cleared = (await runCliJson(['integration', 'edit', '--integration', String(redacting.json.id), '--redaction', 'null'], env)).json;
  expect(cleared).toMatchObject({ redaction: null });
  const [nothing, badEdit] = await Promise.all([
    runCli(['integration', 'edit', '--integration', String(retaining.json.id)], env),
    runCli(['integration', 'edit', '--integration', String(retaining.json.id), '--redaction', '{"paths":["a..b"]}', '--retention-days', '3'], env),
  ]);
  expect([nothing.code, nothing.stderr]).toEqual([1, expect.stringMatching(/^intake: Say what to change/)]);
  const mixed = await runCli(['integration', 'edit', '--integration', String(retaining.json.id), '--source', 'github', '--retention-days', '3'], env);
  expect([mixed.code, mixed.stderr]).toEqual([1, expect.stringMatching(/^intake: Change the source on its own/)]);
  expect(badEdit.code).toBe(1);
  // Refused whole: the retention asked beside the bad path did not change either.
  const reader = openStore(databaseUrl, { poolSize: 1 });
  try {
    expect((await reader.getIntegration(String(company.id), String(retaining.json.id)))?.retentionDays).toBeNull();
  } finally {
    await reader.close();
  }

  // Stripe shows its secret only once the endpoint exists: the address comes first, the secret later.
  const stripe = await runCli(['integration', 'create', '--company', String(company.id), '--name', 'Stripe', '--source', 'stripe'], env);
  expect(stripe.code).toBe(0);
  expect(stripe.stdout).toMatch(/^awaiting_secret: true$/m);
  const stripeId = /^id: (int_\S+)$/m.exec(stripe.stdout)![1]!;
  expect(stripe.stdout).toContain(`intake integration edit --integration ${stripeId} --source stripe --secret <secret>`);
  const pasted = (
    await runCliJson(['integration', 'edit', '--integration', stripeId, '--source', 'stripe', '--secret', `whsec_${'a1'.repeat(16)}`], env)
  ).json;
  expect(pasted).toMatchObject({ id: stripeId, source_type: 'stripe', source_secret_id: expect.stringMatching(/^sec_/) });
  expect(pasted).not.toHaveProperty('awaiting_secret');
  const badSecret = await runCli(['integration', 'edit', '--integration', stripeId, '--source', 'stripe', '--secret', 'not-a-stripe-secret'], env);
  expect(badSecret.code).toBe(1);
  expect(badSecret.stderr).toMatch(/^intake: /);

  const edited = (await runCliJson(['integration', 'edit', '--integration', String(github.id), '--source', 'hmac', '--source-config', '{"prefix":"sha256="}'], env)).json;
  expect(edited).toMatchObject({ id: github.id, source_type: 'hmac', source_secret: expect.any(String) });

  const newKey = newSecretsKey();
  const rotated = (await runCliJson(['secrets', 'rotate'], { ...env, INTAKE_SECRETS_KEY: `${newKey},${TEST_SECRETS_KEY}` })).json;
  expect(rotated).toMatchObject({ sealed_values: 3, resealed: 3 });
  const again = (await runCliJson(['secrets', 'rotate'], { ...env, INTAKE_SECRETS_KEY: `${newKey},${TEST_SECRETS_KEY}` })).json;
  expect(again).toMatchObject({ sealed_values: 3, resealed: 0 });

  // The old key can go: the new one alone opens every stored secret, and it opens the generated one as shown.
  const store = openStore(databaseUrl, { poolSize: 1 });
  try {
    const onlyNew = new SecretBox(parseSecretsKeys(newKey));
    const values = await store.listSealedValues();
    const opened = values.map((value) => onlyNew.open(value.sealed));
    expect(opened).toContain(edited.source_secret);
  } finally {
    await store.close();
  }
});
