import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { expectClean, launchChromium, openTab, SIGNED_OUT_CHECK, seedUser, signInThroughPanel, startPanelServer } from '../support/browser.js';
import { cleanupAll, ROOT, runCliJson, type ServerProcess } from '../support/processes.js';

/**
 * Every main page of the panel, on a company with data in it: each renders its heading
 * without an error, at 1280 px and on a phone (no sideways scrolling of the page; wide
 * tables scroll inside their frame). `npm run screenshots` runs this file with
 * INTAKE_SCREENSHOTS_DIR=docs/screenshots to refresh the README's pictures.
 */
const SCREENSHOTS = process.env.INTAKE_SCREENSHOTS_DIR;

const PAGES: Array<{ name: string; path: string; heading: RegExp }> = [
  { name: 'integrations', path: '/admin/integrations', heading: /integrations/i },
  { name: 'destinations', path: '/admin/destinations', heading: /destinations/i },
  { name: 'webhooks', path: '/admin/webhooks', heading: /webhooks/i },
  { name: 'requests', path: '/admin/requests', heading: /requests/i },
  { name: 'usage', path: '/admin/usage', heading: /usage/i },
  { name: 'members', path: '/admin/members', heading: /members/i },
  { name: 'management-keys', path: '/admin/management-keys', heading: /management keys/i },
  { name: 'audit-log', path: '/admin/audit-log', heading: /audit log/i },
  { name: 'settings', path: '/admin/settings', heading: /settings/i },
  { name: 'account', path: '/admin/account', heading: /^account$/i },
];

let browser: Browser;
let server: ServerProcess;
let owner: { companyId: string; email: string; password: string };
let integrationId: string;

beforeAll(async () => {
  browser = await launchChromium();
  ({ server } = await startPanelServer({ INTAKE_ENV: 'production' }));
  const seeded = await seedUser(server, 'owner');
  owner = seeded;
  await seedUser(server, 'viewer', seeded.companyId);
  const shop = await runCliJson<{ id: string; api_key: string; webhook_url: string }>(
    ['integration', 'create', '--company', seeded.companyId, '--name', 'Shop', '--json'],
    server.cliEnv,
  );
  await runCliJson(['integration', 'create', '--company', seeded.companyId, '--name', 'Billing', '--json'], server.cliEnv);
  integrationId = shop.json.id;
  const events = ['order.created', 'order.paid', 'order.shipped', 'customer.updated'];
  for (let i = 0; i < 12; i++) {
    const event = events[i % events.length]!;
    const body = { event, data: { id: `ord_${1000 + i}`, amount: 1999 + i * 100, currency: 'eur', customer: { email: `c${i}@example.com` } } };
    const sent = await fetch(shop.json.webhook_url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': shop.json.api_key },
      body: JSON.stringify(body),
    });
    expect(sent.status).toBe(202);
  }
  const refused = await fetch(shop.json.webhook_url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  expect(refused.status).toBe(401);
});
afterAll(async () => {
  await browser?.close();
  await cleanupAll();
});

async function settled(page: Page, heading: RegExp): Promise<void> {
  await page.getByRole('heading', { level: 1, name: heading }).waitFor();
  await page.getByText('Loading…').first().waitFor({ state: 'hidden' });
}

describe('the panel pages', { timeout: 120_000 }, () => {
  test('each main page renders at 1280 px, shows the environment, and runs without errors', async () => {
    const { page, problems, refusals, context } = await openTab(browser, server);
    await signInThroughPanel(page, owner.email, owner.password);
    if (SCREENSHOTS) mkdirSync(join(ROOT, SCREENSHOTS), { recursive: true });
    const shots = [...PAGES, { name: 'integration', path: `/admin/integrations/${integrationId}`, heading: /shop/i }];
    for (const { name, path, heading } of shots) {
      await page.goto(path);
      await settled(page, heading);
      await expect(page.getByRole('note').textContent()).resolves.toMatch(/Production/);
      if (SCREENSHOTS) await page.screenshot({ path: join(ROOT, SCREENSHOTS, `${name}.png`) });
    }

    // The two dialogs people see most: a webhook opened from the log, and a new key.
    await page.goto('/admin/webhooks');
    await settled(page, /webhooks/i);
    await page.locator('tr.clickable').first().click();
    const viewer = page.getByRole('dialog', { name: 'Webhook details' });
    await viewer.locator('.json-key', { hasText: 'amount' }).first().waitFor();
    if (SCREENSHOTS) await page.screenshot({ path: join(ROOT, SCREENSHOTS, 'webhook-viewer.png') });
    await page.keyboard.press('Escape');

    await page.goto('/admin/integrations');
    await settled(page, /integrations/i);
    await page.getByRole('button', { name: 'Create integration' }).first().click();
    await page.getByLabel('Name').fill('Payments');
    await page.getByRole('dialog').getByRole('button', { name: 'Create integration' }).click();
    const keyDialog = page.getByRole('dialog', { name: 'Your new API key' });
    await keyDialog.getByText('This key will not be shown again').waitFor();
    if (SCREENSHOTS) await page.screenshot({ path: join(ROOT, SCREENSHOTS, 'new-key.png') });
    await keyDialog.getByRole('button', { name: 'I have copied the key' }).click();

    // A provider source made in its provider's order: the address first, the secret Stripe shows later.
    for (const [width, name] of [[1280, 'new-stripe-source'], [390, 'phone-new-stripe-source']] as const) {
      await page.setViewportSize({ width, height: width === 1280 ? 800 : 844 });
      await page.goto('/admin/integrations');
      await settled(page, /integrations/i);
      await page.getByRole('button', { name: 'Create integration' }).first().click();
      const form = page.getByRole('dialog', { name: 'Create integration' });
      await form.getByLabel('Name').fill(`Checkout ${width}`);
      await form.getByLabel('Source').selectOption({ label: 'Stripe' });
      await form.getByRole('button', { name: 'Create integration' }).click();
      const connect = page.getByRole('dialog', { name: 'Connect Stripe' });
      await connect.getByRole('button', { name: 'Save secret' }).waitFor();
      expect(await connect.evaluate((dialog) => dialog.scrollWidth - dialog.clientWidth)).toBeLessThanOrEqual(0);
      if (SCREENSHOTS) await page.screenshot({ path: join(ROOT, SCREENSHOTS, `${name}.png`) });
      await connect.getByRole('button', { name: 'Done' }).click();
      await page.getByRole('heading', { level: 1, name: `Checkout ${width}` }).waitFor();
    }
    await page.setViewportSize({ width: 1280, height: 800 });
    expectClean(problems, refusals);
    await context.close();
  });

  test('at 1280 px, both copy buttons of the integration page sit on the line of their address', async () => {
    const { page, problems, refusals, context } = await openTab(browser, server);
    await signInThroughPanel(page, owner.email, owner.password);
    await page.goto(`/admin/integrations/${integrationId}`);
    await settled(page, /shop/i);
    const fields = page.getByRole('region', { name: 'Webhook address' }).locator('.copy-field');
    expect(await fields.count()).toBe(2);
    for (const field of await fields.all()) {
      const address = (await field.locator('code').boundingBox())!;
      const button = (await field.getByRole('button', { name: /^Copy / }).boundingBox())!;
      const middle = button.y + button.height / 2;
      // Beside the address, level with it: not on a line of its own below.
      expect(middle).toBeGreaterThan(address.y);
      expect(middle).toBeLessThan(address.y + address.height);
      expect(button.x).toBeGreaterThanOrEqual(address.x + address.width);
    }
    expectClean(problems, refusals);
    await context.close();
  });

  test('an integration id in the URL that names none (malformed, or deleted since) says so, with the way back', async () => {
    const { page, problems, refusals, context } = await openTab(browser, server);
    const asked: string[] = [];
    page.on('request', (request) => asked.push(new URL(request.url()).pathname + new URL(request.url()).search));
    await signInThroughPanel(page, owner.email, owner.password);
    const { csrf_token: csrf } = (await (await page.request.get('/api/v1/auth/session')).json()) as { csrf_token: string };
    const gone = (
      await runCliJson<{ id: string }>(['integration', 'create', '--company', owner.companyId, '--name', 'Gone', '--json'], server.cliEnv)
    ).json.id;
    expect((await page.request.delete(`/api/v1/integrations/${gone}`, { headers: { 'x-csrf-token': csrf } })).status()).toBe(204);

    const cases = [
      { path: '/admin/integrations/nope', back: undefined },
      { path: `/admin/integrations/${gone}`, back: undefined },
      { path: '/admin/webhooks?integration_id=nope', back: { name: 'Show the webhooks of every integration', to: '/admin/webhooks' } },
      { path: `/admin/webhooks?integration_id=${gone}`, back: { name: 'Show the webhooks of every integration', to: '/admin/webhooks' } },
      { path: '/admin/requests?integration_id=nope', back: { name: 'Show the requests of every integration', to: '/admin/requests' } },
      { path: `/admin/usage?integration_id=${gone}`, back: { name: 'Show the usage of every integration', to: '/admin/usage' } },
    ];
    for (const { path, back } of cases) {
      await page.goto(path);
      await page.getByRole('heading', { level: 1, name: 'This integration does not exist' }).waitFor();
      const main = page.locator('#main');
      // Neither the validator's words nor a log "of nope".
      expect(await main.textContent(), path).not.toMatch(/must match|pattern|Accepted webhooks of|nope/);
      expect(await main.getByText('It may have been deleted').count(), path).toBe(1);
      expect(await main.getByRole('link', { name: 'Go to integrations' }).getAttribute('href')).toBe('/admin/integrations');
      if (back) expect(await main.getByRole('link', { name: back.name }).getAttribute('href'), path).toBe(back.to);
    }

    // Naming an integration that exists, from a log of every integration: the log of that
    // integration, and never "does not exist" on the way, not even for one render.
    await page.goto('/admin/webhooks');
    await page.locator('#main').getByRole('heading', { level: 1 }).waitFor();
    // In the page's own words (the tests are compiled without the DOM's types).
    await page.evaluate(`
      window.missingSeen = false;
      new MutationObserver(() => {
        if (document.querySelector('#main')?.textContent?.includes('This integration does not exist')) window.missingSeen = true;
      }).observe(document.body, { childList: true, subtree: true, characterData: true });
      history.pushState({}, '', '/admin/webhooks?integration_id=${integrationId}');
      dispatchEvent(new PopStateEvent('popstate'));
    `);
    await page.locator('#main').getByText('Shop').first().waitFor();
    expect(await page.evaluate<boolean>('window.missingSeen')).toBe(false);

    // The way back leads to the whole log.
    await page.goto(`/admin/usage?integration_id=${gone}`);
    await page.getByRole('heading', { level: 1, name: 'This integration does not exist' }).waitFor();
    await page.getByRole('link', { name: 'Show the usage of every integration' }).click();
    await settled(page, /usage/i);
    expect(new URL(page.url()).search).toBe('');
    // A malformed id never reaches the API; a deleted one is a 404.
    expect(asked.filter((path) => path.startsWith('/api/') && path.includes('nope'))).toEqual([]);
    expectClean(problems, refusals, [SIGNED_OUT_CHECK, { path: `/api/v1/integrations/${gone}`, status: 404 }]);
    await context.close();
  });

  test('a path of the panel that names no page says so, and leads back', async () => {
    const { page, problems, refusals, context } = await openTab(browser, server);
    await signInThroughPanel(page, owner.email, owner.password);
    await page.goto('/admin/integratoins');
    await page.getByRole('heading', { level: 1, name: 'Page not found' }).waitFor();
    expect(await page.locator('#main').textContent()).toContain('There is no page at /admin/integratoins.');
    // The menu stays, and the way back leads to the panel's first page.
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    await page.locator('#main').getByRole('link', { name: 'Go to integrations' }).click();
    await settled(page, /integrations/i);
    expect(new URL(page.url()).pathname).toBe('/admin/integrations');
    expectClean(problems, refusals);
    await context.close();
  });

  test('on a phone, no page scrolls sideways', async () => {
    const { page, problems, refusals, context } = await openTab(browser, server, { width: 390, height: 844 });
    await signInThroughPanel(page, owner.email, owner.password);
    const extra = [
      { path: `/admin/integrations/${integrationId}`, heading: /shop/i },
      { path: '/admin/webhooks?integration_id=nope', heading: /this integration does not exist/i },
      { path: '/admin/no-such-page', heading: /page not found/i },
    ];
    for (const { path, heading } of [...PAGES, ...extra]) {
      await page.goto(path);
      await settled(page, heading);
      // A string, evaluated in the page: the tests are type-checked without the DOM's types.
      const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
      expect(overflow, path).toBeLessThanOrEqual(1);
      // Titles start at the left, as the text under them does.
      expect((await page.getByRole('heading', { level: 1 }).boundingBox())!.x, path).toBeLessThan(24);
    }
    expectClean(problems, refusals);
    await context.close();
  });

  test('on a phone, the navigation folds behind a Menu button and the charts keep readable labels', async () => {
    const { page, problems, refusals, context } = await openTab(browser, server, { width: 390, height: 844 });
    await signInThroughPanel(page, owner.email, owner.password);
    await page.goto('/admin/usage');
    await settled(page, /usage/i);
    // The sidebar is one line at the top, not the first 300 px of every page.
    expect((await page.locator('aside.sidebar').boundingBox())!.height).toBeLessThan(80);
    const nav = page.getByRole('navigation', { name: 'Main' });
    expect(await nav.isVisible()).toBe(false);
    const menu = page.getByRole('button', { name: 'Menu', exact: true });
    expect(await menu.getAttribute('aria-expanded')).toBe('false');
    if (SCREENSHOTS) await page.screenshot({ path: join(ROOT, SCREENSHOTS, 'phone-usage.png'), fullPage: true });
    await menu.click();
    await nav.waitFor();
    if (SCREENSHOTS) await page.screenshot({ path: join(ROOT, SCREENSHOTS, 'phone-menu.png') });
    expect(await page.getByRole('button', { name: 'Close menu' }).getAttribute('aria-expanded')).toBe('true');
    await nav.getByRole('link', { name: 'Webhooks' }).click();
    await settled(page, /webhooks/i);
    expect(await nav.isVisible()).toBe(false);

    // Charts are drawn for their width: their labels keep their size (they were 5 px here).
    await page.goto('/admin/usage');
    await settled(page, /usage/i);
    const tick = page.locator('.chart-tick').first();
    await tick.waitFor();
    expect((await tick.boundingBox())!.height).toBeGreaterThanOrEqual(9);
    expect(await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth')).toBeLessThanOrEqual(1);

    // At 1280 px the navigation is always there, and there is no Menu button.
    await page.setViewportSize({ width: 1280, height: 800 });
    await nav.waitFor();
    expect(await menu.isVisible()).toBe(false);
    expectClean(problems, refusals);
    await context.close();
  });

  test('the sign-in page before anyone signs in', async () => {
    const { page, problems, refusals, context } = await openTab(browser, server);
    await page.goto('/admin/integrations');
    await page.waitForURL(/\/admin\/login/);
    await page.getByLabel('Email').waitFor();
    if (SCREENSHOTS) await page.screenshot({ path: join(ROOT, SCREENSHOTS, 'login.png') });
    expectClean(problems, refusals);
    await context.close();
  });
});

test('a member of two companies switches between them, and each page shows the chosen one', { timeout: 120_000 }, async () => {
  const other = await runCliJson<{ id: string }>(['company', 'create', '--name', 'Globex', '--json'], server.cliEnv);
  await runCliJson(['user', 'create', '--company', other.json.id, '--email', owner.email, '--password', owner.password, '--role', 'viewer', '--json'], server.cliEnv);
  await runCliJson(['integration', 'create', '--company', other.json.id, '--name', 'Globex orders', '--json'], server.cliEnv);
  const { page, problems, refusals, context } = await openTab(browser, server);
  await signInThroughPanel(page, owner.email, owner.password);
  await page.goto('/admin/integrations');
  const switcher = page.getByLabel('Company');
  await page.getByRole('cell', { name: /^Shop/ }).waitFor();
  await switcher.selectOption({ label: 'Globex' });
  await page.getByRole('cell', { name: /^Globex orders/ }).waitFor();
  expect(await page.getByRole('cell', { name: /^Shop/ }).count()).toBe(0);
  // A viewer in Globex: no way to create there, while the owner could in Acme.
  expect(await page.getByRole('button', { name: 'Create integration' }).count()).toBe(0);
  // The choice is kept across a reload.
  await page.reload();
  await page.getByRole('cell', { name: /^Globex orders/ }).waitFor();
  expectClean(problems, refusals);
  await context.close();
});
