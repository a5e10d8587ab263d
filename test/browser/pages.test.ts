import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { expectClean, launchChromium, openTab, seedUser, signInThroughPanel, startPanelServer } from '../support/browser.js';
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
let owner: { email: string; password: string };
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
    expectClean(problems, refusals);
    await context.close();
  });

  test('on a phone, no page scrolls sideways', async () => {
    const { page, problems, refusals, context } = await openTab(browser, server, { width: 390, height: 844 });
    await signInThroughPanel(page, owner.email, owner.password);
    for (const { path, heading } of PAGES) {
      await page.goto(path);
      await settled(page, heading);
      // A string, evaluated in the page: the tests are type-checked without the DOM's types.
      const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
      expect(overflow, path).toBeLessThanOrEqual(1);
    }
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
