import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { expectClean, launchChromium, openTab, seedUser, SIGNED_OUT_CHECK, signInThroughPanel, startPanelServer } from '../support/browser.js';
import { cleanupAll, type ServerProcess } from '../support/processes.js';

/**
 * Redaction in the panel: an integration's Personal data section, the paths and headers
 * set there (a bad path refused in the API's words), a webhook sent afterwards shown
 * redacted in the viewer, and the Edit redaction dialog's preview of an unsaved redaction
 * (and of hashing) on that webhook, at 1280 and 390 px.
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

async function copyFieldValue(scope: ReturnType<Page['locator']>, label: string): Promise<string> {
  const field = scope.locator('.copy-field').filter({ has: scope.page().getByText(label, { exact: true }) });
  return ((await field.locator('code').textContent()) ?? '').trim();
}

describe('redaction in the panel', { timeout: 120_000 }, () => {
  test('set on the integration page; a webhook sent afterwards is stored and shown redacted, and previewed; a phone fits', async () => {
    const { context, page, problems, refusals } = await openTab(browser, server);
    await signInThroughPanel(page, owner.email, owner.password);
    await page.goto('/admin/integrations');
    await page.getByRole('button', { name: /^Create (your first )?integration$/ }).first().click();
    const form = page.getByRole('dialog', { name: 'Create integration' });
    await form.getByLabel('Name').fill('Checkout');
    await form.getByRole('button', { name: 'Create integration' }).click();
    const keyDialog = page.getByRole('dialog', { name: 'Your new API key' });
    const apiKey = await copyFieldValue(keyDialog, 'API key');
    const address = await copyFieldValue(keyDialog, 'Webhook address');
    await keyDialog.getByRole('button', { name: 'I have copied the key' }).click();
    await page.getByRole('heading', { name: 'Checkout', level: 1 }).waitFor();

    const section = page.getByRole('region', { name: 'Personal data' });
    await section.getByText('Nothing is redacted: webhooks are stored as they came.').waitFor();

    // A path the API cannot read: refused in its words, nothing saved.
    await section.getByRole('button', { name: 'Edit redaction' }).click();
    const dialog = page.getByRole('dialog', { name: 'Edit redaction' });
    await dialog.getByLabel('Body paths, one a line').fill('a..b');
    await dialog.getByRole('button', { name: 'Save redaction' }).click();
    await dialog.getByRole('alert').filter({ hasText: '"a..b" is not a path' }).waitFor();
    await dialog.getByLabel('Body paths, one a line').fill('data.customer.email\n\n$..phone');
    await dialog.getByLabel('Headers, one a line').fill('X-Customer-Email');
    await dialog.getByRole('button', { name: 'Save redaction' }).click();
    await dialog.waitFor({ state: 'detached' });
    expect(await section.locator('.redaction-list code').allTextContents()).toEqual(['data.customer.email', '$..phone', 'x-customer-email']);

    const sent = await fetch(address, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': apiKey, 'x-customer-email': 'ada@example.com' },
      body: JSON.stringify({ event: 'order.paid', data: { customer: { email: 'ada@example.com', phone: '+15551234567', name: 'Ada' } } }),
    });
    expect(sent.status).toBe(202);
    const { uuid } = (await sent.json()) as { uuid: string };
    const integrationId = new URL(page.url()).pathname.split('/').pop()!;
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: width === 1280 ? 800 : 844 });
      await page.goto(`/admin/webhooks?${new URLSearchParams({ integration_id: integrationId, webhook: uuid })}`);
      const viewer = page.getByRole('dialog', { name: 'Webhook details' });
      await viewer.getByRole('tab', { name: 'Raw body' }).click();
      const raw = (await viewer.locator('pre.raw-body-text').textContent()) ?? '';
      expect(raw).toBe('{"event":"order.paid","data":{"customer":{"email":"[redacted]","phone":"[redacted]","name":"Ada"}}}');
      await viewer.getByRole('tab', { name: 'Headers' }).click();
      await viewer.locator('tr', { hasText: 'x-customer-email' }).getByText('[redacted]').waitFor();
      expect(await viewer.textContent()).not.toContain('ada@example.com');
      await page.keyboard.press('Escape');
      await page.goto(`/admin/integrations/${integrationId}`);
      await section.locator('.redaction-list').first().waitFor();
      expect(await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth')).toBeLessThanOrEqual(0);

      // The dialog previews the redaction being edited, unsaved, on that webhook.
      await section.getByRole('button', { name: 'Edit redaction' }).click();
      await dialog.getByLabel('Body paths, one a line').fill('data.customer.email\n$..phone\ndata.customer.name');
      const preview = dialog.getByRole('region', { name: 'Preview' });
      await preview.getByRole('button', { name: 'Preview on the latest webhook' }).click();
      const body = preview.getByRole('group', { name: 'Body as it would be stored' });
      await body.getByText('name: "[redacted]"').waitFor();
      expect(await body.textContent()).not.toContain('Ada');
      await preview.getByText(`Webhook ${uuid}`).waitFor();
      await preview.getByText('3 values of the body and 1 header replaced.').waitFor();
      await preview.getByRole('table', { name: 'Headers as they would be stored' }).locator('tr', { hasText: 'x-customer-email' }).getByText('[redacted]').waitFor();
      expect(await dialog.locator('.dialog-body').evaluate((element) => element.scrollWidth - element.clientWidth)).toBeLessThanOrEqual(0);

      // Edited since: said so until previewed again; hashing shows the hash; a bad path in the API's words.
      await dialog.getByRole('radio', { name: /Its keyed hash/ }).check();
      await preview.getByText('The redaction changed since this preview').waitFor();
      await preview.getByRole('button', { name: 'Preview on the latest webhook' }).click();
      await body.getByText(/name: "hmac-sha256:[0-9a-f]{32}"/).waitFor();
      await dialog.getByLabel('Body paths, one a line').fill('a..b');
      await preview.getByRole('button', { name: 'Preview on the latest webhook' }).click();
      await preview.getByRole('alert').filter({ hasText: '"a..b" is not a path' }).waitFor();

      // Nothing of it was saved.
      await dialog.getByRole('button', { name: 'Cancel' }).click();
      await dialog.waitFor({ state: 'detached' });
      expect(await section.locator('.redaction-list code').allTextContents()).toEqual(['data.customer.email', '$..phone', 'x-customer-email']);
    }
    expectClean(problems, refusals, [
      SIGNED_OUT_CHECK,
      { path: `/api/v1/integrations/${integrationId}`, status: 400 },
      { path: `/api/v1/integrations/${integrationId}/redaction/preview`, status: 400 },
    ]);
    await context.close();
  });
});
