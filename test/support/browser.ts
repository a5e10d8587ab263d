import { existsSync } from 'node:fs';
import { expect } from 'vitest';
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { CHROMIUM } from './chromium-path.js';
import { runCliJson, startServer, type ServerProcess } from './processes.js';
import { PASSWORD } from './api.js';

/**
 * The panel's end-to-end tests: the compiled server (`node dist/main.js`, serving the built
 * panel from dist/web) and Debian's Chromium driven by playwright-core. No browser is
 * downloaded: .ci/run installs the `chromium` package when it is missing.
 */


/** The flags this machine needs: no sandbox as root, and no background calls to a closed network. */
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium (or set INTAKE_CHROMIUM)`);
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
}

/** A server on a fresh SQLite database, and the one-time setup link it printed. */
export async function startPanelServer(env: Record<string, string> = {}): Promise<{ server: ServerProcess; setupLink: string }> {
  const server = await startServer({ env: { INTAKE_ENV: 'development', ...env } });
  const [setupLink] = await server.waitForStdout(/http:\/\/\S+\/admin\/setup\?token=[\w-]+/);
  return { server, setupLink };
}

const EXPECTED_HTTP_ERROR = /^Failed to load resource: the server responded with a status of 4\d\d/;

/** A request the panel made that the server refused with a 4xx: its path and status. */
export interface Refusal {
  path: string;
  status: number;
}

/** Signed out, the panel asks who is signed in and hears 401: that is how it knows. */
export const SIGNED_OUT_CHECK: Refusal = { path: '/api/v1/auth/session', status: 401 };

/**
 * A browser tab on the server, 1280 px wide, allowed to use the clipboard. Every console
 * error (a Content-Security-Policy violation included) and uncaught exception is collected
 * in `problems`. Refused requests (4xx) are not problems in themselves (the session check
 * before sign-in, a wrong password); they are kept in `refusals` with their path, for
 * `expectClean` to tell the ones a flow provokes on purpose from any other.
 */
export async function openTab(
  browser: Browser,
  server: ServerProcess,
  viewport = { width: 1280, height: 800 },
): Promise<{ context: BrowserContext; page: Page; problems: string[]; refusals: Refusal[] }> {
  const context = await browser.newContext({ baseURL: server.baseUrl, viewport });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.baseUrl });
  const page = await context.newPage();
  const problems: string[] = [];
  const refusals: Refusal[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' && !EXPECTED_HTTP_ERROR.test(message.text())) problems.push(message.text());
  });
  page.on('pageerror', (error) => problems.push(error.message));
  page.on('response', (response) => {
    if (response.status() >= 400 && response.status() < 500) refusals.push({ path: new URL(response.url()).pathname, status: response.status() });
  });
  return { context, page, problems, refusals };
}

/**
 * No console error, and no refusal but those expected (a path ending in `/` stands for
 * every path below it).
 */
export function expectClean(problems: string[], refusals: Refusal[], expected: Refusal[] = [SIGNED_OUT_CHECK]): void {
  expect(problems).toEqual([]);
  const matches = (r: Refusal, e: Refusal) => r.status === e.status && (e.path.endsWith('/') ? r.path.startsWith(e.path) : r.path === e.path);
  expect(refusals.filter((r) => !expected.some((e) => matches(r, e)))).toEqual([]);
}

/** A company and a user of it with this role, made with the CLI (as an operator would). */
export async function seedUser(
  server: ServerProcess,
  role: 'owner' | 'admin' | 'viewer',
  companyId?: string,
): Promise<{ companyId: string; email: string; password: string }> {
  const company = companyId ?? (await runCliJson<{ id: string }>(['company', 'create', '--name', 'Acme', '--json'], server.cliEnv)).json.id;
  const email = `${role}-${Math.random().toString(36).slice(2, 8)}@example.com`;
  await runCliJson(['user', 'create', '--company', company, '--email', email, '--password', PASSWORD, '--role', role, '--json'], server.cliEnv);
  return { companyId: company, email, password: PASSWORD };
}

/** Signs in through the panel's own form and waits for the signed-in layout. */
export async function signInThroughPanel(page: Page, email: string, password: string): Promise<void> {
  await page.goto('/admin/login');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  // The sidebar, not its navigation: on a phone that is folded behind the Menu button.
  await page.locator('aside.sidebar').waitFor();
}

/** The row of the page's table that holds `text`. */
export function rowWith(page: Page, text: string): Locator {
  return page.locator('tbody tr').filter({ hasText: text });
}

/** Sends a webhook to an intake address with its integration key, as a sender would; its uuid. */
export async function postWebhook(address: string, apiKey: string, event: string, data: unknown = {}): Promise<string> {
  const response = await fetch(address, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
    body: JSON.stringify({ event, data }),
  });
  expect(response.status).toBe(202);
  return ((await response.json()) as { uuid: string }).uuid;
}

/** A destination page's deliveries row of this webhook, once it shows (Refresh until it does). */
export async function deliveryRow(page: Page, uuid: string): Promise<Locator> {
  const section = page.getByRole('region', { name: 'Deliveries' });
  const row = section.locator('tbody tr', { hasText: uuid });
  await expect
    .poll(
      async () => {
        if ((await row.count()) === 0) await section.getByRole('button', { name: 'Refresh' }).click();
        return row.count();
      },
      { timeout: 15_000 },
    )
    .toBe(1);
  return row;
}
