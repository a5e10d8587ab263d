import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { expectClean, launchChromium, openTab, seedUser, SIGNED_OUT_CHECK, signInThroughPanel, startPanelServer } from '../support/browser.js';
import { cleanupAll, type ServerProcess } from '../support/processes.js';

/**
 * An integration's retention in the panel: what it keeps beside its Personal data section
 * (the company's 30 days until set), a value longer than the company's refused in the
 * API's words, a shorter one saved, and back to the company's, at 1280 and 390 px.
 */

let browser: Browser;
let server: ServerProcess;
let owner: { email: string; password: string };

beforeAll(async () => {
  browser = await launchChromium();
  ({ server } = await startPanelServer());
  owner = await seedUser(server, 'owner');
});

afterAll(async () => {
  await browser?.close();
  await cleanupAll();
});

describe('retention per integration in the panel', { timeout: 120_000 }, () => {
  test('shown as the company does, set shorter, refused longer, reset; a phone fits', async () => {
    const { context, page, problems, refusals } = await openTab(browser, server);
    await signInThroughPanel(page, owner.email, owner.password);
    await page.goto('/admin/integrations');
    await page.getByRole('button', { name: /^Create (your first )?integration$/ }).first().click();
    const form = page.getByRole('dialog', { name: 'Create integration' });
    await form.getByLabel('Name').fill('Payments');
    await form.getByRole('button', { name: 'Create integration' }).click();
    await page.getByRole('dialog', { name: 'Your new API key' }).getByRole('button', { name: 'I have copied the key' }).click();
    await page.getByRole('heading', { name: 'Payments', level: 1 }).waitFor();
    const integrationId = new URL(page.url()).pathname.split('/').pop()!;

    const section = page.getByRole('region', { name: 'Retention' });
    await section.getByText('Keeps webhooks as the company does: 30 days', { exact: true }).waitFor();

    await section.getByRole('button', { name: 'Edit retention' }).click();
    const dialog = page.getByRole('dialog', { name: 'Edit retention' });
    await dialog.getByLabel('Days to keep webhooks').fill('45');
    await dialog.getByRole('button', { name: 'Save retention' }).click();
    await dialog.getByRole('alert').filter({ hasText: "the company's retention, 30 days" }).waitFor();
    await dialog.getByLabel('Days to keep webhooks').fill('7');
    await dialog.getByRole('button', { name: 'Save retention' }).click();
    await dialog.waitFor({ state: 'detached' });
    await section.getByText('Keeps webhooks 7 days', { exact: true }).waitFor();

    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: width === 1280 ? 800 : 844 });
      await page.goto(`/admin/integrations/${integrationId}`);
      await section.getByText('Keeps webhooks 7 days', { exact: true }).waitFor();
      expect(await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth')).toBeLessThanOrEqual(0);
    }

    await section.getByRole('button', { name: 'Edit retention' }).click();
    await dialog.getByLabel('Days to keep webhooks').fill('');
    await dialog.getByRole('button', { name: 'Save retention' }).click();
    await dialog.waitFor({ state: 'detached' });
    await section.getByText('Keeps webhooks as the company does: 30 days', { exact: true }).waitFor();
    expectClean(problems, refusals, [SIGNED_OUT_CHECK, { path: `/api/v1/integrations/${integrationId}`, status: 400 }]);
    await context.close();
  });
});
