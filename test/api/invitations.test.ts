import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { passwordResetLink } from '../../src/admin/accounts.js';
import { MAX_PENDING_INVITATIONS } from '../../src/services/invitations.js';
import { buildTestApp, sendWebhook, type TestApp } from '../helpers.js';
import { tokenOf } from '../support/accounts.js';
import { PASSWORD, managementKey, member, signIn, type SignedIn } from '../support/api.js';

/**
 * Members join by invitation, and nobody but an account's holder chooses its password
 * (issue 13, finding 1: a company's owner could set the password of another company's user
 * and read that company's webhooks through it).
 */
let t: TestApp;

beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(() => t.close());

const api = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, headers: Record<string, string> = {}, payload?: object) =>
  t.app.inject({ method, url: `/api/v1${url}`, headers, ...(payload && { payload }) });

/** A company with an owner signed in, and the headers naming it. */
async function company(name: string) {
  const id = (await t.management.createCompany(name)).id;
  const owner = await member(t, id, 'owner');
  return { id, owner, headers: { ...owner.change, 'x-company-id': id } };
}

async function invite(headers: Record<string, string>, email: string, role = 'viewer') {
  const response = await api('POST', '/invitations', headers, { email, role });
  expect(response.statusCode, response.body).toBe(201);
  return response.json<{ invitation: { id: string; email: string; role: string }; invite_url: string; emailed: boolean }>();
}

/** The session an accept answered with, as signIn gives it. */
function sessionOf(response: { headers: Record<string, unknown>; json(): unknown }): SignedIn {
  const cookie = String(response.headers['set-cookie']).split(';', 1)[0]!;
  const csrfToken = (response.json() as { csrf_token: string }).csrf_token;
  return { cookie, csrfToken, read: { cookie }, change: { cookie, 'x-csrf-token': csrfToken } };
}

const unique = (name: string) => `${name}-${Math.random().toString(36).slice(2, 8)}@example.com`;

describe("finding 1: no company can take over another company's user", () => {
  test('an owner who invites the user of another company neither chooses its password nor reaches it, and the user is no member until they accept', async () => {
    const a = await company('Hostile A');
    const b = await company('Victim B');
    const cfo = await member(t, b.id, 'admin');
    const cfoEmail = (await api('GET', `/members/${cfo.userId}`, cfo.read)).json().email as string;
    const payments = await t.newTenant({ companyId: b.id });
    expect((await sendWebhook(t.app, payments.integrationKey, { apiKey: payments.apiKey })).statusCode).toBe(202);

    // The old way in: choose a password while adding the member. It no longer exists.
    const added = await api('POST', '/members', a.headers, { email: cfoEmail, role: 'owner', password: 'chosen by company A!' });
    expect(added.statusCode).toBe(405);
    // An invitation changes nothing until the holder accepts it.
    const invited = await invite(a.headers, cfoEmail, 'owner');
    expect((await api('GET', '/members', a.headers)).json().data.map((m: { email: string }) => m.email)).not.toContain(cfoEmail);
    expect((await api('GET', '/auth/session', cfo.read)).json().companies.map((c: { id: string }) => c.id)).toEqual([b.id]);
    // A holds the link, but cannot use it to make the account (it exists) or to choose its password.
    const taken = await api('POST', '/invitations/accept', {}, { token: tokenOf(invited.invite_url), password: 'chosen by company A!' });
    expect(taken.statusCode).toBe(409);
    await expect(signIn(t.app, cfoEmail, 'chosen by company A!')).rejects.toThrow(/401/);
    // Signed in as themselves, A's owner cannot accept an invitation meant for someone else.
    const wrong = await api('POST', '/invitations/accept', a.owner.change, { token: tokenOf(invited.invite_url) });
    expect(wrong.statusCode).toBe(403);
    expect(wrong.json().code).toBe('invitation_wrong_account');
    // The invitation is still the holder's to take or leave.
    const accepted = await api('POST', '/invitations/accept', cfo.change, { token: tokenOf(invited.invite_url) });
    expect(accepted.statusCode, accepted.body).toBe(200);
    expect(accepted.json().companies.map((c: { id: string }) => c.id).sort()).toEqual([a.id, b.id].sort());
    // A sees its new member, and nothing of B's.
    for (const url of ['/webhooks', '/integrations', '/members']) {
      expect((await api('GET', url, { ...a.owner.read, 'x-company-id': b.id })).statusCode, url).toBe(404);
    }
  });

  test("an account made through one company's link (its owner chose the password) gives that owner nothing of the next company, and its holder takes it back with a reset", async () => {
    const a = await company('Squatter A');
    const b = await company('Later B');
    const email = unique('cfo');
    // A invites an email nobody has yet and, holding the link, makes the account itself.
    const squatted = await invite(a.headers, email);
    const made = await api('POST', '/invitations/accept', {}, { token: tokenOf(squatted.invite_url), password: 'a password A knows' });
    expect(made.statusCode, made.body).toBe(200);
    const squatter = await signIn(t.app, email, 'a password A knows');
    // B invites the same email: the link goes to B's owner (and the inbox), never to the account.
    const forB = await invite(b.headers, email, 'admin');
    expect((await api('GET', '/auth/session', squatter.read)).json().companies.map((c: { id: string }) => c.id)).toEqual([a.id]);
    expect((await api('GET', '/members', { ...squatter.read, 'x-company-id': b.id })).statusCode).toBe(404);
    // The real holder resets the password (a link by email, or from the operator): A is out.
    const reset = await api('POST', '/auth/password-reset/complete', {}, {
      token: tokenOf(await passwordResetLink(t.store, t.config.baseUrl, made.json().user.id)),
      password: 'the holder chooses this',
    });
    expect(reset.statusCode, reset.body).toBe(204);
    expect((await api('GET', '/auth/session', squatter.read)).statusCode).toBe(401);
    await expect(signIn(t.app, email, 'a password A knows')).rejects.toThrow(/401/);
    const holder = await signIn(t.app, email, 'the holder chooses this');
    const joined = await api('POST', '/invitations/accept', holder.change, { token: tokenOf(forB.invite_url) });
    expect(joined.statusCode, joined.body).toBe(200);
    expect((await api('GET', '/members', { ...holder.read, 'x-company-id': b.id })).statusCode).toBe(200);
  });

  test("the answer to an invitation does not tell whether the email has an account", async () => {
    const a = await company('Curious');
    const elsewhere = await company('Elsewhere');
    const existing = (await api('GET', `/members/${elsewhere.owner.userId}`, elsewhere.owner.read)).json().email as string;
    const shape = (answer: Awaited<ReturnType<typeof invite>>) =>
      JSON.stringify(answer, (key, value: unknown) => (['id', 'email', 'invite_url', 'created_at', 'expires_at'].includes(key) ? typeof value : value));
    expect(shape(await invite(a.headers, existing))).toBe(shape(await invite(a.headers, unique('nobody'))));
  });
});

describe('invitations', () => {
  test('a new person accepts with a password of their own: signed in, a member with the role, recorded in the audit log', async () => {
    const c = await company('Welcoming');
    const email = unique('new');
    const invited = await invite(c.headers, ` ${email.toUpperCase()} `, 'admin');
    expect(invited).toMatchObject({ invitation: { email, role: 'admin' }, emailed: false });
    expect(invited.invite_url).toMatch(new RegExp(`^${t.config.baseUrl}/admin/invite\\?token=[\\w-]{43}$`));
    const pending = (await api('GET', '/invitations', c.owner.read)).json();
    expect(pending.data).toEqual([expect.objectContaining({ id: invited.invitation.id, invited_by: { user_id: c.owner.userId, email: expect.any(String) } })]);

    const token = tokenOf(invited.invite_url);
    const lookup = await api('POST', '/invitations/lookup', {}, { token });
    expect(lookup.json()).toMatchObject({ company_name: 'Welcoming', role: 'admin', email });
    expect((await api('POST', '/invitations/accept', {}, { token, password: 'short' })).json().field).toBe('password');
    const accepted = await api('POST', '/invitations/accept', {}, { token, password: PASSWORD });
    expect(accepted.statusCode, accepted.body).toBe(200);
    const session = sessionOf(accepted);
    expect(accepted.json()).toMatchObject({ user: { email }, companies: [{ id: c.id, role: 'admin' }] });
    expect((await api('POST', '/integrations', session.change, { name: 'Made by the new admin' })).statusCode).toBe(201);
    await signIn(t.app, email, PASSWORD);

    expect((await api('GET', '/invitations', c.owner.read)).json().data).toEqual([]);
    expect((await api('POST', '/invitations/accept', {}, { token, password: PASSWORD })).json().code).toBe('invitation_invalid');
    expect((await api('POST', '/invitations/lookup', {}, { token })).statusCode).toBe(403);
    const [record] = await t.store.listAuditLog(c.id, { limit: 1, action: 'member.add' });
    expect(record).toMatchObject({ actor: { type: 'user', id: accepted.json().user.id }, after: { email, role: 'admin', invitationId: invited.invitation.id } });
    const [created] = await t.store.listAuditLog(c.id, { limit: 1, action: 'invitation.create' });
    expect(created).toMatchObject({ actor: { type: 'user', id: c.owner.userId }, targetId: invited.invitation.id });
    expect(JSON.stringify([record, created])).not.toContain(token);
    // Only the token's hash is kept.
    const rows = await t.database.query<{ token_hash: string }>(`select token_hash from invitations where id = '${invited.invitation.id}'`);
    expect(rows[0]!.token_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(rows[0]!.token_hash).not.toContain(token);
  });

  test('until accepted, nothing of the company is visible to the invitee', async () => {
    const c = await company('Private');
    const elsewhere = await company('Home');
    const person = await member(t, elsewhere.id, 'viewer');
    const email = (await api('GET', `/members/${person.userId}`, person.read)).json().email as string;
    await invite(c.headers, email);
    expect((await api('GET', '/auth/session', person.read)).json().companies.map((x: { id: string }) => x.id)).toEqual([elsewhere.id]);
    for (const url of ['/integrations', '/webhooks', '/members', '/invitations', '/company']) {
      expect((await api('GET', url, { ...person.read, 'x-company-id': c.id })).statusCode, url).toBe(404);
    }
  });

  test('a revoked, replaced or expired link is refused and adds nobody', async () => {
    const c = await company('Careful');
    const email = unique('later');
    const first = await invite(c.headers, email);
    const second = await invite(c.headers, email, 'admin');
    expect((await api('POST', '/invitations/lookup', {}, { token: tokenOf(first.invite_url) })).json().code).toBe('invitation_invalid');
    expect((await api('GET', '/invitations', c.owner.read)).json().data.map((i: { id: string }) => i.id)).toEqual([second.invitation.id]);

    expect((await api('DELETE', `/invitations/${second.invitation.id}`, c.headers)).statusCode).toBe(204);
    expect((await api('DELETE', `/invitations/${second.invitation.id}`, c.headers)).statusCode).toBe(404);
    const revoked = await api('POST', '/invitations/accept', {}, { token: tokenOf(second.invite_url), password: PASSWORD });
    expect(revoked.statusCode).toBe(403);
    expect(revoked.json()).toMatchObject({ code: 'invitation_invalid', error: 'Invitation not valid' });

    const third = await invite(c.headers, email);
    const past = Date.now() - 1;
    await t.database.query(`update invitations set expires_at = ${past} where id = '${third.invitation.id}'`);
    expect((await api('POST', '/invitations/accept', {}, { token: tokenOf(third.invite_url), password: PASSWORD })).statusCode).toBe(403);
    expect((await api('GET', '/members', c.owner.read)).json().data).toHaveLength(1);
    expect(await t.store.findUserByEmail(email)).toBeUndefined();
  });

  test('who may invite: owners; every member reads the pending list; keys and other companies reach nothing', async () => {
    const c = await company('Roles');
    const admin = await member(t, c.id, 'admin');
    const viewer = await member(t, c.id, 'viewer');
    const invited = await invite(c.headers, unique('guest'));
    const key = await managementKey(t, c.id);
    for (const headers of [admin.change, viewer.change, key]) {
      expect((await api('POST', '/invitations', headers, { email: unique('x'), role: 'viewer' })).statusCode).toBe(403);
      expect((await api('DELETE', `/invitations/${invited.invitation.id}`, headers)).statusCode).toBe(403);
    }
    expect((await api('GET', '/invitations', viewer.read)).json().data).toHaveLength(1);
    expect((await api('GET', '/invitations', key)).statusCode).toBe(403);
    const other = await company('Other');
    expect((await api('DELETE', `/invitations/${invited.invitation.id}`, other.headers)).statusCode).toBe(404);
    expect((await api('GET', '/invitations', c.owner.read)).json().data).toHaveLength(1);
  });

  test(`a company has at most ${MAX_PENDING_INVITATIONS} pending invitations`, async () => {
    const c = await company('Busy');
    for (let i = 0; i < MAX_PENDING_INVITATIONS; i++) {
      const response = await api('POST', '/invitations', c.headers, { email: `guest${i}@example.com`, role: 'viewer' });
      expect(response.statusCode).toBe(201);
    }
    const over = await api('POST', '/invitations', c.headers, { email: 'one-more@example.com', role: 'viewer' });
    expect(over.statusCode).toBe(409);
    expect(over.json().message).toContain(String(MAX_PENDING_INVITATIONS));
    // Inviting one of them again replaces it: the count does not grow.
    expect((await api('POST', '/invitations', c.headers, { email: 'guest0@example.com', role: 'admin' })).statusCode).toBe(201);
  });

  test('bad input names its field', async () => {
    const c = await company('Strict');
    expect((await api('POST', '/invitations', c.headers, { email: 'not an email', role: 'viewer' })).json().field).toBe('email');
    expect((await api('POST', '/invitations', c.headers, { email: unique('x'), role: 'god' })).statusCode).toBe(400);
    expect((await api('POST', '/invitations/accept', {}, { token: 'made-up' })).statusCode).toBe(400);
    expect((await api('POST', '/invitations/accept', {}, { token: 'made-up', password: PASSWORD })).json().code).toBe('invitation_invalid');
  });
});
