import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { SEARCH_SCAN_BYTES, SEARCH_SCAN_ROWS, WEBHOOK_PAGE_BYTES } from '../../src/store/store.js';
import { buildTestApp, sendWebhook, waitFor, type TestApp, type TestTenant } from '../helpers.js';
import { managementKey, member, type SignedIn } from '../support/api.js';
import { openConnection } from '../support/raw-http.js';
import { createTenant, webhook, type Owner } from '../support/webhooks.js';

/**
 * /api/v1/webhooks: the list across a company, its filters and payload search, one webhook,
 * the NDJSON export; and every route with another company's key, session and ids.
 */
interface Sent {
  uuid: string;
  received_at: string;
  integration_id: string;
  body: string;
}
interface Item {
  uuid: string;
  integration_id: string;
  event: string;
  data: Record<string, unknown>;
  received_at: string;
}
interface ItemPage {
  data: Item[];
  next_cursor: string | null;
}

let t: TestApp;
let first: TestTenant;
let second: TestTenant;
let key: Record<string, string>;
let viewer: SignedIn;
const sent: Sent[] = [];
let other: { tenant: TestTenant; key: Record<string, string>; owner: SignedIn; sent: Sent[] };

/** Bodies whose search by LIKE, by a case-insensitive or by a byte-hex match would find too much or nothing. */
const BODIES: Array<[number, string]> = [
  [0, '{"event":"invoice.paid","data":{"note":"50%_off","amount":100}}'],
  [0, '{"event":"invoice.paid","data":{"note":"50%Xoff"}}'],
  [1, '{"event":"customer.created","data":{"name":"Café Ünïcode"}}'],
  [1, '{"event":"invoice.paid","data":{"n":4},"extra":"kept"}'],
  [0, '{"event":"charge.failed","data":{"reason":"INSUFFICIENT"}}'],
  [0, '{"event":"invoice.paid","data":{"note":"50abc_off"}}'],
  [1, '{"event":"invoice.paid","data":{"note":"half off"}}'],
];

let lastSentAt = 0;
/** Sends one webhook in a later millisecond than the one before, so time filters have edges to find. */
async function send(tenant: TestTenant, body: string, headers: Record<string, string> = {}): Promise<Sent> {
  await waitFor(async () => (Date.now() > lastSentAt ? true : undefined), 'the next millisecond');
  const response = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body, headers });
  lastSentAt = Date.now();
  expect(response.statusCode, response.body).toBe(202);
  return { ...response.json<{ uuid: string; received_at: string }>(), integration_id: tenant.integrationId, body };
}

/** Newest first, as the API orders: time, then uuid. */
const newestFirst = (rows: Sent[]) =>
  [...rows].sort((x, y) => (x.received_at === y.received_at ? (x.uuid < y.uuid ? 1 : -1) : x.received_at < y.received_at ? 1 : -1));
const uuids = (rows: Array<{ uuid: string }>) => rows.map((r) => r.uuid);

const get = (url: string, headers: Record<string, string> = key) => t.app.inject({ method: 'GET', url: `/api/v1${url}`, headers });
async function list(query: string, headers = key): Promise<ItemPage> {
  const response = await get(`/webhooks${query}`, headers);
  expect(response.statusCode, response.body).toBe(200);
  return response.json<ItemPage>();
}
/** Every page of a list, following next_cursor. */
async function walk(query: string, headers = key): Promise<{ items: Item[]; pages: number[] }> {
  const items: Item[] = [];
  const pages: number[] = [];
  let cursor: string | null = null;
  do {
    const page = await list(`${query}${query ? '&' : '?'}${cursor ? `cursor=${encodeURIComponent(cursor)}` : ''}`, headers);
    items.push(...page.data);
    pages.push(page.data.length);
    cursor = page.next_cursor;
  } while (cursor && pages.length < 100);
  return { items, pages };
}
async function exportLines(query: string, headers = key) {
  const response = await get(`/webhooks/export${query}`, headers);
  expect(response.statusCode, response.body).toBe(200);
  expect(response.headers['content-type']).toMatch(/^application\/x-ndjson/);
  expect(response.body === '' || response.body.endsWith('\n')).toBe(true);
  return response.body.split('\n').slice(0, -1).map((line) => JSON.parse(line) as Item & { raw_body: string; headers: Record<string, string> });
}

beforeAll(async () => {
  t = await buildTestApp();
  first = await t.newTenant();
  second = await t.newTenant({ companyId: first.companyId });
  key = await managementKey(t, first.companyId, ['logs:read']);
  viewer = await member(t, first.companyId, 'viewer');
  const otherTenant = await t.newTenant();
  other = { tenant: otherTenant, key: await managementKey(t, otherTenant.companyId, ['logs:read']), owner: await member(t, otherTenant.companyId, 'owner'), sent: [] };
  for (const [i, body] of BODIES) sent.push(await send([first, second][i]!, body));
  other.sent.push(await send(otherTenant, '{"event":"invoice.paid","data":{"note":"50%_off, Café, theirs"}}'));
});
afterAll(() => t.close());

describe('GET /api/v1/webhooks', () => {
  test("lists the company's webhooks across integrations, newest first, in the key list's item shape", async () => {
    const page = await list('');
    expect(page.next_cursor).toBeNull();
    expect(uuids(page.data)).toEqual(uuids(newestFirst(sent)));
    for (const item of page.data) expect(Object.keys(item).sort()).toEqual(['data', 'event', 'integration_id', 'received_at', 'uuid']);
    const extra = sent[3]!;
    expect(page.data.find((i) => i.uuid === extra.uuid)).toEqual({
      uuid: extra.uuid,
      integration_id: second.integrationId,
      event: 'invoice.paid',
      data: { n: 4 },
      received_at: extra.received_at,
    });
    expect(await list('', viewer.read)).toEqual(page);
  });

  test('filters by integration, event and time (since inclusive, until exclusive)', async () => {
    const bySecond = await list(`?integration_id=${second.integrationId}`);
    expect(uuids(bySecond.data)).toEqual(uuids(newestFirst(sent.filter((s) => s.integration_id === second.integrationId))));
    const paid = await list('?event=invoice.paid');
    expect(uuids(paid.data)).toEqual(uuids(newestFirst(sent.filter((s) => s.body.includes('"invoice.paid"')))));
    const both = await list(`?event=invoice.paid&integration_id=${first.integrationId}`);
    expect(both.data.map((i) => [i.event, i.integration_id])).toEqual([...Array(3)].map(() => ['invoice.paid', first.integrationId]));
    const since = sent[2]!.received_at;
    const until = sent[5]!.received_at;
    const range = await list(`?since=${since}&until=${until}`);
    expect(uuids(range.data)).toEqual(uuids(newestFirst(sent.filter((s) => s.received_at >= since && s.received_at < until))));
    expect(range.data.length).toBeGreaterThan(0);
  });

  test('pages by cursor without gaps or repeats, also within a filter', async () => {
    const all = await walk('?limit=2');
    expect(all.pages).toEqual([2, 2, 2, 1]);
    expect(uuids(all.items)).toEqual(uuids(newestFirst(sent)));
    const paid = await walk('?limit=1&event=invoice.paid');
    expect(uuids(paid.items)).toEqual(uuids(newestFirst(sent.filter((s) => s.body.includes('"invoice.paid"')))));
  });

  test.each(['50%_off', '%', '_', 'Café Ünïcode', 'INSUFFICIENT', 'insufficient', '"extra":"kept"', 'off"}'])(
    'q=%s finds exactly the raw bodies holding it (case-sensitive, percent and underscore literal, UTF-8)',
    async (q) => {
      const found = await list(`?q=${encodeURIComponent(q)}`);
      expect(uuids(found.data)).toEqual(uuids(newestFirst(sent.filter((s) => s.body.includes(q)))));
    },
  );

  test('q combines with the other filters', async () => {
    const found = await list(`?q=off&integration_id=${first.integrationId}&event=invoice.paid&limit=1`);
    expect(found.data).toHaveLength(1);
    expect(found.data[0]!.uuid).toBe(newestFirst(sent.filter((s) => s.integration_id === first.integrationId && s.body.includes('off')))[0]!.uuid);
    expect(uuids(found.data)).not.toContain(sent[6]!.uuid);
  });
});

describe('GET /api/v1/webhooks/:uuid', () => {
  test('returns the webhook with its headers, raw body byte for byte and source IP', async () => {
    const body = '{ "event" : "order.placed", "data" : {"id":"o_1"} , "x" : [1,2] }';
    const one = await send(second, body, { 'x-trace': 'abc' });
    const response = await get(`/webhooks/${one.uuid}`);
    expect(response.statusCode).toBe(200);
    const webhook = response.json<Item & { raw_body: string; headers: Record<string, string>; source_ip: string }>();
    expect(webhook).toMatchObject({ uuid: one.uuid, integration_id: second.integrationId, event: 'order.placed', data: { id: 'o_1' } });
    expect(webhook.raw_body).toBe(body);
    expect(webhook.headers['x-trace']).toBe('abc');
    expect(webhook.headers).not.toHaveProperty('x-api-key');
    expect(webhook.source_ip).toBe('127.0.0.1');
    expect((await get(`/webhooks/${'0'.repeat(8)}-0000-7000-8000-${'0'.repeat(12)}`)).statusCode).toBe(404);
  });
});

describe('GET /api/v1/webhooks/export', () => {
  test('streams every matching webhook as one JSON object per line, raw body included', async () => {
    const lines = await exportLines('?event=invoice.paid');
    const expected = newestFirst(sent.filter((s) => s.body.includes('"invoice.paid"')));
    expect(uuids(lines)).toEqual(uuids(expected));
    for (const [i, line] of lines.entries()) {
      expect(line.raw_body).toBe(expected[i]!.body);
      expect(line).toEqual({ ...(await get(`/webhooks/${line.uuid}`)).json<object>() });
    }
    expect(await exportLines('?q=nothing-has-this')).toEqual([]);
  });

  describe('on more rows than a search reads and an export page holds', () => {
    let many: { headers: Record<string, string>; count: number; oldest: string };
    beforeAll(async () => {
      const owner = await createTenant(t.store);
      const count = SEARCH_SCAN_ROWS + 50;
      const now = Date.now();
      const rows = Array.from({ length: count }, (_, i) =>
        webhook(owner, now - count + i, { body: i === 0 ? '{"event":"old","data":{"x":"needle%_"}}' : undefined }),
      );
      for (let i = 0; i < count; i += 1000) await t.store.commitBatch(rows.slice(i, i + 1000), []);
      many = { headers: await managementKey(t, owner.companyId, ['logs:read']), count, oldest: rows[0]!.uuid };
    }, 60_000);

    test('a search scans a bounded range per page, and its cursor reaches the oldest match', async () => {
      const firstPage = await list('?q=needle%25_', many.headers);
      expect(firstPage).toEqual({ data: [], next_cursor: expect.any(String) });
      const { items } = await walk('?q=needle%25_', many.headers);
      expect(uuids(items)).toEqual([many.oldest]);
    });

    test('the export reads the store page by page and writes every row once', async () => {
      const reads = vi.spyOn(t.store, 'exportCompanyWebhooks');
      try {
        const lines = await exportLines('', many.headers);
        expect(lines).toHaveLength(many.count);
        expect(new Set(uuids(lines)).size).toBe(many.count);
        expect(lines.at(-1)!.uuid).toBe(many.oldest);
        const times = lines.map((l) => l.received_at);
        expect([...times].sort().reverse()).toEqual(times);
        expect(reads.mock.calls.length).toBeGreaterThanOrEqual(many.count / 200);
        for (const [, query] of reads.mock.calls) expect(query.limit).toBeLessThanOrEqual(200);
      } finally {
        reads.mockRestore();
      }
      expect(uuids(await exportLines('?q=needle%25_', many.headers))).toEqual([many.oldest]);
    });
  });
});

describe('errors and security', () => {
  test.each([
    '/webhooks?limit=0',
    '/webhooks?limit=201',
    '/webhooks?cursor=not-a-cursor',
    '/webhooks?since=yesterday',
    '/webhooks?integration_id=int_nope',
    '/webhooks?q=',
    `/webhooks?q=${'x'.repeat(201)}`,
    '/webhooks/export?until=soon',
    '/webhooks/not-a-uuid',
  ])('%s is a JSON 400', async (url) => {
    const response = await get(url);
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({ error: 'Invalid request', code: 'invalid_request', message: expect.any(String) });
  });

  const routes = () => ['/webhooks', '/webhooks/export', `/webhooks/${sent[0]!.uuid}`];

  test('no credentials: 401; an integration key or a management key without logs:read: 403', async () => {
    const manageOnly = await managementKey(t, first.companyId, ['integrations:manage']);
    for (const url of routes()) {
      expect((await get(url, {})).statusCode).toBe(401);
      for (const headers of [{ 'x-api-key': first.apiKey }, manageOnly]) {
        const response = await get(url, headers);
        expect(response.statusCode).toBe(403);
        expect(response.json()).toMatchObject({ error: 'Insufficient permissions' });
      }
    }
  });

  test("another company's key and session see only their own webhooks, and 404 for ours", async () => {
    const ours = uuids(sent);
    for (const headers of [other.key, other.owner.read]) {
      expect(uuids((await list('?q=50%25_off', headers)).data)).toEqual(uuids(other.sent));
      expect(uuids((await list('', headers)).data)).toEqual(uuids(other.sent));
      expect((await list(`?integration_id=${first.integrationId}`, headers)).data).toEqual([]);
      expect(uuids(await exportLines('', headers))).toEqual(uuids(other.sent));
      for (const uuid of ours) expect((await get(`/webhooks/${uuid}`, headers)).statusCode).toBe(404);
    }
    expect((await get(`/webhooks/${other.sent[0]!.uuid}`)).statusCode).toBe(404);
  });
});

/** Webhooks of `owner` padded to about `sizes` bytes, committed oldest first a millisecond apart; their uuids and sizes, newest first. */
async function commitLarge(
  owner: Owner,
  sizes: number[],
  body: (i: number, pad: string) => string = (i, pad) => JSON.stringify({ event: 'big', data: { i, pad } }),
) {
  const start = Date.now() - sizes.length;
  const rows = sizes.map((bytes, i) => webhook(owner, start + i, { body: body(i, 'x'.repeat(bytes)) }));
  for (const row of rows) await t.store.commitBatch([row], []);
  return rows.map((row) => ({ uuid: row.uuid, bytes: row.rawBody.length })).reverse();
}

describe('bounds in bytes', () => {
  const MIB = 1024 * 1024;

  test('a page of large webhooks stops at the byte budget, continues by cursor, and the pages hold every webhook once', async () => {
    const tenant = await t.newTenant();
    const owner = { companyId: tenant.companyId, integrationId: tenant.integrationId, keyId: tenant.keyId };
    const keyHeaders = await managementKey(t, tenant.companyId, ['logs:read']);
    // Newest first: 0.3 MiB ×3, one larger than a page, 0.3 MiB ×4.
    const expected = await commitLarge(owner, [0.3, 0.3, 0.3, 0.3, 1.5, 0.3, 0.3, 0.3].map((m) => Math.floor(m * MIB)));

    const management = await walk('?limit=50', keyHeaders);
    const byKey = await walkKeyList(tenant);
    for (const { items, pages } of [management, byKey]) {
      expect(uuids(items)).toEqual(uuids(expected));
      expect(pages.length).toBeGreaterThan(2);
      let at = 0;
      for (const size of pages) {
        const bytes = expected.slice(at, at + size).reduce((sum, w) => sum + w.bytes, 0);
        // Fewer than `limit`, within the budget unless a page of one larger webhook.
        expect(size).toBeLessThan(50);
        if (size > 1) expect(bytes).toBeLessThanOrEqual(WEBHOOK_PAGE_BYTES);
        at += size;
      }
    }
    expect(management.pages).toContain(1);
  });

  test('a search stops its scan at a byte budget too, and its cursor goes on to the oldest match', async () => {
    const tenant = await t.newTenant();
    const owner = { companyId: tenant.companyId, integrationId: tenant.integrationId, keyId: tenant.keyId };
    const keyHeaders = await managementKey(t, tenant.companyId, ['logs:read']);
    // Far fewer rows than SEARCH_SCAN_ROWS, but more bytes than SEARCH_SCAN_BYTES; the needle only in the oldest.
    const count = Math.ceil((SEARCH_SCAN_BYTES * 1.25) / MIB);
    expect(count).toBeLessThan(SEARCH_SCAN_ROWS);
    const rows = await commitLarge(owner, Array(count).fill(MIB), (i, pad) => JSON.stringify({ event: 'big', data: { i, pad, needle: i === 0 } }));

    const firstPage = await list('?q=%22needle%22%3Atrue', keyHeaders);
    expect(firstPage).toEqual({ data: [], next_cursor: expect.any(String) });
    const { items, pages } = await walk('?q=%22needle%22%3Atrue', keyHeaders);
    expect(uuids(items)).toEqual([rows.at(-1)!.uuid]);
    expect(pages.length).toBe(2);
  });
});

/** Every page of the integration key's list (GET /api/webhooks/KEY), following next_cursor. */
async function walkKeyList(tenant: TestTenant): Promise<{ items: Item[]; pages: number[] }> {
  const items: Item[] = [];
  const pages: number[] = [];
  let cursor: string | null = null;
  do {
    const query: string = cursor ? `?limit=50&cursor=${encodeURIComponent(cursor)}` : '?limit=50';
    const url = `/api/webhooks/${tenant.integrationKey}${query}`;
    const response = await t.app.inject({ method: 'GET', url, headers: { 'x-api-key': tenant.apiKey } });
    expect(response.statusCode, response.body).toBe(200);
    const page: ItemPage = response.json<ItemPage>();
    items.push(...page.data);
    pages.push(page.data.length);
    cursor = page.next_cursor;
  } while (cursor && pages.length < 100);
  return { items, pages };
}

describe('bounds on concurrent reads and exports', () => {
  let small: TestApp;
  let port: number;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    small = await buildTestApp(
      {},
      {
        readLimits: {
          heavyReads: { perCompany: 1, perNode: 2 },
          exports: { perCaller: 1, perCompany: 2, perNode: 8 },
          sendTimeoutMs: 1_000,
        },
      },
    );
    port = Number(new URL(await small.app.listen({ host: '127.0.0.1', port: 0 })).port);
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await small.close();
  });

  test('past a company\'s reads 429, past the node\'s 503, both JSON with Retry-After, at once', async () => {
    const [a, b, c] = [await small.newTenant(), await small.newTenant(), await small.newTenant()];
    const keyOf = async (tenant: TestTenant) => managementKey(small, tenant.companyId, ['logs:read']);
    const listBy = async (headers: Record<string, string>) => small.app.inject({ method: 'GET', url: '/api/v1/webhooks', headers });
    const expectRefused = (response: Awaited<ReturnType<typeof listBy>>, status: number) => {
      expect(response.statusCode, response.body).toBe(status);
      expect(response.headers['retry-after']).toMatch(/^\d+$/);
      expect(response.json()).toMatchObject({ error: expect.any(String), message: expect.any(String) });
    };
    // Another reader of company A is under way.
    const busyA = small.app.readLimits.heavyReads.take(a.companyId);
    expectRefused(await listBy(await keyOf(a)), 429);
    expectRefused(await small.app.inject({ method: 'GET', url: `/api/webhooks/${a.integrationKey}`, headers: { 'x-api-key': a.apiKey } }), 429);
    expect((await listBy(await keyOf(b))).statusCode).toBe(200);
    // And one of company B: the node's two reads are taken.
    const busyB = small.app.readLimits.heavyReads.take(b.companyId);
    expectRefused(await listBy(await keyOf(c)), 503);
    busyA();
    busyB();
    expect((await listBy(await keyOf(c))).statusCode).toBe(200);
    expect(small.app.readLimits.heavyReads.inUse).toBe(0);
  });

  test('an export to a client that stops reading is cut off after the send timeout; a caller has one at a time', async () => {
    const tenant = await small.newTenant();
    const owner = { companyId: tenant.companyId, integrationId: tenant.integrationId, keyId: tenant.keyId };
    const key = await managementKey(small, tenant.companyId, ['logs:read']);
    const pad = 'x'.repeat(4 * 1024 * 1024);
    for (let i = 0; i < 10; i++) {
      await small.store.commitBatch([webhook(owner, Date.now() - 10 + i, { body: JSON.stringify({ event: 'big', data: { i, pad } }) })], []);
    }
    const connection = await openConnection(port, sockets);
    connection.socket.write(`GET /api/v1/webhooks/export HTTP/1.1\r\nhost: test\r\nx-api-key: ${key['x-api-key']}\r\n\r\n`);
    await waitFor(async () => (connection.received().includes('\r\n\r\n') ? true : undefined), 'the export to start');
    expect(connection.received()).toMatch(/^HTTP\/1\.1 200/);
    connection.socket.pause();

    const second = await small.app.inject({ method: 'GET', url: '/api/v1/webhooks/export', headers: key });
    expect(second.statusCode).toBe(429);
    expect(second.json()).toMatchObject({ error: 'Rate limit exceeded', message: expect.stringMatching(/per key or user/) });

    // The server gives up while the client still takes nothing; its place and memory are freed.
    await waitFor(async () => (small.app.readLimits.exports.inUse === 0 ? true : undefined), 'the export to be cut off', 15_000);
    connection.socket.resume();
    await Promise.race([connection.closed, new Promise((resolve) => setTimeout(resolve, 10_000))]);
    expect(connection.isClosed()).toBe(true);
    expect(connection.received().match(/"uuid":/g)?.length ?? 0).toBeLessThan(10);
    expect((await small.app.inject({ method: 'GET', url: '/api/v1/webhooks/export?event=none', headers: key })).statusCode).toBe(200);
  });

  test('an export whose key is revoked meanwhile is cut before its next page, not ended as if complete', async () => {
    const patient = await buildTestApp();
    const patientSockets: Socket[] = [];
    try {
      const patientPort = Number(new URL(await patient.app.listen({ host: '127.0.0.1', port: 0 })).port);
      const tenant = await patient.newTenant();
      const owner = { companyId: tenant.companyId, integrationId: tenant.integrationId, keyId: tenant.keyId };
      const pad = 'x'.repeat(2 * 1024 * 1024);
      for (let i = 0; i < 10; i++) {
        await patient.store.commitBatch([webhook(owner, Date.now() - 10 + i, { body: JSON.stringify({ event: 'big', data: { i, pad } }) })], []);
      }
      const key = await patient.management.createManagementKey(tenant.companyId, ['logs:read']);
      const connection = await openConnection(patientPort, patientSockets);
      connection.socket.pause();
      connection.socket.write(`GET /api/v1/webhooks/export HTTP/1.1\r\nhost: test\r\nx-api-key: ${key.apiKey}\r\n\r\n`);
      // The export has begun and waits for the client; the key is revoked, which every
      // request sees within the key cache's poll.
      await waitFor(async () => (patient.app.readLimits.exports.inUse === 1 ? true : undefined), 'the export to start');
      await patient.management.revokeKey(tenant.companyId, key.id);
      const refused = () => patient.app.inject({ method: 'GET', url: '/api/v1/webhooks?limit=1', headers: { 'x-api-key': key.apiKey } });
      await waitFor(async () => ((await refused()).statusCode === 401 ? true : undefined), 'the revocation to hold');
      connection.socket.resume();
      await Promise.race([connection.closed, new Promise((resolve) => setTimeout(resolve, 10_000))]);
      expect(connection.isClosed()).toBe(true);
      expect(connection.received()).toMatch(/^HTTP\/1\.1 200/);
      expect(connection.received().match(/"uuid":/g)?.length ?? 0).toBeLessThan(10);
      // A chunked answer that ended would close with its last chunk; this one was cut.
      expect(connection.received().endsWith('0\r\n\r\n')).toBe(false);
    } finally {
      for (const socket of patientSockets) socket.destroy();
      await patient.close();
    }
  });
});
