import type { IncomingHttpHeaders } from 'node:http';
import type { Browser, Locator, Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { expectClean, launchChromium, openTab, type Refusal, seedUser, signInThroughPanel, startPanelServer, deliveryRow, postWebhook } from '../support/browser.js';
import { cleanupAll, type ServerProcess } from '../support/processes.js';
import { startReceiver, type Receiver } from '../support/receivers.js';

/**
 * Destinations in the panel, against a real receiver on loopback (the server allows
 * 127.0.0.1 through INTAKE_DESTINATION_ALLOW): a destination created with a filter and a
 * header, its secret shown once and verifying what arrives; a delivery that succeeds, one
 * that fails with the receiver's 500 in its attempts and is replayed from the panel once
 * the receiver is fixed; a webhook stored before the destination sent to it; a 410 Gone
 * that disables it, said in words; what a viewer sees (no control); resuming and deleting.
 */

let browser: Browser;
let server: ServerProcess;
let receiver: Receiver;
/** How the receiver answers now. */
let answer: { status: number; body: string } = { status: 200, body: 'thanks' };
let owner: { companyId: string; email: string; password: string };
let viewer: { email: string; password: string };
/** Set by the first test, used by the next ones. */
const shared = { destinationPath: '', webhookAddress: '', apiKey: '' };

beforeAll(async () => {
  browser = await launchChromium();
  receiver = await startReceiver((response) => {
    response.writeHead(answer.status, { 'content-type': 'text/plain' });
    response.end(answer.body);
  });
  ({ server } = await startPanelServer({ INTAKE_DESTINATION_ALLOW: '127.0.0.1/32' }));
  owner = await seedUser(server, 'owner');
  viewer = await seedUser(server, 'viewer', owner.companyId);
});

afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await cleanupAll();
});

async function signedInTab(
  as: { email: string; password: string },
): Promise<{ page: Page; problems: string[]; refusals: Refusal[]; close(): Promise<void> }> {
  const { context, page, problems, refusals } = await openTab(browser, server);
  await signInThroughPanel(page, as.email, as.password);
  return { page, problems, refusals, close: () => context.close() };
}

/** The value of a copy field in `scope`, by its label. */
async function copyFieldValue(scope: Locator, label: string): Promise<string> {
  const field = scope.locator('.copy-field').filter({ has: scope.page().getByText(label, { exact: true }) });
  return ((await field.locator('code').textContent()) ?? '').trim();
}

/** Sends a webhook with the integration's key; its uuid. */
async function sendWebhook(event: string, data: unknown = {}): Promise<string> {
  return postWebhook(shared.webhookAddress, shared.apiKey, event, data);
}

/** Waits until the row's state badge reads `state` (pending rows are read again by the page itself). */
async function expectState(row: Locator, state: string): Promise<void> {
  await expect.poll(() => row.locator('td.state-cell').textContent(), { timeout: 20_000 }).toBe(state);
}

function headerValue(headers: IncomingHttpHeaders, name: string): string {
  const value = headers[name];
  return Array.isArray(value) ? value.join(', ') : (value ?? '');
}

describe('destinations in the panel', { timeout: 180_000 }, () => {
  test('create, deliver, fail with the receiver’s 500, replay; send stored webhooks; pause, edit, rotate; disabled by a 410', async () => {
    const { page, problems, refusals, close } = await signedInTab(owner);

    // An integration to send from, and a webhook stored before any destination exists.
    await page.goto('/admin/integrations');
    await page.getByRole('button', { name: 'Create your first integration' }).click();
    const form = page.getByRole('dialog', { name: 'Create integration' });
    await form.getByLabel('Name').fill('Shop');
    await form.getByRole('button', { name: 'Create integration' }).click();
    const keyDialog = page.getByRole('dialog', { name: 'Your new API key' });
    shared.apiKey = await copyFieldValue(keyDialog, 'API key');
    shared.webhookAddress = await copyFieldValue(keyDialog, 'Webhook address');
    await keyDialog.getByRole('button', { name: 'I have copied the key' }).click();
    await page.getByRole('heading', { name: 'Shop', level: 1 }).waitFor();
    const early = await sendWebhook('order.early', { before: true });

    // Create: only the Shop integration, order.* events, an Authorization header.
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Destinations' }).click();
    await page.getByRole('heading', { name: 'No destinations yet' }).waitFor();
    await page.getByRole('button', { name: 'Create your first destination' }).click();
    const create = page.getByRole('dialog', { name: 'Create destination' });
    await create.getByLabel('Name').fill('Order service');
    await create.getByLabel('URL').fill(receiver.url);
    await create.getByLabel('Only these:').check();
    await create.getByLabel('Shop').check();
    await create.getByLabel('Events').fill('order.*');
    await create.getByRole('button', { name: 'Add header' }).click();
    await create.getByLabel('Header 1 name').fill('Authorization');
    await create.getByLabel('Header 1 value').fill('Bearer receiver-token');
    await create.getByLabel('Timeout (seconds)').fill('5');
    await create.getByRole('button', { name: 'Create destination' }).click();

    const shown = page.getByRole('dialog', { name: 'Your destination’s signing secret' });
    await shown.getByText('This signing secret will not be shown again.').waitFor();
    const secret = await copyFieldValue(shown, 'Signing secret');
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    await shown.getByRole('heading', { name: 'Verify with any Standard Webhooks library' }).waitFor();
    expect(await shown.locator('.destination-snippet pre').first().textContent()).toContain("from 'standardwebhooks'");
    await shown.getByRole('button', { name: 'I have copied the secret' }).click();
    await page.getByRole('heading', { name: 'Order service', level: 1 }).waitFor();
    shared.destinationPath = new URL(page.url()).pathname;
    const settings = page.getByRole('region', { name: 'Settings' });
    await settings.getByRole('link', { name: 'Shop' }).waitFor();
    await settings.locator('code', { hasText: 'order.*' }).waitFor();
    await settings.locator('code', { hasText: 'Authorization' }).waitFor();
    expect(await settings.textContent()).not.toContain('receiver-token');

    // A matching webhook is delivered, signed, with the header; another event is not.
    await sendWebhook('invoice.paid');
    const first = await sendWebhook('order.created', { id: 1 });
    const firstRow = await deliveryRow(page, first);
    await expectState(firstRow, 'succeeded');
    await firstRow.getByText('200 OK').waitFor();
    // The page keeps its live parts current: the last success shows without a reload.
    const lastSuccess = settings.locator('dt', { hasText: 'Last success' }).locator('xpath=following-sibling::dd[1]');
    await expect.poll(() => lastSuccess.textContent(), { timeout: 15_000 }).not.toBe('Never');
    expect(receiver.received).toHaveLength(1);
    const delivered = receiver.received[0]!;
    expect(headerValue(delivered.headers, 'authorization')).toBe('Bearer receiver-token');
    expect(headerValue(delivered.headers, 'webhook-id')).toBe(first);
    const flat = Object.fromEntries(Object.keys(delivered.headers).map((name) => [name, headerValue(delivered.headers, name)]));
    expect(new Webhook(secret).verify(delivered.body.toString('utf8'), flat)).toEqual({ event: 'order.created', data: { id: 1 } });

    // The receiver fails: the attempt shows its 500 and what the receiver said.
    // Its answer one long line, as a minified JSON error often is.
    answer = { status: 500, body: `receiver down ${JSON.stringify({ error: { code: 'upstream_unavailable', trace: 'x'.repeat(600) } })}` };
    const second = await sendWebhook('order.cancelled', { id: 2 });
    const secondRow = await deliveryRow(page, second);
    await expect.poll(() => secondRow.textContent(), { timeout: 15_000 }).toContain('500 Internal Server Error');

    // Retry now says beforehand how many it takes: the one failing and waiting for a retry
    // (opened again should its retry be under way at that moment, when it does not count).
    const retryDialog = page.getByRole('dialog', { name: 'Retry failing deliveries now' });
    await expect
      .poll(
        async () => {
          await page.getByRole('button', { name: 'Retry failing now' }).click();
          await retryDialog.locator('.bulk-count').waitFor();
          const count = await retryDialog.locator('.bulk-count').textContent();
          await retryDialog.getByRole('button', { name: 'Cancel' }).click();
          await retryDialog.waitFor({ state: 'detached' });
          return count;
        },
        { timeout: 15_000 },
      )
      .toBe('1 delivery');
    // On a phone the bulk action is within reach and its dialog says the count, inside the screen.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.getByRole('button', { name: 'Retry failing now' }).click();
    await retryDialog.locator('.bulk-count').waitFor();
    const retryBox = await retryDialog.boundingBox();
    expect(retryBox!.x + retryBox!.width).toBeLessThanOrEqual(390);
    await retryDialog.getByRole('button', { name: 'Cancel' }).click();
    await retryDialog.waitFor({ state: 'detached' });
    await page.setViewportSize({ width: 1280, height: 800 });
    await secondRow.click();
    const detail = page.getByRole('dialog', { name: 'Delivery details' });
    const failedAttempt = detail.locator('.attempts-table tbody tr', { hasText: '500 Internal Server Error' }).first();
    await failedAttempt.waitFor();
    await failedAttempt.locator('summary', { hasText: 'receiver down' }).click();
    await failedAttempt.locator('pre', { hasText: 'upstream_unavailable' }).waitFor();
    // At 1280 px the attempts fit the dialog, the long answer opened: nothing to scroll sideways to.
    const attemptsWrap = detail.locator('.table-wrap', { has: page.locator('.attempts-table') });
    expect(await attemptsWrap.evaluate((wrap) => wrap.scrollWidth - wrap.clientWidth)).toBeLessThanOrEqual(0);

    // Fixed, and replayed from the panel: a new series that succeeds.
    answer = { status: 200, body: 'thanks' };
    await detail.getByRole('button', { name: 'Replay' }).click();
    await detail.locator('dl.details').getByText('Replay 1').waitFor();
    const replayed = detail.locator('.attempts-table tbody tr', { hasText: 'replay 1' }).filter({ hasText: '200 OK' });
    await expect.poll(() => replayed.count(), { timeout: 20_000 }).toBe(1);
    await detail.locator('dl.details').getByText('succeeded', { exact: true }).waitFor();
    expect(await detail.locator('.attempts-table tbody tr', { hasText: '500 Internal Server Error' }).count()).toBeGreaterThanOrEqual(1);
    // The failed attempts' retries are no longer to come: made, or replaced by the replay.
    const nextAttempts = await detail.locator('.attempts-table tbody tr', { hasText: '500 Internal Server Error' }).locator('td:nth-child(5)').allTextContents();
    expect(nextAttempts).toContain('Replaced by replay 1');
    for (const text of nextAttempts) expect(text).toMatch(/^(Made|Replaced by replay 1)$/);
    await page.keyboard.press('Escape');
    await detail.waitFor({ state: 'detached' });
    await expectState(secondRow, 'succeeded');
    const lastForSecond = receiver.received.filter((r) => headerValue(r.headers, 'webhook-id') === second).at(-1)!;
    expect(lastForSecond.headers['x-intake-attempt']).toBe('1');

    // The webhook shows where it went, and its delivery there links back to the delivery.
    await secondRow.click();
    await detail.getByRole('link', { name: second }).click();
    const viewer = page.getByRole('dialog', { name: 'Webhook details' });
    const went = viewer.getByRole('region', { name: 'Deliveries' }).locator('tbody tr', { hasText: 'Order service' });
    await went.waitFor();
    await went.getByText('succeeded', { exact: true }).waitFor();
    await went.getByText('200 OK').waitFor();
    expect(await went.locator('td.numeric').textContent()).toContain('(replay 1)');
    await went.getByRole('link', { name: 'Order service' }).click();
    await page.waitForURL((url) => url.pathname === shared.destinationPath && url.searchParams.get('delivery') !== null);
    await detail.locator('dl.details').getByText('Replay 1').waitFor();
    await page.keyboard.press('Escape');
    await detail.waitFor({ state: 'detached' });

    // Nothing failed for good, so a bulk replay has nothing to do.
    await page.getByRole('button', { name: 'Replay failed deliveries' }).click();
    const replayDialog = page.getByRole('dialog', { name: 'Replay failed deliveries' });
    await replayDialog.locator('.bulk-count', { hasText: '0 failed deliveries' }).waitFor();
    await replayDialog.getByRole('button', { name: 'Replay failed deliveries' }).click();
    await page.getByRole('status').filter({ hasText: 'Replayed 0 failed deliveries' }).waitFor();

    // The webhook stored before the destination existed is sent on request.
    await page.getByRole('button', { name: 'Send stored webhooks' }).click();
    await page.getByRole('dialog', { name: 'Send stored webhooks' }).getByRole('button', { name: 'Send webhooks' }).click();
    await page.getByRole('status').filter({ hasText: 'Created 1 delivery for stored webhooks' }).waitFor();
    await expectState(await deliveryRow(page, early), 'succeeded');

    // Health: the attempts are counted and charted.
    const health = page.getByRole('region', { name: 'Delivery health' });
    await health.getByRole('button', { name: 'Refresh' }).click();
    const attemptsTile = health.locator('.destination-stats li', { hasText: 'Attempts' }).locator('.stat-value');
    await expect.poll(async () => Number(await attemptsTile.textContent()), { timeout: 10_000 }).toBeGreaterThanOrEqual(4);
    await health.getByRole('img', { name: /^Attempts, last 24 hours/ }).waitFor();
    expect(await health.locator('.chart-segment.series-failed').count()).toBeGreaterThanOrEqual(1);

    // Pause holds, resume sends again.
    await page.getByRole('button', { name: 'Pause', exact: true }).click();
    await page.getByText('This destination is paused.').waitFor();
    const held = await sendWebhook('order.held');
    await expectState(await deliveryRow(page, held), 'held');
    await page.locator('.destination-notice').getByRole('button', { name: 'Resume' }).click();
    await page.getByText('This destination is paused.').waitFor({ state: 'detached' });
    await expectState(await deliveryRow(page, held), 'succeeded');

    // Edit: the header's value is never shown; its name is, and the set can be kept.
    await page.getByRole('button', { name: 'Edit', exact: true }).click();
    const edit = page.getByRole('dialog', { name: 'Edit destination' });
    await edit.getByText('Sent with every request:').waitFor();
    await edit.locator('code', { hasText: 'Authorization' }).waitFor();
    expect(await edit.getByLabel('Header 1 value').count()).toBe(0);
    await edit.getByLabel('Name').fill('Order service (EU)');
    await edit.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('heading', { name: 'Order service (EU)', level: 1 }).waitFor();

    // Rotate: a new secret, shown once; both sign during the overlap.
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    await page.getByRole('dialog', { name: 'Rotate signing secret' }).getByRole('button', { name: 'Rotate secret' }).click();
    const rotated = page.getByRole('dialog', { name: 'Your destination’s signing secret' });
    await rotated.getByText('each request carries two signatures').waitFor();
    const next = await copyFieldValue(rotated, 'Signing secret');
    expect(next).not.toBe(secret);
    await rotated.getByRole('button', { name: 'I have copied the secret' }).click();
    await page.getByRole('region', { name: 'Settings' }).getByText('The previous secret signs too until').waitFor();
    // invoice.paid matched no pattern: it never got a delivery.
    expect(await page.getByRole('region', { name: 'Deliveries' }).locator('tbody tr', { hasText: 'invoice.paid' }).count()).toBe(0);

    // 410 Gone: intake turns the destination off at once and says why, offering Resume.
    answer = { status: 410, body: 'gone' };
    await sendWebhook('order.gone');
    const banner = page.locator('.destination-disabled');
    await expect
      .poll(
        async () => {
          if ((await banner.count()) === 0) await page.reload();
          return banner.count();
        },
        { timeout: 15_000 },
      )
      .toBe(1);
    await banner.getByText('The receiver answered 410 Gone').waitFor();
    await banner.getByRole('button', { name: 'Resume' }).waitFor();
    await page.locator('.page-header .badge', { hasText: 'disabled' }).waitFor();

    expectClean(problems, refusals);
    await close();
  });

  test('a viewer sees the destination, its health and deliveries, and no control to change anything', async () => {
    const { page, problems, refusals, close } = await signedInTab(viewer);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Destinations' }).click();
    const row = page.locator('tbody tr', { hasText: 'Order service (EU)' });
    await row.getByText('disabled').waitFor();
    expect(await page.getByRole('button', { name: /^Create/ }).count()).toBe(0);

    await row.click();
    await page.getByRole('heading', { name: 'Order service (EU)', level: 1 }).waitFor();
    const banner = page.locator('.destination-disabled');
    await banner.getByText('The receiver answered 410 Gone').waitFor();
    await banner.getByText('An admin or owner can resume it').waitFor();
    await page.getByRole('region', { name: 'Delivery health' }).locator('.destination-stats').waitFor();
    const deliveries = page.getByRole('region', { name: 'Deliveries' });
    await deliveries.locator('tbody tr').first().waitFor();
    for (const name of ['Edit', 'Pause', 'Resume', 'Rotate secret', 'Delete', 'Replay failed deliveries', 'Send stored webhooks']) {
      expect(await page.getByRole('button', { name, exact: true }).count(), name).toBe(0);
    }
    // On a phone the long URL, the figures and the tables wrap or scroll inside: the page does not scroll sideways.
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth')).toBeLessThanOrEqual(0);
    await page.setViewportSize({ width: 1280, height: 800 });

    // A delivery's attempts are there to read; Replay is not.
    await deliveries.locator('tbody tr', { hasText: 'order.cancelled' }).click();
    const detail = page.getByRole('dialog', { name: 'Delivery details' });
    await detail.locator('.attempts-table tbody tr', { hasText: '500 Internal Server Error' }).first().waitFor();
    expect(await detail.getByRole('button', { name: 'Replay' }).count()).toBe(0);

    // On a phone: the delivery's dialog fits the screen, its attempts scroll inside their frame,
    // and its webhook's viewer lists where the webhook went, each row linking to its delivery.
    await page.setViewportSize({ width: 390, height: 844 });
    const box = await detail.boundingBox();
    expect(box!.x).toBeGreaterThanOrEqual(0);
    expect(box!.x + box!.width).toBeLessThanOrEqual(390);
    const attemptsWrap = detail.locator('.table-wrap', { has: page.locator('.attempts-table') });
    const wrapBox = await attemptsWrap.boundingBox();
    expect(wrapBox!.x + wrapBox!.width).toBeLessThanOrEqual(390);
    expect(await detail.evaluate((dialog) => dialog.scrollWidth - dialog.clientWidth)).toBeLessThanOrEqual(0);
    const webhookLink = detail.locator('dl.details a[href*="webhook="]').first();
    await webhookLink.click();
    const webhookViewer = page.getByRole('dialog', { name: 'Webhook details' });
    const went = webhookViewer.getByRole('region', { name: 'Deliveries' }).locator('tbody tr', { hasText: 'Order service' });
    await went.waitFor();
    expect(await webhookViewer.evaluate((dialog) => dialog.scrollWidth - dialog.clientWidth)).toBeLessThanOrEqual(0);
    await went.getByRole('link', { name: 'Order service' }).click();
    await detail.locator('.attempts-table').waitFor();
    expect(await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth')).toBeLessThanOrEqual(0);
    await page.setViewportSize({ width: 1280, height: 800 });

    expectClean(problems, refusals);
    await close();
  });

  test('resumed from its notice, then deleted', async () => {
    answer = { status: 200, body: 'thanks' };
    const { page, problems, refusals, close } = await signedInTab(owner);
    await page.goto(shared.destinationPath);
    await page.locator('.destination-disabled').getByRole('button', { name: 'Resume' }).click();
    await page.locator('.page-header .badge', { hasText: 'active' }).waitFor();
    expect(await page.locator('.destination-disabled').count()).toBe(0);
    // The delivery the 410 answered was settled; the next webhook goes through.
    const after = await sendWebhook('order.after');
    await expectState(await deliveryRow(page, after), 'succeeded');

    // Picked one by one: two failing deliveries ticked and retried now, once the receiver is back.
    answer = { status: 500, body: 'down again' };
    const picked = [await sendWebhook('order.picked', { n: 1 }), await sendWebhook('order.picked', { n: 2 })];
    const pickedRows = await Promise.all(picked.map((uuid) => deliveryRow(page, uuid)));
    // Past its first attempt and the retry 5 s later, each waits minutes for its next.
    for (const row of pickedRows) {
      await expect.poll(async () => Number(await row.locator('td.numeric').textContent()), { timeout: 30_000 }).toBeGreaterThanOrEqual(2);
    }
    for (const row of pickedRows) await row.getByRole('checkbox').check();
    // Ticking does not open the delivery.
    expect(await page.getByRole('dialog', { name: 'Delivery details' }).count()).toBe(0);
    answer = { status: 200, body: 'thanks' };
    await page.getByRole('button', { name: 'Retry 2 selected now' }).click();
    const selectedDialog = page.getByRole('dialog', { name: 'Retry selected deliveries now' });
    expect(await selectedDialog.locator('.bulk-count').textContent()).toBe('2 deliveries');
    await selectedDialog.getByRole('button', { name: 'Retry selected now' }).click();
    await page.getByRole('status').filter({ hasText: 'Sent 2 selected deliveries again now' }).waitFor();
    for (const row of pickedRows) await expectState(row, 'succeeded');
    expect(await page.getByRole('button', { name: /selected now$/ }).count()).toBe(0);

    // The list keeps each row's figures current too: one more delivery shows without a reload.
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Destinations' }).click();
    const success = page.locator(`tr[data-destination-id="${shared.destinationPath.split('/').pop()}"] td`).nth(3);
    await expect.poll(() => success.textContent()).toMatch(/ of \d+$/);
    const attempts = async () => Number(/ of (\d+)$/.exec((await success.textContent()) ?? '')?.[1]);
    const before = await attempts();
    await sendWebhook('order.listed');
    await expect.poll(attempts, { timeout: 25_000 }).toBeGreaterThan(before);
    await page.locator('tr.clickable', { hasText: 'Order service' }).click();
    await page.getByRole('heading', { name: 'Order service', level: 1 }).waitFor();

    await page.getByRole('button', { name: 'Delete', exact: true }).click();
    const confirm = page.getByRole('dialog', { name: 'Delete destination' });
    await confirm.getByText('Its pending and held deliveries are cancelled.').waitFor();
    await confirm.getByRole('button', { name: 'Delete destination' }).click();
    await page.getByRole('heading', { name: 'No destinations yet' }).waitFor();

    expectClean(problems, refusals);
    await close();
  });
});
