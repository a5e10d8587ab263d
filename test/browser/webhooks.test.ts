import { randomUUID } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectClean, launchChromium, openTab, type Refusal, SIGNED_OUT_CHECK, seedUser, signInThroughPanel, startPanelServer } from '../support/browser.js';
import { cleanupAll, runCliJson, type ServerProcess } from '../support/processes.js';

/**
 * The log pages of the panel in a real browser: the webhook log with its live tail and
 * viewer (payloads shown as text, never as HTML), filters in the URL, the request log with
 * refused requests and why, and the usage chart.
 */

interface CreatedIntegration extends Record<string, unknown> {
  id: string;
  api_key: string;
  webhook_url: string;
}

const XSS = '<img src=x onerror=alert(1)>';

describe('panel: webhooks, requests and usage', { timeout: 120_000 }, () => {
  let browser: Browser;
  let server: ServerProcess;
  let owner: { companyId: string; email: string; password: string };
  let shop: CreatedIntegration;

  beforeAll(async () => {
    browser = await launchChromium();
    ({ server } = await startPanelServer());
    owner = await seedUser(server, 'owner');
    shop = (
      await runCliJson<CreatedIntegration>(['integration', 'create', '--company', owner.companyId, '--name', 'Shop', '--json'], server.cliEnv)
    ).json;
  });

  afterAll(async () => {
    await browser?.close();
    await cleanupAll();
  });

  /** POSTs a webhook to the Shop integration's address, as a sender would. */
  async function send(body: unknown, apiKey: string | undefined = shop.api_key): Promise<Response> {
    return fetch(shop.webhook_url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(apiKey !== undefined && { 'x-api-key': apiKey }) },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  }

  async function signedInTab(): Promise<{ page: Page; problems: string[]; refusals: Refusal[]; close(): Promise<void> }> {
    const { context, page, problems, refusals } = await openTab(browser, server);
    await signInThroughPanel(page, owner.email, owner.password);
    return { page, problems, refusals, close: () => context.close() };
  }

  it('live tail adds a new webhook without reloading, and the viewer shows its event, payload and raw body', async () => {
    const { page, problems, refusals, close } = await signedInTab();
    await page.goto(`/admin/webhooks?integration_id=${shop.id}`);
    await page.getByRole('heading', { name: 'No webhooks yet' }).waitFor();
    // A mark on the window: it survives only if the page is never reloaded.
    await page.evaluate('window.stillHere = true');

    await page.getByRole('button', { name: 'Live tail', exact: true }).click();
    await page.locator('.live-status').getByText('Live', { exact: true }).waitFor();

    const rawBody = JSON.stringify({ event: 'order.created', data: { order_id: 'A-1001', total: 42.5, paid: true, tags: ['new'] } }, null, 2);
    const response = await send(rawBody);
    expect(response.status).toBe(202);
    const { uuid } = (await response.json()) as { uuid: string };

    const row = page.locator(`tr[data-uuid="${uuid}"]`);
    await row.waitFor();
    // The list's reload on connecting may show the row first; the stream's event marks it new.
    await expect.poll(() => row.getAttribute('class')).toContain('new');
    await expect.poll(() => row.textContent()).toContain('order.created');
    expect(await page.evaluate('window.stillHere')).toBe(true);
    // Still one row: the reload on connecting and the stream do not duplicate it.
    expect(await page.locator('tbody tr').count()).toBe(1);

    await row.click();
    const viewer = page.getByRole('dialog', { name: 'Webhook details' });
    await viewer.waitFor();
    await viewer.locator('.viewer-event', { hasText: 'order.created' }).waitFor();
    await viewer.getByText(uuid, { exact: true }).waitFor();
    await viewer.locator('.json-key', { hasText: 'order_id' }).waitFor();
    await viewer.locator('.json-string', { hasText: '"A-1001"' }).waitFor();
    expect(await viewer.locator('.json-number', { hasText: '42.5' }).count()).toBe(1);
    // Objects fold and unfold.
    await viewer.getByRole('button', { name: 'Collapse data' }).click();
    expect(await viewer.locator('.json-key', { hasText: 'order_id' }).count()).toBe(0);
    await viewer.getByRole('button', { name: 'Expand data' }).click();
    await viewer.locator('.json-key', { hasText: 'order_id' }).waitFor();

    await viewer.getByRole('tab', { name: /Headers/ }).click();
    await viewer.getByRole('cell', { name: 'content-type' }).waitFor();
    expect(await viewer.getByText(shop.api_key).count()).toBe(0);

    await viewer.getByRole('tab', { name: 'Raw body' }).click();
    expect(await viewer.locator('pre.raw-body-text').textContent()).toBe(rawBody);
    await viewer.getByRole('button', { name: /^Copy raw body/ }).click();
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(rawBody);

    // The viewer is in the URL: a shared link opens it.
    expect(new URL(page.url()).searchParams.get('webhook')).toBe(uuid);
    await viewer.getByRole('button', { name: 'Close' }).click();
    await viewer.waitFor({ state: 'detached' });

    await page.getByRole('button', { name: 'Stop live tail' }).click();
    expect(await page.locator('.live-status').getByText('Live', { exact: true }).count()).toBe(0);
    expectClean(problems, refusals);
    await close();
  });

  it('shows markup in a payload as text, in the list and in the viewer, and never runs it', async () => {
    const { page, problems, refusals, close } = await signedInTab();
    const dialogs: string[] = [];
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    await page.goto(`/admin/webhooks?integration_id=${shop.id}`);
    await page.getByRole('button', { name: 'Live tail', exact: true }).click();
    await page.locator('.live-status').getByText('Live', { exact: true }).waitFor();

    const response = await send({ event: 'comment.posted', data: { html: XSS, '<svg onload=alert(2)>': '<b>bold</b>' } });
    expect(response.status).toBe(202);
    const { uuid } = (await response.json()) as { uuid: string };

    const row = page.locator(`tr[data-uuid="${uuid}"]`);
    await row.waitFor();
    await row.getByText(XSS, { exact: false }).waitFor();
    expect(await row.textContent()).toContain('<b>bold</b>');
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.locator('b', { hasText: 'bold' }).count()).toBe(0);

    await row.focus();
    await page.keyboard.press('Enter');
    const viewer = page.getByRole('dialog', { name: 'Webhook details' });
    await viewer.locator('.json-string', { hasText: JSON.stringify(XSS) }).waitFor();
    await viewer.locator('.json-key', { hasText: '<svg onload=alert(2)>' }).waitFor();
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.locator('svg').count()).toBe(0);
    await viewer.getByRole('tab', { name: 'Raw body' }).click();
    expect(await viewer.locator('pre.raw-body-text').textContent()).toContain(XSS);
    expect(await page.locator('img').count()).toBe(0);

    // The same after a full load of the list and the viewer from the URL.
    await page.reload();
    await page.getByRole('dialog', { name: 'Webhook details' }).locator('.json-string', { hasText: JSON.stringify(XSS) }).waitFor();
    await page.locator(`tr[data-uuid="${uuid}"]`).getByText(XSS, { exact: false }).waitFor();
    expect(await page.locator('img').count()).toBe(0);
    expect(dialogs).toEqual([]);
    expectClean(problems, refusals);
    await close();
  });

  it('filters by event, keeps the filter in the URL, and says when nothing matches', async () => {
    for (const event of ['invoice.paid', 'invoice.paid', 'refund.created']) {
      expect((await send({ event, data: { n: 1 } })).status).toBe(202);
    }
    const { page, problems, refusals, close } = await signedInTab();
    await page.goto('/admin/webhooks');
    const rows = page.locator('tbody tr');
    await page.locator('tbody tr', { hasText: 'refund.created' }).waitFor();
    // Unset, the event filter says so: no example that reads as a filter already set.
    expect(await page.getByLabel('Event').getAttribute('placeholder')).toBe('Any event');

    await page.getByLabel('Event').fill('invoice.paid');
    await page.getByLabel('Event').press('Enter');
    await expect.poll(() => new URL(page.url()).searchParams.get('event')).toBe('invoice.paid');
    await expect.poll(() => page.locator('tbody tr', { hasText: 'refund.created' }).count()).toBe(0);
    await expect.poll(() => rows.count()).toBe(2);
    for (const text of await rows.allTextContents()) expect(text).toContain('invoice.paid');

    // A shared link opens the same view.
    await page.goto(page.url());
    expect(await page.getByLabel('Event').inputValue()).toBe('invoice.paid');
    await expect.poll(() => rows.count()).toBe(2);

    // A search in payloads, and a filter nothing matches.
    await page.getByLabel('Event').fill('');
    await page.getByLabel('Search payloads').fill('A-1001');
    await page.getByLabel('Search payloads').press('Enter');
    await expect.poll(() => rows.count()).toBe(1);
    expect(await rows.first().textContent()).toContain('order.created');

    await page.getByLabel('Search payloads').fill('');
    await page.getByLabel('Event').fill('no.such.event');
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.getByRole('heading', { name: 'No webhooks match these filters' }).waitFor();
    await page.getByRole('button', { name: 'Clear filters' }).first().click();
    await page.locator('tbody tr', { hasText: 'refund.created' }).waitFor();
    expectClean(problems, refusals);
    await close();
  });

  it('finds a webhook by the full uuid its sender got, searches payloads for a uuid that is no webhook’s, and copies a row’s whole uuid', async () => {
    const orderUuid = randomUUID();
    const response = await send({ event: 'order.refunded', data: { order: orderUuid } });
    expect(response.status).toBe(202);
    const { uuid } = (await response.json()) as { uuid: string };
    const { page, problems, refusals, close } = await signedInTab();
    await page.goto('/admin/webhooks');
    const row = page.locator(`tr[data-uuid="${uuid}"]`);
    await row.waitFor();
    // The column shows the end of the uuid; its button copies all of it, without opening the row.
    expect(await row.locator('td.webhook-uuid').textContent()).toContain(`…${uuid.slice(-8)}`);
    await row.getByRole('button', { name: /^Copy UUID:/ }).click();
    await row.getByRole('button', { name: /^Copy UUID:/ }).filter({ hasText: 'Copied' }).waitFor();
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(uuid);
    expect(await page.getByRole('dialog').count()).toBe(0);

    // The uuid of the 202, pasted as it came (or in capitals), opens that webhook.
    const search = page.getByLabel('Search payloads or UUID');
    await search.fill(` ${uuid.toUpperCase()} `);
    await search.press('Enter');
    const viewer = page.getByRole('dialog', { name: 'Webhook details' });
    await viewer.getByText(uuid, { exact: true }).waitFor();
    await viewer.locator('.viewer-event', { hasText: 'order.refunded' }).waitFor();
    expect(new URL(page.url()).searchParams.get('webhook')).toBe(uuid);
    expect(new URL(page.url()).searchParams.get('q')).toBeNull();
    expect(await search.inputValue()).toBe('');
    await viewer.getByRole('button', { name: 'Close' }).click();
    await viewer.waitFor({ state: 'detached' });

    // A uuid that is no webhook's may be in payloads: it is searched for, and the page says why.
    await search.fill(orderUuid);
    await search.press('Enter');
    await page.getByRole('status').filter({ hasText: `No webhook has the uuid ${orderUuid}` }).waitFor();
    await expect.poll(() => new URL(page.url()).searchParams.get('q')).toBe(orderUuid);
    await expect.poll(() => page.locator('tbody tr').count()).toBe(1);
    expect(await page.locator('tbody tr').first().getAttribute('data-uuid')).toBe(uuid);
    expect(await page.getByRole('dialog').count()).toBe(0);
    expectClean(problems, refusals, [SIGNED_OUT_CHECK, { path: `/api/v1/webhooks/${orderUuid}`, status: 404 }]);
    await close();
  });

  it('lists refused requests with the reason, filters them by status, and finds one by the request_id its sender got', async () => {
    const wrongKey = await send({ event: 'order.created' }, 'whk_dev_thisIsNotAValidKeyAtAll000000000000');
    expect(wrongKey.status).toBe(401);
    const requestId = ((await wrongKey.json()) as { request_id: string }).request_id;
    expect((await send('not json at all')).status).toBe(400);
    const { page, problems, refusals, close } = await signedInTab();
    await page.goto('/admin/requests');
    const refused = page.locator('tbody tr', { hasText: 'invalid_api_key' });
    // The request log is written just after the answer: refresh until it is there.
    await expect
      .poll(async () => {
        if ((await refused.count()) === 0) await page.getByRole('button', { name: 'Refresh' }).click();
        return refused.count();
      })
      .toBe(1);
    expect(await refused.textContent()).toContain('The provided API key is not valid or has been revoked.');
    expect(await refused.locator('.badge-warn').textContent()).toBe('401');
    expect(await refused.textContent()).toContain('Shop');
    await page.locator('tbody tr', { hasText: 'Accepted' }).first().waitFor();
    expect(await page.locator('tbody tr', { hasText: 'Accepted' }).first().locator('.badge-good').count()).toBe(1);

    await page.getByLabel('Status').selectOption('4xx');
    await expect.poll(() => new URL(page.url()).searchParams.get('status_class')).toBe('4xx');
    await expect.poll(() => page.locator('tbody tr', { hasText: 'Accepted' }).count()).toBe(0);
    await page.locator('tbody tr', { hasText: 'invalid_json' }).waitFor();

    await refused.focus();
    await page.keyboard.press('Enter');
    const details = page.getByRole('dialog', { name: 'Request details' });
    await details.getByText('invalid_api_key').waitFor();
    await details.getByText('None stored').waitFor();
    await details.getByText(requestId).first().waitFor();
    await page.keyboard.press('Escape');
    await details.waitFor({ state: 'detached' });

    // One id: the request_id of the answer is the log's, and the search box finds it.
    await page.getByLabel('Status').selectOption('');
    await page.getByLabel('Request ID').fill(requestId);
    await page.getByLabel('Request ID').press('Enter');
    await expect.poll(() => new URL(page.url()).searchParams.get('id')).toBe(requestId);
    await expect.poll(() => page.locator('tbody tr').count()).toBe(1);
    expect(await page.locator('tbody tr').first().textContent()).toContain('invalid_api_key');

    // On a phone the search and its answer are there too, opened from the address the id makes.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`/admin/requests?${new URLSearchParams({ id: requestId })}`);
    expect(await page.getByLabel('Request ID').inputValue()).toBe(requestId);
    await expect.poll(() => page.locator('tbody tr').count()).toBe(1);
    await page.locator('tbody tr').first().click();
    await details.getByText(requestId).first().waitFor();
    const box = await details.boundingBox();
    expect(box!.x + box!.width).toBeLessThanOrEqual(390);
    expect(await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth')).toBeLessThanOrEqual(0);
    await page.setViewportSize({ width: 1280, height: 800 });
    expectClean(problems, refusals);
    await close();
  });

  it('draws usage as stacked bars with a breakdown per integration and per key', async () => {
    expect((await send({ event: 'usage.accepted' })).status).toBe(202);
    expect((await send({ event: 'usage.refused' }, 'wrong-key')).status).toBe(401);
    const { page, problems, refusals, close } = await signedInTab();
    await page.goto('/admin/usage');
    const segments = page.locator('svg.chart-svg rect.chart-segment');
    const tooltips = page.locator('svg.chart-svg rect.chart-segment title');
    // Usage is counted from the request log, written just after each answer.
    await expect
      .poll(async () => {
        const texts = await tooltips.allTextContents();
        const seen = texts.some((t) => t.includes('accepted')) && texts.some((t) => t.includes('rejected'));
        if (!seen) await page.getByRole('button', { name: 'Refresh' }).click();
        return seen;
      })
      .toBe(true);
    expect(await segments.count()).toBeGreaterThanOrEqual(2);

    const breakdown = page.locator('table.breakdown-table');
    await breakdown.locator('tbody tr', { hasText: 'Shop' }).waitFor();
    await breakdown.locator('tfoot tr', { hasText: 'Total' }).waitFor();

    await page.getByRole('button', { name: 'Last hour' }).click();
    await expect.poll(() => new URL(page.url()).searchParams.get('range')).toBe('1h');
    await page.getByRole('heading', { name: /Requests per minute/ }).waitFor();
    await segments.first().waitFor();

    await page.getByRole('button', { name: 'By key' }).click();
    await breakdown.locator('tbody tr', { hasText: 'No valid key' }).waitFor();
    await breakdown.locator('tbody code', { hasText: /^whk_dev_/ }).first().waitFor();
    expectClean(problems, refusals);
    await close();
  });
});
