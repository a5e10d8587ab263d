import { afterAll, beforeAll, expect, test } from 'vitest';
import { freshDatabase, type TestDatabase } from './support/databases.js';
import { operator } from './support/operator.js';
import { mapConcurrent, runCli, runCliJson, TEST_SECRETS_KEY } from './support/processes.js';

/**
 * What `intake destination` refuses, on a SQLite file: one line on stderr naming what is
 * wrong, a non-zero exit, nothing stored (the commands that succeed:
 * test/cli-destinations.test.ts). The company is made in process (support/operator.ts).
 */

let database: TestDatabase;
let env: Record<string, string>;
let company: string;
beforeAll(async () => {
  database = await freshDatabase({ dialect: 'sqlite' });
  env = { INTAKE_DATABASE_URL: database.databaseUrl, INTAKE_SECRETS_KEY: TEST_SECRETS_KEY };
  company = (await operator(database.store).management.createCompany('CLI refusals')).id;
});
afterAll(() => database.cleanup());

/** Eight CLI runs, each a Node start: 0.7 s on a quiet machine, seconds on a busy one. */
const CLI_RUNS_TIMEOUT_MS = 90_000;

const REFUSED: ReadonlyArray<readonly [readonly string[], RegExp]> = [
  [['--url', 'http://127.0.0.1:8080/'], /^intake: url: 127\.0\.0\.1 is a loopback address\.$/],
  [['--url', 'https://ok.example.invalid/', '--header', 'Host: evil'], /^intake: headers: Host belongs to the connection/],
  [['--url', 'https://ok.example.invalid/', '--rate', 'fast'], /^intake: "fast" is not a whole number\.$/],
  [['--url', 'https://ok.example.invalid/', '--header', 'no colon'], /^intake: --header must be "Name: value"/],
  [['--url', 'https://ok.example.invalid/', '--timeout-ms', '10'], /^intake: timeout_ms must be a whole number from 1000 to 60000/],
  [['--url', 'https://ok.example.invalid/', '--integration', 'int_0000000000000000000000'], /^intake: integration_ids: no integration/],
];

test('refusals: one line on stderr naming what is wrong, exit 1, nothing stored', async () => {
  // Side by side, two at a time (the machine's two cores): each run is a Node start, and none stores anything.
  const runs = await mapConcurrent(REFUSED, 2, ([args]) => runCli(['destination', 'create', '--company', company, '--name', 'Refused', ...args, '--json'], env));
  for (const [index, run] of runs.entries()) {
    const message = REFUSED[index]![1];
    expect(run.code, run.stdout).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr.trim()).toMatch(message);
  }
  const [listed, missing] = await Promise.all([
    runCliJson(['destination', 'list', '--company', company], env),
    runCli(['destination', 'pause', '--destination', 'dst_0000000000000000000000'], env),
  ]);
  expect(listed.json).toEqual({ data: [] });
  expect(missing.code).toBe(1);
  expect(missing.stderr).toMatch(/^intake: No destination with id dst_0000000000000000000000\.\n$/);
}, CLI_RUNS_TIMEOUT_MS);
