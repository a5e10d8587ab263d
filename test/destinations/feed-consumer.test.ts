import { afterAll, afterEach, expect, test } from 'vitest';
import { freshDatabase, testDialect, type TestDatabase } from '../support/databases.js';
import { FeedConsumer } from '../support/feed-consumer.js';
import { operator } from '../support/operator.js';
import { cleanupAll, killAll, listAllWebhooks, sleep, startServer, type ServerProcess } from '../support/processes.js';
import { WebhookLoad } from '../support/webhook-load.js';

/**
 * The feed as a consumer uses it (issue 15, Tests: "Feed"): a reader that keeps its cursor
 * long-polls while senders load the service, through a kill -9 and a restart of a node, and
 * gets every webhook the service stored exactly once, none it did not. On SQLite one node;
 * on PostgreSQL two nodes sharing the database, the reader going from one to the other, and
 * one of them killed while the other keeps committing. The company, its integrations and the
 * key are made in the store before the nodes start (support/operator.ts: what the CLI runs).
 */

const NODE_ENV = { LOG_LEVEL: 'warn' };
let db: TestDatabase | undefined;

afterEach(() => killAll());
afterAll(async () => {
  await cleanupAll();
  await db?.cleanup();
});

test('a consumer with its cursor gets every stored webhook once, during load and across a kill -9 and a restart', async () => {
  const postgres = testDialect() === 'postgres';
  db = await freshDatabase(postgres ? { ownDatabase: true } : {});
  const { management } = operator(db.store);
  const company = (await management.createCompany('Feed')).id;
  const integration = await management.createIntegration(company, { name: 'Shop' });
  const other = await management.createIntegration(company, { name: 'Billing' });
  const key = (await management.createManagementKey(company, ['logs:read'])).apiKey;
  // The database is migrated already: the nodes start side by side.
  const nodes: ServerProcess[] = await Promise.all(Array.from({ length: postgres ? 2 : 1 }, () => startServer({ databaseUrl: db!.databaseUrl, env: NODE_ENV })));
  const first = nodes[0]!;

  const targets = () =>
    nodes.flatMap((node) => [
      { address: `${node.baseUrl}/api/webhooks/${integration.integration.integrationKey}`, apiKey: integration.apiKey },
      { address: `${node.baseUrl}/api/webhooks/${other.integration.integrationKey}`, apiKey: other.apiKey },
    ]);
  const consumer = new FeedConsumer(() => nodes, key);
  const before = new WebhookLoad({ concurrency: 6, targets: targets() });
  await sleep(1500);

  // The victim: the only node on SQLite, the first of two on PostgreSQL (the other keeps committing).
  await first.kill();
  before.stop();
  await before.done;
  const restarted = await startServer({ databaseUrl: first.databaseUrl, env: NODE_ENV });
  nodes[0] = restarted;
  const after = new WebhookLoad({ concurrency: 6, targets: targets() });
  await sleep(1500);
  after.stop();
  await after.done;
  const acknowledged = new Set([...before.acked.keys(), ...after.acked.keys()]);
  const stored = [
    ...(await listAllWebhooks(restarted.baseUrl, integration.integration.integrationKey, integration.apiKey)),
    ...(await listAllWebhooks(restarted.baseUrl, other.integration.integrationKey, other.apiKey)),
  ].map((webhook) => webhook.uuid);
  // Reads on until it has as many as were stored (or the test's time runs out): the sets are compared below.
  await consumer.stop(stored.length);

  const duplicates = [...consumer.counts].filter(([, count]) => count > 1);
  console.log(
    `feed consumer (${testDialect()}): acknowledged ${acknowledged.size}, stored ${stored.length}, read ${consumer.seen.length}, ` +
      `duplicates ${duplicates.length}, pages failed while a node was down ${consumer.failures}`,
  );
  expect(acknowledged.size).toBeGreaterThan(100);
  expect(duplicates).toEqual([]);
  expect(new Set(consumer.seen)).toEqual(new Set(stored));
  for (const uuid of acknowledged) expect(consumer.counts.get(uuid), uuid).toBe(1);
}, 90_000);
