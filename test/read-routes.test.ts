import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildTestApp, sendWebhook, waitFor, type TestApp, type TestTenant } from './helpers.js';
import { scrape } from './support/metrics.js';

type Response = Awaited<ReturnType<typeof sendWebhook>>;

interface ListItem {
  uuid: string;
  event: string;
  data: unknown;
  received_at: string;
}
interface ListPage {
  data: ListItem[];
  next_cursor: string | null;
}

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(() => t.close());

const FORBIDDEN = {
  error: 'Insufficient permissions',
  message: 'Your API key does not have permission to access this resource.',
};
const MISSING_KEY = { error: 'Missing API key', message: 'API key is required in the X-API-Key header.' };

function expectJsonError(response: Response, status: number, fields: Record<string, string> = {}) {
  expect(response.statusCode).toBe(status);
  expect(response.headers['content-type']).toMatch(/^application\/json/);
  const body = response.json() as Record<string, unknown>;
  expect(typeof body.error).toBe('string');
  expect(typeof body.message).toBe('string');
  expect(body).toMatchObject(fields);
}

function get(url: string, apiKey?: string) {
  return t.app.inject({ method: 'GET', url, headers: apiKey === undefined ? {} : { 'x-api-key': apiKey } });
}

async function list(tenant: TestTenant, query = '', path = '/api/webhooks'): Promise<ListPage> {
  const response = await get(`${path}/${tenant.integrationKey}${query}`, tenant.apiKey);
  expect(response.statusCode).toBe(200);
  return response.json() as ListPage;
}

/** Sends one webhook per body, in order, each in a later millisecond than the one before. */
async function sendAll(tenant: TestTenant, bodies: string[]): Promise<Array<{ uuid: string; received_at: string }>> {
  const accepted: Array<{ uuid: string; received_at: string }> = [];
  for (const body of bodies) {
    const previous = accepted[accepted.length - 1];
    if (previous) {
      const after = Date.parse(previous.received_at);
      await waitFor(async () => (Date.now() > after ? true : undefined), 'the next millisecond');
    }
    const response = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body });
    expect(response.statusCode).toBe(202);
    accepted.push(response.json() as { uuid: string; received_at: string });
  }
  return accepted;
}

const events = (n: number) => Array.from({ length: n }, (_, i) => JSON.stringify({ event: `e.${i % 2 ? 'odd' : 'even'}`, data: { i } }));

describe('GET /api/webhooks/:integration_key (list)', () => {
  test.each(['/api/webhooks', '/api/webhook'])('%s lists newest first as {data, next_cursor}', async (path) => {
    const tenant = await t.newTenant();
    const sent = await sendAll(tenant, events(3));
    const response = await get(`${path}/${tenant.integrationKey}`, tenant.apiKey);
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toMatch(/^application\/json/);
    const page = response.json() as ListPage;
    expect(Object.keys(page).sort()).toEqual(['data', 'next_cursor']);
    expect(page.next_cursor).toBeNull();
    expect(page.data.map((item) => item.uuid)).toEqual(sent.map((s) => s.uuid).reverse());
    for (const item of page.data) expect(Object.keys(item).sort()).toEqual(['data', 'event', 'received_at', 'uuid']);
    expect(page.data[0]).toEqual({ uuid: sent[2]!.uuid, event: 'e.even', data: { i: 2 }, received_at: sent[2]!.received_at });
    expect(page.data[2]).toEqual({ uuid: sent[0]!.uuid, event: 'e.even', data: { i: 0 }, received_at: sent[0]!.received_at });
  });

  test('an empty integration lists nothing', async () => {
    const tenant = await t.newTenant();
    expect(await list(tenant)).toEqual({ data: [], next_cursor: null });
  });

  test('data is {} when the webhook had none; extra top-level fields are not items', async () => {
    const tenant = await t.newTenant();
    await sendAll(tenant, ['{"event":"bare","extra":{"x":1}}']);
    const page = await list(tenant);
    expect(page.data).toHaveLength(1);
    expect(page.data[0]).toMatchObject({ event: 'bare', data: {} });
    expect(Object.keys(page.data[0]!).sort()).toEqual(['data', 'event', 'received_at', 'uuid']);
  });

  test('webhooks sent within the same millisecond still list newest first', async () => {
    const tenant = await t.newTenant();
    const uuids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const response = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey });
      uuids.push((response.json() as { uuid: string }).uuid);
    }
    expect((await list(tenant)).data.map((item) => item.uuid)).toEqual(uuids.reverse());
  });

  test('limit defaults to 50', async () => {
    const tenant = await t.newTenant();
    for (let i = 0; i < 51; i++) {
      expect((await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey })).statusCode).toBe(202);
    }
    const first = await list(tenant);
    expect(first.data).toHaveLength(50);
    expect(first.next_cursor).toEqual(expect.any(String));
    const rest = await list(tenant, `?cursor=${encodeURIComponent(first.next_cursor!)}`);
    expect(rest.data).toHaveLength(1);
    expect(rest.next_cursor).toBeNull();
    expect(first.data.map((item) => item.uuid)).not.toContain(rest.data[0]!.uuid);
  });

  test('limit 1 and limit 200 are accepted', async () => {
    const tenant = await t.newTenant();
    await sendAll(tenant, events(2));
    const one = await list(tenant, '?limit=1');
    expect(one.data).toHaveLength(1);
    expect(one.next_cursor).toEqual(expect.any(String));
    const all = await list(tenant, '?limit=200');
    expect(all.data).toHaveLength(2);
    expect(all.next_cursor).toBeNull();
  });

  test.each(['0', '201', '-1', 'ten', '2.5'])('limit=%s is a JSON 400', async (limit) => {
    const tenant = await t.newTenant();
    const response = await get(`/api/webhooks/${tenant.integrationKey}?limit=${limit}`, tenant.apiKey);
    expectJsonError(response, 400, { error: 'Invalid request' });
  });

  test('the cursor walks every webhook exactly once, newest first', async () => {
    const tenant = await t.newTenant();
    const sent = await sendAll(tenant, events(7));
    const seen: string[] = [];
    const pageSizes: number[] = [];
    let cursor: string | null = null;
    do {
      const query: string = `?limit=3${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
      const page = await list(tenant, query);
      pageSizes.push(page.data.length);
      seen.push(...page.data.map((item) => item.uuid));
      cursor = page.next_cursor;
    } while (cursor !== null && pageSizes.length < 10);
    expect(pageSizes).toEqual([3, 3, 1]);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual(sent.map((s) => s.uuid).reverse());
  });

  test('the last full page has no next cursor', async () => {
    const tenant = await t.newTenant();
    await sendAll(tenant, events(6));
    const first = await list(tenant, '?limit=3');
    expect(first.next_cursor).toEqual(expect.any(String));
    const second = await list(tenant, `?limit=3&cursor=${encodeURIComponent(first.next_cursor!)}`);
    expect(second.data).toHaveLength(3);
    expect(second.next_cursor).toBeNull();
  });

  test('a webhook arriving during the walk does not disturb the pages after the cursor', async () => {
    const tenant = await t.newTenant();
    const sent = await sendAll(tenant, events(4));
    const first = await list(tenant, '?limit=2');
    await sendAll(tenant, ['{"event":"late"}']);
    const second = await list(tenant, `?limit=2&cursor=${encodeURIComponent(first.next_cursor!)}`);
    expect([...first.data, ...second.data].map((item) => item.uuid)).toEqual(sent.map((s) => s.uuid).reverse());
  });

  test.each([
    ['garbage', 'not-a-cursor'],
    ['base64 of garbage', Buffer.from('hello.world').toString('base64url')],
    ['an empty cursor', ''],
  ])('a bad cursor (%s) is a JSON 400', async (_name, cursor) => {
    const tenant = await t.newTenant();
    const response = await get(`/api/webhooks/${tenant.integrationKey}?cursor=${encodeURIComponent(cursor)}`, tenant.apiKey);
    expectJsonError(response, 400, { error: 'Invalid request' });
  });

  test('a cursor that cannot be decoded says so', async () => {
    const tenant = await t.newTenant();
    const response = await get(`/api/webhooks/${tenant.integrationKey}?cursor=not-a-cursor`, tenant.apiKey);
    expectJsonError(response, 400, {
      error: 'Invalid request',
      message: 'The cursor is not valid; use next_cursor from a previous page.',
    });
  });

  test('event filters by exact event name, and pages within the filter', async () => {
    const tenant = await t.newTenant();
    const sent = await sendAll(tenant, events(7));
    const odd = sent.filter((_, i) => i % 2 === 1).map((s) => s.uuid).reverse();
    const page = await list(tenant, '?event=e.odd');
    expect(page.data.map((item) => item.uuid)).toEqual(odd);
    expect(page.data.every((item) => item.event === 'e.odd')).toBe(true);
    const first = await list(tenant, '?event=e.odd&limit=2');
    const second = await list(tenant, `?event=e.odd&limit=2&cursor=${encodeURIComponent(first.next_cursor!)}`);
    expect([...first.data, ...second.data].map((item) => item.uuid)).toEqual(odd);
    expect(second.next_cursor).toBeNull();
    expect((await list(tenant, '?event=e.od')).data).toEqual([]);
  });

  test('since is inclusive and until exclusive, in ISO times', async () => {
    const tenant = await t.newTenant();
    const [a, b, c] = await sendAll(tenant, events(3));
    const uuids = async (query: string) => (await list(tenant, query)).data.map((item) => item.uuid);
    const iso = (s: { received_at: string }) => encodeURIComponent(s.received_at);
    expect(await uuids(`?since=${iso(b!)}`)).toEqual([c!.uuid, b!.uuid]);
    expect(await uuids(`?until=${iso(b!)}`)).toEqual([a!.uuid]);
    expect(await uuids(`?since=${iso(a!)}&until=${iso(c!)}`)).toEqual([b!.uuid, a!.uuid]);
    expect(await uuids(`?since=${encodeURIComponent('2000-01-01T00:00:00Z')}`)).toHaveLength(3);
    expect(await uuids(`?until=${encodeURIComponent('2000-01-01T00:00:00+02:00')}`)).toEqual([]);
  });

  test.each(['yesterday', '2024-13-45', '1700000000000'])('since=%s is a JSON 400', async (since) => {
    const tenant = await t.newTenant();
    const response = await get(`/api/webhooks/${tenant.integrationKey}?since=${encodeURIComponent(since)}`, tenant.apiKey);
    expectJsonError(response, 400, { error: 'Invalid request' });
  });

  test('until must be an ISO time too', async () => {
    const tenant = await t.newTenant();
    const response = await get(`/api/webhooks/${tenant.integrationKey}?until=soon`, tenant.apiKey);
    expectJsonError(response, 400, { error: 'Invalid request' });
  });
});

describe('GET /api/webhooks/:integration_key/:uuid', () => {
  test.each(['/api/webhooks', '/api/webhook'])('%s returns the webhook with its headers and raw body', async (path) => {
    const tenant = await t.newTenant();
    const body = '{"event":"order.paid" , "data":{"amount":12.50,"note":"naïve ☕"},\n "livemode":false}';
    const sent = await sendWebhook(t.app, tenant.integrationKey, {
      apiKey: tenant.apiKey,
      body,
      headers: { 'x-signature': 'sha256=abc', 'user-agent': 'sender/1.0', authorization: 'Bearer secret-token' },
    });
    expect(sent.statusCode).toBe(202);
    const { uuid, received_at } = sent.json() as { uuid: string; received_at: string };

    const response = await get(`${path}/${tenant.integrationKey}/${uuid}`, tenant.apiKey);
    expect(response.statusCode).toBe(200);
    const webhook = response.json() as {
      uuid: string;
      event: string;
      data: unknown;
      received_at: string;
      headers: Record<string, string>;
      raw_body: string;
    };
    expect(webhook).toMatchObject({ uuid, event: 'order.paid', data: { amount: 12.5, note: 'naïve ☕' }, received_at });
    expect(webhook.raw_body).toBe(body);
    expect(webhook.headers).toMatchObject({
      'content-type': 'application/json',
      'x-signature': 'sha256=abc',
      'user-agent': 'sender/1.0',
    });
    const headerNames = Object.keys(webhook.headers).map((name) => name.toLowerCase());
    expect(headerNames).not.toContain('x-api-key');
    expect(headerNames).not.toContain('authorization');
    expect(response.body).not.toContain(tenant.apiKey);
    expect(response.body).not.toContain('secret-token');
  });

  test('a webhook accepted with a UTF-8 byte order mark can be listed and read back byte for byte', async () => {
    const tenant = await t.newTenant();
    await sendAll(tenant, ['{"event":"plain"}']);
    const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"event":"with.bom","data":{"a":1}}')]);
    const sent = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body });
    expect(sent.statusCode).toBe(202);
    const { uuid } = sent.json() as { uuid: string };

    const listed = await get(`/api/webhooks/${tenant.integrationKey}`, tenant.apiKey);
    expect(listed.statusCode).toBe(200);
    expect((listed.json() as ListPage).data.map((item) => [item.event, item.data])).toEqual([
      ['with.bom', { a: 1 }],
      ['plain', {}],
    ]);
    const one = await get(`/api/webhooks/${tenant.integrationKey}/${uuid}`, tenant.apiKey);
    expect(one.statusCode).toBe(200);
    const webhook = one.json() as { data: unknown; raw_body: string };
    expect(webhook.data).toEqual({ a: 1 });
    expect(Buffer.from(webhook.raw_body, 'utf8').equals(body)).toBe(true);
  });

  test('an unknown uuid is a JSON 404', async () => {
    const tenant = await t.newTenant();
    const response = await get(`/api/webhooks/${tenant.integrationKey}/${randomUUID()}`, tenant.apiKey);
    expectJsonError(response, 404, { error: 'Not found' });
  });

  test('a uuid of another integration is a 404 through this integration', async () => {
    const tenant = await t.newTenant();
    const other = await t.newTenant();
    const sent = await sendWebhook(t.app, other.integrationKey, { apiKey: other.apiKey });
    const { uuid } = sent.json() as { uuid: string };
    expectJsonError(await get(`/api/webhooks/${tenant.integrationKey}/${uuid}`, tenant.apiKey), 404, { error: 'Not found' });
  });
});

describe('security of the read routes', () => {
  let owner: TestTenant;
  let sibling: TestTenant;
  let stranger: TestTenant;
  let uuid: string;

  beforeAll(async () => {
    owner = await t.newTenant();
    sibling = await t.newTenant({ companyId: owner.companyId });
    stranger = await t.newTenant();
    const sent = await sendWebhook(t.app, owner.integrationKey, { apiKey: owner.apiKey, body: '{"event":"private"}' });
    uuid = (sent.json() as { uuid: string }).uuid;
  });

  const paths = (key: string, id: string) => [
    `/api/webhooks/${key}`,
    `/api/webhook/${key}`,
    `/api/webhooks/${key}/${id}`,
    `/api/webhook/${key}/${id}`,
  ];

  test("another company's key gets 403 on list and get-one", async () => {
    for (const url of paths(owner.integrationKey, uuid)) {
      const response = await get(url, stranger.apiKey);
      expectJsonError(response, 403, FORBIDDEN);
      expect(response.body).not.toContain('private');
    }
  });

  test("another integration's key of the same company gets 403 on list and get-one", async () => {
    for (const url of paths(owner.integrationKey, uuid)) {
      const response = await get(url, sibling.apiKey);
      expectJsonError(response, 403, FORBIDDEN);
      expect(response.body).not.toContain('private');
    }
  });

  test('no key gets 401 on list and get-one', async () => {
    for (const url of paths(owner.integrationKey, uuid)) expectJsonError(await get(url), 401, MISSING_KEY);
  });

  test("a reader's own key does not reach the owner's webhook through its own address", async () => {
    expectJsonError(await get(`/api/webhooks/${stranger.integrationKey}/${uuid}`, stranger.apiKey), 404);
    expect((await list(stranger)).data).toEqual([]);
  });

  test('a disabled integration can still read its log', async () => {
    const tenant = await t.newTenant();
    await sendAll(tenant, ['{"event":"before.disable"}']);
    await t.management.setIntegrationEnabled(tenant.companyId, tenant.integrationId, false);
    await waitFor(async () => {
      // An invalid body: refused with 400 until the change is seen, so nothing new is stored.
      const response = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body: 'not json' });
      return response.statusCode === 403 ? true : undefined;
    }, 'the integration to be disabled');
    expect((await list(tenant)).data.map((item) => item.event)).toEqual(['before.disable']);
  });
});

describe('unknown paths and methods', () => {
  test.each(['/nope', '/api', '/api/webhooks', '/api/webhooks/a/b/c'])('GET %s is a JSON 404', async (url) => {
    const response = await t.app.inject({ method: 'GET', url });
    expectJsonError(response, 404, { error: 'Not found' });
  });

  test.each([
    ['DELETE', '/api/webhooks/x', 'GET, POST'],
    ['PUT', '/api/webhook/x', 'GET, POST'],
    ['PATCH', '/api/webhooks/x', 'GET, POST'],
    ['DELETE', '/api/webhooks/x/y', 'GET'],
    ['POST', '/api/webhooks/x/y', 'GET'],
    ['POST', '/healthz', 'GET'],
    ['DELETE', '/readyz', 'GET'],
  ] as const)('%s %s is a JSON 405 with Allow: %s', async (method, url, allow) => {
    const response = await t.app.inject({ method, url });
    expectJsonError(response, 405, { error: 'Method not allowed' });
    expect(response.headers.allow).toBe(allow);
  });
});

describe('health', () => {
  test('/healthz is 200', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/healthz' });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ status: 'ok' });
  });

  test('/readyz is 200 when the database answers', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/readyz' });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ status: 'ok' });
  });

  test('/metrics counts requests to addresses that name no integration', async () => {
    const counted = async () => (await scrape(t.app)).value('intake_unknown_integration_requests_total');
    const before = await counted();
    await sendWebhook(t.app, 'no-such-integration', { apiKey: 'whk_dev_x' });
    await sendWebhook(t.app, 'no-such-integration-either', {});
    expect(await counted()).toBe(before + 2);
  });
});
