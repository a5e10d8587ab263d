import Database from 'better-sqlite3';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { exchange, openConnection } from './support/raw-http.js';
import { issueApiKey } from '../src/domain/api-key.js';
import { verifyPassword } from '../src/domain/password.js';
import { createLogger } from '../src/logger.js';
import { waitFor } from './helpers.js';
import { tokenOf, totpCode } from './support/accounts.js';
import type { Socket } from 'node:net';
import { cleanupAll, runCli, runCliJson, startServer, type RunResult, type ServerProcess } from './support/processes.js';

/**
 * Secrets never leave the service except in the one answer that issues them.
 *
 * One server (at trace level, the most it can say) is driven through every way a secret is
 * issued or presented: the first-run setup link, sign-up with it, sign-in with right and
 * wrong passwords, integration keys made by the API and the CLI, keys added and rotated,
 * management keys, a member who joins by invitation, changes and resets the password and
 * turns two-factor on; then webhooks and API calls with each
 * key, with wrong keys that look real, and with keys where they do not belong (query
 * string, `Authorization: Bearer`, a path). Then everything the service wrote is searched
 * for every secret: its stdout and stderr (and the bytes any line of it holds as an array of
 * numbers, as a serialised Buffer is), every error body and header it answered, every
 * answer but the issuing ones, what the CLI printed on stderr, every row of every table,
 * and the bytes of the SQLite files themselves. And what is at rest must be hashes: of the
 * keys, the passwords, the session cookies and the setup token.
 */

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const unique = () => randomBytes(6).toString('hex');

interface Secret {
  what: string;
  value: string;
  /** A part that must not appear either: a key without its visible prefix. */
  tail?: string;
}

interface Exchange {
  what: string;
  method: string;
  url: string;
  status: number;
  headers: string;
  body: string;
  /** The secrets this answer exists to hand over (a new key, a session cookie). */
  issues: string[];
}

let server: ServerProcess;
let dbPath: string;
const secrets: Secret[] = [];
const exchanges: Exchange[] = [];
const cliRuns: Array<{ what: string; run: RunResult }> = [];

const ownerPassword = `owner-pw-${unique()}-Correct`;
const memberPassword = `member-pw-${unique()}-Correct`;
const memberFirstPassword = `member-first-${unique()}-Correct`;
const memberChangedPassword = `member-changed-${unique()}-Correct`;
const cliPassword = `cli-pw-${unique()}-Correct`;
const ownerEmail = `owner-${unique()}@leak.test`;
const memberEmail = `member-${unique()}@leak.test`;

/** Keys issued by the service, by name. */
const keys: Record<string, string> = {};
/** Session cookie values issued, by name; `live` is false once signed out. */
const cookies: Array<{ what: string; value: string; live: boolean }> = [];
let setupToken: string;
/** The account secrets the run issued: links' tokens, the TOTP secret, recovery codes. */
const account = { inviteToken: '', resetToken: '', totpSecret: '', recoveryCodes: [] as string[] };

function keySecret(what: string, key: string): Secret {
  // whk_<env>_ and the 6 characters the API shows as the prefix; the rest is secret.
  const prefixLength = key.indexOf('_', 4) + 1 + 6;
  return { what, value: key, tail: key.slice(prefixLength) };
}

function needles(secret: Secret): string[] {
  return secret.tail ? [secret.value, secret.tail] : [secret.value];
}

/** Every place `needle` occurs in `haystack`, with a little context, for the failure message. */
function occurrences(haystack: string, needle: string): string[] {
  const found: string[] = [];
  for (let at = haystack.indexOf(needle); at >= 0; at = haystack.indexOf(needle, at + 1)) {
    found.push(haystack.slice(Math.max(0, at - 80), at + needle.length + 40));
  }
  return found;
}

/**
 * The text of every run of bytes written as an array of numbers 0–255 (a Buffer serialised
 * as `{"type":"Buffer","data":[…]}`, or a plain array), decoded as Latin-1 so any byte
 * sequence survives: a secret in such bytes is as leaked as one in plain text.
 */
function decodedByteArrays(text: string): string {
  const decoded: string[] = [];
  for (const [, list] of text.matchAll(/\[\s*(\d{1,3}(?:\s*,\s*\d{1,3}){7,})\s*\]/g)) {
    const bytes = list!.split(',').map(Number);
    if (bytes.every((byte) => byte <= 255)) decoded.push(Buffer.from(bytes).toString('latin1'));
  }
  return decoded.join('\n');
}

/** Each secret found in `text`: its name, where, and the text around it. */
function leaksIn(text: string, where: string, allowed: string[] = []): string[] {
  const leaks: string[] = [];
  for (const secret of secrets) {
    if (allowed.includes(secret.value)) continue;
    // The whole secret, or else its secret part alone (a key cut short, or with its prefix changed).
    const seen = needles(secret)
      .map((needle) => occurrences(text, needle))
      .find((found) => found.length > 0);
    for (const context of seen ?? []) leaks.push(`${secret.what} in ${where}: …${context}…`);
  }
  return leaks;
}

async function call(
  what: string,
  method: string,
  path: string,
  options: { headers?: Record<string, string>; body?: unknown; raw?: string; issues?: (body: Record<string, unknown>) => string[] } = {},
): Promise<{ status: number; json: Record<string, unknown>; setCookie: string | null }> {
  const headers: Record<string, string> = { ...options.headers };
  let body: string | undefined = options.raw;
  if (options.body !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(options.body);
  } else if (body !== undefined) headers['content-type'] ??= 'application/json';
  const response = await fetch(server.url(path), { method, headers, body });
  const text = await response.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // not JSON: kept as text below
  }
  const headerText = [...response.headers].map(([name, value]) => `${name}: ${value}`).join('\n');
  exchanges.push({
    what,
    method,
    url: path,
    status: response.status,
    headers: headerText,
    body: text,
    issues: response.ok && options.issues ? options.issues(json) : [],
  });
  return { status: response.status, json, setCookie: response.headers.get('set-cookie') };
}

function cookieOf(setCookie: string | null): string {
  const match = /intake_session=([^;]+)/.exec(setCookie ?? '');
  if (!match) throw new Error(`no session cookie in ${setCookie}`);
  return decodeURIComponent(match[1]!);
}

async function cli(what: string, args: string[], expectSuccess = true): Promise<Record<string, unknown>> {
  if (expectSuccess) {
    const { json, run } = await runCliJson(args, server.cliEnv);
    cliRuns.push({ what, run });
    return json;
  }
  const run = await runCli(args, server.cliEnv);
  cliRuns.push({ what, run });
  expect(run.code, `${what}: ${run.stderr}`).not.toBe(0);
  return {};
}

beforeAll(async () => {
  // The password-hash cost unset (empty), as a real start has it: the hashes checked below are production's.
  server = await startServer({ env: { LOG_LEVEL: 'trace', INTAKE_PASSWORD_HASH_COST: '' } });
  dbPath = server.dbPath!;

  // --- First run: the setup link, a wrong token, a bad password, then the real sign-up.
  const link = await server.waitForStdout(/\/admin\/setup\?token=([A-Za-z0-9_-]+)/);
  setupToken = link[1]!;
  secrets.push({ what: 'the setup token', value: setupToken });
  const wrongToken = randomBytes(32).toString('base64url');
  secrets.push({ what: 'a wrong setup token', value: wrongToken });
  const shortPassword = `s${unique()}`.slice(0, 10);
  secrets.push({ what: 'a too-short password', value: shortPassword });
  const setup = { company_name: 'Leak check', email: ownerEmail, password: ownerPassword };
  expect((await call('setup with a wrong token', 'POST', '/api/v1/auth/setup', { body: { ...setup, token: wrongToken } })).status).toBe(403);
  expect(
    (await call('setup with a short password', 'POST', '/api/v1/auth/setup', { body: { ...setup, token: setupToken, password: shortPassword } }))
      .status,
  ).toBe(400);
  const signedUp = await call('setup', 'POST', '/api/v1/auth/setup', {
    body: { ...setup, token: setupToken },
    issues: (body) => [String(body.csrf_token)],
  });
  expect(signedUp.status, JSON.stringify(signedUp.json)).toBe(200);
  cookies.push({ what: 'the session cookie from setup', value: cookieOf(signedUp.setCookie), live: true });
  exchanges.at(-1)!.issues.push(cookies[0]!.value);

  // --- Sign-in: wrong passwords (one a near miss), an unknown email, then right.
  const nearMiss = `${ownerPassword.slice(0, -1)}X`;
  const wrong = `wrong-pw-${unique()}`;
  secrets.push({ what: 'a near-miss password', value: nearMiss }, { what: 'a wrong password', value: wrong });
  for (const [what, email, password] of [
    ['near miss', ownerEmail, nearMiss],
    ['wrong password', ownerEmail, wrong],
    ['unknown email', `nobody-${unique()}@leak.test`, ownerPassword],
  ] as const) {
    expect((await call(`sign-in, ${what}`, 'POST', '/api/v1/auth/login', { body: { email, password } })).status).toBe(401);
  }
  const login = await call('sign-in', 'POST', '/api/v1/auth/login', {
    body: { email: ownerEmail, password: ownerPassword },
    issues: (body) => [String(body.csrf_token)],
  });
  expect(login.status).toBe(200);
  const ownerCookie = cookieOf(login.setCookie);
  cookies.push({ what: 'the session cookie from sign-in', value: ownerCookie, live: true });
  exchanges.at(-1)!.issues.push(ownerCookie);
  const csrf = String(login.json.csrf_token);
  const session = { cookie: `intake_session=${encodeURIComponent(ownerCookie)}`, 'x-csrf-token': csrf };

  // --- Keys through the API: an integration (its first key), another key, a rotation, a management key.
  const issuesKey = (body: Record<string, unknown>) => [String(body.api_key)];
  const integration = await call('create integration', 'POST', '/api/v1/integrations', { headers: session, body: { name: 'API' }, issues: issuesKey });
  expect(integration.status).toBe(201);
  keys.apiFirst = String(integration.json.api_key);
  const integrationId = (integration.json.integration as { id: string }).id;
  const integrationKey = (integration.json.integration as { integration_key: string }).integration_key;
  const added = await call('add a key', 'POST', `/api/v1/integrations/${integrationId}/keys`, {
    headers: session,
    body: { name: 'second sender' },
    issues: issuesKey,
  });
  expect(added.status).toBe(201);
  keys.apiAdded = String(added.json.api_key);
  const rotated = await call('rotate', 'POST', `/api/v1/integrations/${integrationId}/keys/rotate`, {
    headers: session,
    body: { grace_seconds: 3600 },
    issues: issuesKey,
  });
  expect(rotated.status).toBe(201);
  keys.apiRotated = String(rotated.json.api_key);

  // --- Sources: a pasted Stripe secret, generated query tokens (one rotated); signed
  // webhooks, forged ones, a token in the query string, and a signed test from the panel.
  const issuesSecret = (body: Record<string, unknown>) => [String(body.api_key), String(body.source_secret)];
  const stripeSecret = `whsec_${randomBytes(24).toString('hex')}`;
  secrets.push({ what: "a Stripe signing secret, pasted", value: stripeSecret });
  const stripeSource = await call('create a stripe source', 'POST', '/api/v1/integrations', {
    headers: session,
    body: { name: 'Stripe', source: { type: 'stripe', secret: stripeSecret } },
    issues: issuesKey,
  });
  expect(stripeSource.status).toBe(201);
  const stripe = stripeSource.json.integration as { id: string; integration_key: string };
  expect((await call('a signed test', 'POST', `/api/v1/integrations/${stripe.id}/source-test`, { headers: session })).json.status).toBe(202);
  const forged = `t=${Math.floor(Date.now() / 1000)},v1=${'0'.repeat(64)}`;
  expect((await call('a forged Stripe signature', 'POST', `/api/webhooks/${stripe.integration_key}`, { raw: '{"id":"evt_1","type":"x"}', headers: { 'stripe-signature': forged } })).status).toBe(401);
  const tokenSource = await call('create a query_token source', 'POST', '/api/v1/integrations', {
    headers: session,
    body: { name: 'Token', source: { type: 'query_token' } },
    issues: issuesSecret,
  });
  const tokenIntegration = tokenSource.json.integration as { id: string; integration_key: string };
  const token = String(tokenSource.json.source_secret);
  secrets.push({ what: 'a generated query token', value: token });
  expect((await call('the query token', 'POST', `/api/webhooks/${tokenIntegration.integration_key}?token=${token}`, { raw: '{"event":"a"}' })).status).toBe(202);
  expect((await call('a wrong query token', 'POST', `/api/webhooks/${tokenIntegration.integration_key}?token=x${token}`, { raw: '{}' })).status).toBe(401);
  const tokenRotated = await call('rotate the query token', 'POST', `/api/v1/integrations/${tokenIntegration.id}/source-secrets`, {
    headers: session,
    body: { previous_expires_in_seconds: 0 },
    issues: (body) => [String(body.source_secret)],
  });
  expect(tokenRotated.status).toBe(201);
  secrets.push({ what: 'a rotated query token', value: String(tokenRotated.json.source_secret) });
  expect((await call('the old query token', 'POST', `/api/webhooks/${tokenIntegration.integration_key}?token=${token}`, { raw: '{}' })).status).toBe(401);
  const management = await call('create a management key', 'POST', '/api/v1/management-keys', {
    headers: session,
    body: { name: 'script', scopes: ['integrations:manage', 'logs:read'] },
    issues: issuesKey,
  });
  expect(management.status).toBe(201);
  keys.apiManagement = String(management.json.api_key);

  // --- A member joins by invitation (once with a password too short), changes the password,
  // resets it with the operator's link, turns two-factor on and signs in with a recovery code.
  const invited = await call('invite a member', 'POST', '/api/v1/invitations', {
    headers: session,
    body: { email: memberEmail, role: 'admin' },
    issues: (body) => [tokenOf(String(body.invite_url))],
  });
  expect(invited.status).toBe(201);
  const inviteToken = (account.inviteToken = tokenOf(String(invited.json.invite_url)));
  expect((await call('accept, short password', 'POST', '/api/v1/invitations/accept', { body: { token: inviteToken, password: shortPassword } })).status).toBe(400);
  const joined = await call('accept the invitation', 'POST', '/api/v1/invitations/accept', {
    body: { token: inviteToken, password: memberFirstPassword },
    issues: (body) => [String(body.csrf_token)],
  });
  expect(joined.status, JSON.stringify(joined.json)).toBe(200);
  const joinedCookie = { what: 'the session cookie from accepting', value: cookieOf(joined.setCookie), live: true };
  cookies.push(joinedCookie);
  exchanges.at(-1)!.issues.push(joinedCookie.value);
  const joinedSession = { cookie: `intake_session=${encodeURIComponent(joinedCookie.value)}`, 'x-csrf-token': String(joined.json.csrf_token) };
  expect(
    (await call('change the password', 'POST', '/api/v1/account/password', {
      headers: joinedSession,
      body: { current_password: memberFirstPassword, new_password: memberChangedPassword },
    })).status,
  ).toBe(204);
  const reset = await cli('user reset-password', ['user', 'reset-password', '--email', memberEmail]);
  const resetToken = (account.resetToken = tokenOf(String(reset.reset_url)));
  expect((await call('reset, short password', 'POST', '/api/v1/auth/password-reset/complete', { body: { token: resetToken, password: shortPassword } })).status).toBe(400);
  expect((await call('reset the password', 'POST', '/api/v1/auth/password-reset/complete', { body: { token: resetToken, password: memberPassword } })).status).toBe(204);
  joinedCookie.live = false;
  expect((await call('ask for a reset link', 'POST', '/api/v1/auth/password-reset', { body: { email: memberEmail } })).status).toBe(202);
  const memberLogin = await call('member sign-in', 'POST', '/api/v1/auth/login', {
    body: { email: memberEmail, password: memberPassword },
    issues: (body) => [String(body.csrf_token)],
  });
  expect(memberLogin.status).toBe(200);
  const memberCookie = cookieOf(memberLogin.setCookie);
  cookies.push({ what: "the member's session cookie", value: memberCookie, live: true });
  exchanges.at(-1)!.issues.push(memberCookie);
  const memberSession = { cookie: `intake_session=${encodeURIComponent(memberCookie)}`, 'x-csrf-token': String(memberLogin.json.csrf_token) };
  const twoFactor = await call('two-factor setup', 'POST', '/api/v1/account/two-factor/setup', {
    headers: memberSession,
    issues: (body) => [String(body.secret)],
  });
  const totpSecret = (account.totpSecret = String(twoFactor.json.secret));
  expect((await call('two-factor enable, wrong code', 'POST', '/api/v1/account/two-factor/enable', { headers: memberSession, body: { code: 'x1y2z3' } })).status).toBe(401);
  const enabled = await call('two-factor enable', 'POST', '/api/v1/account/two-factor/enable', {
    headers: memberSession,
    body: { code: totpCode(totpSecret) },
    issues: (body) => body.recovery_codes as string[],
  });
  expect(enabled.status).toBe(200);
  const recoveryCodes = (account.recoveryCodes = enabled.json.recovery_codes as string[]);
  const withCode = (twoFactorCode: string) => ({ email: memberEmail, password: memberPassword, two_factor_code: twoFactorCode });
  // Its first character changed to another: a code that began with 9 stayed itself when it was set to 9.
  const wrongCode = recoveryCodes[1]!.replace(/./, (first) => (first === '9' ? '8' : '9'));
  expect((await call('sign-in, wrong code', 'POST', '/api/v1/auth/login', { body: withCode(wrongCode) })).status).toBe(401);
  const recovered = await call('sign-in with a recovery code', 'POST', '/api/v1/auth/login', {
    body: withCode(recoveryCodes[0]!),
    issues: (body) => [String(body.csrf_token)],
  });
  expect(recovered.status).toBe(200);
  cookies.push({ what: 'the session cookie from a recovery code', value: cookieOf(recovered.setCookie), live: true });
  exchanges.at(-1)!.issues.push(cookies.at(-1)!.value);
  secrets.push(
    { what: 'the invitation token', value: inviteToken },
    { what: 'the reset token', value: resetToken },
    { what: 'the TOTP secret', value: totpSecret },
    ...recoveryCodes.map((code, i) => ({ what: `recovery code ${i + 1}`, value: code })),
    { what: "the member's first password", value: memberFirstPassword },
    { what: "the member's changed password", value: memberChangedPassword },
  );

  // --- The CLI: a company, a user with a password, an integration, a rotation, a management key.
  const company = await cli('company create', ['company', 'create', '--name', 'CLI leak check']);
  const companyId = String(company.id);
  await cli('user create', ['user', 'create', '--company', companyId, '--email', `cli-${unique()}@leak.test`, '--password', cliPassword, '--role', 'owner']);
  const cliIntegration = await cli('integration create', ['integration', 'create', '--company', companyId, '--name', 'CLI']);
  keys.cliFirst = String(cliIntegration.api_key);
  const cliIntegrationKey = String(cliIntegration.integration_key);
  const cliRotated = await cli('key rotate', ['key', 'rotate', '--integration', String(cliIntegration.id), '--grace', '0']);
  keys.cliRotated = String(cliRotated.api_key);
  const cliManagement = await cli('key create', ['key', 'create', '--company', companyId, '--scope', 'integrations:manage']);
  keys.cliManagement = String(cliManagement.api_key);
  // CLI mistakes with a secret in hand: a short password, a key given where its id is asked for.
  await cli('user create, short password', ['user', 'create', '--company', companyId, '--email', `x-${unique()}@leak.test`, '--password', shortPassword, '--role', 'owner'], false);
  await cli('key revoke given the key itself', ['key', 'revoke', '--key', keys.cliRotated], false);

  for (const [name, key] of Object.entries(keys)) secrets.push(keySecret(`the ${name} key`, key));
  secrets.push(
    { what: "the owner's password", value: ownerPassword },
    { what: "the member's password", value: memberPassword },
    { what: 'the password given to the CLI', value: cliPassword },
  );
  for (const cookie of cookies) secrets.push({ what: cookie.what, value: cookie.value });

  // Keys that look real but are not: right shape and checksum, another environment's, one character off.
  const lookalikes = {
    unknown: issueApiKey('development').plaintext,
    production: issueApiKey('production').plaintext,
    offByOne: `${keys.apiRotated.slice(0, -1)}${keys.apiRotated.endsWith('A') ? 'B' : 'A'}`,
    otherEnvironment: keys.apiRotated.replace('whk_dev_', 'whk_live_'),
  };
  // (Made from a real key, the last two share its secret part: only the whole of them is searched for.)
  secrets.push(keySecret('an unknown lookalike key', lookalikes.unknown), keySecret('a production lookalike key', lookalikes.production));
  secrets.push({ what: 'a key one character off', value: lookalikes.offByOne }, { what: "a key of another environment", value: lookalikes.otherEnvironment });

  // --- Webhooks and API calls with every key, right and wrong, and keys in the wrong places.
  const address = `/api/webhooks/${integrationKey}`;
  const send = (what: string, headers: Record<string, string>, path = address, raw = `{"event":"${what}","data":{"n":1}}`) =>
    call(`webhook: ${what}`, 'POST', path, { headers, raw });
  expect((await send('rotated key', { 'x-api-key': keys.apiRotated })).status).toBe(202);
  expect((await send('first key in its grace period', { 'x-api-key': keys.apiFirst })).status).toBe(202);
  expect((await send('added key', { 'x-api-key': keys.apiAdded, 'user-agent': 'leak-check/1.0' })).status).toBe(202);
  expect((await send('key and Authorization', { 'x-api-key': keys.apiRotated, authorization: `Bearer ${keys.apiRotated}`, cookie: `intake_session=${ownerCookie}` })).status).toBe(202);
  expect((await send('CLI key on its own address', { 'x-api-key': keys.cliRotated }, `/api/webhooks/${cliIntegrationKey}`)).status).toBe(202);
  expect((await send('CLI key replaced by rotation', { 'x-api-key': keys.cliFirst }, `/api/webhooks/${cliIntegrationKey}`)).status).toBe(401);
  expect((await send('another company key', { 'x-api-key': keys.cliRotated })).status).toBe(403);
  expect((await send('management key', { 'x-api-key': keys.apiManagement })).status).toBe(403);
  for (const [name, key] of Object.entries(lookalikes)) expect((await send(`lookalike ${name}`, { 'x-api-key': key })).status).toBe(401);
  expect((await send('bad body', { 'x-api-key': keys.apiRotated }, address, '{"event":')).status).toBe(400);
  expect((await send('no event', { 'x-api-key': keys.apiRotated }, address, `{"data":{}}`)).status).toBe(422);
  expect((await send('key in the query', {}, `${address}?api_key=${keys.apiRotated}&key=${keys.apiRotated}`)).status).toBe(401);
  expect((await send('key as Bearer', { authorization: `Bearer ${keys.apiRotated}` })).status).toBe(401);
  expect((await send('key as Basic', { authorization: `Basic ${Buffer.from(`${keys.apiRotated}:`).toString('base64')}` })).status).toBe(401);
  expect((await send('key as the address', { 'x-api-key': keys.apiRotated }, `/api/webhooks/${keys.apiRotated}`)).status).toBeGreaterThanOrEqual(400);
  expect((await send('key after the address', { 'x-api-key': keys.apiRotated }, `${address}/${keys.apiRotated}`)).status).toBeGreaterThanOrEqual(400);
  expect((await call('key in an unknown path', 'GET', `/nowhere/${keys.apiRotated}?key=${keys.apiRotated}`, { headers: { 'x-api-key': keys.apiRotated } })).status).toBe(404);
  expect((await call('read with a lookalike', 'GET', address, { headers: { 'x-api-key': lookalikes.unknown } })).status).toBe(401);
  const list = await call('read the log', 'GET', address, { headers: { 'x-api-key': keys.apiRotated } });
  expect(list.status).toBe(200);
  const withAuthorization = (list.json.data as Array<{ uuid: string; event: string }>).find((w) => w.event === 'key and Authorization')!;
  expect((await call('read one webhook', 'GET', `${address}/${withAuthorization.uuid}`, { headers: { 'x-api-key': keys.apiRotated } })).status).toBe(200);

  // The management API: with the management key, a wrong one, an integration key, a session without CSRF.
  const management2 = { 'x-api-key': keys.apiManagement };
  for (const path of ['/api/v1/integrations', `/api/v1/integrations/${integrationId}/keys`, '/api/v1/requests', '/api/v1/webhooks', `/api/v1/webhooks/${withAuthorization.uuid}`, '/api/v1/usage']) {
    expect((await call(`management read ${path}`, 'GET', path, { headers: management2 })).status, path).toBe(200);
  }
  for (const path of ['/api/v1/audit-log', '/api/v1/members', '/api/v1/management-keys', '/api/v1/auth/session']) {
    expect((await call(`session read ${path}`, 'GET', path, { headers: { cookie: session.cookie } })).status, path).toBe(200);
  }
  expect((await call('management API, lookalike key', 'GET', '/api/v1/integrations', { headers: { 'x-api-key': lookalikes.unknown } })).status).toBe(401);
  expect((await call('management API, integration key', 'GET', '/api/v1/integrations', { headers: { 'x-api-key': keys.apiRotated } })).status).toBe(403);
  expect((await call('management API, Bearer', 'GET', '/api/v1/integrations', { headers: { authorization: `Bearer ${keys.apiManagement}` } })).status).toBe(401);
  expect((await call('change without CSRF', 'POST', '/api/v1/integrations', { headers: { cookie: session.cookie }, body: { name: 'x' } })).status).toBe(403);
  expect(
    (await call('change with a wrong CSRF token', 'POST', '/api/v1/integrations', { headers: { ...session, 'x-csrf-token': ownerCookie }, body: { name: 'x' } }))
      .status,
  ).toBe(403);
  expect((await call('a forged cookie', 'GET', '/api/v1/integrations', { headers: { cookie: `intake_session=${keys.apiRotated}` } })).status).toBe(401);

  // Requests Node's parser gives up on (a header line without a colon, a bad header value),
  // with a key, a cookie and a password in the same packet: the parser's error holds the
  // packet's bytes, which a log line must not.
  const sockets: Socket[] = [];
  const malformed = [
    `POST ${address} HTTP/1.1\r\nHost: localhost\r\nX-API-Key: ${keys.apiRotated}\r\nCookie: intake_session=${ownerCookie}\r\n` +
      `Content-Type: application/json\r\nNo colon on this line\r\nContent-Length: 40\r\n\r\n{"password":"${ownerPassword}"}`,
    `POST /api/v1/auth/login HTTP/1.1\r\nHost: localhost\r\nX-API-Key: ${keys.apiManagement}\r\nX-Bad: a\u0001b\r\n\r\n` +
      `{"email":"${ownerEmail}","password":"${ownerPassword}"}`,
  ];
  try {
    for (const raw of malformed) {
      const answer = await exchange(await openConnection(server.port, sockets), raw);
      expect(answer.status).toBe(400);
      exchanges.push({ what: 'a request the parser refuses', method: 'POST', url: '(raw)', status: answer.status, headers: JSON.stringify(answer.headers), body: answer.body, issues: [] });
    }
  } finally {
    for (const socket of sockets) socket.destroy();
  }

  // Revoke a key and use it; sign out and use the old cookie.
  const addedId = ((await call('list keys', 'GET', `/api/v1/integrations/${integrationId}/keys`, { headers: management2 })).json.data as Array<{ id: string; prefix: string }>).find(
    (k) => keys.apiAdded!.startsWith(k.prefix),
  )!.id;
  expect((await call('revoke', 'POST', `/api/v1/integrations/${integrationId}/keys/${addedId}/revoke`, { headers: management2 })).status).toBe(200);
  await waitFor(async () => ((await send('revoked key', { 'x-api-key': keys.apiAdded! })).status === 401 ? true : undefined), 'revocation to hold');
  const setupSession = { cookie: `intake_session=${encodeURIComponent(cookies[0]!.value)}` };
  const setupCsrf = String(signedUp.json.csrf_token);
  expect((await call('sign out', 'POST', '/api/v1/auth/logout', { headers: { ...setupSession, 'x-csrf-token': setupCsrf } })).status).toBe(204);
  cookies[0]!.live = false;
  expect((await call('signed-out cookie', 'GET', '/api/v1/integrations', { headers: setupSession })).status).toBe(401);

  // Every refused request to an address is in the request log before the server stops.
  await waitFor(async () => {
    const db = new Database(dbPath, { readonly: true, fileMustExist: true });
    try {
      const row = db.prepare("select count(*) as n from request_log where status >= 400").get() as { n: number };
      return row.n >= 10 ? true : undefined;
    } finally {
      db.close();
    }
  }, 'the request log to be written');
  await server.stop(30_000);
}, 120_000);

afterAll(() => cleanupAll());

describe('secrets never leave the service', () => {
  test('the run exercised what it claims: secrets issued, refusals logged, output written', () => {
    expect(Object.keys(keys)).toHaveLength(7);
    expect(cookies).toHaveLength(5);
    expect(exchanges.filter((e) => e.status >= 400).length).toBeGreaterThan(20);
    expect(server.stdout.length + server.stderr.length).toBeGreaterThan(0);
    // The requests the parser refused were logged (at debug), so their lines were searched.
    expect(server.stdout.match(/"msg":"client error"/g)?.length ?? 0).toBeGreaterThanOrEqual(2);
    // Every secret is distinct and long enough that finding it means it leaked.
    for (const secret of secrets) expect(secret.value.length, secret.what).toBeGreaterThanOrEqual(10);
  });

  test('nothing the server wrote (at trace level) holds a secret; the setup token only in its one first-run line', () => {
    const output = `${server.stdout}\n${server.stderr}`;
    expect(leaksIn(output, 'server output', [setupToken])).toEqual([]);
    expect(leaksIn(decodedByteArrays(output), 'bytes in the server output')).toEqual([]);
    const withToken = output.split('\n').filter((line) => line.includes(setupToken));
    expect(withToken).toEqual([expect.stringMatching(/^First run: create the first account at http:\/\/\S+\/admin\/setup\?token=[\w-]+$/)]);
  });

  test('no error answer holds a secret, in its body or its headers', () => {
    const errors = exchanges.filter((e) => e.status >= 400);
    const leaks = errors.flatMap((e) => leaksIn(`${e.headers}\n${e.body}`, `the ${e.status} answer to "${e.what}"`));
    expect(leaks).toEqual([]);
  });

  test('no other answer holds a secret, but for the one secret it issues', () => {
    const leaks = exchanges
      .filter((e) => e.status < 400)
      .flatMap((e) => leaksIn(`${e.headers}\n${e.body}`, `the ${e.status} answer to "${e.what}"`, e.issues));
    expect(leaks).toEqual([]);
  });

  test('the CLI prints a new key only in its --json answer, and no secret in its errors', () => {
    const leaks = cliRuns.flatMap(({ what, run }) => [
      ...leaksIn(run.stderr, `stderr of intake ${what}`),
      ...(run.code !== 0 ? leaksIn(run.stdout, `stdout of the failed intake ${what}`) : []),
    ]);
    expect(leaks).toEqual([]);
  });

  test('no table row and no byte of the database files holds a secret', () => {
    const db = new Database(dbPath, { readonly: true, fileMustExist: true });
    try {
      const tables = (db.prepare("select name from sqlite_master where type = 'table'").all() as Array<{ name: string }>).map((t) => t.name);
      for (const name of ['api_keys', 'users', 'sessions', 'setup_tokens', 'request_log', 'audit_log', 'webhooks']) expect(tables).toContain(name);
      const leaks: string[] = [];
      for (const table of tables) {
        const rows = db.prepare(`select * from "${table}"`).all() as Array<Record<string, unknown>>;
        const text = rows
          .map((row) => Object.values(row).map((v) => (Buffer.isBuffer(v) ? v.toString('latin1') : String(v))).join('\u0001'))
          .join('\n');
        leaks.push(...leaksIn(text, `table ${table}`));
      }
      expect(leaks).toEqual([]);
      // The tables this is about have rows to search.
      const count = (table: string) => (db.prepare(`select count(*) as n from ${table}`).get() as { n: number }).n;
      expect(count('request_log')).toBeGreaterThan(10);
      expect(count('audit_log')).toBeGreaterThan(3);
      expect(count('sessions')).toBeGreaterThanOrEqual(2);
    } finally {
      db.close();
    }
    const dir = dirname(dbPath);
    const files = readdirSync(dir).filter((name) => name.startsWith('intake.db'));
    expect(files).toContain('intake.db');
    expect(files.flatMap((file) => leaksIn(readFileSync(join(dir, file)).toString('latin1'), `the file ${file}`))).toEqual([]);
  });
});

describe('only hashes at rest', () => {
  let db: Database.Database;
  beforeAll(() => {
    expect(existsSync(dbPath)).toBe(true);
    db = new Database(dbPath, { readonly: true, fileMustExist: true });
  });
  afterAll(() => db?.close());

  test('api_keys: the SHA-256 of each key and a prefix of 6 random characters, nothing more', () => {
    const rows = db.prepare('select * from api_keys').all() as Array<{ key_hash: string; prefix: string }>;
    expect(rows.length).toBeGreaterThanOrEqual(Object.keys(keys).length);
    for (const [name, key] of Object.entries(keys)) {
      const row = rows.find((r) => r.key_hash === sha256(key));
      expect(row, `no row with the hash of the ${name} key`).toBeDefined();
      expect(key.startsWith(row!.prefix), name).toBe(true);
      expect(row!.prefix).toMatch(/^whk_dev_[0-9A-Za-z]{6}$/);
    }
    for (const row of rows) expect(row.key_hash).toMatch(/^[0-9a-f]{64}$/);
  });

  test('users: a salted scrypt hash of each password, which verifies', async () => {
    const rows = db.prepare('select email, password_hash from users').all() as Array<{ email: string; password_hash: string }>;
    expect(rows).toHaveLength(3);
    const salts = new Set<string>();
    for (const row of rows) {
      expect(row.password_hash).toMatch(/^scrypt\$\d+\$\d+\$\d+\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
      const [, n, r, p, salt] = row.password_hash.split('$');
      // OWASP's minimum for scrypt: N=2^17, r=8, p=1.
      expect(Number(n)).toBeGreaterThanOrEqual(2 ** 17);
      expect(Number(r)).toBeGreaterThanOrEqual(8);
      expect(Number(p)).toBeGreaterThanOrEqual(1);
      salts.add(salt!);
    }
    expect(salts.size, 'every password has its own salt').toBe(rows.length);
    const hashOf = (email: string) => rows.find((r) => r.email === email)!.password_hash;
    expect(await verifyPassword(ownerPassword, hashOf(ownerEmail))).toBe(true);
    expect(await verifyPassword(memberPassword, hashOf(memberEmail))).toBe(true);
    const cliUser = rows.find((r) => r.email.startsWith('cli-'))!;
    expect(await verifyPassword(cliPassword, cliUser.password_hash)).toBe(true);
  });

  test('sessions: the SHA-256 of each live cookie; a signed-out one is gone', () => {
    const rows = db.prepare('select id_hash from sessions').all() as Array<{ id_hash: string }>;
    const hashes = new Set(rows.map((r) => r.id_hash));
    for (const row of rows) expect(row.id_hash).toMatch(/^[0-9a-f]{64}$/);
    for (const cookie of cookies) expect(hashes.has(sha256(cookie.value)), cookie.what).toBe(cookie.live);
  });

  test('invitations and password resets: the SHA-256 of each link\'s token, used', () => {
    expect(db.prepare('select token_hash, accepted_at from invitations').all()).toEqual([{ token_hash: sha256(account.inviteToken), accepted_at: expect.any(Number) }]);
    const resets = db.prepare('select token_hash, used_at from password_resets').all() as Array<{ token_hash: string; used_at: number | null }>;
    expect(resets).toContainEqual({ token_hash: sha256(account.resetToken), used_at: expect.any(Number) });
  });

  test('two-factor: the TOTP secret sealed (AES-GCM), recovery codes as SHA-256 of their normalised form', () => {
    const [user] = db.prepare('select totp_secret from users where email = ?').all(memberEmail) as Array<{ totp_secret: string }>;
    expect(user!.totp_secret).toMatch(/^v1\.[\w-]{8}\.[\w-]{16}\.[\w-]+$/);
    const hashes = (db.prepare('select code_hash from recovery_codes').all() as Array<{ code_hash: string }>).map((r) => r.code_hash).sort();
    expect(hashes).toEqual(account.recoveryCodes.map((code) => sha256(code.replace('-', ''))).sort());
  });

  test('setup_tokens: the SHA-256 of the token, used', () => {
    const rows = db.prepare('select token_hash, used_at from setup_tokens').all() as Array<{ token_hash: string; used_at: number | null }>;
    expect(rows).toEqual([{ token_hash: sha256(setupToken), used_at: expect.any(Number) }]);
  });
});

test('an error carrying the raw request bytes is logged without them, wherever it is logged', () => {
  const lines: string[] = [];
  const logger = createLogger('trace', { write: (line: string) => void lines.push(line) });
  const packet = Buffer.from('POST / HTTP/1.1\r\nCookie: intake_session=secret-cookie-value\r\n\r\n');
  logger.warn({ err: Object.assign(new Error('Parse Error: Invalid header value char'), { code: 'HPE_INVALID_HEADER_TOKEN', rawPacket: packet }) }, 'x');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toContain('HPE_INVALID_HEADER_TOKEN');
  expect(lines[0]).not.toContain('rawPacket');
  expect(decodedByteArrays(lines[0]!)).not.toContain('secret-cookie-value');
});
