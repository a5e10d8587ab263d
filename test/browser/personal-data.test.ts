import { readFile } from 'node:fs/promises';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { expectClean, launchChromium, openTab, rowWith, seedUser, SIGNED_OUT_CHECK, signInThroughPanel, startPanelServer } from '../support/browser.js';
import { cleanupAll, runCliJson, type ServerProcess } from '../support/processes.js';

/**
 * The Personal data page (issue 40): an owner previews the erasure of a person's value
 * (counts and a sample of the webhooks, never a body), erases it with the typed word, sees
 * it completed with its counts, finds an erased webhook a tombstone in the viewer and
 * downloads the report; a path the API cannot read is refused in its words; a viewer and an
 * admin get no erase control. At 1280 and 390 px, each with a person of its own.
 */

type Integration = { id: string; api_key: string; webhook_url: string };

let browser: Browser;
let server: ServerProcess;
let owner: { companyId: string; email: string; password: string };
let shop: Integration;
let billing: Integration;

beforeAll(async () => {
  browser = await launchChromium();
  ({ server } = await startPanelServer());
  owner = await seedUser(server, 'owner');
  const create = async (name: string) =>
    (await runCliJson<Integration>(['integration', 'create', '--company', owner.companyId, '--name', name, '--json'], server.cliEnv)).json;
  shop = await create('Shop');
  billing = await create('Billing');
});

afterAll(async () => {
  await browser?.close();
  await cleanupAll();
});

/** Sends a webhook as its sender would, with extra headers; its uuid. */
async function send(integration: Integration, event: string, data: unknown, headers: Record<string, string> = {}): Promise<string> {
  const response = await fetch(integration.webhook_url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': integration.api_key, ...headers },
    body: JSON.stringify({ event, data }),
  });
  expect(response.status).toBe(202);
  return ((await response.json()) as { uuid: string }).uuid;
}

/**
 * A person's webhooks: at the path, elsewhere in a body, in a header (of another
 * integration), and one of someone else. `matching` are the ones holding the value.
 */
async function sendWebhooksOf(email: string) {
  const atPath = await send(shop, 'customer.updated', { customer: { email, name: 'A. Person' } });
  const inNote = await send(shop, 'order.paid', { note: `Ring ${email.toUpperCase()} before delivery`, amount: 1200 });
  const inHeader = await send(billing, 'invoice.sent', { invoice: 'inv_1' }, { 'x-customer-email': email });
  const someoneElse = await send(shop, 'customer.updated', { customer: { email: 'someone.else@example.com' } });
  return { atPath, inNote, inHeader, someoneElse };
}

async function overflow(page: Page): Promise<number> {
  return page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
}

/** The main navigation's link: behind the Menu button on a phone. */
async function navLink(page: Page, name: string) {
  const menu = page.getByRole('button', { name: 'Menu' });
  if (await menu.isVisible()) await menu.click();
  return page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name });
}

async function sampleRows(page: Page) {
  const rows = page.getByRole('table', { name: 'Sample of the webhooks' }).locator('tbody tr');
  const all = [];
  for (const row of await rows.all()) {
    const cells = await row.locator('td').allTextContents();
    all.push({ uuid: await row.getAttribute('data-uuid'), event: cells[0], integration: cells[1], matchedIn: cells[3] });
  }
  return all;
}

async function countTiles(page: Page): Promise<Record<string, string>> {
  const tiles = page.locator('.erasure-counts li');
  const entries: [string, string][] = [];
  for (const tile of await tiles.all()) entries.push([(await tile.locator('.stat-label').textContent())!, (await tile.locator('.stat-value').textContent())!]);
  return Object.fromEntries(entries);
}

describe('the Personal data page', { timeout: 180_000 }, () => {
  test('at 1280 px: a bad path refused; a preview counts and samples every place the value is; erased with the typed word; the viewer shows the tombstone; the report downloads', async () => {
    const email = 'Ada.Lovelace@example.com';
    const sent = await sendWebhooksOf(email.toLowerCase());
    const { context, page, problems, refusals } = await openTab(browser, server);
    await signInThroughPanel(page, owner.email, owner.password);
    await (await navLink(page, 'Personal data')).click();
    await page.getByRole('heading', { name: 'Personal data', level: 1 }).waitFor();
    await page.getByRole('heading', { name: 'No erasures yet' }).waitFor();

    // A path the API cannot read: its words beside the form, nothing created.
    const form = page.getByRole('form', { name: 'Search for a person’s data' });
    await form.getByLabel('Value to search for').fill(email);
    await form.getByLabel('JSON paths, one a line').fill('a..b');
    await form.getByRole('button', { name: 'Preview' }).click();
    await form.getByRole('alert').filter({ hasText: '"a..b" is not a path' }).waitFor();
    expect(await form.getByLabel('JSON paths, one a line').getAttribute('aria-invalid')).toBe('true');
    await form.getByLabel('JSON paths, one a line').fill('');

    // The preview: counting, then what it found. The value is never shown back, nor any body.
    await form.getByRole('button', { name: 'Preview' }).click();
    const card = page.getByRole('region', { name: 'Preview of A•••@example.com' });
    await card.locator('.badge', { hasText: 'previewed' }).waitFor({ timeout: 20_000 });
    expect(page.url()).toMatch(/[?&]erasure=ers_/);
    expect(await countTiles(page)).toEqual({ 'Webhooks matching': '3', Deliveries: '0', 'Delivery responses': '0', 'Request-log rows': '3' });
    const sample = await sampleRows(page);
    expect(sample.map((s) => s.uuid).sort()).toEqual([sent.atPath, sent.inNote, sent.inHeader].sort());
    expect(sample.find((s) => s.uuid === sent.inHeader)).toMatchObject({ event: 'invoice.sent', integration: 'Billing', matchedIn: 'header x-customer-email' });
    expect(sample.find((s) => s.uuid === sent.atPath)).toMatchObject({ event: 'customer.updated', integration: 'Shop' });
    expect((await card.textContent())!.toLowerCase()).not.toContain('lovelace');
    expect(await overflow(page)).toBeLessThanOrEqual(0);
    // Nothing changed yet: the webhook still holds the value.
    const before = await page.request.get(`/api/v1/webhooks/${sent.atPath}`, { headers: { 'x-company-id': owner.companyId } });
    expect(await before.text()).toContain(email.toLowerCase());
    const erasureId = new URL(page.url()).searchParams.get('erasure')!;
    const row = page.locator(`tr[data-erasure-id="${erasureId}"]`);
    await row.locator('.badge', { hasText: 'previewed' }).waitFor();

    // Erase: the dialog asks for the word, says it cannot be undone and where the range ends.
    await card.getByRole('button', { name: 'Erase', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: 'Erase personal data' });
    expect(await dialog.textContent()).toContain('This cannot be undone.');
    expect(await dialog.textContent()).toContain('The preview found 3 webhooks. The range is searched again from the start');
    expect(await dialog.textContent()).toMatch(/The range ends at .+, when the preview was made: webhooks received after it are not searched/);
    await dialog.getByLabel('Type “erase” to confirm').fill('eras');
    await dialog.getByRole('button', { name: 'Erase', exact: true }).click();
    await dialog.getByRole('alert').filter({ hasText: 'The word does not match. Type erase to erase.' }).waitFor();
    await dialog.getByLabel('Type “erase” to confirm').fill('erase');
    await dialog.getByRole('button', { name: 'Erase', exact: true }).click();
    await dialog.waitFor({ state: 'detached' });

    // Confirmed: progress, then completed with its counts, in the card and the list.
    const erased = page.getByRole('region', { name: 'Erasure of A•••@example.com' });
    await erased.locator('.badge', { hasText: 'completed' }).waitFor({ timeout: 20_000 });
    expect(await countTiles(page)).toEqual({ 'Webhooks erased': '3', Deliveries: '0', 'Delivery responses': '0', 'Request-log rows': '3' });
    await erased.getByRole('status').filter({ hasText: 'Erased: 3 webhooks now hold only their id' }).waitFor();
    await row.locator('.badge', { hasText: 'completed' }).waitFor();
    expect(await row.locator('td.erasure-found').textContent()).toBe('3 webhooks0 deliveries, 0 responses, 3 request-log rows');
    expect(await row.textContent()).toContain(`by ${owner.email}`);
    expect(await row.getByRole('button', { name: `Erase ${erasureId}` }).count()).toBe(0);

    // The report, downloaded from the list: the value masked, the counts.
    const [download] = await Promise.all([page.waitForEvent('download'), row.getByRole('button', { name: `Download the report of ${erasureId}` }).click()]);
    expect(download.suggestedFilename()).toBe(`${erasureId}.txt`);
    const report = await readFile((await download.path())!, 'utf8');
    expect(report).toContain(`Erasure report ${erasureId}`);
    expect(report).toContain('Value searched for: A•••@example.com');
    expect(report).toContain('Webhooks erased: 3');
    expect(report.toLowerCase()).not.toContain('lovelace');

    // A preview still waiting is listed with Erase, which asks the same question (cancelled here).
    await form.getByLabel('Value to search for').fill('someone.else@example.com');
    await form.getByRole('button', { name: 'Preview' }).click();
    await page.getByRole('region', { name: 'Preview of s•••@example.com' }).locator('.badge', { hasText: 'previewed' }).waitFor({ timeout: 20_000 });
    const waiting = page.locator('tr[data-erasure-id]').first();
    await waiting.locator('.badge', { hasText: 'previewed' }).waitFor();
    await page.getByRole('button', { name: 'Close', exact: true }).click();
    await waiting.getByRole('button', { name: /^Erase ers_/ }).click();
    await dialog.getByText('The preview found 1 webhook.').waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached' });
    expect(await page.locator('tr[data-erasure-id]').count()).toBe(2);

    // An erased webhook, opened from the sample: its tombstone, not the value.
    await page.goto(`/admin/personal-data?erasure=${erasureId}`);
    await erased.getByRole('link', { name: `Open webhook ${sent.inNote}` }).click();
    const viewer = page.getByRole('dialog', { name: 'Webhook details' });
    // Said in words above the facts, not left to the raw JSON.
    await viewer.getByRole('status').filter({ hasText: `Erased by ${erasureId}` }).waitFor();
    await viewer.getByRole('tab', { name: 'Raw body' }).click();
    const raw = JSON.parse((await viewer.locator('pre.raw-body-text').textContent())!) as { erased: { erasure_id: string; erased_by: string } };
    expect(raw.erased.erasure_id).toBe(erasureId);
    expect(raw.erased.erased_by).toMatch(/^user usr_/);
    await viewer.getByRole('tab', { name: 'Headers' }).click();
    await viewer.getByText('No headers were kept for this webhook.').waitFor();
    expect((await viewer.textContent())!.toLowerCase()).not.toContain('lovelace');
    expect(await viewer.locator('.viewer-event').textContent()).toBe('order.paid');

    expectClean(problems, refusals, [SIGNED_OUT_CHECK, { path: '/api/v1/erasures', status: 400 }]);
    await context.close();
  });

  test('at 390 px: one integration and one path; the page, the dialog and the result fit the phone', async () => {
    const email = 'grace.hopper@example.org';
    const sent = await sendWebhooksOf(email);
    const { context, page, problems, refusals } = await openTab(browser, server, { width: 390, height: 844 });
    await signInThroughPanel(page, owner.email, owner.password);
    await (await navLink(page, 'Personal data')).click();
    await page.getByRole('heading', { name: 'Personal data', level: 1 }).waitFor();
    const form = page.getByRole('form', { name: 'Search for a person’s data' });
    await form.getByLabel('Value to search for').fill(email);
    await form.getByLabel('Only these:').check();
    await form.getByLabel('Shop').check();
    await form.getByLabel('JSON paths, one a line').fill('data.customer.email');
    expect(await overflow(page)).toBeLessThanOrEqual(0);
    await form.getByRole('button', { name: 'Preview' }).click();

    const card = page.getByRole('region', { name: 'Preview of g•••@example.org' });
    await card.locator('.badge', { hasText: 'previewed' }).waitFor({ timeout: 20_000 });
    const criteria = await card.locator('.erasure-criteria').textContent();
    expect(criteria).toContain('IntegrationsShop');
    expect(criteria).toContain('WhereAt data.customer.email');
    expect(await countTiles(page)).toEqual({ 'Webhooks matching': '1', Deliveries: '0', 'Delivery responses': '0', 'Request-log rows': '1' });
    expect(await sampleRows(page)).toEqual([{ uuid: sent.atPath, event: 'customer.updated', integration: 'Shop', matchedIn: 'data.customer.email' }]);
    expect(await overflow(page)).toBeLessThanOrEqual(0);

    await card.getByRole('button', { name: 'Erase', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: 'Erase personal data' });
    const box = await dialog.boundingBox();
    expect(box!.x).toBeGreaterThanOrEqual(0);
    expect(box!.x + box!.width).toBeLessThanOrEqual(390);
    await dialog.getByLabel('Type “erase” to confirm').fill('erase');
    await dialog.getByRole('button', { name: 'Erase', exact: true }).click();
    await dialog.waitFor({ state: 'detached' });
    const erased = page.getByRole('region', { name: 'Erasure of g•••@example.org' });
    await erased.locator('.badge', { hasText: 'completed' }).waitFor({ timeout: 20_000 });
    expect(await countTiles(page)).toEqual({ 'Webhooks erased': '1', Deliveries: '0', 'Delivery responses': '0', 'Request-log rows': '1' });
    expect(await overflow(page)).toBeLessThanOrEqual(0);

    // Only the webhook at the path was erased: the note and the header still hold the value.
    const read = async (uuid: string) =>
      (await (await page.request.get(`/api/v1/webhooks/${uuid}`, { headers: { 'x-company-id': owner.companyId } })).json()) as {
        raw_body: string;
        headers: Record<string, string>;
      };
    expect((await read(sent.atPath)).raw_body).not.toContain(email);
    expect((await read(sent.inNote)).raw_body).toContain(email.toUpperCase());
    expect((await read(sent.inHeader)).headers['x-customer-email']).toBe(email);

    await erased.getByRole('link', { name: `Open webhook ${sent.atPath}` }).click();
    const viewer = page.getByRole('dialog', { name: 'Webhook details' });
    // Said in words above the facts, not left to the raw JSON.
    await viewer.getByRole('status').filter({ hasText: /^Erased by ers_/ }).waitFor();
    await viewer.getByRole('tab', { name: 'Raw body' }).click();
    expect(await viewer.locator('pre.raw-body-text').textContent()).toContain('"erased":{"erasure_id":"ers_');
    expect(await viewer.textContent()).not.toContain(email);

    expectClean(problems, refusals);
    await context.close();
  });

  test('a viewer and an admin get no Personal data link and no erase control, at 1280 and 390 px', async () => {
    for (const role of ['viewer', 'admin'] as const) {
      const member = await seedUser(server, role, owner.companyId);
      for (const width of [1280, 390]) {
        const { context, page, problems, refusals } = await openTab(browser, server, { width, height: width === 1280 ? 800 : 844 });
        await signInThroughPanel(page, member.email, member.password);
        await (await navLink(page, 'Audit log')).waitFor();
        expect(await page.getByRole('link', { name: 'Personal data' }).count()).toBe(0);
        await page.goto('/admin/personal-data');
        await page.getByRole('heading', { name: 'Only owners erase personal data' }).waitFor();
        expect(await page.getByRole('button', { name: /Preview|Erase|Report/ }).count()).toBe(0);
        expect(await page.getByRole('textbox').count()).toBe(0);
        expect(await rowWith(page, 'ers_').count()).toBe(0);
        expect(await overflow(page)).toBeLessThanOrEqual(0);
        expectClean(problems, refusals);
        await context.close();
      }
    }
  });
});
