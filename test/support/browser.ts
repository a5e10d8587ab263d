import { existsSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
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

/**
 * A browser tab on the server, 1280 px wide, allowed to use the clipboard. Every console
 * error (a Content-Security-Policy violation included) and uncaught exception is collected
 * in `problems`, so a test can assert the panel ran cleanly.
 */
export async function openTab(
  browser: Browser,
  server: ServerProcess,
  viewport = { width: 1280, height: 800 },
): Promise<{ context: BrowserContext; page: Page; problems: string[] }> {
  const context = await browser.newContext({ baseURL: server.baseUrl, viewport });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.baseUrl });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(message.text());
  });
  page.on('pageerror', (error) => problems.push(error.message));
  return { context, page, problems };
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
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
}

