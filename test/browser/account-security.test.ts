import { readFileSync } from 'node:fs';
import * as QRCode from 'qrcode';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PASSWORD } from '../support/api.js';
import { expectClean, launchChromium, openTab, SIGNED_OUT_CHECK, signInThroughPanel, startPanelServer } from '../support/browser.js';
import { cleanupAll, runCliJson, type ServerProcess } from '../support/processes.js';
import { startSmtpSink } from '../support/smtp-sink.js';
import { apiSignIn, companyWithOwner, freshCode, setUpTwoFactorThroughPanel, signInWithCode, wrongCode } from './account-steps.js';

/**
 * The signed-in person's own account (issue 13): changing the password, resetting a
 * forgotten one by a one-time link (emailed through a real SMTP server on loopback), and
 * two-factor sign-in with recovery codes, in Chromium against the compiled server.
 */

let browser: Browser;
let server: ServerProcess;
let smtp: Awaited<ReturnType<typeof startSmtpSink>>;

beforeAll(async () => {
  browser = await launchChromium();
  smtp = await startSmtpSink();
  ({ server } = await startPanelServer({ INTAKE_SMTP_URL: smtp.url }));
});

afterAll(async () => {
  await browser?.close();
  await smtp?.close();
  await cleanupAll();
});

const NEW_PASSWORD = 'a different passphrase entirely';

async function goToAccount(page: Page): Promise<void> {
  await page.getByRole('complementary').getByRole('link', { name: 'Account' }).click();
  await page.getByRole('heading', { name: 'Account', level: 1 }).waitFor();
}

/** Whether the tab's session still works: reloading a panel page keeps it signed in. */
async function stillSignedIn(page: Page): Promise<boolean> {
  await page.goto('/admin/integrations');
  await page.getByRole('navigation', { name: 'Main' }).or(page.getByRole('button', { name: 'Sign in' })).waitFor();
  return !page.url().includes('/admin/login');
}

describe('the account page, password reset and two-factor sign-in', { timeout: 180_000 }, () => {
  test('changing the password: the old one no longer signs in, another browser is signed out, this one goes on', async () => {
    const user = await companyWithOwner(server, 'Acme');
    const here = await openTab(browser, server);
    const elsewhere = await openTab(browser, server);
    await signInThroughPanel(here.page, user.email, user.password);
    await signInThroughPanel(elsewhere.page, user.email, user.password);
    const { page } = here;
    await goToAccount(page);

    // Wrong current password, and two new ones that differ: said in words, nothing changes.
    await page.getByLabel('Current password').fill('not my password at all');
    await page.getByLabel(/^New password/).fill(NEW_PASSWORD);
    await page.getByLabel('Repeat the new password').fill(NEW_PASSWORD + '!');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByRole('alert').filter({ hasText: 'The two new passwords are not the same.' }).waitFor();
    await page.getByLabel('Repeat the new password').fill(NEW_PASSWORD);
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByRole('alert').filter({ hasText: 'The current password is not correct.' }).waitFor();

    await page.getByLabel('Current password').fill(user.password);
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByRole('status').filter({ hasText: 'Every other session of your account was signed out; this one goes on.' }).waitFor();

    expect(await stillSignedIn(page)).toBe(true);
    expect(await stillSignedIn(elsewhere.page)).toBe(false);
    expect(await apiSignIn(server, { email: user.email, password: user.password })).toEqual({ status: 401, code: 'invalid_credentials' });
    expect((await apiSignIn(server, { email: user.email, password: NEW_PASSWORD })).status).toBe(200);

    // The sign-in form refuses the old password too.
    await elsewhere.page.getByLabel('Email').fill(user.email);
    await elsewhere.page.getByLabel('Password').fill(user.password);
    await elsewhere.page.getByRole('button', { name: 'Sign in' }).click();
    await elsewhere.page.getByRole('alert').filter({ hasText: 'The email or password is not correct.' }).waitFor();

    expectClean(here.problems, here.refusals, [SIGNED_OUT_CHECK, { path: '/api/v1/account/password', status: 401 }]);
    expectClean(elsewhere.problems, elsewhere.refusals, [
      SIGNED_OUT_CHECK,
      { path: '/api/v1/', status: 401 }, // the ended session's requests
    ]);
    for (const tab of [here, elsewhere]) await tab.context.close();
  });

  test('a forgotten password: the same answer for any email, the emailed link sets a new one and ends every session, then sign-in says so', async () => {
    const user = await companyWithOwner(server, 'Acme');
    const signedIn = await openTab(browser, server);
    await signInThroughPanel(signedIn.page, user.email, user.password);

    const tab = await openTab(browser, server);
    const { page } = tab;
    const ask = async (email: string) => {
      await page.goto('/admin/login');
      await page.getByRole('link', { name: 'Forgot your password?' }).click();
      await page.getByRole('heading', { name: 'Reset your password' }).waitFor();
      await page.getByLabel('Email').fill(email);
      await page.getByRole('button', { name: 'Send the reset link' }).click();
      return (await page.getByRole('status').textContent()) ?? '';
    };
    const answer = await ask(user.email);
    expect(answer.length).toBeGreaterThan(0);
    expect(await ask('nobody-has-this@example.com')).toBe(answer);

    const mail = await smtp.waitForMessage(user.email);
    const link = /https?:\/\/\S+\/admin\/reset-password\?token=[\w-]+/.exec(mail.text)?.[0];
    expect(link).toBeDefined();
    expect(smtp.messages.some((message) => message.to.includes('nobody-has-this@example.com'))).toBe(false);

    await page.goto(link!);
    await page.getByRole('heading', { name: 'Choose a new password' }).waitFor();
    // Which account, from the moment it opens (checking the link did not use it up).
    expect(await page.locator('.auth-card > p.muted').first().textContent()).toContain(`Choose a new password for ${user.email}.`);
    await page.setViewportSize({ width: 390, height: 844 });
    await page.reload();
    await page.getByText(`Choose a new password for ${user.email}.`).waitFor();
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.getByLabel(/^New password/).fill(NEW_PASSWORD);
    await page.getByLabel('Repeat the new password').fill(NEW_PASSWORD);
    await page.getByRole('button', { name: 'Set the new password' }).click();
    await page.waitForURL('**/admin/login');
    await page.getByRole('status').filter({ hasText: 'Sign in with the new password.' }).waitFor();
    await page.getByLabel('Email').fill(user.email);
    await page.getByLabel('Password').fill(NEW_PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();

    expect(await stillSignedIn(signedIn.page)).toBe(false);
    expect((await apiSignIn(server, { email: user.email, password: user.password })).status).toBe(401);

    // The link worked once: opened again, it says so at once, before any password is typed,
    // with the way to a new one (at 390 px too).
    const again = await openTab(browser, server);
    for (const width of [1280, 390]) {
      await again.page.setViewportSize({ width, height: 844 });
      await again.page.goto(link!);
      await again.page.getByRole('heading', { name: 'This reset link cannot be used' }).waitFor();
      expect(await again.page.getByRole('alert').textContent()).toContain('already used');
      expect(await again.page.getByLabel(/^New password/).count()).toBe(0);
      await again.page.getByRole('link', { name: 'Ask for a new one' }).waitFor();
    }
    await again.page.getByRole('link', { name: 'Ask for a new one' }).click();
    await again.page.getByRole('heading', { name: 'Reset your password' }).waitFor();
    await again.page.setViewportSize({ width: 1280, height: 800 });

    // The operator's way, without email: the CLI prints a link that works the same.
    const printed = await runCliJson(['user', 'reset-password', '--email', user.email, '--json'], server.cliEnv);
    const cliLink = Object.values(printed.json).find((value) => typeof value === 'string' && value.includes('/admin/reset-password?token='));
    expect(cliLink).toBeDefined();
    await again.page.goto(String(cliLink));
    await again.page.getByLabel(/^New password/).fill(PASSWORD);
    await again.page.getByLabel('Repeat the new password').fill(PASSWORD);
    await again.page.getByRole('button', { name: 'Set the new password' }).click();
    await again.page.waitForURL('**/admin/login');
    expect((await apiSignIn(server, { email: user.email, password: PASSWORD })).status).toBe(200);

    expectClean(signedIn.problems, signedIn.refusals, [SIGNED_OUT_CHECK, { path: '/api/v1/', status: 401 }]);
    expectClean(tab.problems, tab.refusals);
    expectClean(again.problems, again.refusals, [SIGNED_OUT_CHECK, { path: '/api/v1/auth/password-reset/check', status: 403 }]);
    for (const t of [signedIn, tab, again]) await t.context.close();
  });

  test('a two-factor sign-in at 1280 and 390 px: no console error at all, and "You are signed out" goes once the password is accepted', async () => {
    const user = await companyWithOwner(server, 'Acme');
    const wide = await openTab(browser, server);
    await signInThroughPanel(wide.page, user.email, user.password);
    const { secret, codes } = await setUpTwoFactorThroughPanel(wide.page);
    await wide.page.getByRole('button', { name: 'I have saved the codes' }).click();
    const narrow = await openTab(browser, server, { width: 390, height: 844 });

    // Every console message of type error, the HTTP ones the harness lets pass included.
    const consoleErrors = (page: Page) => {
      const errors: string[] = [];
      page.on('console', (message) => message.type() === 'error' && errors.push(message.text()));
      return errors;
    };
    const signOutThenIn = async (tab: typeof wide, code: string) => {
      const { page } = tab;
      if (await page.getByRole('button', { name: 'Menu' }).isVisible()) await page.getByRole('button', { name: 'Menu' }).click();
      await page.getByRole('button', { name: 'Sign out', exact: true }).click();
      await page.waitForURL('**/admin/login**');
      const signedOut = page.getByRole('status').filter({ hasText: 'You are signed out.' });
      await signedOut.waitFor();
      const errors = consoleErrors(page);
      const loginRefusals = () => tab.refusals.filter((r) => r.path === '/api/v1/auth/login').length;
      const refusedBefore = loginRefusals();
      await page.getByLabel('Email').fill(user.email);
      await page.getByLabel('Password').fill(user.password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByLabel('Code').waitFor();
      expect(await signedOut.count()).toBe(0);
      expect(await page.getByRole('status').filter({ hasText: 'Your account has two-factor sign-in.' }).isVisible()).toBe(true);
      await page.getByLabel('Code').fill(code);
      await page.getByRole('button', { name: 'Verify code' }).click();
      await page.locator('aside.sidebar').waitFor();
      expect(errors).toEqual([]);
      expect(loginRefusals()).toBe(refusedBefore);
    };

    await signOutThenIn(wide, await freshCode(secret));
    await signInWithCode(narrow.page, user.email, user.password, codes[0]!);
    await narrow.page.locator('aside.sidebar').waitFor();
    await signOutThenIn(narrow, codes[1]!);

    // The company's audit log has the change in words, by the user and of the user.
    await wide.page.getByRole('link', { name: 'Audit log' }).click();
    const enabled = wide.page.locator('tr.audit-row').filter({ hasText: 'account.two_factor_enable' });
    await expect.poll(() => enabled.locator('.audit-summary').textContent()).toBe('two-factor sign-in turned on (with new recovery codes)');
    expect(await enabled.locator('.audit-actor').textContent()).toContain(user.email);
    expect(await enabled.locator('.audit-target-name').textContent()).toContain(user.email);

    for (const tab of [wide, narrow]) {
      expectClean(tab.problems, tab.refusals);
      await tab.context.close();
    }
  });

  test('two-factor sign-in: the QR code holds the app URI, recovery codes are shown once and downloadable, sign-in asks for the code, a recovery code works once', async () => {
    const user = await companyWithOwner(server, 'Acme');
    const tab = await openTab(browser, server);
    const { page } = tab;
    await signInThroughPanel(page, user.email, user.password);
    await goToAccount(page);
    await page.getByRole('button', { name: 'Set up two-factor sign-in' }).click();

    // The QR code, drawn as SVG rectangles, is exactly the module matrix of the otpauth URI.
    const qr = page.getByRole('img', { name: 'QR code for your authenticator app' });
    await qr.waitFor();
    const uri = (await page.getByRole('link', { name: 'Open it in your authenticator app' }).getAttribute('href')) ?? '';
    const secret = ((await page.locator('.copy-field').filter({ hasText: 'Secret key' }).locator('code').textContent()) ?? '').trim();
    expect(uri).toMatch(/^otpauth:\/\/totp\//);
    expect(new URL(uri).searchParams.get('secret')).toBe(secret);
    const expected = QRCode.create(uri, { errorCorrectionLevel: 'M' }).modules;
    const drawn = await qr
      .locator('rect[fill="#000"]')
      .evaluateAll((rects) => rects.map((r) => ['x', 'y', 'width'].map((name) => Number(r.getAttribute(name)))));
    const dark = new Set<string>();
    for (const [x, y, width] of drawn) for (let i = 0; i < width!; i++) dark.add(`${x! - 4 + i},${y! - 4}`);
    const wanted = new Set<string>();
    for (let y = 0; y < expected.size; y++) for (let x = 0; x < expected.size; x++) if (expected.get(y, x)) wanted.add(`${x},${y}`);
    expect(dark).toEqual(wanted);

    // A wrong code is refused and nothing changes; the right one shows ten recovery codes.
    await page.getByLabel('6-digit code').fill(wrongCode(secret));
    await page.getByRole('button', { name: 'Turn on two-factor sign-in' }).click();
    await page.locator('.two-factor-setup').getByRole('alert').waitFor();
    expect(await page.getByRole('list', { name: 'Recovery codes' }).count()).toBe(0);
    await page.getByLabel('6-digit code').fill(await freshCode(secret));
    await page.getByRole('button', { name: 'Turn on two-factor sign-in' }).click();
    const list = page.getByRole('list', { name: 'Recovery codes' });
    await list.waitFor();
    const codes = (await list.locator('code').allTextContents()).map((code) => code.trim());
    expect(codes).toHaveLength(10);
    // It is on from the moment the codes show, and the card says so.
    const card = page.getByRole('region', { name: 'Two-factor sign-in' });
    expect(await card.locator('.company-card-header .badge').textContent()).toBe('on');
    await page.getByRole('button', { name: /^Copy the codes/ }).click();
    await expect.poll(() => page.evaluate<string>('navigator.clipboard.readText()')).toBe(codes.join('\n'));
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download as text' }).click()]);
    expect(download.suggestedFilename()).toBe('intake-recovery-codes.txt');
    const saved = readFileSync((await download.path())!, 'utf8');
    for (const code of codes) expect(saved).toContain(code);
    await page.getByRole('button', { name: 'I have saved the codes' }).click();
    expect(await page.getByText(codes[0]!).count()).toBe(0);
    await expect.poll(() => page.locator('.recovery-codes-left').textContent()).toBe('10');

    // Signing in now asks for the code: a recovery code works once, then the app's code.
    await page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await page.waitForURL('**/admin/login**');
    await signInWithCode(page, user.email, user.password, codes[0]!);
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    await page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await page.waitForURL('**/admin/login**');
    await signInWithCode(page, user.email, user.password, codes[0]!);
    await page.getByRole('alert').filter({ hasText: 'already used' }).waitFor();
    expect(await page.getByLabel('Code').isVisible()).toBe(true);
    await page.getByLabel('Code').fill(await freshCode(secret));
    await page.getByRole('button', { name: 'Verify code' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    await goToAccount(page);
    await expect.poll(() => page.locator('.recovery-codes-left').textContent()).toBe('9');

    // New recovery codes: the old ones stop working.
    await page.getByRole('button', { name: 'New recovery codes' }).click();
    const renew = page.getByRole('dialog', { name: 'New recovery codes' });
    await renew.getByLabel('Password').fill(user.password);
    await renew.getByRole('button', { name: 'Make new codes' }).click();
    await list.waitFor();
    const fresh = (await list.locator('code').allTextContents()).map((code) => code.trim());
    expect(fresh).toHaveLength(10);
    expect(fresh).not.toContain(codes[1]);
    await page.getByRole('button', { name: 'I have saved the codes' }).click();
    expect(await apiSignIn(server, { email: user.email, password: user.password, two_factor_code: codes[1]! })).toEqual({
      status: 401,
      code: 'invalid_two_factor_code',
    });

    // Turned off with the password (a wrong one is refused): sign-in asks for the password only.
    await page.getByRole('button', { name: 'Turn off two-factor sign-in' }).click();
    const off = page.getByRole('dialog', { name: 'Turn off two-factor sign-in' });
    await off.getByLabel('Password').fill('not my password at all');
    await off.getByRole('button', { name: 'Turn off' }).click();
    await off.getByRole('alert').filter({ hasText: 'The password is not correct.' }).waitFor();
    await off.getByLabel('Password').fill(user.password);
    await off.getByRole('button', { name: 'Turn off' }).click();
    await off.waitFor({ state: 'detached' });
    await page.getByRole('status').filter({ hasText: 'Two-factor sign-in is off.' }).waitFor();
    expect((await apiSignIn(server, { email: user.email, password: user.password })).status).toBe(200);

    expectClean(tab.problems, tab.refusals, [
      SIGNED_OUT_CHECK,
      { path: '/api/v1/account/two-factor/enable', status: 401 },
      { path: '/api/v1/account/two-factor/disable', status: 401 },
      { path: '/api/v1/auth/login', status: 401 },
    ]);
    await tab.context.close();
  });
});
