import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PASSWORD } from '../support/api.js';
import { expectClean, launchChromium, openTab, rowWith, SIGNED_OUT_CHECK, signInThroughPanel, startPanelServer } from '../support/browser.js';
import { cleanupAll, type ServerProcess } from '../support/processes.js';
import { apiSignIn, companyWithOwner, freshCode, inviteThroughPanel, setUpTwoFactorThroughPanel } from './account-steps.js';

/**
 * Members join by invitation only (issue 13): an owner invites an email with a role, the
 * panel shows the link once, and only the person opening it chooses a password (a new
 * account) or signs in to their own (an existing one). Driven in Chromium against the
 * compiled server without SMTP, so every link is passed on by hand.
 */

let browser: Browser;
let server: ServerProcess;
let owner: { companyId: string; email: string; password: string };

beforeAll(async () => {
  browser = await launchChromium();
  ({ server } = await startPanelServer());
  owner = await companyWithOwner(server, 'Acme');
});

afterAll(async () => {
  await browser?.close();
  await cleanupAll();
});


function pendingRow(page: Page, email: string): Locator {
  return page.getByRole('region', { name: 'Pending invitations' }).locator('tbody tr').filter({ hasText: email });
}

async function ownerTab() {
  const tab = await openTab(browser, server);
  await signInThroughPanel(tab.page, owner.email, owner.password);
  return tab;
}

const newEmail = (name: string) => `${name}-${Math.random().toString(36).slice(2, 8)}@example.com`;

describe('invitations in the panel', { timeout: 180_000 }, () => {
  test('an owner invites a new person: the link is shown once and listed as pending; opening it elsewhere creates the account in the company with the role', async () => {
    const invitee = newEmail('new');
    const ownerSide = await ownerTab();
    const { page } = ownerSide;
    await page.getByRole('link', { name: 'Members' }).click();
    // Nobody chooses another person's password any more: no "Add member", no password field.
    await page.getByRole('button', { name: 'Invite member' }).click();
    const dialog = page.getByRole('dialog', { name: 'Invite member' });
    expect(await dialog.locator('input[type="password"]').count()).toBe(0);
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect(await page.getByRole('button', { name: 'Add member' }).count()).toBe(0);

    await page.getByRole('button', { name: 'Invite member' }).click();
    await dialog.getByLabel('Email').fill(invitee);
    await dialog.getByLabel('Role').selectOption('admin');
    await dialog.getByRole('button', { name: 'Create invitation' }).click();
    const created = page.getByRole('dialog', { name: 'Invitation created' });
    await created.getByText('This link will not be shown again. Copy it now.').waitFor();
    expect(await created.locator('.invite-emailed').textContent()).toContain('No email was sent');
    const link = ((await created.locator('.copy-field code').textContent()) ?? '').trim();
    expect(link.startsWith(`${server.baseUrl}/admin/invite?token=`)).toBe(true);
    await created.getByRole('button', { name: /^Copy Invitation link/ }).click();
    await expect.poll(() => page.evaluate<string>('navigator.clipboard.readText()')).toBe(link);
    await created.getByRole('button', { name: 'Done' }).click();
    await created.waitFor({ state: 'detached' });
    // Shown once: the page no longer holds it, and the pending list shows the invitation without it.
    expect(await page.getByText(link).count()).toBe(0);
    const pending = pendingRow(page, invitee);
    await expect.poll(() => pending.locator('.badge').textContent()).toBe('admin');
    expect(await pending.textContent()).toContain(owner.email);
    expect(await pending.locator('time').getAttribute('datetime')).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(await page.content()).not.toContain(new URL(link).searchParams.get('token'));

    // The invitee, in another browser: what the link offers, then their own password.
    const inviteeSide = await openTab(browser, server);
    await inviteeSide.page.goto(link);
    await inviteeSide.page.getByRole('heading', { name: 'Join Acme' }).waitFor();
    const details = inviteeSide.page.getByRole('definition');
    expect(await details.allTextContents()).toEqual(expect.arrayContaining(['Acme', owner.email, invitee]));
    expect(await inviteeSide.page.locator('.invite-details .badge').textContent()).toBe('admin');
    const email = inviteeSide.page.getByLabel('Email');
    expect(await email.inputValue()).toBe(invitee);
    expect(await email.getAttribute('readonly')).not.toBeNull();
    await inviteeSide.page.getByLabel('Password').fill(PASSWORD);
    await inviteeSide.page.getByRole('button', { name: 'Create account and join' }).click();
    await inviteeSide.page.getByRole('navigation', { name: 'Main' }).waitFor();
    await inviteeSide.page.waitForURL('**/admin/integrations');
    expect(await inviteeSide.page.locator('.company-name').textContent()).toBe('Acme');
    expect(await inviteeSide.page.locator('.account .muted.small').first().textContent()).toBe('admin');
    expect((await apiSignIn(server, { email: invitee, password: PASSWORD })).status).toBe(200);

    // The owner sees a member now, and no pending invitation.
    await page.reload();
    await expect.poll(() => rowWith(page, invitee).locator('.badge').first().textContent()).toBe('admin');
    await page.getByText('No invitations are waiting to be accepted.').waitFor();

    // The link worked once.
    const again = await openTab(browser, server);
    await again.page.goto(link);
    await again.page.getByRole('heading', { name: 'This invitation cannot be used' }).waitFor();

    expectClean(ownerSide.problems, ownerSide.refusals);
    expectClean(inviteeSide.problems, inviteeSide.refusals);
    expectClean(again.problems, again.refusals, [SIGNED_OUT_CHECK, { path: '/api/v1/invitations/lookup', status: 403 }]);
    for (const tab of [ownerSide, inviteeSide, again]) await tab.context.close();
  });

  test('an existing account of another company, signed in as someone else, signs out, signs in on the page with its code, accepts, and has both companies', async () => {
    const other = await companyWithOwner(server, 'Globex');
    // The invitee has two-factor sign-in, set up in its own panel.
    const setup = await openTab(browser, server);
    await signInThroughPanel(setup.page, other.email, other.password);
    const { secret } = await setUpTwoFactorThroughPanel(setup.page);
    await setup.context.close();

    const ownerSide = await ownerTab();
    const { link } = await inviteThroughPanel(ownerSide.page, other.email, 'viewer');

    // Opened in a browser signed in as the owner: the API refuses, naming both accounts.
    const inviteeSide = await openTab(browser, server);
    const { page } = inviteeSide;
    await signInThroughPanel(page, owner.email, owner.password);
    await page.goto(link);
    await page.getByRole('heading', { name: 'Join Acme' }).waitFor();
    expect(await page.getByText(`You are signed in as ${owner.email}.`).isVisible()).toBe(true);
    await page.getByRole('button', { name: 'Accept invitation' }).click();
    const refused = page.getByRole('alert');
    await refused.waitFor();
    expect(await refused.textContent()).toContain(other.email);
    expect(await refused.textContent()).toContain(owner.email);
    await page.getByRole('button', { name: 'Sign out' }).click();

    // Signed out: the account exists, so sign in (with the code), and the invitation is accepted.
    await page.getByRole('heading', { name: 'Create your account' }).waitFor();
    await page.getByRole('button', { name: 'I already have an account: sign in' }).click();
    expect(await page.getByLabel('Email').inputValue()).toBe(other.email);
    await page.getByLabel('Password').fill(other.password);
    await page.getByRole('button', { name: 'Sign in and accept' }).click();
    await page.getByLabel('Code').fill(await freshCode(secret));
    await page.getByRole('button', { name: 'Verify code' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    const switcher = page.getByLabel('Company');
    expect(await switcher.locator('option').allTextContents()).toEqual(expect.arrayContaining(['Acme', 'Globex']));
    // The panel opens on the company just joined, with the invitation's role.
    expect(await switcher.locator('option:checked').textContent()).toBe('Acme');
    expect(await page.locator('.account .muted.small').first().textContent()).toBe('viewer');

    await ownerSide.page.reload();
    await expect.poll(() => rowWith(ownerSide.page, other.email).locator('.badge').first().textContent()).toBe('viewer');

    expectClean(ownerSide.problems, ownerSide.refusals);
    expectClean(inviteeSide.problems, inviteeSide.refusals, [
      SIGNED_OUT_CHECK,
      { path: '/api/v1/invitations/accept', status: 403 },
    ]);
    for (const tab of [ownerSide, inviteeSide]) await tab.context.close();
  });

  test('a revoked invitation leaves the pending list and its link shows the invalid page; a viewer sees the list without controls', async () => {
    const ownerSide = await ownerTab();
    const { page } = ownerSide;
    const revoked = newEmail('revoked');
    const kept = newEmail('kept');
    const { link } = await inviteThroughPanel(page, revoked, 'admin');
    await inviteThroughPanel(page, kept, 'viewer');
    await pendingRow(page, revoked).waitFor();

    await page.getByRole('button', { name: `Revoke the invitation of ${revoked}` }).click();
    const confirm = page.getByRole('dialog', { name: 'Revoke invitation' });
    await confirm.getByRole('button', { name: 'Revoke invitation' }).click();
    await confirm.waitFor({ state: 'detached' });
    await page.getByRole('status').filter({ hasText: `The invitation of ${revoked} is revoked` }).waitFor();
    await expect.poll(() => pendingRow(page, revoked).count()).toBe(0);
    await pendingRow(page, kept).waitFor();

    const stranger = await openTab(browser, server);
    await stranger.page.goto(link);
    await stranger.page.getByRole('heading', { name: 'This invitation cannot be used' }).waitFor();
    expect(await stranger.page.getByRole('link', { name: 'Go to sign in' }).isVisible()).toBe(true);
    await stranger.page.goto('/admin/invite?token=not-a-real-token');
    await stranger.page.getByRole('heading', { name: 'This invitation cannot be used' }).waitFor();
    await stranger.page.goto('/admin/invite');
    await stranger.page.getByRole('heading', { name: 'This invitation link is incomplete' }).waitFor();

    // A viewer reads the pending invitations but cannot invite or revoke.
    const viewerEmail = newEmail('viewer');
    const { link: viewerLink } = await inviteThroughPanel(page, viewerEmail, 'viewer');
    const viewerSide = await openTab(browser, server);
    await viewerSide.page.goto(viewerLink);
    await viewerSide.page.getByLabel('Password').fill(PASSWORD);
    await viewerSide.page.getByRole('button', { name: 'Create account and join' }).click();
    await viewerSide.page.getByRole('navigation', { name: 'Main' }).waitFor();
    await viewerSide.page.getByRole('link', { name: 'Members' }).click();
    await pendingRow(viewerSide.page, kept).waitFor();
    expect(await viewerSide.page.getByRole('button', { name: /Invite|Revoke|Add/ }).count()).toBe(0);

    expectClean(ownerSide.problems, ownerSide.refusals);
    expectClean(stranger.problems, stranger.refusals, [SIGNED_OUT_CHECK, { path: '/api/v1/invitations/lookup', status: 403 }]);
    expectClean(viewerSide.problems, viewerSide.refusals);
    for (const tab of [ownerSide, stranger, viewerSide]) await tab.context.close();
  });
});
