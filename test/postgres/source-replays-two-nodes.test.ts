import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { sign as signGitHub } from '@octokit/webhooks-methods';
import { pino } from 'pino';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { buildApp, type AppInstance } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { Management } from '../../src/services/management.js';
import type { Store } from '../../src/store/store.js';
import { testSecretBox } from '../helpers.js';
import { freshDatabase, type TestDatabase } from '../support/databases.js';
import { ADMISSION_GATE_OFF } from '../support/processes.js';

/**
 * Issue 33 across nodes: copies of one captured GitHub request, each with a new
 * X-GitHub-Delivery, sent to two nodes on one PostgreSQL database at once, store one
 * webhook; every other answer is a replay of it. The signature's claim is a row under a
 * unique constraint, so the nodes agree without talking to each other.
 */

let db: TestDatabase;
const nodes: Array<{ app: AppInstance; origin: string }> = [];

async function startNode(store: Store) {
  const config = loadConfig({ LOG_LEVEL: 'silent', ...ADMISSION_GATE_OFF });
  const app = await buildApp({ config, store, logger: pino({ level: 'silent' }), secrets: testSecretBox() });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, origin: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` };
}

beforeAll(async () => {
  db = await freshDatabase({ dialect: 'postgres' });
  nodes.push(await startNode(db.store), await startNode(db.openAnother()));
});
afterAll(async () => {
  for (const node of nodes) await node.app.close();
  await db?.cleanup();
});

test('copies of a captured request with new delivery ids, sent to two nodes at once, store one webhook', async () => {
  const management = new Management(db.store, { environment: 'development', baseUrl: 'http://localhost', defaultBodyLimit: 1 << 20, secrets: testSecretBox() }, {
    type: 'cli',
    id: 'test',
    ip: null,
  });
  const company = (await management.createCompany('Two nodes')).id;
  const created = await management.createIntegration(company, { name: 'GitHub', source: { type: 'github' } });
  const path = `/api/webhooks/${created.integration.integrationKey}`;
  const ROUNDS = 10;
  const COPIES = 8;
  for (let round = 0; round < ROUNDS; round++) {
    const body = JSON.stringify({ action: 'opened', issue: { number: round } });
    const signature = await signGitHub(created.sourceSecret!, body);
    const answers = await Promise.all(
      Array.from({ length: COPIES }, async (_, i) => {
        const response = await fetch(nodes[i % 2]!.origin + path, {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/json', 'x-github-event': 'issues', 'x-github-delivery': randomUUID(), 'x-hub-signature-256': signature },
        });
        return { status: response.status, uuid: ((await response.json()) as { uuid: string }).uuid };
      }),
    );
    expect(answers.filter((answer) => answer.status === 202), `round ${round}`).toHaveLength(1);
    expect(answers.filter((answer) => answer.status === 200)).toHaveLength(COPIES - 1);
    expect(new Set(answers.map((answer) => answer.uuid)).size).toBe(1);
  }
  const rows = await db.query<{ n: string }>('select count(*) as n from webhooks where integration_id = $1', [created.integration.id]);
  expect(Number(rows[0]!.n)).toBe(ROUNDS);
});
