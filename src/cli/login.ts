import { hostname } from 'node:os';
import type { Command } from 'commander';
import { CliError } from './cli-error.js';
import { configDir, findLogin, forgetLogin, originOf, saveLogin } from './credentials.js';

/** RFC 8628, section 3.5: every slow_down adds 5 seconds to the wait between polls. */
const SLOW_DOWN_STEP_SECONDS = 5;
const REQUEST_TIMEOUT_MS = 15_000;

interface StartedLogin {
  device_code: string;
  user_code: string;
  verification_url: string;
  expires_at: string;
  interval: number;
}

interface IssuedKey {
  api_key: string;
  key_id: string;
  company_id: string;
  company_name: string;
  name: string;
}

/**
 * `intake login` and `intake logout`: the commands that talk to a running intake over HTTP
 * (no database of their own), after RFC 8628's device flow. Nothing opens a browser: the
 * person opens the printed link wherever they are signed in to the panel.
 */
export function registerLoginCommands(program: Command): void {
  program
    .command('login')
    .description(
      'sign this machine in to a running intake: open the link it prints, approve the code in the panel, and a key ' +
        'that reads the company\'s webhooks and logs (logs:read only) is saved in the config folder (INTAKE_CONFIG_DIR, ' +
        'else $XDG_CONFIG_HOME/intake, else ~/.config/intake), mode 0600',
    )
    .requiredOption('--url <url>', "the intake's address, e.g. https://intake.example.com")
    .option('--name <name>', "the key's name in the panel (default: intake login: followed by this machine's host name)")
    .option('--json', 'print one JSON object at the end (never the key)')
    .action((options: { url: string; name?: string; json?: boolean }) => login(options));
  program
    .command('logout')
    .description("revoke the key intake login saved for this intake, and forget it here")
    .requiredOption('--url <url>', "the intake's address, as given to intake login")
    .option('--json', 'print one JSON object')
    .action((options: { url: string; json?: boolean }) => logout(options));
}

async function login(options: { url: string; name?: string; json?: boolean }): Promise<void> {
  const origin = intakeOrigin(options.url);
  const name = options.name ?? `intake login: ${hostname()}`;
  const started = await call(origin, 'POST', '/api/v1/cli-logins', { body: { name } });
  if (started.status !== 201) throw refusal(origin, started);
  const login = started.body as unknown as StartedLogin;
  process.stderr.write(
    `To sign in, open ${login.verification_url}\n` +
      `and approve it if the panel shows the code ${login.user_code}. Waiting (the code works for 10 minutes)…\n`,
  );
  const key = await waitForApproval(origin, login);
  const path = await saveLogin({
    url: origin,
    apiKey: key.api_key,
    keyId: key.key_id,
    companyId: key.company_id,
    companyName: key.company_name,
    name: key.name,
    createdAt: new Date().toISOString(),
  });
  if (options.json) {
    process.stdout.write(`${JSON.stringify({ company_id: key.company_id, key_id: key.key_id, name: key.name, path })}\n`);
    return;
  }
  process.stdout.write(
    `Signed in to ${key.company_name} (${key.company_id}) with key ${key.key_id} ("${key.name}", logs:read only).\n` +
      `Saved in ${path}. intake logout --url ${origin} revokes it.\n`,
  );
}

/** Polls until the sign-in is decided: the key once approved, else the reason it is not coming. */
async function waitForApproval(origin: string, login: StartedLogin): Promise<IssuedKey> {
  const expiresAt = Date.parse(login.expires_at);
  let intervalSeconds = login.interval;
  for (;;) {
    await sleep(intervalSeconds * 1000);
    let answer: Answer;
    try {
      answer = await call(origin, 'POST', '/api/v1/cli-logins/token', { body: { device_code: login.device_code } });
    } catch (error) {
      // A node restarting, a balancer between nodes: the sign-in is in the database, ask again.
      if (error instanceof Unreachable && Date.now() < expiresAt) continue;
      throw error;
    }
    if (answer.status === 200) return answer.body as unknown as IssuedKey;
    const code = answer.body.code;
    if (code === 'authorization_pending') continue;
    if (code === 'slow_down') {
      intervalSeconds += SLOW_DOWN_STEP_SECONDS;
      continue;
    }
    if ((answer.status === 429 || answer.status === 503) && Date.now() < expiresAt) {
      intervalSeconds = Math.max(intervalSeconds, answer.retryAfterSeconds ?? 0);
      continue;
    }
    if (code === 'access_denied') throw new CliError(`the sign-in was not approved: ${answer.body.message}`);
    if (code === 'expired_token') throw new CliError(`the sign-in ended without a key: ${answer.body.message}`);
    throw refusal(origin, answer);
  }
}

async function logout(options: { url: string; json?: boolean }): Promise<void> {
  const origin = intakeOrigin(options.url);
  const saved = await findLogin(origin);
  if (!saved) throw new CliError(`no login is saved for ${origin} in ${configDir()}`);
  let problem: string | undefined;
  try {
    const answer = await call(origin, 'DELETE', '/api/v1/cli-logins/current', { apiKey: saved.apiKey });
    // 401: the key is refused already (revoked in the panel): nothing is left to revoke.
    if (answer.status !== 204 && answer.status !== 401) problem = refusal(origin, answer).message;
  } catch (error) {
    if (!(error instanceof Unreachable)) throw error;
    problem = error.message;
  }
  // Forgotten either way: whoever logs out wants the key off this machine.
  await forgetLogin(origin);
  if (problem !== undefined) {
    throw new CliError(`the key is forgotten here, but ${saved.keyId} could not be revoked (${problem}): revoke it in the panel under Management keys`);
  }
  if (options.json) {
    process.stdout.write(`${JSON.stringify({ url: origin, key_id: saved.keyId, revoked: true })}\n`);
    return;
  }
  process.stdout.write(`Signed out of ${origin}: key ${saved.keyId} is revoked and forgotten here.\n`);
}

/** The origin of --url, or a CliError saying what is wrong with it. Plain http beyond this machine gets a warning. */
function intakeOrigin(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new CliError(`--url takes an address such as https://intake.example.com, not "${url}"`);
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new CliError(`--url takes an http or https address, not "${url}"`);
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(parsed.hostname) || parsed.hostname.startsWith('127.');
  if (parsed.protocol === 'http:' && !loopback) {
    process.stderr.write(`intake: warning: ${parsed.origin} is plain http: the key crosses the network unencrypted\n`);
  }
  return originOf(url);
}

interface Answer {
  status: number;
  /** The JSON body (every answer of intake's is a JSON object); {} when there is none. */
  body: Record<string, unknown> & { code?: unknown; message?: unknown };
  retryAfterSeconds?: number;
}

/** intake could not be asked at all (refused, timed out, no such host). */
class Unreachable extends CliError {}

async function call(origin: string, method: string, path: string, options: { body?: object; apiKey?: string }): Promise<Answer> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (options.apiKey !== undefined) headers['x-api-key'] = options.apiKey;
  let response: Response;
  try {
    response = await fetch(new URL(path, origin), {
      method,
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      // A redirect is not followed: a POST would arrive as a GET, and a key should go only where it was sent.
      redirect: 'manual',
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    throw new Unreachable(`cannot reach ${origin}: ${cause?.code ?? cause?.message ?? (error as Error).message}`);
  }
  if (response.status >= 300 && response.status < 400) {
    throw new CliError(`${origin} redirects to ${response.headers.get('location') ?? 'another address'}: give that address to --url`);
  }
  const text = await response.text();
  let body: Answer['body'] = {};
  if (text !== '') {
    try {
      body = JSON.parse(text) as Answer['body'];
    } catch {
      throw new CliError(`${origin} answered ${response.status} with something that is not intake's JSON: is --url the intake's address?`);
    }
  }
  const retryAfter = Number(response.headers.get('retry-after') ?? NaN);
  return { status: response.status, body, retryAfterSeconds: Number.isFinite(retryAfter) ? retryAfter : undefined };
}

/** An answer that is not what the command waits for, in one line. */
function refusal(origin: string, answer: Answer): CliError {
  const message = typeof answer.body.message === 'string' ? answer.body.message : 'no message';
  return new CliError(`${origin} answered ${answer.status}: ${message}`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}
