import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PASSWORD } from '../support/api.js';
import { expectClean, launchChromium, openTab, SIGNED_OUT_CHECK, type Refusal, seedUser, signInThroughPanel, startPanelServer } from '../support/browser.js';
import { cleanupAll, type ServerProcess } from '../support/processes.js';

/**
 * The panel's first run, sign-in, integrations and their keys, driven through the UI in
 * Chromium against the compiled server; webhooks are sent with the keys the panel showed.
 */

const OWNER_EMAIL = 'owner@example.com';
const SENDER_AGENT = 'billing-sender/2.1';

let browser: Browser;
let server: ServerProcess;
let setupLink: string;
/** Filled in as the flow goes: the company, the integration made in the panel and its keys. */
const flow: {
  companyId?: string;
  integrationId?: string;
  integrationName: string;
  webhookUrl?: string;
  firstKey?: string;
  currentKey?: string;
} = {
  integrationName: 'Billing events',
};

beforeAll(async () => {
  browser = await launchChromium();
  ({ server, setupLink } = await startPanelServer());
});

afterAll(async () => {
  await browser?.close();
  await cleanupAll();
});

/** Sends one webhook with this key, as a sender would (Node's fetch). */
async function send(url: string, apiKey: string, contentType = 'application/json', data: object = { hello: 'world' }): Promise<number> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': contentType, 'x-api-key': apiKey, 'user-agent': SENDER_AGENT },
    body: JSON.stringify({ event: 'test.ping', data }),
  });
  await response.arrayBuffer();
  return response.status;
}

/** The key an open "Your new API key" dialog shows. */
async function shownKey(page: Page): Promise<string> {
  const dialog = page.getByRole('dialog', { name: 'Your new API key' });
  await dialog.waitFor();
  await expect.poll(() => dialog.getByText('This key will not be shown again. Copy it now.').isVisible()).toBe(true);
  const field = dialog.locator('.copy-field').filter({ has: page.getByText('API key', { exact: true }) });
  const key = (await field.locator('code').textContent())?.trim() ?? '';
  expect(key).toMatch(/^whk_dev_[A-Za-z0-9]+$/);
  return key;
}

async function closeKeyDialog(page: Page): Promise<void> {
  const dialog = page.getByRole('dialog', { name: 'Your new API key' });
  await dialog.getByRole('button', { name: 'I have copied the key' }).click();
  await dialog.waitFor({ state: 'detached' });
}

/** Reloads the page until `locator` shows (bounded): for what the server records just after answering. */
async function reloadUntilVisible(page: Page, locator: ReturnType<Page['locator']>): Promise<void> {
  await expect
    .poll(
      async () => {
        if (await locator.waitFor({ timeout: 2_000 }).then(() => true, () => false)) return true;
        await page.reload();
        return false;
      },
      { timeout: 20_000, interval: 100 },
    )
    .toBe(true);
}

/** The row of the keys table whose prefix starts `apiKey`. */
/**
 * The row of the key table that shows apiKey's prefix. The locator names the row by its prefix,
 * not by its position: the table re-renders (a rotation adds a row at the top) while a test
 * waits on a row it found a moment before.
 */
async function keyRow(page: Page, apiKey: string) {
  const rows = page.locator('.keys-table tbody tr');
  await rows.first().waitFor();
  for (const shown of await rows.locator('code.key-prefix').allTextContents()) {
    const prefix = shown.replace('…', '').trim();
    if (prefix && apiKey.startsWith(prefix)) {
      return rows.filter({ has: page.locator('code.key-prefix', { hasText: shown }) });
    }
  }
  throw new Error(`no key row for ${apiKey.slice(0, 14)}…`);
}

describe('setup, sign-in, integrations and keys in the panel', { timeout: 120_000 }, () => {
  test('the setup link makes the first company and owner, who lands signed in on an empty Integrations page', async () => {
    const { context, page, problems, refusals } = await openTab(browser, server);

    // Without a token: a clear message and the way to sign in.
    await page.goto('/admin/setup');
    await page.getByRole('heading', { name: 'This setup link is incomplete' }).waitFor();
    expect(await page.getByRole('link', { name: 'Go to sign in' }).getAttribute('href')).toBe('/admin/login');

    await page.goto(setupLink);
    await page.getByRole('heading', { name: 'Set up intake' }).waitFor();
    await expect.poll(() => page.getByText('At least 12 characters.').isVisible()).toBe(true);
    await page.getByLabel('Company name').fill('Acme Webhooks');
    await page.getByLabel('Email').fill(OWNER_EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create company and account' }).click();

    await page.waitForURL('**/admin/integrations');
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    await page.getByRole('heading', { name: 'No integrations yet' }).waitFor();
    expect(await page.getByRole('button', { name: 'Create your first integration' }).isVisible()).toBe(true);
    expect(await page.locator('.company-name').textContent()).toBe('Acme Webhooks');

    const session = await page.request.get('/api/v1/auth/session');
    expect(session.status()).toBe(200);
    const body = (await session.json()) as { user: { email: string }; companies: { id: string; role: string }[] };
    expect(body.user.email).toBe(OWNER_EMAIL);
    expect(body.companies).toHaveLength(1);
    expect(body.companies[0]!.role).toBe('owner');
    flow.companyId = body.companies[0]!.id;

    // The link is used up: opening it again and submitting says so, with the way to sign in.
    const { page: again, problems: againProblems, refusals: againRefusals } = await openTab(browser, server);
    await again.goto(setupLink);
    await again.getByLabel('Company name').fill('Second');
    await again.getByLabel('Email').fill('second@example.com');
    await again.getByLabel('Password').fill(PASSWORD);
    await again.getByRole('button', { name: 'Create company and account' }).click();
    await again.getByRole('heading', { name: 'This setup link cannot be used' }).waitFor();
    await again.getByRole('link', { name: 'Go to sign in' }).waitFor();
    expectClean(againProblems, againRefusals, [SIGNED_OUT_CHECK, { path: '/api/v1/auth/setup', status: 403 }]);
    await again.context().close();

    expectClean(problems, refusals);
    await context.close();
  });

  test('sign out, a wrong password is refused with the API’s message, the right one signs in', async () => {
    const { context, page, problems, refusals } = await openTab(browser, server);
    await signInThroughPanel(page, OWNER_EMAIL, PASSWORD);
    await page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await page.waitForURL('**/admin/login**');
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    // Signing out says so.
    await page.getByRole('status').filter({ hasText: 'You are signed out.' }).waitFor();

    await page.getByLabel('Email').fill(OWNER_EMAIL);
    await page.getByLabel('Password').fill('not the right password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'The email or password is not correct.' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/admin/login');
    expect(await page.getByRole('navigation', { name: 'Main' }).count()).toBe(0);

    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    // It went back where sign-out left it (?next=/integrations).
    expect(new URL(page.url()).pathname).toBe('/admin/integrations');

    // Signed in, the sign-in page moves on to the panel.
    await page.goto('/admin/login');
    await page.waitForURL('**/admin/integrations');

    expectClean(problems, refusals, [SIGNED_OUT_CHECK, { path: '/api/v1/auth/login', status: 401 }]);
    await context.close();
  });

  test('create an integration: the key dialog copies the key shown, and a webhook sent with it is accepted', async () => {
    const { context, page, problems, refusals } = await openTab(browser, server);
    await signInThroughPanel(page, OWNER_EMAIL, PASSWORD);
    await page.getByRole('button', { name: 'Create your first integration' }).click();
    const dialog = page.getByRole('dialog', { name: 'Create integration' });
    await dialog.getByLabel('Name').fill(flow.integrationName);
    await dialog.getByLabel('Description').fill('Invoices and payments');
    await dialog.getByLabel('Rate limit (requests per minute)').fill('600');
    await dialog.getByRole('button', { name: 'Create integration' }).click();

    const key = await shownKey(page);
    const keyDialog = page.getByRole('dialog', { name: 'Your new API key' });
    await keyDialog.getByRole('button', { name: /^Copy API key:/ }).click();
    await keyDialog.getByRole('button', { name: /^Copy API key:/ }).filter({ hasText: 'Copied' }).waitFor();
    expect(await page.evaluate<string>('navigator.clipboard.readText()')).toBe(key);

    const address = (await keyDialog.locator('.copy-field').filter({ has: page.getByText('Webhook address', { exact: true }) }).locator('code').textContent())!;
    const singular = (await keyDialog.locator('.copy-field').filter({ has: page.getByText('Alternative address', { exact: true }) }).locator('code').textContent())!;
    expect(address).toMatch(new RegExp(`^${server.baseUrl}/api/webhooks/[^/]+$`));
    expect(singular).toBe(address.replace('/api/webhooks/', '/api/webhook/'));
    const curl = (await keyDialog.locator('.copy-field').filter({ has: page.getByText('curl', { exact: true }) }).locator('code').textContent())!;
    expect(curl).toBe(
      `curl -X POST '${address}' -H 'Content-Type: application/json' -H 'X-API-Key: ${key}' -d '{"event":"test.ping","data":{"hello":"world"}}'`,
    );
    await keyDialog.getByRole('button', { name: /^Copy curl:/ }).click();
    expect(await page.evaluate<string>('navigator.clipboard.readText()')).toBe(curl);

    const copied = key;
    expect(await send(address, copied)).toBe(202);
    expect(await send(singular, copied)).toBe(202);
    expect(await send(address, copied, 'text/plain')).toBe(415);

    // Done: the integration's own page, with its settings.
    await closeKeyDialog(page);
    await page.getByRole('heading', { name: flow.integrationName, level: 1 }).waitFor();
    flow.integrationId = new URL(page.url()).pathname.split('/').pop();
    expect(flow.integrationId).toMatch(/^int_/);
    expect(await page.getByText('600 requests per minute').isVisible()).toBe(true);
    expect(await page.getByRole('link', { name: 'View webhooks' }).getAttribute('href')).toBe(`/admin/webhooks?integration_id=${flow.integrationId}`);
    expect(await page.locator('#main').getByRole('link', { name: 'Requests', exact: true }).getAttribute('href')).toBe(`/admin/requests?integration_id=${flow.integrationId}`);
    // The first key shows as active and used.
    const row = await keyRow(page, key);
    await row.getByText('active').waitFor();

    // The list shows it, with its activity, and opens it.
    await page.getByRole('link', { name: '← Integrations' }).click();
    const listRow = page.getByRole('row').filter({ hasText: flow.integrationName });
    await listRow.getByText('enabled').waitFor();
    await listRow.getByText('2 accepted').waitFor();
    // A refusal reaches the request log just after its answer: reload until it is counted.
    await reloadUntilVisible(page, listRow.getByText('1 refused'));
    // Last webhook and created, both times.
    expect(await listRow.locator('td:nth-child(3) time').count()).toBe(1);
    await listRow.focus();
    await page.keyboard.press('Enter');
    await page.waitForURL(`**/admin/integrations/${flow.integrationId}`);

    flow.webhookUrl = address;
    flow.firstKey = key;
    expectClean(problems, refusals);
    await context.close();
  });

  test('rotate immediately, add a key, revoke it, rotate with a grace period: each key works exactly as the panel says', async () => {
    const { webhookUrl, firstKey, integrationId } = flow;
    if (!webhookUrl || !firstKey || !integrationId) throw new Error('needs the integration of the previous test');
    const { context, page, problems, refusals } = await openTab(browser, server);
    await signInThroughPanel(page, OWNER_EMAIL, PASSWORD);
    await page.goto(`/admin/integrations/${integrationId}`);
    await page.getByRole('heading', { name: 'API keys' }).waitFor();

    // Rotate, the old key stopping at once.
    await page.getByRole('button', { name: 'Rotate keys' }).click();
    let dialog = page.getByRole('dialog', { name: 'Rotate keys' });
    expect(await dialog.getByLabel('Old keys keep working for').inputValue()).toBe('86400');
    await dialog.getByLabel('Old keys keep working for').selectOption({ label: 'Stop immediately' });
    await dialog.getByRole('button', { name: 'Rotate keys' }).click();
    const rotated = await shownKey(page);
    expect(rotated).not.toBe(firstKey);
    await page.getByRole('dialog', { name: 'Your new API key' }).getByText('The previous keys stopped working now.').waitFor();
    expect(await send(webhookUrl, firstKey)).toBe(401);
    expect(await send(webhookUrl, rotated)).toBe(202);
    await closeKeyDialog(page);
    // The old key says what happened to it, and when: not "expired".
    const stopped = await keyRow(page, firstKey);
    await stopped.locator('.badge', { hasText: 'stopped at rotation' }).waitFor();
    expect(await stopped.locator('td').nth(4).textContent()).toMatch(/^Stopped (just now|\d+ seconds? ago), when the keys were rotated$/);
    expect(await stopped.getByText('expired').count()).toBe(0);
    await (await keyRow(page, rotated)).getByText('active').waitFor();

    // Add a key, then revoke it with the confirmation.
    await page.getByRole('button', { name: 'Add key' }).click();
    dialog = page.getByRole('dialog', { name: 'Add key' });
    await dialog.getByLabel('Key name').fill('EU worker');
    await dialog.getByRole('button', { name: 'Create key' }).click();
    const added = await shownKey(page);
    expect(added).not.toBe(rotated);
    await closeKeyDialog(page);
    expect(await send(webhookUrl, added)).toBe(202);

    const addedRow = await keyRow(page, added);
    await addedRow.getByText('EU worker').waitFor();
    await addedRow.getByRole('button', { name: /^Revoke key/ }).click();
    dialog = page.getByRole('dialog', { name: 'Revoke key' });
    await dialog.getByText('stops working at once').waitFor();
    await dialog.getByRole('button', { name: 'Revoke key' }).click();
    await dialog.waitFor({ state: 'detached' });
    await addedRow.locator('.badge', { hasText: 'revoked' }).waitFor();
    expect(await addedRow.getByRole('button', { name: /^Revoke key/ }).count()).toBe(0);
    expect(await send(webhookUrl, added)).toBe(401);
    expect(await send(webhookUrl, rotated)).toBe(202);

    // Rotate with the default grace period: the old key keeps working, and its callers are listed.
    await page.getByRole('button', { name: 'Rotate keys' }).click();
    dialog = page.getByRole('dialog', { name: 'Rotate keys' });
    await dialog.getByRole('button', { name: 'Rotate keys' }).click();
    const newest = await shownKey(page);
    await page.getByRole('dialog', { name: 'Your new API key' }).getByText('The previous keys keep working until').waitFor();
    await closeKeyDialog(page);
    expect(await send(webhookUrl, rotated)).toBe(202);
    expect(await send(webhookUrl, newest)).toBe(202);
    await (await keyRow(page, rotated)).getByText('expiring').waitFor();
    await page.reload();
    const callers = page.getByRole('region', { name: /^Callers of old key/ });
    await callers.getByRole('cell', { name: SENDER_AGENT }).waitFor();
    await callers.getByRole('cell', { name: '127.0.0.1' }).waitFor();
    // rotated was used 3 times: after the first rotation, after the revocation, and in the grace period.
    await callers.getByRole('cell', { name: '3', exact: true }).waitFor();
    flow.currentKey = newest;

    expectClean(problems, refusals);
    await context.close();
  });

  test('a viewer sees the integrations but no control to change them; the API refuses them too', async () => {
    const { companyId, integrationId } = flow;
    if (!companyId || !integrationId) throw new Error('needs the company and integration of the previous tests');
    const viewer = await seedUser(server, 'viewer', companyId);
    const { context, page, problems, refusals } = await openTab(browser, server);
    await signInThroughPanel(page, viewer.email, viewer.password);
    await page.goto('/admin/integrations');

    const row = page.getByRole('row').filter({ hasText: flow.integrationName });
    await row.waitFor();
    expect(await page.getByRole('button', { name: /create/i }).count()).toBe(0);

    await row.click();
    await page.getByRole('heading', { name: flow.integrationName, level: 1 }).waitFor();
    await page.locator('.keys-table tbody tr').first().waitFor();
    expect(await page.locator('.keys-table .badge').count()).toBeGreaterThan(0);
    for (const name of ['Edit', 'Disable', 'Delete', 'Rotate keys', 'Add key']) {
      expect(await page.getByRole('button', { name, exact: true }).count(), name).toBe(0);
    }
    expect(await page.getByRole('button', { name: /^Revoke/ }).count()).toBe(0);
    expect(await page.getByRole('link', { name: 'View webhooks' }).isVisible()).toBe(true);

    const session = (await (await page.request.get('/api/v1/auth/session')).json()) as { csrf_token: string };
    const refused = await page.request.post('/api/v1/integrations', {
      headers: { 'x-csrf-token': session.csrf_token },
      data: { name: 'Not allowed' },
    });
    expect(refused.status()).toBe(403);
    const rotate = await page.request.post(`/api/v1/integrations/${integrationId}/keys/rotate`, {
      headers: { 'x-csrf-token': session.csrf_token },
      data: { grace_seconds: 0 },
    });
    expect(rotate.status()).toBe(403);

    expectClean(problems, refusals);
    await context.close();
  });
  test('edit the limits (an empty rate limit removes it), disable and enable, delete after typing the name', async () => {
    const { webhookUrl, currentKey, integrationId } = flow;
    if (!webhookUrl || !currentKey || !integrationId) throw new Error('needs the integration and key of the previous tests');
    const { context, page, problems, refusals } = await openTab(browser, server);
    await signInThroughPanel(page, OWNER_EMAIL, PASSWORD);
    await page.goto(`/admin/integrations/${integrationId}`);
    await page.getByText('600 requests per minute').waitFor();

    await page.getByRole('button', { name: 'Edit', exact: true }).click();
    let dialog = page.getByRole('dialog', { name: 'Edit integration' });
    expect(await dialog.getByLabel('Name').inputValue()).toBe(flow.integrationName);
    await dialog.getByLabel('Body limit (bytes)').fill('100');
    await dialog.getByLabel('Rate limit (requests per minute)').fill('');
    await dialog.getByRole('button', { name: 'Save changes' }).click();
    await dialog.waitFor({ state: 'detached' });
    await page.locator('dl.details').getByText('100 bytes', { exact: true }).waitFor();
    await page.locator('dl.details').getByText('No limit', { exact: true }).waitFor();
    const stored = (await (await page.request.get(`/api/v1/integrations/${integrationId}`)).json()) as Record<string, unknown>;
    expect(stored).toMatchObject({ body_limit_bytes: 100, rate_limit_per_minute: null });
    expect(await send(webhookUrl, currentKey)).toBe(202);
    expect(await send(webhookUrl, currentKey, 'application/json', { padding: 'x'.repeat(200) })).toBe(413);

    // A refused edit keeps the dialog open with the reason.
    await page.getByRole('button', { name: 'Edit', exact: true }).click();
    dialog = page.getByRole('dialog', { name: 'Edit integration' });
    await dialog.getByLabel('Name').fill('   ');
    await dialog.getByRole('button', { name: 'Save changes' }).click();
    await dialog.getByRole('alert').filter({ hasText: 'Give the integration a name.' }).waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();

    await page.getByRole('button', { name: 'Disable', exact: true }).click();
    dialog = page.getByRole('dialog', { name: 'Disable integration' });
    await dialog.getByRole('button', { name: 'Disable', exact: true }).click();
    await dialog.waitFor({ state: 'detached' });
    await page.locator('.page-header .badge', { hasText: 'disabled' }).waitFor();
    expect(await send(webhookUrl, currentKey)).toBe(403);
    await page.getByRole('button', { name: 'Enable', exact: true }).click();
    await page.locator('.page-header .badge', { hasText: 'enabled' }).waitFor();
    expect(await send(webhookUrl, currentKey)).toBe(202);

    await page.getByRole('button', { name: 'Delete', exact: true }).click();
    dialog = page.getByRole('dialog', { name: 'Delete integration' });
    await dialog.getByLabel('Type the integration’s name to confirm').fill('Billing');
    await dialog.getByRole('button', { name: 'Delete integration' }).click();
    await dialog.getByRole('alert').filter({ hasText: 'The name does not match.' }).waitFor();
    expect(await send(webhookUrl, currentKey)).toBe(202);
    await dialog.getByLabel('Type the integration’s name to confirm').fill(flow.integrationName);
    await dialog.getByRole('button', { name: 'Delete integration' }).click();
    await page.waitForURL('**/admin/integrations');
    await page.getByRole('heading', { name: 'No integrations yet' }).waitFor();
    expect(await send(webhookUrl, currentKey)).toBe(401);

    expectClean(problems, refusals);
    await context.close();
  });
});
