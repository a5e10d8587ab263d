import { readFileSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { PASSWORD } from './support/api.js';
import { startLogin } from './support/cli-login.js';
import { cleanupAll, freePort, makeTempDir, runCli, runCliJson, startServer, type ServerProcess } from './support/processes.js';

/**
 * `intake login` and `intake logout` as a person runs them: a real server, the CLI as a child
 * process with its own config folder, and the approval given through the API (as the panel
 * gives it) while the CLI polls. The saved key must be private (file 0600, folder 0700), read
 * the feed, and be refused once `intake logout` has revoked it.
 */
let server: ServerProcess;
let companyId: string;
let panel: { cookie: string; csrf: string };

beforeAll(async () => {
  server = await startServer();
  companyId = String((await runCliJson(['company', 'create', '--name', 'Acme'], server.cliEnv)).json.id);
  await runCliJson(['user', 'create', '--company', companyId, '--email', 'owner@acme.test', '--password', PASSWORD, '--role', 'owner'], server.cliEnv);
  const integration = (await runCliJson(['integration', 'create', '--company', companyId, '--name', 'Shop'], server.cliEnv)).json;
  const sent = await fetch(String(integration.webhook_url), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': String(integration.api_key) },
    body: '{"event":"order.paid","data":{}}',
  });
  expect(sent.status).toBe(202);
  const signedIn = await fetch(server.url('/api/v1/auth/login'), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'owner@acme.test', password: PASSWORD }),
  });
  expect(signedIn.status).toBe(200);
  panel = { cookie: signedIn.headers.getSetCookie()[0]!.split(';', 1)[0]!, csrf: ((await signedIn.json()) as { csrf_token: string }).csrf_token };
}, 60_000);
afterAll(cleanupAll);

/** The panel's call: the signed-in owner decides the sign-in. */
function decide(code: string, decision: 'approve' | 'deny') {
  return fetch(server.url(`/api/v1/cli-logins/${code}/${decision}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json', cookie: panel.cookie, 'x-csrf-token': panel.csrf },
    body: JSON.stringify(decision === 'approve' ? { company_id: companyId } : {}),
  });
}

const feed = (apiKey: string) => fetch(server.url('/api/v1/webhooks/feed'), { headers: { 'x-api-key': apiKey } });

test('login prints a code, gets the key once approved and saves it privately; logout revokes it', async () => {
  const configDir = join(makeTempDir('intake-cli-login-'), 'config', 'intake');
  const login = startLogin(server, configDir, ['--json']);
  const { code, link } = await login.printed;
  expect(link).toBe(`${server.baseUrl}/admin/cli-login?code=${code}`);
  const approved = await decide(code, 'approve');
  expect(approved.status, await approved.clone().text()).toBe(200);
  const run = await login.exited;
  expect(run.status, run.stderr).toBe(0);

  // --json: one JSON object, never the key.
  const lines = run.stdout.split('\n').filter(Boolean);
  expect(lines).toHaveLength(1);
  const result = JSON.parse(lines[0]!) as { company_id: string; key_id: string; name: string; path: string };
  expect(result).toEqual({ company_id: companyId, key_id: expect.stringMatching(/^key_/), name: `intake login: ${hostname()}`, path: join(configDir, 'credentials.json') });
  expect(run.stdout + run.stderr).not.toMatch(/whk_/);

  expect(statSync(result.path).mode & 0o777).toBe(0o600);
  expect(statSync(configDir).mode & 0o777).toBe(0o700);
  const saved = JSON.parse(readFileSync(result.path, 'utf8')) as { logins: Record<string, { apiKey: string; keyId: string; companyName: string }> };
  const entry = saved.logins[server.baseUrl]!;
  expect(entry).toMatchObject({ keyId: result.key_id, companyName: 'Acme' });

  const read = await feed(entry.apiKey);
  expect(read.status).toBe(200);
  expect(((await read.json()) as { data: Array<{ event: string }> }).data.map((w) => w.event)).toEqual(['order.paid']);

  const out = await runCliJson(['logout', '--url', server.baseUrl], { INTAKE_CONFIG_DIR: configDir });
  expect(out.json).toEqual({ url: server.baseUrl, key_id: result.key_id, revoked: true });
  expect((await feed(entry.apiKey)).status).toBe(401);
  expect(JSON.parse(readFileSync(result.path, 'utf8'))).toEqual({ version: 1, logins: {} });
  expect(statSync(result.path).mode & 0o777).toBe(0o600);
}, 60_000);

test('a denied sign-in ends the command with one line on stderr and nothing saved', async () => {
  const configDir = join(makeTempDir('intake-cli-login-'), 'intake');
  const login = startLogin(server, configDir, ['--name', 'ci runner']);
  expect((await decide((await login.printed).code, 'deny')).status).toBe(200);
  const run = await login.exited;
  expect(run.status).toBe(1);
  expect(run.stdout).toBe('');
  expect(run.stderr.trimEnd().split('\n').at(-1)).toBe('intake: the sign-in was not approved: This sign-in was denied in the panel.');
  expect(run.stderr).not.toMatch(/\bat .*\.js:\d+/);
  expect(() => statSync(join(configDir, 'credentials.json'))).toThrow();
}, 60_000);

test('an intake that cannot be reached, a bad --url and logout without a login are one clear line each', async () => {
  const configDir = join(makeTempDir('intake-cli-login-'), 'intake');
  const env = { INTAKE_CONFIG_DIR: configDir };
  const closed = `http://127.0.0.1:${await freePort()}`;
  const unreachable = await runCli(['login', '--url', closed], env);
  expect(unreachable.code).toBe(1);
  expect(unreachable.stderr).toMatch(new RegExp(`^intake: cannot reach ${closed}: ECONNREFUSED\n$`));
  const malformed = await runCli(['login', '--url', 'intake.example.com'], env);
  expect(malformed.code).toBe(1);
  expect(malformed.stderr).toBe('intake: --url takes an address such as https://intake.example.com, not "intake.example.com"\n');
  const nothing = await runCli(['logout', '--url', server.baseUrl], env);
  expect(nothing.code).toBe(1);
  expect(nothing.stderr).toBe(`intake: no login is saved for ${server.baseUrl} in ${configDir}\n`);
});
