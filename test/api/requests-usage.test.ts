import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ERRORS, type ErrorCode } from '../../src/errors.js';
import { buildTestApp, sendWebhook, waitFor, type TestApp, type TestTenant } from '../helpers.js';
import { managementKey, member, type SignedIn } from '../support/api.js';
import { createIntegration, createTenant, logRow, type Owner } from '../support/webhooks.js';

/**
 * /api/v1/requests and /api/v1/usage: real traffic through the intake address, rows placed
 * at known times for the buckets, each filter, the errors, and another company's view.
 */
interface Row {
  id: string;
  integration_id: string;
  received_at: string;
  method: string;
  status: number;
  error_code: string | null;
  reason: string | null;
  key_id: string | null;
  webhook_uuid: string | null;
}
interface Usage {
  since: string;
  until: string;
  data: Array<Record<string, unknown> & { accepted: number; replayed: number; rejected: number; failed: number; total: number }>;
}

const HOUR = 3_600_000;
const MINUTE = 60_000;
let t: TestApp;
let a: TestTenant;
let a2: TestTenant;
let key: Record<string, string>;
let viewer: SignedIn;
let other: { tenant: TestTenant; key: Record<string, string>; owner: SignedIn };
const accepted: string[] = [];
/** Statuses of the requests made below, and the one 5xx row placed directly. */
const STATUSES = [202, 202, 202, 202, 200, 401, 401, 400, 422, 415, 503];

const get = (url: string, headers: Record<string, string> = key) => t.app.inject({ method: 'GET', url: `/api/v1${url}`, headers });
async function rows(query = '', headers = key): Promise<Row[]> {
  const response = await get(`/requests?limit=200${query}`, headers);
  expect(response.statusCode, response.body).toBe(200);
  return response.json<{ data: Row[] }>().data;
}
async function usage(query: string, headers = key): Promise<Usage> {
  const response = await get(`/usage?${query}`, headers);
  expect(response.statusCode, response.body).toBe(200);
  return response.json<Usage>();
}

beforeAll(async () => {
  t = await buildTestApp();
  a = await t.newTenant();
  a2 = await t.newTenant({ companyId: a.companyId });
  key = await managementKey(t, a.companyId, ['logs:read']);
  viewer = await member(t, a.companyId, 'viewer');
  const theirs = await t.newTenant();
  other = { tenant: theirs, key: await managementKey(t, theirs.companyId, ['logs:read']), owner: await member(t, theirs.companyId, 'owner') };
  let lastSentAt = 0;
  // Each in a later millisecond than the one before, so time filters have edges to find.
  const send = async (tenant: TestTenant, options: Parameters<typeof sendWebhook>[2], status: number) => {
    await waitFor(async () => (Date.now() > lastSentAt ? true : undefined), 'the next millisecond');
    const response = await sendWebhook(t.app, tenant.integrationKey, options);
    lastSentAt = Date.now();
    expect(response.statusCode, response.body).toBe(status);
    if (status === 202) accepted.push(response.json<{ uuid: string }>().uuid);
  };
  await send(a, { apiKey: a.apiKey }, 202);
  await send(a, { apiKey: a.apiKey }, 202);
  await send(a2, { apiKey: a2.apiKey }, 202);
  await send(a, { apiKey: a.apiKey, headers: { 'idempotency-key': 'k1' } }, 202);
  await send(a, { apiKey: a.apiKey, headers: { 'idempotency-key': 'k1' } }, 200);
  await send(a, { apiKey: 'whk_dev_notavalidkeyatall0000000000' }, 401);
  await send(a2, {}, 401);
  await send(a, { apiKey: a.apiKey, body: '{"event":' }, 400);
  await send(a, { apiKey: a.apiKey, body: '{"data":{}}' }, 422);
  await send(a2, { apiKey: a2.apiKey, contentType: 'text/plain' }, 415);
  await send(theirs, { apiKey: theirs.apiKey }, 202);
  await send(theirs, { apiKey: 'whk_dev_notavalidkeyatall0000000000' }, 401);
  await t.store.commitBatch([], [{ ...logRow({ ...a }, Date.now()), status: 503, errorCode: 'service_unavailable', keyId: a.keyId }]);
  // Refused requests' rows are written with the next group: wait for all of them.
  await waitFor(async () => ((await rows()).length === STATUSES.length ? true : undefined), 'every request-log row');
  await waitFor(async () => ((await rows('', other.key)).length === 2 ? true : undefined), "the other company's rows");
});
afterAll(() => t.close());

describe('GET /api/v1/requests', () => {
  test('lists every request newest first, with the reason in words for each refusal', async () => {
    const all = await rows();
    expect(all.map((r) => r.status).sort()).toEqual([...STATUSES].sort());
    const times = all.map((r) => r.received_at);
    expect([...times].sort().reverse()).toEqual(times);
    expect(Object.keys(all[0]!).sort()).toEqual(
      ['duration_ms', 'error_code', 'id', 'integration_id', 'ip', 'key_id', 'method', 'reason', 'received_at', 'size_bytes', 'status', 'trace_id', 'user_agent', 'webhook_uuid'],
    );
    for (const row of all) {
      expect(row.reason).toBe(row.error_code === null ? null : ERRORS[row.error_code as ErrorCode].message);
      expect(row.webhook_uuid !== null).toBe(row.status === 202 || row.status === 200);
    }
    const reasons = Object.fromEntries(all.map((r) => [r.error_code, r.reason]));
    expect(reasons.invalid_api_key).toBe('The provided API key is not valid or has been revoked.');
    expect(reasons.missing_api_key).toBe('API key is required in the X-API-Key header.');
    expect(reasons.validation_failed).toBe('The webhook does not follow the rules.');
    expect(all.filter((r) => r.status === 202).map((r) => r.webhook_uuid).sort()).toEqual([...accepted].slice(0, 4).sort());
    const replay = all.find((r) => r.status === 200)!;
    expect(replay.webhook_uuid).toBe(accepted[3]);
    expect(await rows('', viewer.read)).toEqual(all);
  });

  test('filters by status class, error code, key, integration and time', async () => {
    const all = await rows();
    const expectRows = async (query: string, keep: (r: Row) => boolean) => {
      const expected = all.filter(keep);
      expect(expected.length, query).toBeGreaterThan(0);
      expect(await rows(query), query).toEqual(expected);
    };
    await expectRows('&status_class=2xx', (r) => r.status >= 200 && r.status < 300);
    await expectRows('&status_class=4xx', (r) => r.status >= 400 && r.status < 500);
    await expectRows('&status_class=5xx', (r) => r.status === 503);
    await expectRows('&error_code=invalid_json', (r) => r.error_code === 'invalid_json');
    await expectRows(`&key_id=${a2.keyId}`, (r) => r.key_id === a2.keyId);
    await expectRows(`&integration_id=${a2.integrationId}`, (r) => r.integration_id === a2.integrationId);
    await expectRows(`&integration_id=${a.integrationId}&status_class=4xx`, (r) => r.integration_id === a.integrationId && r.status >= 400 && r.status < 500);
    const since = all[7]!.received_at;
    const until = all[2]!.received_at;
    await expectRows(`&since=${since}&until=${until}`, (r) => r.received_at >= since && r.received_at < until);
  });

  test("filters by a source secret (sec_…): who still signs with the old one during a rotation", async () => {
    const company = (await t.management.createCompany('Rotating')).id;
    const logsKey = await managementKey(t, company, ['logs:read']);
    const tenant = await t.newTenant({ companyId: company, source: { type: 'github' } });
    const signed = async (secret: string) => {
      const body = JSON.stringify({ action: 'opened', n: Math.random() });
      const signature = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
      const response = await sendWebhook(t.app, tenant.integrationKey, { body, headers: { 'x-github-event': 'issues', 'x-hub-signature-256': signature } });
      expect(response.statusCode).toBe(202);
      return (response.json() as { uuid: string }).uuid;
    };
    const byOld = await signed(tenant.sourceSecret!);
    const rotated = await t.management.rotateSourceSecret(company, tenant.integrationId, undefined, 3600);
    const byNew = await waitFor(async () => {
      const response = await sendWebhook(t.app, tenant.integrationKey, {
        body: '{"action":"closed"}',
        headers: { 'x-github-event': 'issues', 'x-hub-signature-256': `sha256=${createHmac('sha256', rotated.secret!).update('{"action":"closed"}').digest('hex')}` },
      });
      return response.statusCode === 202 ? (response.json() as { uuid: string }).uuid : undefined;
    }, 'the new secret to verify');
    const bySecret = async (secretId: string) => {
      const found = await waitFor(async () => {
        const listed = await rows(`&key_id=${secretId}`, logsKey);
        return listed.length > 0 ? listed : undefined;
      }, `the rows of ${secretId}`);
      return found.map((row) => row.webhook_uuid);
    };
    expect(await bySecret(tenant.sourceSecretId!)).toEqual([byOld]);
    expect(await bySecret(rotated.id)).toEqual([byNew]);
    const malformed = await get(`/requests?key_id=sec_short`, logsKey);
    expect(malformed.statusCode).toBe(400);
  });

  test("one id for a request: a refusal's request_id is the id the log lists, and ?id= finds it", async () => {
    // A company of its own, so the counts of the other tests stay as they are.
    const own = await t.newTenant();
    const ownKey = await managementKey(t, own.companyId);
    const refused = await sendWebhook(t.app, own.integrationKey, { apiKey: 'not-a-key', body: '{"event":"x","data":{}}' });
    expect(refused.statusCode).toBe(401);
    const requestId = refused.json<{ request_id: string }>().request_id;
    expect(requestId).toMatch(/^req_[0-9A-Za-z]{22}$/);
    const found = await waitFor(async () => {
      const listed = await rows(`&id=${requestId}`, ownKey);
      return listed.length > 0 ? listed : undefined;
    }, 'the refused request in the log');
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({ id: requestId, status: 401, error_code: 'invalid_api_key' });
    expect((await rows('', ownKey)).map((row) => row.id)).toEqual([requestId]);

    // A stored webhook's record is found by its id too; an id of nothing finds nothing.
    const stored = (await rows('&status_class=2xx')).find((row) => row.status === 202)!;
    expect(await rows(`&id=${stored.id}`)).toEqual([stored]);
    expect(await rows(`&id=req_${'0'.repeat(22)}`)).toEqual([]);
    // Another company's request is not found by its id.
    expect(await rows(`&id=${requestId}`)).toEqual([]);
    const malformed = await get('/requests?id=nope');
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json()).toMatchObject({ field: 'id' });
  });

  test('pages by cursor without gaps or repeats', async () => {
    const seen: Row[] = [];
    let cursor: string | null = null;
    do {
      const response = await get(`/requests?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      const page = response.json<{ data: Row[]; next_cursor: string | null }>();
      expect(page.data.length).toBeLessThanOrEqual(3);
      seen.push(...page.data);
      cursor = page.next_cursor;
    } while (cursor && seen.length < 100);
    expect(seen).toEqual(await rows());
  });
});

describe('GET /api/v1/usage', () => {
  let company: { owner: Owner; second: Owner; headers: Record<string, string>; base: number };
  beforeAll(async () => {
    const owner = await createTenant(t.store);
    const second = await createIntegration(t.store, owner.companyId);
    const base = Math.floor(Date.now() / HOUR) * HOUR - 2 * HOUR;
    const at = (who: Owner, time: number, status: number, keyed = true, method = 'POST') => ({
      ...logRow(who, time),
      status,
      method,
      keyId: keyed ? who.keyId : null,
    });
    await t.store.commitBatch([], [
      at(owner, base + MINUTE + 5_000, 202),
      at(owner, base + MINUTE + 6_000, 202),
      at(owner, base + 2 * MINUTE - 1, 200),
      at(owner, base + MINUTE, 401, false),
      at(second, base + 3 * MINUTE, 503),
      at(second, base + 3 * MINUTE, 422),
      at(second, base + 3 * MINUTE + 1, 202),
      at(owner, base + 3 * MINUTE, 200, true, 'GET'),
      at(owner, base + HOUR + MINUTE, 202),
    ]);
    company = { owner, second, base, headers: await managementKey(t, owner.companyId, ['logs:read']) };
  });
  const iso = (ms: number) => new Date(ms).toISOString();
  const counts = (accepted: number, replayed: number, rejected: number, failed: number) => ({
    accepted, replayed, rejected, failed, total: accepted + replayed + rejected + failed,
  });
  const range = (bucket: string, from = company.base, to = company.base + 2 * HOUR) =>
    `bucket=${bucket}&since=${iso(from)}&until=${iso(to)}`;

  test('counts webhook sends per minute, hour and day by outcome; reads and empty buckets are left out', async () => {
    const { base, headers } = company;
    expect(await usage(range('minute'), headers)).toEqual({
      bucket: 'minute',
      since: iso(base),
      until: iso(base + 2 * HOUR),
      group_by: null,
      data: [
        { start: iso(base + MINUTE), ...counts(2, 1, 1, 0) },
        { start: iso(base + 3 * MINUTE), ...counts(1, 0, 1, 1) },
        { start: iso(base + HOUR + MINUTE), ...counts(1, 0, 0, 0) },
      ],
    });
    expect((await usage(range('hour'), headers)).data).toEqual([
      { start: iso(base), ...counts(3, 1, 2, 1) },
      { start: iso(base + HOUR), ...counts(1, 0, 0, 0) },
    ]);
    const day = await usage(range('day'), headers);
    expect(day.data.reduce((sum, b) => sum + b.total, 0)).toBe(8);
    for (const b of day.data) expect(Date.parse(b.start as string) % (24 * HOUR)).toBe(0);
  });

  test('since moves back to the start of its bucket', async () => {
    const { base, headers } = company;
    const found = await usage(range('minute', base + MINUTE + 30_000, base + 2 * MINUTE), headers);
    expect(found.since).toBe(iso(base + MINUTE));
    expect(found.data).toEqual([{ start: iso(base + MINUTE), ...counts(2, 1, 1, 0) }]);
  });

  test('groups by integration or key, and filters by either', async () => {
    const { base, owner, second, headers } = company;
    const hour = range('hour', base, base + HOUR);
    const byIntegration = [
      { start: iso(base), integration_id: owner.integrationId, ...counts(2, 1, 1, 0) },
      { start: iso(base), integration_id: second.integrationId, ...counts(1, 0, 1, 1) },
    ].sort((x, y) => (x.integration_id < y.integration_id ? -1 : 1));
    expect((await usage(`${hour}&group_by=integration`, headers)).data).toEqual(byIntegration);
    const byKey = (await usage(`${hour}&group_by=key`, headers)).data;
    expect(byKey).toHaveLength(3);
    expect(byKey).toContainEqual({ start: iso(base), key_id: null, ...counts(0, 0, 1, 0) });
    expect(byKey).toContainEqual({ start: iso(base), key_id: owner.keyId, ...counts(2, 1, 0, 0) });
    expect((await usage(`${hour}&integration_id=${second.integrationId}`, headers)).data).toEqual([{ start: iso(base), ...counts(1, 0, 1, 1) }]);
    expect((await usage(`${hour}&key_id=${owner.keyId}`, headers)).data).toEqual([{ start: iso(base), ...counts(2, 1, 0, 0) }]);
  });

  test('real traffic: the default range holds every webhook sent, by outcome', async () => {
    const found = await usage('bucket=minute');
    const sum = (field: 'accepted' | 'replayed' | 'rejected' | 'failed' | 'total') => found.data.reduce((n, b) => n + b[field], 0);
    expect([sum('accepted'), sum('replayed'), sum('rejected'), sum('failed'), sum('total')]).toEqual([4, 1, 5, 1, 11]);
  });

  test.each([
    'bucket=week',
    'group_by=everything',
    'bucket=minute&since=2030-01-02T00:00:00Z&until=2030-01-01T00:00:00Z',
    'bucket=minute&since=2030-01-01T00:00:00Z&until=2030-01-02T00:00:01Z',
    'bucket=hour&since=2030-01-01T00:00:00Z&until=2030-03-02T00:00:01Z',
    'integration_id=int_nope',
  ])('%s is a JSON 400', async (query) => {
    const response = await get(`/usage?${query}`);
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({ error: 'Invalid request', code: 'invalid_request' });
  });

  test('1,440 buckets are allowed', async () => {
    expect((await get('/usage?bucket=minute&since=2030-01-01T00:00:00Z&until=2030-01-02T00:00:00Z')).statusCode).toBe(200);
  });
});

describe('errors and security', () => {
  test.each(['status_class=3xx', 'error_code=Not-A-Code', 'key_id=key_nope', 'limit=0', 'limit=201', 'cursor=junk', 'since=today'])(
    '/requests?%s is a JSON 400',
    async (query) => {
      const response = await get(`/requests?${query}`);
      expect(response.statusCode).toBe(400);
      expect(response.json()).toMatchObject({ error: 'Invalid request', code: 'invalid_request' });
    },
  );

  test('no credentials: 401; an integration key or a management key without logs:read: 403', async () => {
    const manageOnly = await managementKey(t, a.companyId, ['integrations:manage']);
    for (const url of ['/requests', '/usage']) {
      expect((await get(url, {})).statusCode).toBe(401);
      for (const headers of [{ 'x-api-key': a.apiKey }, manageOnly]) expect((await get(url, headers)).statusCode).toBe(403);
    }
  });

  test("another company's key and session see only their own requests and usage", async () => {
    const ours = new Set((await rows()).map((r) => r.id));
    for (const headers of [other.key, other.owner.read]) {
      const theirs = await rows('', headers);
      expect(theirs.map((r) => r.status).sort()).toEqual([202, 401]);
      expect(theirs.filter((r) => ours.has(r.id) || r.integration_id !== other.tenant.integrationId)).toEqual([]);
      expect(await rows(`&integration_id=${a.integrationId}`, headers)).toEqual([]);
      const total = (await usage('bucket=minute', headers)).data.reduce((n, b) => n + b.total, 0);
      expect(total).toBe(2);
      expect((await usage(`bucket=minute&integration_id=${a.integrationId}`, headers)).data).toEqual([]);
    }
  });
});
