import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PASSWORD } from '../support/api.js';
import { startLogin } from '../support/cli-login.js';
import { expectClean, launchChromium, openTab, SIGNED_OUT_CHECK, startPanelServer } from '../support/browser.js';
import { cleanupAll, makeTempDir, runCliJson, type ServerProcess } from '../support/processes.js';
import { companyWithOwner } from './account-steps.js';

/**
 * The page `intake login` links to (`/admin/cli-login?code=…`), in Chromium against the
 * compiled server: a visitor who is not signed in signs in first and comes back to it; it
 * shows the code, the machine and its address, a company choice for a member of several;
 * Approve, and the page says the terminal has its key once the real `intake login` process
 * has collected it. Deny tells the terminal so.
 */
let browser: Browser;
let server: ServerProcess;
let person: { email: string; acme: string; globex: string };

beforeAll(async () => {
  browser = await launchChromium();
  ({ server } = await startPanelServer());
  const owner = await companyWithOwner(server, 'Acme');
  const globex = await runCliJson<{ id: string }>(['company', 'create', '--name', 'Globex', '--json'], server.cliEnv);
  // The same person, a viewer of a second company: the page asks which one.
  await runCliJson(['user', 'create', '--company', globex.json.id, '--email', owner.email, '--password', PASSWORD, '--role', 'viewer', '--json'], server.cliEnv);
  person = { email: owner.email, acme: owner.companyId, globex: globex.json.id };
});

/** Signs the person in on the panel's sign-in page, before any link is opened. */
async function signInFirst(page: Page): Promise<void> {
  await page.goto('/admin/login');
  await page.getByLabel('Email').fill(person.email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
}

afterAll(async () => {
  await browser?.close();
  await cleanupAll();
});

describe('approving intake login in the panel', { timeout: 120_000 }, () => {
  test('signed out, the link leads through sign-in back to the page; approving for the chosen company gives the terminal its key', async () => {
    const login = startLogin(server, makeTempDir('intake-browser-login-'), ['--name', 'intake login: build-box', '--json']);
    const { code, link } = await login.printed;
    const { page, problems, refusals } = await openTab(browser, server);

    await page.goto(link);
    await page.getByLabel('Email').fill(person.email);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Approve a command-line sign-in' }).waitFor();
    expect(new URL(page.url()).pathname + new URL(page.url()).search).toBe(`/admin/cli-login?code=${code}`);

    expect(await page.getByLabel('Code').textContent()).toBe(code);
    const details = page.getByRole('definition');
    expect(await details.allTextContents()).toEqual(expect.arrayContaining(['intake login: build-box', '127.0.0.1']));
    await page.getByLabel('Company').selectOption({ label: 'Globex' });
    expect(await page.locator('.auth-card').textContent()).toContain('reads Globex’s webhooks and logs');
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.getByText('You can close this page; the terminal has its key.').waitFor({ timeout: 30_000 });

    const run = await login.exited;
    expect(run.status, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ company_id: person.globex, name: 'intake login: build-box' });
    expectClean(problems, refusals, [SIGNED_OUT_CHECK]);
  });

  test('deny: the page says so and the terminal ends without a key', async () => {
    const login = startLogin(server, makeTempDir('intake-browser-login-'));
    const { link } = await login.printed;
    const { page, problems, refusals } = await openTab(browser, server);
    await signInFirst(page);
    await page.goto(link);
    await page.getByRole('button', { name: 'Deny' }).click();
    await page.getByRole('heading', { name: 'Sign-in denied' }).waitFor();
    const run = await login.exited;
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('intake: the sign-in was not approved');
    expectClean(problems, refusals, [SIGNED_OUT_CHECK]);
  });

  test('an unknown or expired code says to start again', async () => {
    const { page, problems, refusals } = await openTab(browser, server);
    await signInFirst(page);
    await page.goto('/admin/cli-login?code=BCDF-GHJK');
    await page.getByRole('heading', { name: 'This sign-in cannot be approved' }).waitFor();
    expect(await page.getByRole('alert').textContent()).toContain('it may have expired');
    expectClean(problems, refusals, [SIGNED_OUT_CHECK, { path: '/api/v1/cli-logins/BCDF-GHJK', status: 404 }]);
  });
});
