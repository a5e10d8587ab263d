import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers.js';
import { tokenOf } from '../support/accounts.js';
import { PASSWORD, member, signIn } from '../support/api.js';
import { freePort } from '../support/processes.js';
import { startSmtpSink, type SmtpSink } from '../support/smtp-sink.js';

/** Invitations and password resets by email, through nodemailer to a real SMTP server on loopback. */
let sink: SmtpSink;
let t: TestApp;

beforeAll(async () => {
  sink = await startSmtpSink();
  t = await buildTestApp({ INTAKE_SMTP_URL: sink.url, INTAKE_SMTP_FROM: 'intake <no-reply@example.com>' });
});
afterAll(async () => {
  await t.close();
  await sink.close();
});

const api = (method: 'GET' | 'POST', url: string, headers: Record<string, string> = {}, payload?: object) =>
  t.app.inject({ method, url: `/api/v1${url}`, headers, ...(payload && { payload }) });

describe('with INTAKE_SMTP_URL', () => {
  test('an invitation is emailed to the invitee with its link, which works', async () => {
    const companyId = (await t.management.createCompany('Mailing Co')).id;
    const owner = await member(t, companyId, 'owner');
    const invited = await api('POST', '/invitations', owner.change, { email: 'invitee@example.com', role: 'admin' });
    expect(invited.statusCode, invited.body).toBe(201);
    expect(invited.json().emailed).toBe(true);
    const email = await sink.waitForMessage('invitee@example.com');
    expect(email.subject).toBe('You are invited to Mailing Co on intake');
    expect(email.text).toContain(invited.json().invite_url);
    expect(email.text).toContain('as admin');
    const accepted = await api('POST', '/invitations/accept', {}, { token: tokenOf(invited.json().invite_url), password: PASSWORD });
    expect(accepted.json().companies).toEqual([expect.objectContaining({ id: companyId, role: 'admin' })]);
  });

  test('an inbox cannot be flooded through the service: re-inviting one address sends it 5 emails an hour at most', async () => {
    const companyId = (await t.management.createCompany('Pushy')).id;
    const owner = await member(t, companyId, 'owner');
    const emailed: boolean[] = [];
    for (let i = 0; i < 7; i++) {
      const invited = await api('POST', '/invitations', owner.change, { email: 'target@example.com', role: 'viewer' });
      expect(invited.statusCode).toBe(201);
      emailed.push(invited.json().emailed);
    }
    expect(emailed).toEqual([true, true, true, true, true, false, false]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(sink.messages.filter((m) => m.to.includes('target@example.com'))).toHaveLength(5);
  });

  test('a reset request emails a one-time link to an existing account only, and at most 3 an hour', async () => {
    const companyId = (await t.management.createCompany('Resetting')).id;
    const person = await member(t, companyId, 'viewer');
    const address = (await api('GET', '/account', person.read)).json().email as string;
    const unknown = await api('POST', '/auth/password-reset', {}, { email: 'no-account@example.com' });
    const known = await api('POST', '/auth/password-reset', {}, { email: address.toUpperCase() });
    expect(known.statusCode).toBe(202);
    expect(known.body).toBe(unknown.body);
    const email = await sink.waitForMessage(address);
    expect(email.subject).toBe('Reset your intake password');
    const link = /http:\/\/\S+\/admin\/reset-password\?token=[\w-]+/.exec(email.text)?.[0];
    expect(link).toBeDefined();
    expect((await api('POST', '/auth/password-reset/complete', {}, { token: tokenOf(link!), password: 'chosen after the email' })).statusCode).toBe(204);
    await signIn(t.app, address, 'chosen after the email');
    expect(sink.messages.filter((m) => m.to.includes('no-account@example.com'))).toEqual([]);

    for (let i = 0; i < 4; i++) await api('POST', '/auth/password-reset', {}, { email: address });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(sink.messages.filter((m) => m.to.includes(address))).toHaveLength(3);
  });
});

test('an SMTP server that does not answer: the invitation is made, emailed is false, the link is shown', async () => {
  const down = await buildTestApp({ INTAKE_SMTP_URL: `smtp://127.0.0.1:${await freePort()}` });
  try {
    const companyId = (await down.management.createCompany('Offline')).id;
    const owner = await member(down, companyId, 'owner');
    const invited = await down.app.inject({ method: 'POST', url: '/api/v1/invitations', headers: owner.change, payload: { email: 'x@example.com', role: 'viewer' } });
    expect(invited.statusCode).toBe(201);
    expect(invited.json()).toMatchObject({ emailed: false, invite_url: expect.stringContaining('/admin/invite?token=') });
  } finally {
    await down.close();
  }
});
