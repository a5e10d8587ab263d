import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { sign } from '@octokit/webhooks-methods';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { newId } from '../src/domain/ids.js';
import { newSigningSecret } from '../src/destinations/signing.js';
import { blockLoop, buildTestApp, fillGroupsInFlight, releaseStalledCommits, sendWebhook, stallCommits, testSecretBox, waitFor, type TestApp } from './helpers.js';
import { managementKey, PASSWORD } from './support/api.js';
import { testDialect } from './support/databases.js';
import { addDestination } from './support/deliveries.js';
import { scrape, scrapeUrl, type Scrape } from './support/metrics.js';
import { freePort, killAll, ROOT, sleep, startServer } from './support/processes.js';
import { okReceiver, type Receiver } from './support/receivers.js';
import { DAY_MS, webhook } from './support/webhooks.js';

/**
 * /metrics scraped from a real app and read with a Prometheus text-format parser: each
 * metric moves when what it counts happens, no label names a tenant, the token guards it,
 * and INTAKE_METRICS_PORT moves it to a port of its own.
 */

const WEBHOOK_ROUTE = { method: 'POST', route: '/api/webhooks/:integration_key' };
const TOKEN = 'metrics-token-0123456789abcdef';

const apps: TestApp[] = [];
const receivers: Receiver[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  releaseStalledCommits();
  for (const app of apps.splice(0)) await app.close();
  for (const receiver of receivers.splice(0)) await receiver.close();
  await killAll();
});

async function app(env: Record<string, string> = {}, options: Parameters<typeof buildTestApp>[1] = {}): Promise<TestApp> {
  const built = await buildTestApp(env, options);
  apps.push(built);
  return built;
}

/** What a metric moved by between two scrapes. */
function moved(before: Scrape, after: Scrape, name: string, labels: Record<string, string> = {}): number {
  return after.value(name, labels) - before.value(name, labels);
}

/** An app that has accepted one webhook, how to send another, and a scrape after the first. */
async function acceptingOne(env: Record<string, string>) {
  const t = await app(env);
  const tenant = await t.newTenant();
  const send = () => sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey });
  expect((await send()).statusCode).toBe(202);
  return { t, send, before: await scrape(t.app) };
}

function observations(before: Scrape, after: Scrape, name: string, labels: Record<string, string> = {}): number {
  return after.histogram(name, labels).count - before.histogram(name, labels).count;
}


describe(`/metrics (${testDialect()})`, () => {
  test('is Prometheus text with the process metrics, and every metric of the service is documented', async () => {
    const t = await app();
    const metrics = await scrape(t.app);
    for (const name of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_heap_size_used_bytes',
      'nodejs_gc_duration_seconds',
      'nodejs_eventloop_lag_seconds',
      'nodejs_active_handles_total',
    ]) {
      expect(metrics.has(name), name).toBe(true);
    }
    const operations = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');
    const ours = [...metrics.families.values()].filter((family) => family.name.startsWith('intake_'));
    expect(ours.length).toBeGreaterThan(25);
    for (const family of ours) {
      expect(family.help, family.name).not.toBe('');
      expect(operations, `${family.name} is not in docs/operations.md`).toContain(`\`${family.name}\``);
    }
  });

  test('two apps in one process keep their own counts', async () => {
    const [one, two] = [await app(), await app()];
    const tenant = await one.newTenant();
    expect((await sendWebhook(one.app, tenant.integrationKey, { apiKey: tenant.apiKey })).statusCode).toBe(202);
    const accepted = { ...WEBHOOK_ROUTE, outcome: 'accepted' };
    expect((await scrape(one.app)).value('intake_webhook_requests_total', accepted)).toBe(1);
    expect((await scrape(two.app)).value('intake_webhook_requests_total', accepted)).toBe(0);
  });

  test('a flood of scrapes is paced: callers at once share one text, one after another wait for the next; none gets a text older than its call', async () => {
    const t = await app();
    const tenant = await t.newTenant();
    const made = vi.spyOn(Registry, 'merge');
    const accepted = { ...WEBHOOK_ROUTE, outcome: 'accepted' };

    // 100 at once: one text, or two when one was being made as they came (a third only if
    // they took over 50 ms to arrive); unpaced, 100.
    const atOnce = await Promise.all(Array.from({ length: 100 }, () => t.app.inject({ method: 'GET', url: '/metrics' })));
    expect(atOnce.every((response) => response.statusCode === 200)).toBe(true);
    expect(made.mock.calls.length).toBeLessThanOrEqual(3);

    // One after another for 500 ms: a text at most every 50 ms, each after the webhook sent before it.
    made.mockClear();
    const started = performance.now();
    let scrapes = 0;
    while (performance.now() - started < 500) {
      expect((await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey })).statusCode).toBe(202);
      scrapes++;
      expect((await scrape(t.app)).value('intake_webhook_requests_total', accepted)).toBe(scrapes);
    }
    expect(made.mock.calls.length).toBe(scrapes);
    expect(scrapes).toBeLessThanOrEqual(12);
  });

  test('a 202, a replay and refusals move the intake counters and histograms', async () => {
    const t = await app();
    const tenant = await t.newTenant();
    const before = await scrape(t.app);
    const body = '{"event":"order.created","data":{"id":1}}';
    const idempotent = { apiKey: tenant.apiKey, body, headers: { 'idempotency-key': 'order-1' } };
    expect((await sendWebhook(t.app, tenant.integrationKey, idempotent)).statusCode).toBe(202);
    expect((await sendWebhook(t.app, tenant.integrationKey, idempotent)).statusCode).toBe(200);
    expect((await sendWebhook(t.app, tenant.integrationKey, {})).statusCode).toBe(401);
    expect((await sendWebhook(t.app, tenant.integrationKey, { apiKey: 'whk_dev_nope' })).statusCode).toBe(401);
    expect((await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body: '{"data":{}}' })).statusCode).toBe(422);
    expect((await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body: '[' })).statusCode).toBe(400);
    expect((await sendWebhook(t.app, 'no-such-integration', {})).statusCode).toBe(401);
    const after = await scrape(t.app);

    const requests = (outcome: string, status: string) => moved(before, after, 'intake_webhook_requests_total', { ...WEBHOOK_ROUTE, outcome, status });
    expect(requests('accepted', '202')).toBe(1);
    expect(requests('replayed', '200')).toBe(1);
    expect(requests('missing_api_key', '401')).toBe(2);
    expect(requests('invalid_api_key', '401')).toBe(1);
    expect(requests('validation_failed', '422')).toBe(1);
    expect(requests('invalid_json', '400')).toBe(1);
    expect(moved(before, after, 'intake_auth_failures_total', { area: 'intake', reason: 'missing_api_key' })).toBe(2);
    expect(moved(before, after, 'intake_auth_failures_total', { area: 'intake', reason: 'invalid_api_key' })).toBe(1);
    expect(moved(before, after, 'intake_unknown_integration_requests_total')).toBe(1);

    // The bodies read: the 202, the replay, the 422 and the 400 (refusals before the body have none).
    const bodies = after.histogram('intake_webhook_body_bytes');
    expect(bodies.count - before.histogram('intake_webhook_body_bytes').count).toBe(4);
    expect(bodies.sum - before.histogram('intake_webhook_body_bytes').sum).toBe(2 * body.length + '{"data":{}}'.length + 1);
    // One group commit with the new webhook (the replay commits in a group of its own: its claim is checked there).
    expect(observations(before, after, 'intake_group_commit_webhooks')).toBeGreaterThanOrEqual(1);
    expect(observations(before, after, 'intake_group_commit_duration_seconds', { outcome: 'committed' })).toBeGreaterThanOrEqual(1);
    expect(after.histogram('intake_group_commit_duration_seconds', { outcome: 'failed' }).count).toBe(0);
    expect(observations(before, after, 'intake_http_request_duration_seconds', { ...WEBHOOK_ROUTE, status: '202' })).toBe(1);
    expect(observations(before, after, 'intake_http_request_duration_seconds', { ...WEBHOOK_ROUTE, status: '401' })).toBe(3);
    expect(moved(before, after, 'intake_key_cache_lookups_total', { kind: 'key', result: 'hit' })).toBeGreaterThanOrEqual(1);
    expect(moved(before, after, 'intake_key_cache_lookups_total', { kind: 'key', result: 'miss' })).toBeGreaterThanOrEqual(1);
  });

  test('a request shed for the event loop is counted by its bound', async () => {
    const { t, send, before } = await acceptingOne({ INTAKE_MAX_EVENT_LOOP_LAG_MS: '50' });

    await sleep(30);
    blockLoop(150);
    expect((await send()).statusCode).toBe(503);

    const after = await scrape(t.app);
    expect(moved(before, after, 'intake_requests_shed_total', { bound: 'event_loop_lag' })).toBe(1);
    expect(moved(before, after, 'intake_requests_shed_total', { bound: 'queue_full' })).toBe(0);
    expect(moved(before, after, 'intake_webhook_requests_total', { ...WEBHOOK_ROUTE, outcome: 'service_unavailable', status: '503' })).toBe(1);
  });

  // Without the event-loop bound: on a loaded machine a pause of the loop would shed one of
  // the webhooks that fill the writer, which this test needs accepted.
  test('a request refused by a full queue is counted by its bound; the queue is measured while it waits', async () => {
    const { t, send, before } = await acceptingOne({ INTAKE_WRITE_QUEUE_MAX: '1' });

    // The database stalls: the groups the writer may have in flight go to the store, the next webhook waits, another finds the queue full.
    const release = stallCommits(t.store);
    const queued = await fillGroupsInFlight(t, send);
    const waiting = await scrape(t.app);
    expect(waiting.value('intake_write_queue_depth')).toBe(1);
    expect(waiting.value('intake_write_queue_bytes')).toBeGreaterThan(0);
    expect(waiting.value('intake_write_queue_oldest_seconds')).toBeGreaterThan(0);
    expect((await send()).statusCode).toBe(503);
    release();
    expect((await Promise.all(queued)).map((answer) => answer.statusCode)).toEqual(queued.map(() => 202));

    const after = await scrape(t.app);
    expect(moved(before, after, 'intake_requests_shed_total', { bound: 'queue_full' })).toBe(1);
    expect(moved(before, after, 'intake_requests_shed_total', { bound: 'event_loop_lag' })).toBe(0);
    expect(moved(before, after, 'intake_requests_shed_total', { bound: 'queue_wait' })).toBe(0);
    expect(moved(before, after, 'intake_webhook_requests_total', { ...WEBHOOK_ROUTE, outcome: 'service_unavailable', status: '503' })).toBe(1);
    expect(after.value('intake_write_queue_depth')).toBe(0);
  });

  test('API and panel requests are timed by route shape and status; a failed sign-in is counted', async () => {
    const t = await app();
    const tenant = await t.newTenant();
    const headers = await managementKey(t, tenant.companyId);
    const email = 'owner@example.com';
    await t.management.addUser(tenant.companyId, email, PASSWORD, 'owner');
    const before = await scrape(t.app);
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/integrations', headers })).statusCode).toBe(200);
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/integrations/${tenant.integrationId}`, headers })).statusCode).toBe(200);
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/integrations/${newId('int')}`, headers })).statusCode).toBe(404);
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/integrations' })).statusCode).toBe(401);
    // 200 with the panel built, 503 without it: observed either way.
    expect([200, 503]).toContain((await t.app.inject({ method: 'GET', url: '/admin/integrations' })).statusCode);
    const wrong = await t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email, password: 'not the password' } });
    expect(wrong.statusCode).toBe(401);
    expect((await t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email, password: PASSWORD } })).statusCode).toBe(200);
    const after = await scrape(t.app);

    const timed = (method: string, route: string, status: string) =>
      observations(before, after, 'intake_http_request_duration_seconds', { method, route, status });
    expect(timed('GET', '/api/v1/integrations', '200')).toBe(1);
    expect(timed('GET', '/api/v1/integrations/:integration_id', '200')).toBe(1);
    expect(timed('GET', '/api/v1/integrations/:integration_id', '404')).toBe(1);
    expect(timed('GET', '/api/v1/integrations', '401')).toBe(1);
    expect(observations(before, after, 'intake_http_request_duration_seconds', { method: 'GET', route: '/admin/*' })).toBe(1);
    expect(timed('POST', '/api/v1/auth/login', '401')).toBe(1);
    expect(moved(before, after, 'intake_auth_failures_total', { area: 'api' })).toBe(1);
    expect(moved(before, after, 'intake_sign_in_failures_total', { reason: 'invalid_credentials' })).toBe(1);
    expect(moved(before, after, 'intake_sign_in_failures_total')).toBe(1);
    // A change through the API makes this node forget its cached keys at once.
    const changed = await t.app.inject({ method: 'PATCH', url: `/api/v1/integrations/${tenant.integrationId}`, headers, payload: { name: 'Renamed' } });
    expect(changed.statusCode).toBe(200);
    expect(moved(after, await scrape(t.app), 'intake_key_cache_invalidations_total', { reason: 'local' })).toBe(1);
  });

  test("a source's refusals are counted by provider and reason, never by integration", async () => {
    const t = await app();
    const secret = 'a signing secret of the test';
    const tenant = await t.newTenant({ source: { type: 'github', secret } });
    const before = await scrape(t.app);
    const body = JSON.stringify({ zen: 'Keep it logically awesome.' });
    const post = (signature: string | undefined) =>
      sendWebhook(t.app, tenant.integrationKey, {
        body,
        headers: { 'x-github-event': 'ping', 'x-github-delivery': randomUUID(), ...(signature === undefined ? {} : { 'x-hub-signature-256': signature }) },
      });
    expect((await post(undefined)).statusCode).toBe(401);
    expect((await post(await sign('another secret', body))).statusCode).toBe(401);
    expect((await post(await sign(secret, body))).statusCode).toBe(202);
    const after = await scrape(t.app);
    expect(moved(before, after, 'intake_source_verification_failures_total', { provider: 'github', reason: 'invalid_signature' })).toBe(2);
    expect(moved(before, after, 'intake_source_verification_failures_total')).toBe(2);
    expect(moved(before, after, 'intake_auth_failures_total', { area: 'intake', reason: 'invalid_signature' })).toBe(2);
    expect(moved(before, after, 'intake_webhook_requests_total', { ...WEBHOOK_ROUTE, outcome: 'accepted' })).toBe(1);
  });

  test('a delivery attempt, its lag and the backlog it leaves', async () => {
    const t = await app({ INTAKE_DESTINATION_ALLOW: '127.0.0.1/32' }, { delivery: { start: false } });
    const tenant = await t.newTenant();
    const receiver = await okReceiver();
    receivers.push(receiver);
    const box = testSecretBox();
    await addDestination(t.store, tenant.companyId, {
      name: 'Receiver',
      url: receiver.url,
      timeoutMs: 2000,
      secretSealed: box.seal(newSigningSecret()),
    });
    const before = await scrape(t.app);
    expect((await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey })).statusCode).toBe(202);
    await sleep(5);
    const due = await scrape(t.app);
    expect(due.value('intake_delivery_backlog')).toBe(1);
    expect(due.value('intake_delivery_backlog_oldest_seconds')).toBeGreaterThan(0);

    expect(await t.app.dispatcher.runOnce()).toBe(1);
    const after = await scrape(t.app);
    expect(moved(before, after, 'intake_delivery_attempts_total', { outcome: 'succeeded' })).toBe(1);
    expect(moved(before, after, 'intake_delivery_attempts_total')).toBe(1);
    expect(observations(before, after, 'intake_delivery_lag_seconds')).toBe(1);
    expect(after.histogram('intake_delivery_lag_seconds').sum).toBeGreaterThan(0);
    expect(after.value('intake_delivery_backlog')).toBe(0);
    expect(after.value('intake_delivery_backlog_oldest_seconds')).toBe(0);
    expect(after.value('intake_deliveries_in_flight')).toBe(0);
  });

  test('an open live tail is counted while it is open', async () => {
    const t = await app();
    const tenant = await t.newTenant();
    const headers = await managementKey(t, tenant.companyId);
    const base = await t.app.listen({ host: '127.0.0.1', port: 0 });
    const abort = new AbortController();
    const response = await fetch(`${base}/api/v1/webhooks/stream`, { headers, signal: abort.signal });
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    await reader.read();
    expect((await scrape(t.app)).value('intake_live_tail_streams')).toBe(1);
    abort.abort();
    await reader.read().catch(() => undefined);
    await waitFor(async () => ((await scrape(t.app)).value('intake_live_tail_streams') === 0 ? true : undefined), 'the stream to close');
    // A stream's answer never ends as others do: it is not timed (the gauge is its measure).
    expect((await scrape(t.app)).samples('intake_http_request_duration_seconds_count', { route: '/api/v1/webhooks/stream' })).toEqual([]);
  });

  test("retention's purges are counted by table", async () => {
    const t = await app({ INTAKE_RETENTION_INTERVAL_SECONDS: '1' });
    const tenant = await t.newTenant();
    const owner = { companyId: tenant.companyId, integrationId: tenant.integrationId, integrationKey: tenant.integrationKey, keyId: tenant.keyId };
    await t.store.commitBatch([webhook(owner, Date.now() - 40 * DAY_MS), webhook(owner, Date.now() - 41 * DAY_MS)], []);
    const after = await waitFor(async () => {
      const metrics = await scrape(t.app);
      return metrics.value('intake_retention_runs_total', { outcome: 'completed' }) > 0 ? metrics : undefined;
    }, 'a retention purge');
    // PostgreSQL may drop an expired day partition whole instead of deleting its rows.
    const purged = after.value('intake_retention_rows_purged_total', { table: 'webhooks' }) + after.value('intake_retention_partitions_dropped_total');
    expect(purged).toBeGreaterThan(0);
    expect(after.value('intake_retention_runs_total', { outcome: 'failed' })).toBe(0);
  });

  test('the connection pool is shown on PostgreSQL and absent on SQLite', async () => {
    const t = await app();
    await t.newTenant();
    // The app's start-up reads (key cache, delivery and retention jobs) may briefly queue for
    // one of the test pool's few connections on a busy machine: scrape once none waits.
    const metrics =
      testDialect() === 'postgres'
        ? await waitFor(async () => {
            const scraped = await scrape(t.app);
            return scraped.value('intake_postgres_pool_waiting_queries') === 0 ? scraped : undefined;
          }, 'no query waiting for a pooled connection')
        : await scrape(t.app);
    if (testDialect() === 'postgres') {
      // The test store opens its own pool (test/support/databases.ts), smaller than the config's default.
      expect(metrics.value('intake_postgres_pool_max_connections')).toBe(t.store.connectionPool()!.max);
      expect(metrics.value('intake_postgres_pool_connections')).toBeGreaterThan(0);
      expect(metrics.value('intake_postgres_pool_waiting_queries')).toBe(0);
      expect(metrics.has('intake_postgres_pool_idle_connections')).toBe(true);
    } else {
      expect([...metrics.families.keys()].filter((name) => name.startsWith('intake_postgres_'))).toEqual([]);
    }
  });

  test("the event loop's busy time is counted, and the SQLite threads' only where the store runs them", async () => {
    const { t, send, before } = await acceptingOne({});
    // Work on the loop between two scrapes is busy time of the loop.
    const started = performance.now();
    while (performance.now() - started < 100) Math.sqrt(Math.random());
    expect((await send()).statusCode).toBe(202);
    const after = await scrape(t.app);
    expect(moved(before, after, 'intake_thread_busy_seconds_total', { thread: 'event_loop' })).toBeGreaterThanOrEqual(0.09);
    // The test app's store runs on the event loop (the server's SQLite threads: test/sqlite-commit-thread.test.ts).
    expect(after.samples('intake_thread_busy_seconds_total').map((sample) => sample.labels?.thread)).toEqual(['event_loop']);
  });

  test('no label carries a company, an integration, a key, a destination or a path as sent', async () => {
    const t = await app({ INTAKE_DESTINATION_ALLOW: '127.0.0.1/32' });
    const tenant = await t.newTenant();
    const headers = await managementKey(t, tenant.companyId);
    const sent = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey });
    const uuid = sent.json<{ uuid: string }>().uuid;
    await sendWebhook(t.app, tenant.integrationKey, { apiKey: 'whk_dev_made_up' });
    const read = await t.app.inject({ method: 'GET', url: `/api/webhooks/${tenant.integrationKey}/${uuid}`, headers: { 'x-api-key': tenant.apiKey } });
    expect(read.statusCode).toBe(200);
    await t.app.inject({ method: 'GET', url: `/api/v1/integrations/${tenant.integrationId}`, headers });
    await t.app.inject({ method: 'GET', url: `/api/v1/webhooks/${uuid}`, headers });
    await t.app.inject({ method: 'GET', url: `/no/such/${tenant.companyId}/${uuid}` });
    const created = await t.app.inject({ method: 'POST', url: '/api/v1/destinations', headers, payload: { name: 'Labels', url: 'http://127.0.0.1:9/hooks' } });
    expect(created.statusCode).toBe(201);
    const destinationId = created.json<{ destination: { id: string } }>().destination.id;
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/destinations/${destinationId}`, headers })).statusCode).toBe(200);
    const metrics = await scrape(t.app);

    const secrets = [tenant.companyId, tenant.integrationId, tenant.integrationKey, tenant.apiKey, tenant.keyId, headers['x-api-key']!, uuid, destinationId];
    const values = metrics.labelValues();
    expect(values.length).toBeGreaterThan(50);
    for (const { metric, label, value } of values) {
      for (const secret of secrets) expect(value, `${metric}{${label}}`).not.toContain(secret);
      expect(value, `${metric}{${label}}`).not.toMatch(/\b(?:cmp|int|key|usr|dst|dlv|req|sec)_[0-9A-Za-z]{6}|whk_|[0-9a-f]{8}-[0-9a-f]{4}-/);
      if (label === 'route') expect(value, metric).toMatch(/^(\/[a-z0-9/:_.*-]*|\(unmatched\))$/);
    }
    expect(metrics.histogram('intake_http_request_duration_seconds', { route: '/api/webhooks/:integration_key/:uuid', status: '200' }).count).toBe(1);
    expect(metrics.histogram('intake_http_request_duration_seconds', { route: '(unmatched)', status: '404' }).count).toBe(1);
  });
});

describe('INTAKE_METRICS_TOKEN', () => {
  test('set, /metrics answers 401 in the contract\'s shape without the bearer token, or with another; 200 with it', async () => {
    const t = await app({ INTAKE_METRICS_TOKEN: TOKEN });
    const get = (authorization?: string) =>
      t.app.inject({ method: 'GET', url: '/metrics', headers: authorization === undefined ? {} : { authorization } });
    for (const authorization of [undefined, '', 'Bearer', `Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(0, -1)}`, `Basic ${TOKEN}`, TOKEN]) {
      const refused = await get(authorization);
      expect(refused.statusCode, String(authorization)).toBe(401);
      expect(refused.headers['content-type']).toMatch(/^application\/json/);
      expect(refused.headers['www-authenticate']).toBe('Bearer realm="metrics"');
      expect(refused.json()).toMatchObject({ error: 'Invalid metrics token', code: 'invalid_metrics_token', message: expect.any(String) });
      expect(refused.body).not.toContain(TOKEN);
    }
    expect((await scrape(t.app, { authorization: `Bearer ${TOKEN}` })).has('intake_webhook_requests_total')).toBe(true);
    expect((await scrape(t.app, { authorization: `bearer ${TOKEN}` })).has('intake_webhook_requests_total')).toBe(true);
  });

  test('is validated at start, without its value in the message, and the metrics port must not be PORT', () => {
    const problems = (env: Record<string, string>) => {
      try {
        loadConfig(env);
        return [];
      } catch (error) {
        return (error as ConfigError).problems;
      }
    };
    const short = problems({ INTAKE_METRICS_TOKEN: 'short' });
    expect(short).toHaveLength(1);
    expect(short[0]).toMatch(/^INTAKE_METRICS_TOKEN=\(value not shown\): /);
    expect(problems({ INTAKE_METRICS_TOKEN: 'has a space in it, sixteen+' })).toHaveLength(1);
    expect(problems({ PORT: '9000', INTAKE_METRICS_PORT: '9000' })).toEqual([
      'INTAKE_METRICS_PORT=9000: must differ from PORT (unset it to serve /metrics on PORT)',
    ]);
    expect(problems({ INTAKE_METRICS_PORT: '70000' })).toHaveLength(1);
    expect(loadConfig({ INTAKE_METRICS_PORT: '9464', INTAKE_METRICS_TOKEN: TOKEN })).toMatchObject({ metricsPort: 9464, metricsToken: TOKEN });
    expect(loadConfig({})).toMatchObject({ metricsPort: undefined, metricsToken: undefined });
  });
});

describe('INTAKE_METRICS_PORT', () => {
  test('/metrics moves to a server of its own (with the token when set), and is gone from the main port', async () => {
    const t = await app({ INTAKE_METRICS_PORT: '0', INTAKE_METRICS_TOKEN: TOKEN });
    const tenant = await t.newTenant();
    expect((await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey })).statusCode).toBe(202);
    const onMain = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } });
    expect(onMain.statusCode).toBe(404);
    expect(onMain.json()).toMatchObject({ code: 'not_found' });

    const server = t.app.metricsServer!;
    await server.listen({ host: '127.0.0.1', port: 0 });
    const base = `http://127.0.0.1:${(server.server.address() as AddressInfo).port}`;
    const metrics = await scrapeUrl(`${base}/metrics`, { authorization: `Bearer ${TOKEN}` });
    expect(metrics.value('intake_webhook_requests_total', { ...WEBHOOK_ROUTE, outcome: 'accepted' })).toBe(1);
    expect(metrics.has('process_cpu_seconds_total')).toBe(true);

    const refused = await fetch(`${base}/metrics`);
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({ error: 'Invalid metrics token', code: 'invalid_metrics_token' });
    const elsewhere = await fetch(`${base}/healthz`);
    expect(elsewhere.status).toBe(404);
    expect(await elsewhere.json()).toMatchObject({ error: 'Not found', code: 'not_found', message: expect.any(String) });

    // The app's close closes it.
    apps.splice(apps.indexOf(t), 1);
    await t.close();
    await expect(fetch(`${base}/metrics`)).rejects.toThrow();
  });

  // The compiled server on SQLite: once is enough, whatever the project's database.
  test.skipIf(testDialect() === 'postgres')('the server started as operators start it listens on both ports', async () => {
    const metricsPort = await freePort();
    const server = await startServer({ env: { INTAKE_METRICS_PORT: String(metricsPort), LOG_LEVEL: 'silent' } });
    const metrics = await scrapeUrl(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(metrics.has('intake_write_queue_depth')).toBe(true);
    expect(metrics.has('nodejs_heap_size_used_bytes')).toBe(true);
    expect((await fetch(server.url('/metrics'))).status).toBe(404);
    expect((await fetch(server.url('/healthz'))).status).toBe(200);
    await server.stop();
  });
});
