import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { SEARCH_SCAN_ROWS } from '../../src/store/store.js';
import { buildTestApp, sendWebhook, waitFor, type TestApp, type TestTenant } from '../helpers.js';
import { managementKey, member, type SignedIn } from '../support/api.js';
import { createTenant, webhook } from '../support/webhooks.js';

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
      const reads = vi.spyOn(t.store, 'listCompanyWebhooks');
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
