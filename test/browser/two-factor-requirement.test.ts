import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { expectClean, launchChromium, openTab, SIGNED_OUT_CHECK, seedUser, signInThroughPanel, startPanelServer } from '../support/browser.js';
import { cleanupAll, type ServerProcess } from '../support/processes.js';
import { companyWithOwner, setUpTwoFactorThroughPanel } from './account-steps.js';

/**
 * A company that requires two-factor sign-in of every member (issue 13): an owner can turn
 * it on only with their own on; a member without it is shown a banner and kept on the
 * Account page until they set it up, whether they signed in before or after the change.
 */

let browser: Browser;
let server: ServerProcess;

beforeAll(async () => {
  browser = await launchChromium();
  ({ server } = await startPanelServer());
});

afterAll(async () => {
  await browser?.close();
  await cleanupAll();
});

const REQUIRE = 'Require two-factor sign-in for every member';

describe('requiring two-factor sign-in', { timeout: 180_000 }, () => {
  test('an owner turns the requirement on once their own is on; members without it see the banner and stay on Account until they set it up', async () => {
    const owner = await companyWithOwner(server, 'Acme');
    const member = await seedUser(server, 'admin', owner.companyId);
    const early = await seedUser(server, 'viewer', owner.companyId);

    // Signed in before the change: their session does not know of the requirement yet.
    const earlySide = await openTab(browser, server);
    await signInThroughPanel(earlySide.page, early.email, early.password);

    const ownerSide = await openTab(browser, server);
    const { page } = ownerSide;
    await signInThroughPanel(page, owner.email, owner.password);
    await page.getByRole('link', { name: 'Settings' }).click();
    const toggle = page.getByLabel(REQUIRE);
    expect(await toggle.isChecked()).toBe(false);
    await toggle.click(); // the API refuses: the box falls back
    const refused = page.getByRole('alert');
    await refused.waitFor();
    expect(await refused.textContent()).toMatch(/two-factor/i);
    await expect.poll(() => toggle.isChecked()).toBe(false);

    await setUpTwoFactorThroughPanel(page);
    await page.getByRole('button', { name: 'I have saved the codes' }).click();
    await page.getByRole('link', { name: 'Settings' }).click();
    // A click, not check(): the box follows the API's answer, so it changes a moment later.
    await page.getByLabel(REQUIRE).click();
    await expect.poll(() => page.getByLabel(REQUIRE).isChecked()).toBe(true);
    await page.reload();
    await expect.poll(() => page.getByLabel(REQUIRE).isChecked()).toBe(true);
    expect(await page.locator('.two-factor-banner').count()).toBe(0);

    // A member signing in now lands on Account with the banner, and stays there.
    const memberSide = await openTab(browser, server);
    const m = memberSide.page;
    await signInThroughPanel(m, member.email, member.password);
    await m.waitForURL('**/admin/account');
    const banner = m.getByRole('alert').filter({ hasText: 'Acme requires two-factor sign-in.' });
    await banner.waitFor();
    await m.getByRole('link', { name: 'Integrations' }).click();
    await m.waitForURL('**/admin/account');
    await m.goto('/admin/members');
    await m.waitForURL('**/admin/account');
    await banner.waitFor();
    const direct = await m.request.get('/api/v1/integrations', { headers: { 'x-company-id': owner.companyId } });
    expect(direct.status()).toBe(403);
    expect(((await direct.json()) as { code: string }).code).toBe('two_factor_setup_required');

    // Setting it up lifts the banner and opens the company.
    await setUpTwoFactorThroughPanel(m);
    await banner.waitFor({ state: 'detached' });
    await m.getByRole('button', { name: 'I have saved the codes' }).click();
    // … and with the requirement on, it cannot be turned off again.
    await m.getByRole('button', { name: 'Turn off two-factor sign-in' }).click();
    const off = m.getByRole('dialog', { name: 'Turn off two-factor sign-in' });
    await off.getByLabel('Password').fill(member.password);
    await off.getByRole('button', { name: 'Turn off' }).click();
    await off.getByRole('alert').filter({ hasText: 'Acme' }).waitFor();
    await off.getByRole('button', { name: 'Cancel' }).click();
    await m.getByRole('link', { name: 'Integrations' }).click();
    await m.getByRole('heading', { name: 'Integrations', level: 1 }).waitFor();

    // The member signed in before: their next page hears 403 from the API, and the panel
    // reloads the session and keeps them on Account too.
    await earlySide.page.getByRole('link', { name: 'Members' }).click();
    await earlySide.page.waitForURL('**/admin/account');
    await earlySide.page.getByRole('alert').filter({ hasText: 'Acme requires two-factor sign-in.' }).waitFor();

    expectClean(ownerSide.problems, ownerSide.refusals, [SIGNED_OUT_CHECK, { path: '/api/v1/company', status: 409 }]);
    expectClean(memberSide.problems, memberSide.refusals, [
      SIGNED_OUT_CHECK,
      { path: '/api/v1/integrations', status: 403 },
      { path: '/api/v1/account/two-factor/disable', status: 409 },
    ]);
    expectClean(earlySide.problems, earlySide.refusals, [SIGNED_OUT_CHECK, { path: '/api/v1/', status: 403 }]);
    for (const tab of [ownerSide, memberSide, earlySide]) await tab.context.close();
  });
});
