import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { newId } from '../../src/domain/ids.js';
import { buildTestApp, type TestApp } from '../helpers.js';
import { PASSWORD, managementKey, member, type SignedIn } from '../support/api.js';
import { quickMember } from '../support/members.js';

/**
 * /api/v1/members, /api/v1/company and /api/v1/audit-log: happy paths, each error, who
 * may do what, and another company's session, key and ids (STYLE: a security test per route).
 */
let t: TestApp;
let companyId: string;
let owner: SignedIn & { userId: string };
let admin: SignedIn & { userId: string };
let viewer: SignedIn & { userId: string };
let key: Record<string, string>;
let other: { companyId: string; owner: SignedIn & { userId: string }; key: Record<string, string> };

beforeAll(async () => {
  t = await buildTestApp();
  companyId = (await t.management.createCompany('Acme')).id;
  owner = await member(t, companyId, 'owner');
  admin = await member(t, companyId, 'admin');
  viewer = await member(t, companyId, 'viewer');
  key = await managementKey(t, companyId);
  const otherCompany = (await t.management.createCompany('Other')).id;
  other = { companyId: otherCompany, owner: await member(t, otherCompany, 'owner'), key: await managementKey(t, otherCompany) };
});
afterAll(() => t.close());

type Page<T> = { data: T[]; next_cursor: string | null };

const api = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, headers: Record<string, string>, payload?: object) =>
  t.app.inject({ method, url: `/api/v1${url}`, headers, ...(payload && { payload }) });

/** A company of its own with one owner, for tests about owners. */
async function ownedCompany() {
  const id = (await t.management.createCompany('Owned')).id;
  const signedIn = await member(t, id, 'owner');
  return { id, owner: signedIn, headers: { ...signedIn.change, 'x-company-id': id } };
}

describe('members', () => {
  test('the list shows every member with email, role and when added, newest first, page by page', async () => {
    const response = await api('GET', '/members', viewer.read);
    expect(response.statusCode, response.body).toBe(200);
    const { data } = response.json<{ data: Array<{ user_id: string; role: string; email: string; added_at: string }> }>();
    expect(data.map((m) => [m.user_id, m.role])).toEqual([
      [viewer.userId, 'viewer'],
      [admin.userId, 'admin'],
      [owner.userId, 'owner'],
    ]);
    expect(data[0]!.email).toMatch(/^viewer-.*@example\.com$/);
    expect(Date.parse(data[0]!.added_at)).toBeGreaterThan(0);
    expect(response.body).not.toContain('scrypt');
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: Page<{ user_id: string }> = (await api('GET', `/members?limit=1${cursor ? `&cursor=${cursor}` : ''}`, admin.read)).json();
      seen.push(...page.data.map((m) => m.user_id));
      cursor = page.next_cursor;
    } while (cursor);
    expect(seen).toEqual(data.map((m) => m.user_id));
    expect((await api('GET', `/members/${admin.userId}`, viewer.read)).json()).toMatchObject({ user_id: admin.userId, role: 'admin' });
  });

  test('a role change and a removal hold from the next request of an open session', async () => {
    const c = await ownedCompany();
    const person = await member(t, c.id, 'viewer');
    const create = () => api('POST', '/integrations', person.change, { name: 'x' });
    expect((await create()).statusCode).toBe(403);
    const changed = await api('PATCH', `/members/${person.userId}`, c.headers, { role: 'admin' });
    expect(changed.statusCode, changed.body).toBe(200);
    expect(changed.json()).toMatchObject({ user_id: person.userId, role: 'admin' });
    expect((await create()).statusCode).toBe(201);
    expect((await api('DELETE', `/members/${person.userId}`, c.headers)).statusCode).toBe(204);
    const after = await api('GET', '/company', person.read);
    expect(after.statusCode).toBe(403);
    expect(after.json().message).toBe('You are not a member of any company.');
    const records = await t.store.listAuditLog(c.id, { limit: 10, targetId: person.userId });
    expect(records.map((r) => [r.action, r.actor.id, r.before, r.after ?? null])).toEqual([
      ['member.remove', c.owner.userId, { email: expect.any(String), role: 'admin' }, null],
      ['member.role_change', c.owner.userId, { email: expect.any(String), role: 'viewer' }, { email: expect.any(String), role: 'admin' }],
      ['member.add', 'test', undefined, { email: expect.any(String), role: 'viewer' }],
    ]);
  });

  test('the last owner can be neither demoted nor removed (409); with a second owner, either can go', async () => {
    const c = await ownedCompany();
    for (const [method, payload] of [['PATCH', { role: 'admin' }], ['DELETE', undefined]] as const) {
      const refused = await api(method, `/members/${c.owner.userId}`, c.headers, payload);
      expect(refused.statusCode).toBe(409);
      expect(refused.json()).toMatchObject({ error: 'Conflict', message: expect.stringContaining('at least one owner') });
    }
    expect((await t.store.getMember(c.id, c.owner.userId))?.role).toBe('owner');
    const second = (await quickMember(t.store, c.id, 'owner')).userId;
    expect((await api('PATCH', `/members/${c.owner.userId}`, c.headers, { role: 'viewer' })).statusCode).toBe(200);
    expect((await t.store.listMembers(c.id, { limit: 10 })).filter((m) => m.role === 'owner').map((m) => m.userId)).toEqual([second]);
  });

  test('the list says who is the last owner, so the panel tells them before they try; a second owner lifts it', async () => {
    const c = await ownedCompany();
    const lastOwner = async () => {
      const { data } = (await api('GET', '/members', c.owner.read)).json<Page<{ user_id: string; last_owner: boolean }>>();
      return data.filter((m) => m.last_owner).map((m) => m.user_id);
    };
    const person = await member(t, c.id, 'admin');
    expect(await lastOwner()).toEqual([c.owner.userId]);
    expect((await api('GET', `/members/${c.owner.userId}`, person.read)).json()).toMatchObject({ last_owner: true });
    const promoted = await api('PATCH', `/members/${person.userId}`, c.headers, { role: 'owner' });
    expect(promoted.json()).toMatchObject({ role: 'owner', last_owner: false });
    expect(await lastOwner()).toEqual([]);
    const demoted = await api('PATCH', `/members/${c.owner.userId}`, c.headers, { role: 'viewer' });
    expect(demoted.json()).toMatchObject({ role: 'viewer', last_owner: false });
    expect(await lastOwner()).toEqual([person.userId]);
  });

  test('two owners demoting each other at once: one wins, the company keeps an owner', async () => {
    for (let round = 0; round < 5; round++) {
      const id = (await t.management.createCompany('Race')).id;
      const [a, b] = [(await quickMember(t.store, id, 'owner')).userId, (await quickMember(t.store, id, 'owner')).userId];
      const outcomes = await Promise.allSettled([
        t.management.changeMemberRole(id, a, 'viewer'),
        t.management.removeMember(id, b),
      ]);
      expect(outcomes.map((o) => o.status).sort()).toEqual(['fulfilled', 'rejected']);
      expect((await t.store.listMembers(id, { limit: 10 })).filter((m) => m.role === 'owner')).toHaveLength(1);
    }
  });

  test.each([
    ['no email address', { email: 'not-an-email', role: 'viewer' }, 'email', /email address/],
    ['an unknown role', { email: 'x@example.com', role: 'god' }, undefined, /role/],
  ])('inviting with %s is a 400 that says why', async (_name, payload, field, message) => {
    const response = await api('POST', '/invitations', owner.change, payload);
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({ code: 'invalid_request', message: expect.stringMatching(message) });
    if (field) expect(response.json().field).toBe(field);
  });

  test('nobody is added without an invitation; inviting a member is a 409; unknown and malformed ids are 404 and 400', async () => {
    const email = (await api('GET', `/members/${admin.userId}`, owner.read)).json().email;
    const added = await api('POST', '/members', owner.change, { email: 'someone@example.com', role: 'viewer', password: PASSWORD });
    expect(added.statusCode).toBe(405);
    const twice = await api('POST', '/invitations', owner.change, { email, role: 'viewer' });
    expect(twice.statusCode).toBe(409);
    expect(twice.json().message).toContain('already a member');
    const unknown = newId('usr');
    expect((await api('GET', `/members/${unknown}`, owner.read)).statusCode).toBe(404);
    expect((await api('PATCH', `/members/${unknown}`, owner.change, { role: 'admin' })).statusCode).toBe(404);
    expect((await api('DELETE', `/members/${unknown}`, owner.change)).statusCode).toBe(404);
    expect((await api('DELETE', '/members/nope', owner.change)).statusCode).toBe(400);
    expect((await api('GET', '/members?cursor=%%%', owner.read)).statusCode).toBe(400);
    expect((await t.store.getMember(companyId, admin.userId))?.role).toBe('admin');
  });
});

describe('company', () => {
  test('every member and every management key reads it', async () => {
    const readOnlyKey = await managementKey(t, companyId, ['logs:read']);
    for (const headers of [owner.read, viewer.read, key, readOnlyKey]) {
      const response = await api('GET', '/company', headers);
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json()).toEqual({
        id: companyId,
        name: expect.any(String),
        retention_days: expect.any(Number),
        require_two_factor: false,
        created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        environment: 'development',
      });
    }
  });

  test('an owner changes the name and the retention; the audit record holds before and after', async () => {
    const c = await ownedCompany();
    const patched = await api('PATCH', '/company', c.headers, { name: ' Renamed ', retention_days: 90 });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json()).toMatchObject({ id: c.id, name: 'Renamed', retention_days: 90 });
    expect((await api('PATCH', '/company', c.headers, { retention_days: 3650 })).json()).toMatchObject({ name: 'Renamed', retention_days: 3650 });
    expect(await t.store.getCompany(c.id)).toMatchObject({ name: 'Renamed', retentionDays: 3650 });
    const [latest, first] = await t.store.listAuditLog(c.id, { limit: 2, action: 'company.update' });
    expect(first).toMatchObject({ actor: { type: 'user', id: c.owner.userId }, targetId: c.id });
    expect(first).toMatchObject({ before: { name: 'Owned', retentionDays: 30 }, after: { name: 'Renamed', retentionDays: 90 } });
    expect(latest).toMatchObject({ before: { retentionDays: 90 }, after: { retentionDays: 3650 } });
  });

  test.each([
    ['nothing', {}],
    ['a retention of 0 days', { retention_days: 0 }],
    ['a retention over ten years', { retention_days: 3651 }],
    ['a fractional retention', { retention_days: 1.5 }],
    ['a blank name', { name: '   ' }],
  ])('changing %s is a 400 and changes nothing', async (_name, payload) => {
    const before = await t.store.getCompany(companyId);
    const response = await api('PATCH', '/company', owner.change, payload);
    expect(response.statusCode).toBe(400);
    expect(response.json().code).toBe('invalid_request');
    expect(await t.store.getCompany(companyId)).toEqual(before);
  });
});

describe('audit log', () => {
  test('newest first, with filters and pages; readable by every role and a logs:read key', async () => {
    const c = await ownedCompany();
    for (const name of ['One', 'Two', 'Three']) await api('PATCH', '/company', c.headers, { name });
    const page = await api('GET', '/audit-log?action=company.update', c.owner.read);
    expect(page.statusCode, page.body).toBe(200);
    const records = page.json().data;
    expect(records.map((r: { after: { name: string } }) => r.after.name)).toEqual(['Three', 'Two', 'One']);
    expect(records[0]).toEqual({
      id: expect.stringMatching(/^aud_/),
      at: expect.any(String),
      actor: { type: 'user', id: c.owner.userId, ip: '127.0.0.1' },
      action: 'company.update',
      target: { type: 'company', id: c.id },
      before: expect.objectContaining({ name: 'Two' }),
      after: expect.objectContaining({ name: 'Three' }),
    });
    const all = (await api('GET', '/audit-log', c.owner.read)).json().data;
    expect(all.map((r: { action: string }) => r.action)).toEqual(['company.update', 'company.update', 'company.update', 'member.add', 'company.create']);
    const byActor = (await api('GET', `/audit-log?actor_id=${c.owner.userId}&target_id=${c.id}`, c.owner.read)).json().data;
    expect(byActor).toHaveLength(3);
    const ids = async (filter: string) =>
      (await api('GET', `/audit-log?actor_id=${c.owner.userId}&${filter}`, c.owner.read)).json().data.map((r: { id: string }) => r.id);
    const newest = records[0];
    expect(await ids(`since=${encodeURIComponent(newest.at)}`)).toContain(newest.id);
    expect(await ids(`until=${encodeURIComponent(newest.at)}`)).not.toContain(newest.id);
    expect(await ids(`since=${encodeURIComponent(new Date(Date.parse(newest.at) + 1).toISOString())}`)).toEqual([]);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const next: Page<{ id: string }> = (await api('GET', `/audit-log?limit=2${cursor ? `&cursor=${cursor}` : ''}`, c.owner.read)).json();
      seen.push(...next.data.map((r) => r.id));
      cursor = next.next_cursor;
    } while (cursor);
    expect(seen).toEqual(all.map((r: { id: string }) => r.id));
    for (const headers of [viewer.read, admin.read, await managementKey(t, companyId, ['logs:read'])]) {
      expect((await api('GET', '/audit-log', headers)).statusCode).toBe(200);
    }
  });

  test('a key without logs:read cannot read it; bad filters are 400s', async () => {
    const manageOnly = await managementKey(t, companyId, ['integrations:manage']);
    expect((await api('GET', '/audit-log', manageOnly)).statusCode).toBe(403);
    expect((await api('GET', '/audit-log?since=yesterday', owner.read)).statusCode).toBe(400);
    expect((await api('GET', '/audit-log?cursor=%%%', owner.read)).statusCode).toBe(400);
    expect((await api('GET', '/audit-log?limit=201', owner.read)).statusCode).toBe(400);
  });
});

describe('who may do what', () => {
  const changes = (userId: string) =>
    [
      ['POST', '/invitations', { email: 'someone@example.com', role: 'viewer' }],
      ['PATCH', `/members/${userId}`, { role: 'owner' }],
      ['DELETE', `/members/${userId}`, undefined],
      ['PATCH', '/company', { name: 'Taken over' }],
    ] as const;

  test('a viewer, an admin and a management key change no member and no setting (403)', async () => {
    const before = { members: await t.store.listMembers(companyId, { limit: 50 }), company: await t.store.getCompany(companyId) };
    for (const headers of [viewer.change, admin.change, key]) {
      for (const [method, url, payload] of changes(viewer.userId)) {
        const response = await api(method, url, headers, payload);
        expect(response.statusCode, `${method} ${url}`).toBe(403);
        expect(response.json().error).toBe('Insufficient permissions');
      }
    }
    expect((await api('GET', '/members', key)).statusCode).toBe(403);
    expect(await t.store.listMembers(companyId, { limit: 50 })).toEqual(before.members);
    expect(await t.store.getCompany(companyId)).toEqual(before.company);
  });

  test("another company's session, key and ids reach nothing of this company", async () => {
    const before = await t.store.listMembers(companyId, { limit: 50 });
    const outsider = { ...other.owner.change, 'x-company-id': companyId };
    for (const url of ['/members', '/company', '/audit-log']) expect((await api('GET', url, outsider)).statusCode).toBe(404);
    const own = { ...other.owner.change, 'x-company-id': other.companyId };
    for (const [method, url, payload] of changes(admin.userId).slice(1, 3)) {
      expect((await api(method, url, own, payload)).statusCode, `${method} ${url}`).toBe(404);
    }
    expect((await api('GET', `/members/${admin.userId}`, own)).statusCode).toBe(404);
    expect((await api('GET', '/company', other.key)).json().id).toBe(other.companyId);
    for (const headers of [own, other.key]) {
      const log = await api('GET', `/audit-log?target_id=${companyId}`, headers);
      expect(log.json().data).toEqual([]);
      const everything = await api('GET', '/audit-log?limit=200', headers);
      expect(everything.body).not.toContain(companyId);
      expect(everything.body).not.toContain(admin.userId);
    }
    expect(await t.store.listMembers(companyId, { limit: 50 })).toEqual(before);
  });
});
