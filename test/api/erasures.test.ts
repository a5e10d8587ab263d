import { readFileSync, existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildTestApp, sendWebhook, type TestApp, type TestTenant } from '../helpers.js';
import { managementKey, member } from '../support/api.js';
import { addDestination } from '../support/deliveries.js';
import { webhook, type Owner } from '../support/webhooks.js';

/**
 * Erasure by data subject through the API, on each database (issue 40): a preview counts
 * and changes nothing; an erasure replaces every match by a tombstone and nothing else; the
 * value is found however the body writes it; another company's copies are never counted or
 * touched; only owners and keys with data:erase may; the value is gone from the SQLite
 * file and its WAL afterwards, and from the live table on PostgreSQL.
 */

const PERSON = 'Jane.Doe@Example.com';
const SPELLINGS = [
  (at: number) => JSON.stringify({ event: 'customer.updated', data: { customer: { email: 'jane.doe@example.com' }, at } }),
  (at: number) => JSON.stringify({ event: 'customer.updated', data: { note: `Contact JANE.DOE@EXAMPLE.COM soon`, at } }),
  // Written with a JSON escape for the @: the same value once read.
  (at: number) => `{"event":"customer.updated","data":{"email":"jane.doe\\u0040example.com","at":${at}}}`,
];

let t: TestApp;
let a: TestTenant;
let b: TestTenant;
let owner: Record<string, string>;
let eraseKey: Record<string, string>;
/** A's webhooks holding the value, by uuid, and those that do not. */
const matching = new Set<string>();
const others: string[] = [];
/** What each of A's webhooks was stored as, by uuid. */
const sentBodies = new Map<string, string>();
let otherCompanyUuid: string;
let destinationId: string;

beforeAll(async () => {
  t = await buildTestApp({}, { delivery: { start: false }, erasures: { start: false, pageRows: 50, restRatio: 0 } });
  a = await t.newTenant();
  b = await t.newTenant();
  owner = { ...(await member(t, a.companyId, 'owner')).change };
  eraseKey = { ...(await managementKey(t, a.companyId, ['data:erase'])), 'content-type': 'application/json' };
  destinationId = await addDestination(t.store, a.companyId, { createdAt: Date.now() - 3_600_000 });
  const ownerA: Owner = { companyId: a.companyId, integrationId: a.integrationId, keyId: a.keyId };
  const at = Date.now() - 600_000;
  const batch = [];
  for (let i = 0; i < 400; i++) {
    const spelling = i % 11 === 0 ? SPELLINGS[(i / 11) % SPELLINGS.length] : undefined;
    const row = webhook(ownerA, at + i, spelling ? { body: spelling(i), event: 'customer.updated' } : { body: JSON.stringify({ event: 'x', data: { email: 'someone.else@example.com', i } }) });
    if (i === 7) row.headers = JSON.stringify({ 'content-type': 'application/json', 'x-customer': 'jane.doe@example.com' });
    if (spelling || i === 7) matching.add(row.uuid);
    else others.push(row.uuid);
    batch.push(row);
    sentBodies.set(row.uuid, row.rawBody.toString('utf8'));
  }
  await t.store.commitBatch(batch, []);
  const ownerB: Owner = { companyId: b.companyId, integrationId: b.integrationId, keyId: b.keyId };
  const theirs = webhook(ownerB, at, { body: SPELLINGS[0]!(1) });
  otherCompanyUuid = theirs.uuid;
  await t.store.commitBatch([theirs], []);
  // An attempt with the receiver's answer, which may quote the body back.
  const [delivery] = await t.database.query<{ id: string }>(`select id from deliveries where webhook_uuid = '${[...matching][0]}'`);
  await t.database.query(
    `insert into delivery_attempts (id, company_id, delivery_id, destination_id, series, number, attempted_at, duration_ms, status, error, response_excerpt, next_attempt_at)
     values ('att_erasuretest00000000000000', '${a.companyId}', '${delivery!.id}', '${destinationId}', 0, 1, ${Date.now()}, 5, 500, null, 'bad email jane.doe@example.com', null)`,
  );
});
afterAll(() => t?.close());

async function api(method: 'GET' | 'POST', url: string, headers: Record<string, string>, payload?: object) {
  const sent = payload ? headers : Object.fromEntries(Object.entries(headers).filter(([name]) => name !== 'content-type'));
  const response = await t.app.inject({ method, url: `/api/v1${url}`, headers: sent, ...(payload && { payload }) });
  return { status: response.statusCode, body: response.body, json: () => response.json() as Record<string, any> };
}

async function rawBody(uuid: string, headers = owner): Promise<string> {
  const read = await api('GET', `/webhooks/${uuid}`, headers);
  expect(read.status, read.body).toBe(200);
  return read.json().raw_body as string;
}

test('only owners and keys with data:erase may erase; the others get 403 and nothing is created', async () => {
  for (const role of ['admin', 'viewer'] as const) {
    const refused = await api('POST', '/erasures', (await member(t, a.companyId, role)).change, { value: PERSON });
    expect(refused.status, refused.body).toBe(403);
  }
  const logsKey = await managementKey(t, a.companyId, ['integrations:manage', 'logs:read']);
  expect((await api('POST', '/erasures', logsKey, { value: PERSON })).status).toBe(403);
  expect((await api('GET', '/erasures', logsKey)).status).toBe(403);
  expect((await api('GET', '/erasures', eraseKey)).json().data).toEqual([]);
});

test('bad criteria are a 400 naming the field; an unknown integration a 404', async () => {
  expect((await api('POST', '/erasures', eraseKey, { value: 'ab' })).json()).toMatchObject({ error: 'Invalid request', message: expect.stringContaining('value') });
  expect((await api('POST', '/erasures', eraseKey, { value: '   ab   ' })).json()).toMatchObject({ field: 'value' });
  expect((await api('POST', '/erasures', eraseKey, { value: PERSON, paths: ['a..b'] })).json()).toMatchObject({ field: 'paths' });
  const backwards = await api('POST', '/erasures', eraseKey, { value: PERSON, since: '2026-02-01T00:00:00Z', until: '2026-01-01T00:00:00Z' });
  expect([backwards.status, backwards.json().field]).toEqual([400, 'since']);
  const unknown = await api('POST', '/erasures', eraseKey, { value: PERSON, integration_ids: [b.integrationId] });
  expect(unknown.status).toBe(404);
});

describe('a preview, then the erasure', () => {
  let id: string;

  test('a preview counts every spelling, shows no body, and changes nothing', async () => {
    const created = await api('POST', '/erasures', eraseKey, { value: PERSON, dry_run: true });
    expect(created.status, created.body).toBe(202);
    expect(created.json()).toMatchObject({ state: 'counting', dry_run: true, value_hint: 'J•••@Example.com' });
    expect(created.body).not.toContain('Jane.Doe');
    id = created.json().id;
    await t.app.erasureRunner.runOnce();
    const previewed = (await api('GET', `/erasures/${id}`, eraseKey)).json();
    expect(previewed).toMatchObject({ state: 'previewed', scanned: 400, counts: { webhooks: matching.size, deliveries: matching.size, attempts: 1, request_log: matching.size } });
    expect(previewed.sample).toHaveLength(10);
    expect(previewed.sample.every((s: { uuid: string }) => matching.has(s.uuid))).toBe(true);
    expect(previewed.sample.map((s: { matched_in: string }) => s.matched_in)).toContain('header x-customer');
    expect(JSON.stringify(previewed.sample)).not.toContain('example.com');
    for (const uuid of matching) expect(await rawBody(uuid)).toBe(sentBodies.get(uuid));
    const [row] = await t.database.query<{ n: number }>(`select count(*) as n from webhooks where erasure_id is not null`);
    expect(Number(row!.n)).toBe(0);
  });

  test('confirmed, every match becomes a tombstone; nothing else changes; the value is dropped', async () => {
    const before = new Map(await Promise.all(others.map(async (uuid) => [uuid, await rawBody(uuid)] as const)));
    const theirs = await rawBody(otherCompanyUuid, (await member(t, b.companyId, 'owner')).change);
    // A webhook that arrives after the preview: the range had no end of its own, so it is erased too.
    const late = webhook({ companyId: a.companyId, integrationId: a.integrationId, keyId: a.keyId }, Date.now(), { body: SPELLINGS[0]!(999) });
    await t.store.commitBatch([late], []);
    matching.add(late.uuid);
    const confirmed = await api('POST', `/erasures/${id}/confirm`, eraseKey);
    expect([confirmed.status, confirmed.json().state], confirmed.body).toEqual([202, 'queued']);
    // Another company sends meanwhile, the same email in its bodies: every one is taken, and kept as sent.
    const load = Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        sendWebhook(t.app, b.integrationKey, { apiKey: b.apiKey, body: JSON.stringify({ event: 'b.load', data: { i, email: 'jane.doe@example.com' } }) }),
      ),
    );
    const [answers] = await Promise.all([load, t.app.erasureRunner.runOnce()]);
    expect(answers.map((answer) => answer.statusCode)).toEqual(Array(40).fill(202));
    const [kept] = await t.database.query<{ n: number }>(`select count(*) as n from webhooks where company_id = '${b.companyId}' and erasure_id is null`);
    expect(Number(kept!.n)).toBe(41);
    const done = (await api('GET', `/erasures/${id}`, eraseKey)).json();
    expect(done).toMatchObject({ state: 'completed', dry_run: false, scanned: 401, counts: { webhooks: matching.size, deliveries: matching.size, attempts: 1, request_log: matching.size } });
    expect(done.finished_at).toEqual(expect.any(String));

    for (const uuid of matching) {
      const read = (await api('GET', `/webhooks/${uuid}`, owner)).json();
      expect(read.data).toEqual({ erased: { erasure_id: id, erased_at: expect.any(String), erased_by: expect.stringMatching(/^key key_/) } });
      expect(read.headers).toEqual({});
      expect(JSON.stringify(read).toLowerCase()).not.toContain('jane.doe');
    }
    for (const [uuid, body] of before) expect(await rawBody(uuid)).toBe(body);
    expect(await rawBody(otherCompanyUuid, (await member(t, b.companyId, 'owner')).change)).toBe(theirs);

    // Deliveries keep their states and times; the one still to be made is cancelled; the attempt's excerpt is gone.
    const states = await t.database.query<{ state: string }>(`select distinct state from deliveries where webhook_uuid in (${[...matching].map((u) => `'${u}'`).join(',')})`);
    expect(states.map((s) => s.state)).toEqual(['cancelled']);
    const [attempt] = await t.database.query<{ response_excerpt: string | null }>(`select response_excerpt from delivery_attempts where id = 'att_erasuretest00000000000000'`);
    expect(attempt!.response_excerpt).toBeNull();
    const senders = await t.database.query<{ source_ip: string; user_agent: string | null }>(
      `select source_ip, user_agent from webhooks where erasure_id = '${id}'`,
    );
    expect(senders).toHaveLength(matching.size);
    expect(senders.every((s) => s.source_ip === '' && s.user_agent === null)).toBe(true);
    const [sealed] = await t.database.query<{ value_sealed: string | null }>(`select value_sealed from erasures where id = '${id}'`);
    expect(sealed!.value_sealed).toBeNull();

    // Erased webhooks are never found again: a second erasure of the value finds none.
    const again = await api('POST', '/erasures', eraseKey, { value: PERSON });
    await t.app.erasureRunner.runOnce();
    expect((await api('GET', `/erasures/${again.json().id}`, eraseKey)).json()).toMatchObject({ state: 'completed', counts: { webhooks: 0 } });
  });

  test('the audit log and the report name the erasure with the value masked; a finished erasure cannot be confirmed again', async () => {
    const audit = await api('GET', `/audit-log?target_id=${id}`, owner);
    expect(audit.json().data.map((r: { action: string }) => r.action).sort()).toEqual(['erasure.complete', 'erasure.confirm', 'erasure.preview']);
    expect(audit.body.toLowerCase()).not.toContain('jane.doe');
    const report = await api('GET', `/erasures/${id}/report`, eraseKey);
    expect(report.status).toBe(200);
    expect(report.body).toContain(`Webhooks erased: ${matching.size}`);
    expect(report.body.toLowerCase()).not.toContain('jane.doe');
    expect((await api('POST', `/erasures/${id}/confirm`, eraseKey)).status).toBe(409);
    // Another company cannot see it.
    expect((await api('GET', `/erasures/${id}`, await managementKey(t, b.companyId, ['data:erase']))).status).toBe(404);
  });
});

test('with paths, only a value at a path counts, and it must equal the value', async () => {
  const c = await t.newTenant();
  const ownerC: Owner = { companyId: c.companyId, integrationId: c.integrationId, keyId: c.keyId };
  const key = { ...(await managementKey(t, c.companyId, ['data:erase'])), 'content-type': 'application/json' };
  const at = Date.now() - 60_000;
  const atPath = webhook(ownerC, at, { body: JSON.stringify({ event: 'e', data: { customer: { email: 'ada@example.org' } } }) });
  const elsewhere = webhook(ownerC, at + 1, { body: JSON.stringify({ event: 'e', data: { note: 'ada@example.org' } }) });
  const longer = webhook(ownerC, at + 2, { body: JSON.stringify({ event: 'e', data: { customer: { email: 'ada@example.org.uk' } } }) });
  await t.store.commitBatch([atPath, elsewhere, longer], []);
  const created = (await api('POST', '/erasures', key, { value: 'ada@example.org', paths: ['data.customer.email'], integration_ids: [c.integrationId] })).json();
  await t.app.erasureRunner.runOnce();
  const done = (await api('GET', `/erasures/${created.id}`, key)).json();
  expect(done).toMatchObject({ state: 'completed', counts: { webhooks: 1 }, criteria: { paths: ['data.customer.email'], integration_ids: [c.integrationId] } });
  const erased = await t.database.query<{ uuid: string }>(`select uuid from webhooks where erasure_id = '${created.id}'`);
  expect(erased.map((r) => r.uuid)).toEqual([atPath.uuid]);
});

test('the value is gone from the SQLite file and its WAL (PostgreSQL: from the live table)', async () => {
  const d = await t.newTenant();
  const ownerD: Owner = { companyId: d.companyId, integrationId: d.integrationId, keyId: d.keyId };
  const key = { ...(await managementKey(t, d.companyId, ['data:erase'])), 'content-type': 'application/json' };
  const secret = 'zed.quixote.unique@example.net';
  const kept = 'kept.marker.value@example.net';
  const at = Date.now() - 60_000;
  // Large bodies too: their bytes live on overflow pages, which are freed and rewritten.
  const rows = Array.from({ length: 30 }, (_, i) =>
    webhook(ownerD, at + i, { body: JSON.stringify({ event: 'e', data: { email: i % 2 ? secret : kept, pad: 'x'.repeat(i % 3 === 0 ? 20_000 : 10) } }) }),
  );
  await t.store.commitBatch(rows, []);
  const created = (await api('POST', '/erasures', key, { value: secret })).json();
  await t.app.erasureRunner.runOnce();
  expect((await api('GET', `/erasures/${created.id}`, key)).json()).toMatchObject({ state: 'completed', counts: { webhooks: 15 } });
  if (t.database.dialect === 'sqlite') {
    const file = t.database.databaseUrl.slice('sqlite:'.length);
    const bytes = Buffer.concat([readFileSync(file), existsSync(`${file}-wal`) ? readFileSync(`${file}-wal`) : Buffer.alloc(0)]);
    // The search can find: the value left alone is there.
    expect(bytes.includes(kept)).toBe(true);
    expect(bytes.includes(secret)).toBe(false);
  } else {
    const found = await t.database.query<{ n: string }>(`select count(*) as n from webhooks where position(convert_to($1, 'UTF8') in raw_body) > 0`, [secret]);
    expect(Number(found[0]!.n)).toBe(0);
    const stillThere = await t.database.query<{ n: string }>(`select count(*) as n from webhooks where position(convert_to($1, 'UTF8') in raw_body) > 0`, [kept]);
    expect(Number(stillThere[0]!.n)).toBe(15);
  }
});

test('a company may have a few erasures under way at once; past that, 429', async () => {
  const e = await t.newTenant();
  const key = { ...(await managementKey(t, e.companyId, ['data:erase'])), 'content-type': 'application/json' };
  const statuses = [];
  for (let i = 0; i < 6; i++) statuses.push((await api('POST', '/erasures', key, { value: `person${i}@example.com`, dry_run: true })).status);
  expect(statuses).toEqual([202, 202, 202, 202, 202, 429]);
  await t.app.erasureRunner.runOnce();
  expect((await api('POST', '/erasures', key, { value: 'later@example.com', dry_run: true })).status).toBe(202);
});

test('a value an integration stored as its keyed hash is found and erased by the value itself', async () => {
  const f = await t.newTenant();
  const ownerF = (await member(t, f.companyId, 'owner')).change;
  const created = await api('POST', '/integrations', ownerF, { name: 'Hashing', redaction: { paths: ['data.customer.email'], headers: ['x-email'], mode: 'hash' } });
  expect(created.status, created.body).toBe(201);
  const { integration, api_key } = created.json() as { integration: { integration_key: string; redaction: unknown }; api_key: string };
  expect(integration.redaction).toEqual({ paths: ['data.customer.email'], headers: ['x-email'], mode: 'hash' });
  const send = (email: string, header?: string) =>
    sendWebhook(t.app, integration.integration_key, {
      apiKey: api_key,
      body: JSON.stringify({ event: 'customer.created', data: { customer: { email, plan: 'pro' } } }),
      ...(header && { headers: { 'x-email': header } }),
    });
  const first = await send('Grace.Hopper@example.com');
  const second = await send('grace.hopper@example.com');
  const byHeader = await send('someone@example.com', 'GRACE.HOPPER@EXAMPLE.COM');
  const other = await send('alan.turing@example.com');
  const stored = async (response: Awaited<ReturnType<typeof send>>) => rawBody((response.json() as { uuid: string }).uuid, ownerF);
  const [a1, a2] = [await stored(first), await stored(second)];
  expect(a1).toMatch(/"email":"hmac-sha256:[0-9a-f]{32}"/);
  expect(a1).toBe(a2);
  expect(a1.toLowerCase()).not.toContain('grace');
  const key = { ...(await managementKey(t, f.companyId, ['data:erase'])), 'content-type': 'application/json' };
  const erasure = (await api('POST', '/erasures', key, { value: 'grace.hopper@example.com' })).json();
  await t.app.erasureRunner.runOnce();
  expect((await api('GET', `/erasures/${erasure.id}`, key)).json()).toMatchObject({ state: 'completed', counts: { webhooks: 3 } });
  expect(await stored(other)).toContain('hmac-sha256:');
  expect(JSON.parse(await stored(byHeader))).toMatchObject({ erased: { erasure_id: erasure.id } });
});

test('one node at a time runs an erasure; when its lease ends, another takes it over from its cursor', async () => {
  const g = await t.newTenant();
  const ownerG: Owner = { companyId: g.companyId, integrationId: g.integrationId, keyId: g.keyId };
  const key = { ...(await managementKey(t, g.companyId, ['data:erase'])), 'content-type': 'application/json' };
  const at = Date.now() - 60_000;
  const rows = Array.from({ length: 120 }, (_, i) => webhook(ownerG, at + i, { body: JSON.stringify({ event: 'e', data: { email: 'lin@example.com', i } }) }));
  await t.store.commitBatch(rows, []);
  const created = (await api('POST', '/erasures', key, { value: 'lin@example.com' })).json();
  // Another node takes it first, and reaches the 40th webhook before it stops answering.
  const taken = await t.store.takeErasure(Date.now(), 'the other node', 60_000);
  expect(taken?.id).toBe(created.id);
  const step = { id: created.id, token: 'the other node', at: Date.now(), leaseMs: 60_000, dryRun: false, tombstone: Buffer.from('{"erased":{}}'), scanned: 40, sample: [] };
  const first40 = rows.slice(0, 40).map((row) => ({ uuid: row.uuid, receivedAt: row.receivedAt }));
  expect(await t.store.erasureStep(g.companyId, { ...step, targets: first40, cursor: first40[39]! })).toBe(true);
  // While its lease lives, this node leaves the erasure alone.
  await t.app.erasureRunner.runOnce();
  expect((await api('GET', `/erasures/${created.id}`, key)).json()).toMatchObject({ state: 'running', scanned: 40, counts: { webhooks: 40 } });
  // The lease ends: this node goes on from the 41st, and the other node's next step is refused.
  await t.database.query(`update erasures set lease_expires_at = 0 where id = '${created.id}'`);
  await t.app.erasureRunner.runOnce();
  expect((await api('GET', `/erasures/${created.id}`, key)).json()).toMatchObject({ state: 'completed', scanned: 120, counts: { webhooks: 120 } });
  expect(await t.store.erasureStep(g.companyId, { ...step, targets: [], cursor: first40[39]! })).toBe(false);
});
