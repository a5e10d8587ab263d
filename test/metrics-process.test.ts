import { afterAll, expect, test } from 'vitest';
import { buildTestApp, type TestApp } from './helpers.js';
import { scrape } from './support/metrics.js';

/**
 * In a file of its own, so that no scrape in this process came before: the process's CPU
 * counter and event-loop monitor count from when they start, which must be the app's start,
 * not its first scrape.
 */
let t: TestApp | undefined;
afterAll(async () => {
  await t?.close();
});

test("the process's CPU counter includes what the process did before /metrics was first scraped", async () => {
  t = await buildTestApp();
  const before = process.cpuUsage();
  const started = Date.now();
  while (Date.now() - started < 300) Math.sqrt(Math.random());
  const spent = process.cpuUsage(before);
  const spentSeconds = (spent.user + spent.system) / 1e6;

  const metrics = await scrape(t.app);
  expect(metrics.value('process_cpu_seconds_total')).toBeGreaterThanOrEqual(spentSeconds * 0.9);
});
