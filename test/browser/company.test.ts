import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PASSWORD } from '../support/api.js';
import { expectClean, launchChromium, openTab, rowWith, SIGNED_OUT_CHECK, seedUser, signInThroughPanel, startPanelServer } from '../support/browser.js';
import { cleanupAll, type ServerProcess } from '../support/processes.js';

/**
 * Members, management keys, the audit log and the company settings, driven through the
 * panel in Chromium against the compiled server; keys the panel shows are tried from Node.
 */

const LAST_OWNER = 'A company must keep at least one owner: make another member an owner first.';
const NEW_MEMBER = `new-member-${Math.random().toString(36).slice(2, 8)}@example.com`;

let browser: Browser;
let server: ServerProcess;
let owner: { companyId: string; email: string; password: string };

beforeAll(async () => {
  browser = await launchChromium();
  ({ server } = await startPanelServer());
  owner = await seedUser(server, 'owner');
});

afterAll(async () => {
  await browser?.close();
  await cleanupAll();
});


async function callIntegrations(apiKey: string): Promise<number> {
  const response = await fetch(`${server.baseUrl}/api/v1/integrations`, { headers: { 'x-api-key': apiKey } });
  await response.arrayBuffer();
  return response.status;
}

async function ownerTab() {
  const tab = await openTab(browser, server);
  await signInThroughPanel(tab.page, owner.email, owner.password);
  return tab;
}

describe('members, management keys, audit log and settings in the panel', { timeout: 120_000 }, () => {
  test('an owner invites a member, who joins with their own password, and changes their role; the last owner can be neither demoted nor removed', async () => {
    const { context, page, problems, refusals } = await ownerTab();
    await page.getByRole('link', { name: 'Members' }).click();
    await page.getByRole('heading', { name: 'Members', level: 1 }).waitFor();
    const ownerRow = rowWith(page, owner.email);
    await ownerRow.waitFor();
    expect(await ownerRow.locator('.badge').textContent()).toBe('owner');

    // Nobody sets another person's password: the owner invites, the person joins by the link.
    await page.getByRole('button', { name: 'Invite member' }).click();
    const invite = page.getByRole('dialog', { name: 'Invite member' });
    await invite.getByLabel('Email').fill(NEW_MEMBER);
    await invite.getByLabel('Role').selectOption('admin');
    await invite.getByRole('button', { name: 'Create invitation' }).click();
    const created = page.getByRole('dialog', { name: 'Invitation created' });
    const link = ((await created.locator('.copy-field code').textContent()) ?? '').trim();
    await created.getByRole('button', { name: 'Done' }).click();
    const joining = await openTab(browser, server);
    await joining.page.goto(link);
    await joining.page.getByLabel('Password').fill(PASSWORD);
    await joining.page.getByRole('button', { name: 'Create account and join' }).click();
    await joining.page.getByRole('navigation', { name: 'Main' }).waitFor();
    expectClean(joining.problems, joining.refusals);
    await joining.context.close();

    await page.reload();
    const memberRow = rowWith(page, NEW_MEMBER);
    await expect.poll(() => memberRow.locator('.badge').textContent()).toBe('admin');

    // Their role changes.
    await page.getByRole('button', { name: `Change role of ${NEW_MEMBER}` }).click();
    const change = page.getByRole('dialog', { name: 'Change role' });
    await change.getByLabel('Role').selectOption('viewer');
    await change.getByRole('button', { name: 'Save role' }).click();
    await change.waitFor({ state: 'detached' });
    await expect.poll(() => memberRow.locator('.badge').textContent()).toBe('viewer');

    // The last owner is told before clicking: neither removing nor demoting is offered, and
    // the reason is beside the disabled buttons (at 390 px too); another member's are not.
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 844 });
      const lastOwner = rowWith(page, owner.email);
      for (const name of [`Change role of ${owner.email}`, `Remove ${owner.email}`]) {
        const button = lastOwner.getByRole('button', { name });
        expect(await button.isDisabled()).toBe(true);
        expect(await button.getAttribute('aria-describedby')).toBeTruthy();
      }
      const note = lastOwner.locator('.last-owner-note');
      await note.scrollIntoViewIfNeeded();
      expect(await note.isVisible()).toBe(true);
      expect(await note.textContent()).toBe('You are the only owner: make another member an owner before you leave or change your role.');
      expect(await memberRow.getByRole('button', { name: `Remove ${NEW_MEMBER}` }).isDisabled()).toBe(false);
      expect(await memberRow.locator('.last-owner-note').count()).toBe(0);
    }
    await page.setViewportSize({ width: 1280, height: 800 });

    // The server refuses still, whoever asks: demoting is a 409 with its reason, so is removing.
    const { csrf_token: csrf } = (await (await page.request.get('/api/v1/auth/session')).json()) as { csrf_token: string };
    const ownerId = await rowWith(page, owner.email).getAttribute('data-user-id');
    const demote = await page.request.patch(`/api/v1/members/${ownerId}`, { headers: { 'x-csrf-token': csrf }, data: { role: 'admin' } });
    expect(demote.status()).toBe(409);
    expect(((await demote.json()) as { message: string }).message).toBe(LAST_OWNER);
    const removed = await page.request.delete(`/api/v1/members/${ownerId}`, { headers: { 'x-csrf-token': csrf } });
    expect(removed.status()).toBe(409);

    // With a second owner, both may leave or change role: the buttons are back, the note gone.
    await page.getByRole('button', { name: `Change role of ${NEW_MEMBER}` }).click();
    await change.getByLabel('Role').selectOption('owner');
    await change.getByRole('button', { name: 'Save role' }).click();
    await change.waitFor({ state: 'detached' });
    await expect.poll(() => rowWith(page, owner.email).getByRole('button', { name: `Remove ${owner.email}` }).isDisabled()).toBe(false);
    expect(await page.locator('.last-owner-note').count()).toBe(0);
    await page.getByRole('button', { name: `Change role of ${NEW_MEMBER}` }).click();
    await change.getByLabel('Role').selectOption('viewer');
    await change.getByRole('button', { name: 'Save role' }).click();
    await change.waitFor({ state: 'detached' });
    await expect.poll(() => rowWith(page, owner.email).getByRole('button', { name: `Remove ${owner.email}` }).isDisabled()).toBe(true);
    await expect.poll(() => rowWith(page, owner.email).locator('.badge').textContent()).toBe('owner');

    expectClean(problems, refusals, [SIGNED_OUT_CHECK]);
    await context.close();
  });

  test('a management key is shown once, works from a script, and stops working when revoked', async () => {
    const { context, page, problems, refusals } = await ownerTab();
    await page.getByRole('link', { name: 'Management keys' }).click();
    await page.getByRole('heading', { name: 'No management keys yet' }).waitFor();
    expect(await page.getByText('lets a script or a CI job call /api/v1').isVisible()).toBe(true);

    await page.getByRole('button', { name: 'Create a management key' }).click();
    const create = page.getByRole('dialog', { name: 'Create management key' });
    await create.getByLabel('Name').fill('CI deploy');
    expect(await create.getByLabel('integrations:manage').isChecked()).toBe(true);
    await create.getByLabel('logs:read').check();
    await create.getByRole('button', { name: 'Create key' }).click();

    const shown = page.getByRole('dialog', { name: 'Your new management key' });
    await shown.getByText('This key will not be shown again. Copy it now.').waitFor();
    const field = shown.locator('.copy-field').filter({ has: page.getByText('API key', { exact: true }) });
    const apiKey = ((await field.locator('code').textContent()) ?? '').trim();
    expect(apiKey).toMatch(/^whk_\w+$/);
    await field.getByRole('button', { name: /^Copy API key/ }).click();
    await expect.poll(() => page.evaluate<string>('navigator.clipboard.readText()')).toBe(apiKey);
    const example = shown.locator('.copy-field').filter({ has: page.getByText('Example', { exact: true }) });
    expect(await example.locator('code').textContent()).toBe(`curl -H 'X-API-Key: ${apiKey}' ${server.baseUrl}/api/v1/integrations`);

    expect(await callIntegrations(apiKey)).toBe(200);

    await shown.getByRole('button', { name: 'I have copied the key' }).click();
    await shown.waitFor({ state: 'detached' });
    const row = rowWith(page, 'CI deploy');
    await expect.poll(() => row.locator('.badge').allTextContents()).toEqual(['integrations:manage', 'logs:read', 'active']);
    const prefix = ((await row.locator('code.key-prefix').textContent()) ?? '').replace('…', '');
    expect(apiKey.startsWith(prefix)).toBe(true);
    expect(await page.getByText(apiKey).count()).toBe(0);

    await row.getByRole('button', { name: `Revoke key ${prefix}` }).click();
    const revoke = page.getByRole('dialog', { name: 'Revoke management key' });
    await revoke.getByRole('button', { name: 'Revoke key' }).click();
    await revoke.waitFor({ state: 'detached' });
    await expect.poll(() => row.locator('.badge').last().textContent()).toBe('revoked');
    expect(await row.getByRole('button', { name: /Revoke/ }).count()).toBe(0);
    await expect.poll(() => callIntegrations(apiKey), { timeout: 5_000 }).toBe(401);

    expectClean(problems, refusals);
    await context.close();
  });

  test('the audit log lists those changes newest first, shows a change field by field, and filters by action', async () => {
    const { context, page, problems, refusals } = await ownerTab();
    await page.getByRole('link', { name: 'Audit log' }).click();
    await page.getByRole('heading', { name: 'Audit log', level: 1 }).waitFor();
    const rows = page.locator('tr.audit-row');
    await rows.first().waitFor();
    const actions = await page.locator('tr.audit-row .audit-action').allTextContents();
    // Newest first: the key revoked last, then created; the member's role change after their addition.
    expect(actions.slice(0, 2)).toEqual(['management_key.revoke', 'management_key.create']);
    for (const action of ['member.add', 'member.role_change', 'management_key.create', 'management_key.revoke']) {
      expect(actions).toContain(action);
    }
    expect(actions.indexOf('member.role_change')).toBeLessThan(actions.lastIndexOf('member.add'));

    // Who did it: the owner, by email, with the address they came from.
    const created = rows.filter({ hasText: 'management_key.create' });
    await expect.poll(() => created.locator('.audit-actor').textContent()).toContain(owner.email);
    await expect.poll(() => created.locator('.audit-target').textContent()).toContain('CI deploy');

    // The first role change (the oldest, below the owner round trip), opened with the keyboard: role changed from admin to viewer.
    const roleChange = rows.filter({ hasText: 'member.role_change' }).filter({ hasText: NEW_MEMBER }).last();
    await roleChange.focus();
    await page.keyboard.press('Enter');
    expect(await roleChange.getAttribute('aria-expanded')).toBe('true');
    const diff = page.getByRole('table', { name: 'Changes' });
    const role = diff.locator('tr[data-field="role"]');
    expect(await role.getAttribute('class')).toContain('audit-changed');
    expect(await role.locator('td pre').allTextContents()).toEqual(['"admin"', '"viewer"']);
    expect(await diff.locator('tr[data-field="email"]').getAttribute('class')).toBe('audit-same');

    // Filtered by action (kept in the URL).
    await page.getByLabel('Action').fill('management_key.create');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/action=management_key\.create/);
    await expect.poll(() => page.locator('tr.audit-row .audit-action').allTextContents()).toEqual(['management_key.create']);
    await page.getByRole('button', { name: 'Clear', exact: true }).click();
    await expect.poll(async () => (await page.locator('tr.audit-row').count()) > 1).toBe(true);

    expectClean(problems, refusals);
    await context.close();
  });

  test('the audit log names an integration as it was then, reads enabling and disabling as such, and filters by a person or a thing picked by name', async () => {
    const { context, page, problems, refusals } = await ownerTab();
    const { csrf_token: csrf } = (await (await page.request.get('/api/v1/auth/session')).json()) as { csrf_token: string };
    const made = await page.request.post('/api/v1/integrations', { headers: { 'x-csrf-token': csrf }, data: { name: 'Orders' } });
    expect(made.status()).toBe(201);
    const integrationId = ((await made.json()) as { integration: { id: string } }).integration.id;

    // Disabled and enabled from its page, then renamed.
    await page.goto(`/admin/integrations/${integrationId}`);
    await page.getByRole('button', { name: 'Disable', exact: true }).click();
    await page.getByRole('dialog', { name: 'Disable integration' }).getByRole('button', { name: 'Disable', exact: true }).click();
    await page.getByRole('button', { name: 'Enable', exact: true }).click();
    await page.locator('.page-header .badge', { hasText: 'enabled' }).waitFor();
    await page.getByRole('button', { name: 'Edit', exact: true }).click();
    const edit = page.getByRole('dialog', { name: 'Edit integration' });
    await edit.getByLabel('Name').fill('Orders EU');
    await edit.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('heading', { level: 1, name: 'Orders EU' }).waitFor();
    // A script disables it while changing its description: one update, which still says it disabled it.
    const both = await page.request.patch(`/api/v1/integrations/${integrationId}`, {
      headers: { 'x-csrf-token': csrf },
      data: { enabled: false, description: 'Paused for the move' },
    });
    expect(both.status()).toBe(200);

    await page.getByRole('link', { name: 'Audit log' }).click();
    const rows = page.locator('tr.audit-row').filter({ hasText: integrationId });
    await expect
      .poll(() => rows.locator('.audit-action').allTextContents())
      .toEqual(['integration.update', 'integration.update', 'integration.enable', 'integration.disable', 'integration.create']);
    const [mixed, renamed, enabled, disabled, created] = await rows.all();
    const target = (row: typeof created) => row!.locator('.audit-target');
    // Before the rename: the name then, and the name now.
    for (const row of [created, disabled, enabled]) {
      expect(await target(row).locator('.audit-target-name').textContent()).toBe('Orders ');
      expect(await target(row).locator('.audit-now-named').textContent()).toBe('now named Orders EU ');
    }
    expect(await target(renamed).textContent()).toContain('Orders EU (renamed from Orders)');
    expect(await target(renamed).locator('.audit-now-named').count()).toBe(0);
    expect(await renamed!.locator('.audit-summary').textContent()).toBe('changed name');
    expect(await mixed!.locator('.audit-summary').textContent()).toBe('disabled; changed description');
    expect(await disabled!.locator('.audit-summary').count()).toBe(0);

    // Who: picked by email, sent as the user's id, shown again by email.
    const all = await page.locator('tr.audit-row').count();
    await page.getByLabel('Actor').fill(owner.email);
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/actor_id=usr_/);
    await expect.poll(async () => (await page.locator('tr.audit-row').count()) < all).toBe(true);
    for (const actor of await page.locator('tr.audit-row .audit-actor').allTextContents()) expect(actor).toContain(owner.email);
    expect(await page.getByLabel('Actor').inputValue()).toBe(owner.email);
    await page.getByRole('button', { name: 'Clear', exact: true }).click();
    // Cleared before typing on: the form shows the URL's filters again when it changes, and
    // on a loaded machine that came after the next fill once (and wiped it).
    await page.waitForURL((url) => !url.searchParams.has('actor_id'));
    await expect.poll(() => page.getByLabel('Actor').inputValue()).toBe('');

    // What: an integration by its name (any case), a management key by part of its name.
    await page.getByLabel('Target').fill('orders eu');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(new RegExp(`target_id=${integrationId}`));
    await expect.poll(() => page.locator('tr.audit-row').count()).toBe(5);
    expect(await page.getByLabel('Target').inputValue()).toBe('Orders EU');
    await page.getByLabel('Target').fill('CI dep');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/target_id=key_/);
    await expect
      .poll(() => page.locator('tr.audit-row .audit-action').allTextContents())
      .toEqual(['management_key.revoke', 'management_key.create']);

    // A name that is nothing's: said, and the filters stay as they were.
    const before = page.url();
    await page.getByLabel('Target').fill('no such thing');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByRole('alert').filter({ hasText: 'No integration, destination, member or key matches “no such thing”.' }).waitFor();
    expect(page.url()).toBe(before);

    expectClean(problems, refusals);
    await context.close();
  });

  test('an owner changes the name and the retention, saved across a reload; "Sign out everywhere" ends the session', async () => {
    const { context, page, problems, refusals } = await ownerTab();
    await page.getByRole('link', { name: 'Settings' }).click();
    await page.getByRole('heading', { name: 'Settings', level: 1 }).waitFor();
    const retention = page.locator('.company-retention');
    expect(await retention.textContent()).toBe('30 days');
    expect(await page.locator('.company-id-value code').textContent()).toBe(owner.companyId);

    await page.getByRole('button', { name: 'Edit settings' }).click();
    await page.getByLabel('Company name').fill('Acme Renamed');
    await page.getByLabel('Retention (days)').fill('90');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByRole('status').filter({ hasText: 'Settings saved.' }).waitFor();
    await expect.poll(() => page.locator('.company-name').textContent()).toBe('Acme Renamed');
    await page.reload();
    await expect.poll(() => retention.textContent()).toBe('90 days');
    expect(await page.locator('.company-setting-name').textContent()).toBe('Acme Renamed');

    // Shorter: the panel says what will be deleted and asks first.
    await page.getByRole('button', { name: 'Edit settings' }).click();
    await page.getByLabel('Retention (days)').fill('30');
    await page.getByRole('note').filter({ hasText: 'will be deleted at the next retention run' }).waitFor();
    await page.getByRole('button', { name: 'Save settings' }).click();
    const confirm = page.getByRole('dialog', { name: 'Shorten the retention?' });
    await confirm.getByRole('button', { name: 'Keep 30 days' }).click();
    await confirm.waitFor({ state: 'detached' });
    await page.reload();
    await expect.poll(() => retention.textContent()).toBe('30 days');

    const company = await page.request.get('/api/v1/company');
    expect(((await company.json()) as { retention_days: number }).retention_days).toBe(30);

    // Another browser of the same person, signed in before.
    const other = await ownerTab();
    await other.page.getByRole('heading', { level: 1, name: 'Integrations' }).waitFor();

    // Your account: sign out everywhere ends this session too.
    const account = page.getByRole('region', { name: 'Your account' });
    expect(await account.getByText(owner.email).isVisible()).toBe(true);
    await account.getByRole('button', { name: 'Sign out everywhere' }).click();
    await page.waitForURL('**/admin/login**');
    await page.getByRole('status').filter({ hasText: 'You are signed out, here and on every other device.' }).waitFor();
    expect((await page.request.get('/api/v1/auth/session')).status()).toBe(401);

    // The other browser learns it at its next request, and is told why it is asked to sign in.
    await other.page.getByRole('link', { name: 'Members' }).click();
    await other.page.waitForURL('**/admin/login**');
    await other.page.getByRole('status').filter({ hasText: 'Your session has ended. Sign in again to go on.' }).waitFor();
    expectClean(other.problems, other.refusals, [
      SIGNED_OUT_CHECK,
      { path: '/api/v1/members', status: 401 },
      { path: '/api/v1/invitations', status: 401 },
    ]);
    await other.context.close();

    expectClean(problems, refusals);
    await context.close();
  });

  test('a viewer sees the members and settings without any control to change them', async () => {
    const viewer = await seedUser(server, 'viewer', owner.companyId);
    const { context, page, problems, refusals } = await openTab(browser, server);
    await signInThroughPanel(page, viewer.email, viewer.password);
    expect(await page.getByRole('link', { name: 'Management keys' }).count()).toBe(0);

    await page.getByRole('link', { name: 'Members' }).click();
    await rowWith(page, viewer.email).waitFor();
    await rowWith(page, owner.email).waitFor();
    expect(await page.getByRole('button', { name: /Invite|Add/ }).count()).toBe(0);
    expect(await page.getByRole('button', { name: /Change role|Remove|Revoke/ }).count()).toBe(0);

    await page.getByRole('link', { name: 'Settings' }).click();
    await page.locator('.company-retention').waitFor();
    expect(await page.getByRole('button', { name: 'Edit settings' }).count()).toBe(0);
    expect(await page.getByRole('textbox').count()).toBe(0);
    expect(await page.getByRole('spinbutton').count()).toBe(0);

    await page.goto('/admin/management-keys');
    await page.getByRole('heading', { name: 'Only owners manage these keys' }).waitFor();

    await page.getByRole('link', { name: 'Audit log' }).click();
    await rowWith(page, 'member.add').first().waitFor();

    expectClean(problems, refusals);
    await context.close();
  });
});
