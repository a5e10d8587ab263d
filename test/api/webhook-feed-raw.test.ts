import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { buildApp, type AppDeps, type AppInstance } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { Management } from '../../src/services/management.js';
import { sendWebhook, testSecretBox, waitFor, type TestApp, type TestTenant } from '../helpers.js';
import { freshDatabase, type TestDatabase } from '../support/databases.js';
import { ADMISSION_GATE_OFF, TEST_PASSWORD_HASH_COST } from '../support/processes.js';
import { webhook } from '../support/webhooks.js';

/**
 * What `intake listen` reads from GET /api/v1/webhooks/feed: the request as received
 * (`include=request`), the `event` and repeated `integration_id` filters, and a waiting read
 * woken by this node's commit. The feed's poll is set far beyond every wait here, so only
 * the bell (src/intake/feed-bell.ts) can answer a waiting read before its time is up.
 *
 * The app is built here rather than with buildTestApp: on a database of its own (on
 * PostgreSQL the feed waits for every older transaction of its database, other test files'
 * included) and with that poll interval.
 */
const ONLY_THE_BELL_POLL_MS = 10 * 60_000;
const MIB = 1024 * 1024;

interface FeedApp extends Pick<TestApp, 'app' | 'store' | 'management' | 'newTenant'> {
  database: TestDatabase;
  close(): Promise<void>;
}

/** A management key of the company that reads logs: its X-API-Key header. */
async function logReader(f: FeedApp, companyId: string): Promise<Record<string, string>> {
  return { 'x-api-key': (await f.management.createManagementKey(companyId, ['logs:read'])).apiKey };
}

async function buildFeedApp(options: Pick<AppDeps, 'readLimits'> = {}): Promise<FeedApp> {
  const database = await freshDatabase({ ownDatabase: true });
  const store = database.store;
  const config = loadConfig({ LOG_LEVEL: 'silent', ...ADMISSION_GATE_OFF, INTAKE_PASSWORD_HASH_COST: TEST_PASSWORD_HASH_COST });
  const app = await buildApp({
    config,
    store,
    logger: pino({ level: 'silent' }),
    secrets: testSecretBox(),
    delivery: { start: false },
    feedPollMs: ONLY_THE_BELL_POLL_MS,
    ...options,
  });
  const management = new Management(
    store,
    { environment: config.environment, baseUrl: config.baseUrl, defaultBodyLimit: config.defaultBodyLimit, secrets: testSecretBox(), passwordHashCost: config.passwordHashCost },
    { type: 'cli', id: 'test', ip: null },
  );
  return {
    app,
    store,
    database,
    management,
    async newTenant({ companyId, ...limits } = {}) {
      const company = companyId ?? (await management.createCompany('Feed company')).id;
      const created = await management.createIntegration(company, { name: 'Feed integration', ...limits });
      return { companyId: company, integrationId: created.integration.id, integrationKey: created.integration.integrationKey, apiKey: created.apiKey, keyId: created.keyId };
    },
    async close() {
      await app.close();
      await database.cleanup();
    },
  };
}

type Item = Record<string, unknown> & { uuid: string };
type Page = { data: Item[]; next_cursor: string };

function readFeed(app: AppInstance, headers: Record<string, string>, query: string) {
  return app.inject({ method: 'GET', url: `/api/v1/webhooks/feed?${query}`, headers });
}

async function page(app: AppInstance, headers: Record<string, string>, query: string): Promise<Page> {
  const response = await readFeed(app, headers, query);
  expect(response.statusCode, response.body).toBe(200);
  return response.json<Page>();
}

/** The cursor past everything in the feed now. */
async function endOfFeed(app: AppInstance, headers: Record<string, string>): Promise<string> {
  let cursor = '';
  for (;;) {
    const next = await page(app, headers, `limit=500${cursor && `&after=${cursor}`}`);
    if (next.data.length === 0) return next.next_cursor;
    cursor = next.next_cursor;
  }
}

async function send(app: AppInstance, to: TestTenant, options: { body?: string | Buffer; headers?: Record<string, string> } = {}): Promise<string> {
  const response = await sendWebhook(app, to.integrationKey, { apiKey: to.apiKey, ...options });
  expect(response.statusCode, response.body).toBe(202);
  return response.json<{ uuid: string }>().uuid;
}

const sendEvent = (app: AppInstance, to: TestTenant, event: string) => send(app, to, { body: JSON.stringify({ event, data: { event } }) });

describe('the request as received, and the filters', () => {
  let f: FeedApp;
  let tenant: TestTenant;
  let reader: Record<string, string>;
  beforeAll(async () => {
    f = await buildFeedApp();
    tenant = await f.newTenant({ bodyLimitBytes: MIB });
    reader = await logReader(f, tenant.companyId);
  });
  afterAll(() => f?.close());

  test('include=request: the stored headers, as the detail route gives them, and the body byte for byte', async () => {
    const start = await endOfFeed(f.app, reader);
    // A byte-order mark, CRLF, characters of two to four bytes and an escaped lone surrogate:
    // bytes that a reader taking raw_body as text could change.
    const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"event":"raw.bytes",\r\n "data":{"s":"é€🎉 \\udcff"}}', 'utf8')]);
    const signature = 'v1,3q2+7w==';
    const uuid = await send(f.app, tenant, { body, headers: { 'webhook-signature': signature, 'x-custom-header': 'Custom Value' } });

    const [item] = (await page(f.app, reader, `after=${start}&include=request`)).data;
    expect(item).toBeDefined();
    expect(Object.keys(item!).sort()).toEqual(['cursor', 'data', 'event', 'headers', 'integration_id', 'raw_body_base64', 'received_at', 'uuid']);
    expect(item).toMatchObject({ uuid, event: 'raw.bytes', data: { s: 'é€🎉 \udcff' } });
    expect(Buffer.from(item!.raw_body_base64 as string, 'base64').equals(body)).toBe(true);
    const detail = await f.app.inject({ method: 'GET', url: `/api/v1/webhooks/${uuid}`, headers: reader });
    expect(item!.headers).toEqual(detail.json<{ headers: unknown }>().headers);
    expect(item!.headers).toMatchObject({ 'webhook-signature': signature, 'x-custom-header': 'Custom Value', 'content-type': 'application/json' });
    expect(item!.headers).not.toHaveProperty('x-api-key');

    // Without include the item is the summary it always was.
    const [plain] = (await page(f.app, reader, `after=${start}`)).data;
    expect(Object.keys(plain!).sort()).toEqual(['data', 'event', 'integration_id', 'received_at', 'uuid']);
    expect(plain).toEqual({ ...item, headers: undefined, raw_body_base64: undefined, cursor: undefined });
  });

  test('the stored bytes come back exactly, also where they are not UTF-8 (the route only encodes them in base64)', async () => {
    // Intake takes no body that is not UTF-8 (400), so this one is written as the writer would.
    const other = await f.newTenant();
    const raw = Buffer.from([0xff, 0xfe, 0x7b, 0x00, 0x80, 0xc3]);
    const written = { ...webhook(other, Date.now()), rawBody: raw, headers: JSON.stringify({ 'x-custom-header': 'é', 'content-type': 'application/octet-stream' }) };
    await f.store.commitBatch([written], []);
    const [item] = await waitFor(async () => {
      const items = await f.store.readFeed(other.companyId, { after: null, limit: 10, withHeaders: true });
      return items.length > 0 ? items : undefined;
    }, 'the webhook in the feed');
    expect(item!.uuid).toBe(written.uuid);
    expect(item!.rawBody.equals(raw)).toBe(true);
    expect(item!.headers).toEqual({ 'x-custom-header': 'é', 'content-type': 'application/octet-stream' });
    const [plain] = await f.store.readFeed(other.companyId, { after: null, limit: 10 });
    expect(plain).not.toHaveProperty('headers');
  });

  test('a page counts the headers in its byte budget with include=request, and only then', async () => {
    const start = await endOfFeed(f.app, reader);
    // Two bodies that fit one page together, with headers that do not.
    const padding = 'p'.repeat(MIB / 2 - 1_000 - '{"event":"big","data":{"p":""}}'.length);
    const body = `{"event":"big","data":{"p":"${padding}"}}`;
    const headers = { 'x-padding': 'h'.repeat(2_000) };
    const sent = [await send(f.app, tenant, { body, headers }), await send(f.app, tenant, { body, headers })];
    expect((await page(f.app, reader, `after=${start}`)).data.map((item) => item.uuid)).toEqual(sent);
    const first = await page(f.app, reader, `after=${start}&include=request`);
    expect(first.data.map((item) => item.uuid)).toEqual([sent[0]]);
    expect((await page(f.app, reader, `after=${first.next_cursor}&include=request`)).data.map((item) => item.uuid)).toEqual([sent[1]]);
  });

  test("each item's own cursor resumes just after it, as next_cursor does after the last", async () => {
    const start = await endOfFeed(f.app, reader);
    const sent = [await sendEvent(f.app, tenant, 'c.one'), await sendEvent(f.app, tenant, 'c.two'), await sendEvent(f.app, tenant, 'c.three')];
    const read = await page(f.app, reader, `after=${start}&include=request`);
    expect(read.data.map((item) => item.uuid)).toEqual(sent);
    const [first, second, third] = read.data as (Item & { cursor: string })[];
    expect((await page(f.app, reader, `after=${first!.cursor}`)).data.map((item) => item.uuid)).toEqual(sent.slice(1));
    expect((await page(f.app, reader, `after=${second!.cursor}`)).data.map((item) => item.uuid)).toEqual(sent.slice(2));
    expect(third!.cursor).toBe(read.next_cursor);
  });

  test('event patterns and repeated integration_id leave the others out of data and pass them', async () => {
    const second = await f.newTenant({ companyId: tenant.companyId });
    const third = await f.newTenant({ companyId: tenant.companyId });
    const start = await endOfFeed(f.app, reader);
    const sent = {
      orderPaid: await sendEvent(f.app, tenant, 'order.paid'),
      invoiceFailed: await sendEvent(f.app, second, 'invoice.failed'),
      orderShipped: await sendEvent(f.app, third, 'order.shipped'),
      orderPaidSecond: await sendEvent(f.app, second, 'order.paid'),
    };
    const end = await endOfFeed(f.app, reader);
    const shown = async (filter: string) => {
      const read = await page(f.app, reader, `after=${start}&limit=500&${filter}`);
      // Filtered out or not, every webhook is passed.
      expect(read.next_cursor).toBe(end);
      return read.data.map((item) => item.uuid);
    };
    expect(await shown(`integration_id=${tenant.integrationId}&integration_id=${second.integrationId}`)).toEqual([
      sent.orderPaid,
      sent.invoiceFailed,
      sent.orderPaidSecond,
    ]);
    expect(await shown(`integration_id=${third.integrationId}`)).toEqual([sent.orderShipped]);
    expect(await shown('event=order.*')).toEqual([sent.orderPaid, sent.orderShipped, sent.orderPaidSecond]);
    expect(await shown('event=*.failed&event=order.shipped')).toEqual([sent.invoiceFailed, sent.orderShipped]);
    expect(await shown('event=order.paid')).toEqual([sent.orderPaid, sent.orderPaidSecond]);
    expect(await shown('event=Order.*')).toEqual([]);
    expect(await shown(`event=order.*&integration_id=${second.integrationId}`)).toEqual([sent.orderPaidSecond]);
  });

  test('bad filters and include are a 400', async () => {
    const tooMany = Array.from({ length: 51 }, () => `integration_id=${tenant.integrationId}`).join('&');
    for (const query of ['include=headers', 'include=request&include=request', 'event=', `event=${'e'.repeat(201)}`, tooMany, 'integration_id=nope']) {
      const response = await readFeed(f.app, reader, query);
      expect(response.statusCode, query).toBe(400);
      expect(response.json()).toMatchObject({ code: 'invalid_request' });
    }
  });
});

describe('a waiting read, woken by the commit', () => {
  let f: FeedApp;
  let tenant: TestTenant;
  let reader: Record<string, string>;
  beforeAll(async () => {
    f = await buildFeedApp({ readLimits: { heavyReads: { perCompany: 1, perNode: 4 } } });
    tenant = await f.newTenant();
    reader = await logReader(f, tenant.companyId);
  });
  afterAll(() => f?.close());

  /**
   * Starts waiting reads one after the other (the company has one heavy read: first reads at
   * once would refuse each other), each once it waits past its first read.
   */
  async function waiting(queries: string[], headers = reader) {
    const answers: Array<Promise<Page>> = [];
    for (const query of queries) {
      const before = f.app.readLimits.longPolls.inUse;
      answers.push(page(f.app, headers, query));
      await waitFor(async () => (f.app.readLimits.longPolls.inUse === before + 1 ? true : undefined), 'the read to wait');
    }
    return answers;
  }

  test('every read waiting for the company answers with the webhook its commit brought, long before the poll', async () => {
    const cursor = await endOfFeed(f.app, reader);
    const answers = await waiting([`after=${cursor}&wait=5`, `after=${cursor}&wait=5&include=request`, `after=${cursor}&wait=5&event=bell.*`]);
    const uuid = await sendEvent(f.app, tenant, 'bell.rung');
    for (const answer of await Promise.all(answers)) expect(answer.data.map((item) => item.uuid)).toEqual([uuid]);
    expect(f.app.readLimits.longPolls.inUse).toBe(0);
  });

  test("another company's commit does not answer the read", async () => {
    const other = await f.newTenant();
    const cursor = await endOfFeed(f.app, reader);
    const [answer] = await waiting([`after=${cursor}&wait=1`]);
    await sendEvent(f.app, other, 'elsewhere');
    expect(await answer).toEqual({ data: [], next_cursor: cursor });
  });

  test('a woken read still takes a heavy read of the company: it reads once one is free', async () => {
    const cursor = await endOfFeed(f.app, reader);
    const [answer] = await waiting([`after=${cursor}&wait=5`]);
    const held = f.app.readLimits.heavyReads.take(tenant.companyId);
    const reads = vi.spyOn(f.store, 'readFeed');
    const slots = vi.spyOn(f.app.readLimits.heavyReads, 'tryTake');
    try {
      const uuid = await sendEvent(f.app, tenant, 'bell.held');
      await waitFor(async () => (slots.mock.calls.length > 0 ? true : undefined), 'the woken read to ask for a heavy read');
      expect(reads).not.toHaveBeenCalled();
      held();
      expect((await answer!).data.map((item) => item.uuid)).toEqual([uuid]);
    } finally {
      held();
      reads.mockRestore();
      slots.mockRestore();
    }
  });

  test('a woken read checks its caller again: a key revoked meanwhile is answered 401, not the webhook', async () => {
    const revocable = await f.management.createManagementKey(tenant.companyId, ['logs:read']);
    const headers = { 'x-api-key': revocable.apiKey };
    const cursor = await endOfFeed(f.app, reader);
    const before = f.app.readLimits.longPolls.inUse;
    const answer = readFeed(f.app, headers, `after=${cursor}&wait=5`);
    await waitFor(async () => (f.app.readLimits.longPolls.inUse === before + 1 ? true : undefined), 'the read to wait');
    await f.management.revokeKey(tenant.companyId, revocable.id);
    await waitFor(async () => ((await readFeed(f.app, headers, `after=${cursor}`)).statusCode === 401 ? true : undefined), 'the revocation to reach the node');
    await sendEvent(f.app, tenant, 'bell.revoked');
    expect((await answer).statusCode).toBe(401);
  });
});
