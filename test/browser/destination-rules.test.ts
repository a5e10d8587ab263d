import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { expectClean, launchChromium, openTab, seedUser, SIGNED_OUT_CHECK, signInThroughPanel, startPanelServer, deliveryRow, postWebhook } from '../support/browser.js';
import { cleanupAll, runCliJson, type ServerProcess } from '../support/processes.js';
import { okReceiver, type Receiver } from '../support/receivers.js';

/**
 * A destination's rules in the panel, against a real receiver on loopback: a filter written
 * in the editor (highlighted), refused by the API with its words beside it, tried on stored
 * webhooks (one it refuses, one it sends, showing the request), a transformation that
 * throws tried with its line shown; saved as version 1, then webhooks sent: the refused one
 * is a `filtered` delivery with what skipped it and the version, a repeat is `deduplicated`
 * with a link to the delivery it repeats; and the page at 390 px does not scroll sideways.
 */

let browser: Browser;
let server: ServerProcess;
let receiver: Receiver;
let owner: { companyId: string; email: string; password: string };
let shop: { id: string; api_key: string; webhook_url: string };

const ALLOW_LOOPBACK = { INTAKE_DESTINATION_ALLOW: '127.0.0.1/32' };

beforeAll(async () => {
  browser = await launchChromium();
  receiver = await okReceiver();
  ({ server } = await startPanelServer(ALLOW_LOOPBACK));
  owner = await seedUser(server, 'owner');
  shop = (await runCliJson<typeof shop>(['integration', 'create', '--company', owner.companyId, '--name', 'Shop', '--json'], server.cliEnv)).json;
});

afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await cleanupAll();
});

/** Sends a webhook with the integration's key; its uuid. */
async function sendWebhook(event: string, data: unknown): Promise<string> {
  return postWebhook(shop.webhook_url, shop.api_key, event, data);
}

/** Waits until the row's state reads `state` (Refresh while it does not: settled rows are not read again by themselves). */
async function expectState(page: Page, row: Locator, state: string): Promise<void> {
  const refresh = page.getByRole('region', { name: 'Deliveries' }).getByRole('button', { name: 'Refresh' });
  await expect
    .poll(
      async () => {
        const text = await row.locator('td.state-cell').textContent();
        if (text !== state && (await refresh.isEnabled())) await refresh.click();
        return text;
      },
      { timeout: 20_000 },
    )
    .toBe(state);
}

async function pageOverflow(page: Page): Promise<number> {
  return page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
}

describe('a destination’s rules in the panel', { timeout: 180_000 }, () => {
  test('write a filter, try it on stored webhooks, save it; deliveries are filtered and deduplicated; fits a phone', async () => {
    // Two stored webhooks to try the rules on, before the destination exists (they have no delivery).
    const small = await sendWebhook('order.created', { id: 1, amount: 5 });
    const big = await sendWebhook('order.created', { id: 2, amount: 250 });
    const created = await runCliJson<{ id: string }>(
      ['destination', 'create', '--company', owner.companyId, '--name', 'Orders', '--url', receiver.url, '--integration', shop.id, '--json'],
      { ...server.cliEnv, ...ALLOW_LOOPBACK },
    );
    const destinationId = created.json.id;

    const { context, page, problems, refusals } = await openTab(browser, server);
    await signInThroughPanel(page, owner.email, owner.password);
    await page.goto(`/admin/destinations/${destinationId}`);
    const rules = page.getByRole('region', { name: 'Rules' });
    await rules.getByText('None saved yet.').waitFor();
    await rules.getByText('The standard schedule').waitFor();
    await rules.getByRole('button', { name: 'Edit rules' }).click();

    // The filter is highlighted as typed: keys, numbers, operators' names as keys.
    const filter = rules.getByRole('textbox', { name: 'Filter' });
    await filter.fill('{ "body": { "data": { "amount": { "$gte": true } } } }');
    const highlighted = rules.locator('.code-editor:has(#rules-filter) .code-highlight');
    expect(await highlighted.locator('.code-key').allTextContents()).toEqual(['"body"', '"data"', '"amount"', '"$gte"']);
    expect(await highlighted.locator('.code-literal').allTextContents()).toEqual(['true']);
    expect(await highlighted.textContent()).toContain('{ "body": { "data": { "amount": { "$gte": true } } } }');

    // Refused by the API, its words beside the filter; nothing saved.
    await rules.getByRole('button', { name: 'Save rules' }).click();
    const filterField = rules.locator('.field:has(> .code-editor #rules-filter)');
    await filterField.getByRole('alert').getByText('rules.filter.body.data.amount.$gte: expects a number or a string').waitFor();
    expect(await filter.getAttribute('aria-invalid')).toBe('true');
    expect(await rules.locator('.rules-version').textContent()).toBe('None saved yet.');
    // Tried, the same words; "Try it" says why it did not run.
    const tryPanel = rules.getByRole('region', { name: 'Try it' });
    await tryPanel.getByRole('button', { name: 'Try' }).click();
    await tryPanel.getByRole('alert').getByText('Not tried: the filter has a problem, shown beside it.').waitFor();
    await filterField.getByRole('alert').getByText('rules.filter.body.data.amount.$gte: expects a number or a string').waitFor();

    // Not JSON: said by the editor before any request.
    await filter.fill('{ "body": ');
    await rules.getByRole('button', { name: 'Save rules' }).click();
    await filterField.getByRole('alert').getByText(/^The filter is not valid JSON/).waitFor();

    await filter.fill('{\n  "body": { "data": { "amount": { "$gte": 100 } } }\n}');
    // Changing the part takes its problem away.
    expect(await filterField.getByRole('alert').count()).toBe(0);
    expect(await highlighted.locator('.code-number').allTextContents()).toEqual(['100']);
    expect(await rules.locator('.code-gutter').first().textContent()).toBe('1\n2\n3\n');
    // Deduplicate on the order's id.
    await rules.getByLabel('Deliver a repeated webhook only once within a window').check();
    await rules.getByLabel('Fields').fill('body.data.id');

    // At 1280 px the editor and "Try it" sit side by side.
    const fieldsBox = (await rules.locator('.rules-fields').boundingBox())!;
    const tryBox = (await tryPanel.boundingBox())!;
    expect(tryBox.x).toBeGreaterThanOrEqual(fieldsBox.x + fieldsBox.width);

    // Tried on the small order: the filter refuses it.
    const sample = tryPanel.getByRole('combobox', { name: /^Webhook/ });
    await expect.poll(() => sample.locator('option').count()).toBe(2);
    await sample.selectOption(small);
    await tryPanel.getByRole('button', { name: 'Try' }).click();
    const verdict = tryPanel.locator('.rules-verdict');
    await verdict.getByText('Would not be sent').waitFor();
    expect(await verdict.textContent()).toContain("The destination's filter refuses this webhook");
    expect(await tryPanel.locator('dl.details dd').first().textContent()).toBe('Refused');
    expect(await tryPanel.getByRole('region', { name: 'The request it would send' }).count()).toBe(0);

    // On the big one: it passes, and the request it would send is shown, the body as JSON.
    await sample.selectOption(big);
    await tryPanel.getByRole('button', { name: 'Try' }).click();
    await verdict.getByText('Would be sent').waitFor();
    const request = tryPanel.getByRole('region', { name: 'The request it would send' });
    await request.getByText(`POST ${receiver.url}`).waitFor();
    await request.getByText('application/json', { exact: true }).waitFor();
    const body = request.getByRole('group', { name: 'Request body' });
    await body.locator('.json-number', { hasText: '250' }).waitFor();
    expect(await tryPanel.locator('dl.details dd').first().textContent()).toBe('Passed');
    expect(await tryPanel.locator('dl.details dd').nth(1).textContent()).toMatch(/^[0-9a-f]{16}…$/);

    // A transformation that throws: its message with the line, marked in the line numbers.
    const code = rules.getByRole('textbox', { name: 'Transformation' });
    await code.fill('function transform(request, context) {\n  return request.body.missing.field;\n}');
    const codeHighlight = rules.locator('.code-editor:has(#rules-transformation) .code-highlight');
    expect(await codeHighlight.locator('.code-keyword').allTextContents()).toEqual(['function', 'return']);
    // The sandbox's time limit is measured in wall-clock time: on a busy machine even this
    // can run "out of time", which is not what this test is about, so it is tried again then.
    const thrown = tryPanel.locator('.rules-try-error');
    await expect
      .poll(
        async () => {
          await tryPanel.getByRole('button', { name: 'Try' }).click();
          await verdict.getByText('Would not be sent').waitFor();
          return thrown.textContent();
        },
        { timeout: 20_000 },
      )
      .not.toMatch(/ran out of time/);
    expect(await thrown.textContent()).toMatch(/^TypeError: .*\(line 2\b/);
    expect(await rules.locator('.code-editor:has(#rules-transformation) .code-gutter-error').textContent()).toBe('2\n');
    // The example is one click away, highlighted; then the transformation is left out.
    await rules.getByRole('button', { name: 'Shopify: reshape an order' }).click();
    expect(await code.inputValue()).toContain('function transform(request, context)');
    expect(await codeHighlight.locator('.code-comment').first().textContent()).toBe('// Shopify order → what the billing service takes');
    await tryPanel.getByText('The rules changed since this try').waitFor();
    await code.fill('');

    // Saved: version 1, shown in the summary.
    await rules.getByRole('button', { name: 'Save rules' }).click();
    await rules.getByRole('status').getByText('Saved as version 1.').waitFor();
    expect(await rules.locator('.rules-version').textContent()).toBe('Version 1.');
    const savedFilter = rules.getByRole('group', { name: 'Filter' });
    expect(JSON.parse((await savedFilter.textContent()) ?? '')).toEqual({ body: { data: { amount: { $gte: 100 } } } });
    expect(await rules.locator('dd', { hasText: 'body.data.id' }).textContent()).toBe('body.data.id within 5 min: delivered once');

    // Webhooks sent now: the small one is filtered, the big one delivered, its repeat deduplicated.
    const refused = await sendWebhook('order.created', { id: 3, amount: 7 });
    const sent = await sendWebhook('order.created', { id: 4, amount: 400 });
    const refusedRow = await deliveryRow(page, refused);
    await expectState(page, refusedRow, 'filtered');
    expect(await refusedRow.locator('td.last-attempt-cell').textContent()).toBe('Not sent');
    expect(await refusedRow.locator('td.state-cell').locator('[title]').getAttribute('title')).toBe("The destination's rules did not send it");
    const sentRow = await deliveryRow(page, sent);
    await expectState(page, sentRow, 'succeeded');
    const repeat = await sendWebhook('order.created', { id: 4, amount: 400 });
    const repeatRow = await deliveryRow(page, repeat);
    await expectState(page, repeatRow, 'deduplicated');
    expect(receiver.received.map((r) => JSON.parse(r.body.toString('utf8')).data.id)).toEqual([4]);

    // The filtered delivery's detail: what skipped it, under which version, and no attempt.
    await refusedRow.click();
    const detail = page.getByRole('dialog', { name: 'Delivery details' });
    const facts = detail.locator('dl.details');
    await facts.getByText("The destination's filter refused it").waitFor();
    expect(await facts.locator('dt', { hasText: 'Rules version' }).locator('xpath=following-sibling::dd[1]').textContent()).toBe('1');
    await detail.getByText("No attempt was made: the destination's rules did not send it.").waitFor();
    await page.keyboard.press('Escape');
    await detail.waitFor({ state: 'detached' });

    // The repeat links to the delivery it repeats.
    await repeatRow.click();
    const sentId = await sentRow.getAttribute('data-delivery-id');
    await facts.locator('dt', { hasText: 'Repeats' }).waitFor();
    await facts.getByRole('link', { name: sentId! }).click();
    await facts.locator('dd', { hasText: sentId! }).waitFor();
    await facts.getByText('succeeded', { exact: true }).waitFor();
    await page.keyboard.press('Escape');
    await detail.waitFor({ state: 'detached' });

    // The state filter offers the new states.
    const deliveries = page.getByRole('region', { name: 'Deliveries' });
    await deliveries.getByLabel('State').selectOption('filtered');
    await expect.poll(() => deliveries.locator('tbody tr').count()).toBe(1);
    expect(await deliveries.locator('tbody tr').getAttribute('data-delivery-id')).toBe(await refusedRow.getAttribute('data-delivery-id'));

    // On a phone: the summary, then the editor (one column) and a try's request, all inside the page's width.
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await pageOverflow(page)).toBeLessThanOrEqual(0);
    await rules.getByRole('button', { name: 'Edit rules' }).click();
    await sample.selectOption(big);
    await tryPanel.getByRole('button', { name: 'Try' }).click();
    await request.getByText(`POST ${receiver.url}`).waitFor();
    const phoneFields = (await rules.locator('.rules-fields').boundingBox())!;
    const phoneTry = (await tryPanel.boundingBox())!;
    expect(phoneTry.y).toBeGreaterThanOrEqual(phoneFields.y + phoneFields.height);
    expect(await pageOverflow(page)).toBeLessThanOrEqual(0);
    await page.setViewportSize({ width: 1280, height: 800 });

    expectClean(problems, refusals, [
      SIGNED_OUT_CHECK,
      { path: `/api/v1/destinations/${destinationId}`, status: 400 },
      { path: `/api/v1/destinations/${destinationId}/rules/try`, status: 400 },
    ]);
    await context.close();
  });
});
