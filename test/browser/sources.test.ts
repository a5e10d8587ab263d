import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { expectClean, launchChromium, openTab, type Refusal, seedUser, SIGNED_OUT_CHECK, signInThroughPanel, startPanelServer } from '../support/browser.js';
import { cleanupAll, type ServerProcess } from '../support/processes.js';

/**
 * Sources in the panel: an integration created with a provider's signature as a second way
 * in, that provider's setup steps, a signed test sent from the page, a badly signed request
 * refused with its reason in words, a generated secret shown once and rotated, and a Stripe
 * source made in Stripe's own order (the address first, the secret once Stripe shows it).
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

async function signedInTab(): Promise<{ page: Page; problems: string[]; refusals: Refusal[]; close(): Promise<void> }> {
  const { context, page, problems, refusals } = await openTab(browser, server);
  await signInThroughPanel(page, owner.email, owner.password);
  return { page, problems, refusals, close: () => context.close() };
}

/** Fills the Create integration dialog with a name and a source; the secret only when given. */
async function createIntegration(page: Page, name: string, source: string, secret?: string): Promise<void> {
  await page.goto('/admin/integrations');
  await page.getByRole('button', { name: /^Create (your first )?integration$/ }).first().click();
  const dialog = page.getByRole('dialog', { name: 'Create integration' });
  await dialog.getByLabel('Name').fill(name);
  await dialog.getByLabel('Source').selectOption({ label: source });
  if (secret !== undefined) await dialog.getByLabel('Signing secret').fill(secret);
  await dialog.getByRole('button', { name: 'Create integration' }).click();
  await page.getByRole('dialog', { name: `Connect ${source}` }).waitFor();
}

/** The value of a copy field in `scope`, by its label. */
async function copyFieldValue(scope: ReturnType<Page['locator']>, label: string): Promise<string> {
  const field = scope.locator('.copy-field').filter({ has: scope.page().getByText(label, { exact: true }) });
  return ((await field.locator('code').textContent()) ?? '').trim();
}

/** A GitHub delivery signed with `secret`, as GitHub sends it; the status answered. */
async function sendGitHub(url: string, secret: string): Promise<number> {
  // A body of its own each time: the same signed bytes again would be a replay (200).
  const body = JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: 1, n: randomBytes(8).toString('hex') });
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-github-event': 'ping',
      'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`,
    },
    body,
  });
  await response.arrayBuffer();
  return response.status;
}

describe('sources in the panel', { timeout: 120_000 }, () => {
  test('a Stripe source: setup steps, a signed test accepted and stored, a bad signature refused with its reason', async () => {
    const { page, problems, refusals, close } = await signedInTab();
    // Stripe issues its secrets (whsec_ and letters and digits): pasted, now or once Stripe shows it.
    const pasted = `whsec_${randomBytes(32).toString('base64').replace(/[^A-Za-z0-9]/g, '')}`;
    await page.goto('/admin/integrations');
    await page.getByRole('button', { name: 'Create your first integration' }).click();
    const form = page.getByRole('dialog', { name: 'Create integration' });
    await form.getByLabel('Source').selectOption({ label: 'Stripe' });
    const secretField = form.getByLabel('Signing secret');
    expect(await secretField.getAttribute('type')).toBe('password');
    expect(await secretField.getAttribute('placeholder')).toBe('whsec_…');
    await expect.poll(() => form.locator('.field-hint', { hasText: 'Leave empty to get the address first' }).count()).toBe(1);
    expect(await secretField.getAttribute('required')).toBeNull();
    // The source comes before the limits, which few change.
    const order = await form.evaluate((dialog) => [...dialog.querySelectorAll('.field-label')].map((label) => label.textContent));
    expect(order.indexOf('Source')).toBeLessThan(order.indexOf('Body limit (bytes)'));
    expect(order.indexOf('Name')).toBeLessThan(order.indexOf('Source'));
    await page.keyboard.press('Escape');

    await createIntegration(page, 'Payments', 'Stripe', pasted);
    const keyDialog = page.getByRole('dialog', { name: 'Connect Stripe' });
    // A pasted secret is not shown back.
    await keyDialog.locator('.copy-field', { hasText: 'Webhook address' }).waitFor();
    expect(await keyDialog.locator('.copy-field', { hasText: 'Signing secret' }).count()).toBe(0);
    await keyDialog.getByText('The signing secret you pasted verifies Stripe’s webhooks from now on.').waitFor();
    await keyDialog.getByRole('button', { name: 'Done' }).click();
    await page.getByRole('heading', { name: 'Payments', level: 1 }).waitFor();
    const integrationId = new URL(page.url()).pathname.split('/').pop()!;

    const source = page.getByRole('region', { name: 'Source', exact: true });
    await source.locator('dl.details').getByText('Stripe', { exact: true }).waitFor();
    await source.locator('dl.details').getByText('Stripe-Signature', { exact: true }).waitFor();
    const address = ((await source.locator('.source-address code').textContent()) ?? '').trim();
    expect(address).toMatch(new RegExp(`^${server.baseUrl}/api/webhooks/[^/?]+$`));
    await source.getByRole('heading', { name: 'Set up Stripe' }).waitFor();
    const steps = source.locator('ol.source-guide');
    await steps.getByText('Developers → Webhooks → Add endpoint').waitFor();
    await steps.getByText('Reveal').waitFor();
    expect(await steps.textContent()).toContain(address);
    await expect.poll(() => source.locator('.source-secrets-table tbody tr').count()).toBe(1);
    // On a phone the long address and the steps wrap: the page does not scroll sideways.
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth')).toBeLessThanOrEqual(0);
    await page.setViewportSize({ width: 1280, height: 800 });

    // What the address refuses is said in words: disabled, it answers 403 whatever the signature.
    await page.getByRole('button', { name: 'Disable', exact: true }).click();
    await page.getByRole('dialog', { name: 'Disable integration' }).getByRole('button', { name: 'Disable', exact: true }).click();
    await page.locator('.page-header .badge', { hasText: 'disabled' }).waitFor();
    await source.getByRole('button', { name: 'Send a test' }).click();
    await source.getByRole('status').filter({ hasText: /^Refused \(403\): \S/ }).waitFor();
    await page.getByRole('button', { name: 'Enable', exact: true }).click();
    await page.locator('.page-header .badge', { hasText: 'enabled' }).waitFor();

    // The test is signed with the pasted secret and goes through the address like any webhook.
    await source.getByRole('button', { name: 'Send a test' }).click();
    const outcome = source.getByRole('status').filter({ hasText: /^Accepted/ });
    await outcome.waitFor();
    expect(await source.getByRole('status').filter({ hasText: /^Refused/ }).count()).toBe(0);
    const uuid = ((await outcome.getByRole('link').textContent()) ?? '').trim();
    expect(await outcome.textContent()).toBe(`Accepted: webhook ${uuid}. It is stored marked as a test and sent to no destination.`);
    await outcome.getByRole('link').click();
    await page.waitForURL((url) => url.pathname === '/admin/webhooks' && url.searchParams.get('webhook') === uuid);
    const viewer = page.getByRole('dialog', { name: 'Webhook details' });
    await viewer.locator('.viewer-event', { hasText: 'payment_intent.succeeded' }).waitFor();
    // Marked as the test it is, wherever it is opened.
    expect(await viewer.locator('.viewer-test').textContent()).toBe('Test');
    await page.keyboard.press('Escape');
    await page.locator(`tr[data-uuid="${uuid}"]`).getByText('payment_intent.succeeded').waitFor();

    // Signed with another secret: refused, and the request log says why in words.
    const body = JSON.stringify({ id: 'evt_forged', object: 'event', type: 'charge.succeeded', data: { object: {} } });
    const t = Math.floor(Date.now() / 1000);
    const forged = createHmac('sha256', 'whsec_notTheSecretAtAll00000000').update(`${t}.${body}`).digest('hex');
    const refused = await fetch(address, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': `t=${t},v1=${forged}` },
      body,
    });
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({ code: 'invalid_signature' });

    await page.goto(`/admin/requests?integration_id=${integrationId}`);
    const row = page.locator('tbody tr', { hasText: 'invalid_signature' });
    await expect
      .poll(async () => {
        if ((await row.count()) === 0) await page.getByRole('button', { name: 'Refresh' }).click();
        return row.count();
      })
      .toBe(1);
    expect(await row.locator('td.reason').textContent()).toBe('signature does not match the secret');
    expect(await row.locator('.badge-warn').textContent()).toBe('401');
    await page.locator('tbody tr', { hasText: 'Accepted' }).waitFor();

    expectClean(problems, refusals);
    await close();
  });

  test('a GitHub source: the generated secret is shown once, works, and rotates with an overlap', async () => {
    const { page, problems, refusals, close } = await signedInTab();
    await createIntegration(page, 'Repository events', 'GitHub');
    const keyDialog = page.getByRole('dialog', { name: 'Connect GitHub' });
    await keyDialog.getByText('This signing secret will not be shown again.').waitFor();
    const first = await copyFieldValue(keyDialog, 'Signing secret');
    expect(first.length).toBeGreaterThanOrEqual(32);
    const address = await copyFieldValue(keyDialog, 'Webhook address');
    expect(await sendGitHub(address, first)).toBe(202);
    // GitHub takes ours: the address, then the secret, then GitHub's page; the API key comes after them.
    const headings = await keyDialog.locator('h3').allTextContents();
    expect(headings).toEqual(['Give GitHub this address', 'Its signing secret', 'On GitHub’s side', 'Send a test', 'API key']);
    await keyDialog.getByRole('button', { name: 'Done' }).click();
    await page.getByRole('heading', { name: 'Repository events', level: 1 }).waitFor();

    const source = page.getByRole('region', { name: 'Source', exact: true });
    await source.locator('ol.source-guide').getByText('Settings → Webhooks → Add webhook').waitFor();
    const rows = source.locator('.source-secrets-table tbody tr');
    await expect.poll(() => rows.count()).toBe(1);

    await source.getByRole('button', { name: 'Rotate secret' }).click();
    const rotate = page.getByRole('dialog', { name: 'Rotate signing secret' });
    expect(await rotate.getByLabel('Previous secrets keep verifying for').inputValue()).toBe('86400');
    await rotate.getByLabel('Previous secrets keep verifying for').selectOption({ label: '1 hour' });
    await rotate.getByRole('button', { name: 'Rotate secret' }).click();
    const shown = page.getByRole('dialog', { name: 'Your new signing secret' });
    await shown.getByText('The previous secrets keep verifying until').waitFor();
    const second = await copyFieldValue(shown, 'Signing secret');
    expect(second).not.toBe(first);
    await shown.getByRole('button', { name: 'I have copied the secret' }).click();

    // Both verify during the overlap; the old one says when it stops.
    await expect.poll(() => rows.count()).toBe(2);
    await rows.filter({ hasText: 'Stops at' }).waitFor();
    expect(await rows.filter({ hasText: 'When rotated' }).count()).toBe(1);
    expect(await sendGitHub(address, first)).toBe(202);
    expect(await sendGitHub(address, second)).toBe(202);

    // Stopping the old one ends the overlap at once.
    await rows.filter({ hasText: 'Stops at' }).getByRole('button', { name: /^Stop secret/ }).click();
    const stop = page.getByRole('dialog', { name: 'Stop signing secret' });
    await stop.getByRole('button', { name: 'Stop now' }).click();
    await stop.waitFor({ state: 'detached' });
    await expect.poll(() => rows.count()).toBe(1);
    expect(await sendGitHub(address, first)).toBe(401);
    expect(await sendGitHub(address, second)).toBe(202);

    // Changing the type warns that the secrets go at once; cancelled, nothing changes.
    await source.getByRole('button', { name: 'Change source' }).click();
    const change = page.getByRole('dialog', { name: 'Change source' });
    expect(await change.getByLabel('Source').inputValue()).toBe('github');
    await change.getByLabel('Signing secret').waitFor();
    expect(await change.getByLabel('Signing secret').getAttribute('required')).toBeNull();
    await change.getByLabel('Source').selectOption({ label: 'Stripe' });
    await change.getByRole('alert').filter({ hasText: 'A new type replaces the signing secrets at once' }).waitFor();
    await change.getByRole('button', { name: 'Cancel' }).click();
    await change.waitFor({ state: 'detached' });
    expect(await sendGitHub(address, second)).toBe(202);

    expectClean(problems, refusals);
    await close();
  });

  test("a Stripe source in Stripe's order: the address first, webhooks refused saying the secret is awaited, the secret pasted, a test; at 1280 and 390 px", async () => {
    const stripe = new Stripe('sk_test_unused');
    for (const width of [1280, 390]) {
      const { page, problems, refusals, close } = await signedInTab();
      await page.setViewportSize({ width, height: 844 });
      const name = `Checkout ${width}`;
      await page.goto('/admin/integrations');
      await page.getByRole('button', { name: /^Create (your first )?integration$/ }).first().click();
      const form = page.getByRole('dialog', { name: 'Create integration' });
      await form.getByLabel('Name').fill(name);
      await form.getByLabel('Source').selectOption({ label: 'Stripe' });
      await form.getByText('Next: the address, how to set up Stripe, where to paste its secret, and a test.').waitFor();
      await form.getByRole('button', { name: 'Create integration' }).click();

      // The provider's order: the address, Stripe's page, the secret it shows, a test; the API key after.
      const dialog = page.getByRole('dialog', { name: 'Connect Stripe' });
      await dialog.waitFor();
      const headings = await dialog.locator('h3').allTextContents();
      expect(headings).toEqual(['Give Stripe this address', 'On Stripe’s side', 'Paste the signing secret Stripe shows', 'Send a test', 'API key']);
      const address = await copyFieldValue(dialog, 'Webhook address');
      expect(address).toMatch(new RegExp(`^${server.baseUrl}/api/webhooks/[^/?]+$`));
      await dialog.locator('ol.source-guide').getByText('Developers → Webhooks → Add endpoint').waitFor();
      expect(await dialog.getByRole('button', { name: 'Send a test' }).isDisabled()).toBe(true);
      expect(await dialog.evaluate((element) => element.scrollWidth - element.clientWidth)).toBeLessThanOrEqual(0);
      // Behind the dialog, the list says the new source waits for its secret.
      await page.locator('tr', { hasText: name }).getByText('waiting for the secret').waitFor({ state: 'attached' });

      // Stripe, set up with the address, sends its first event before the secret is in intake: refused, saying why.
      const secret = `whsec_${randomBytes(24).toString('base64').replace(/[^A-Za-z0-9]/g, '')}`;
      const sendSigned = async () => {
        const body = JSON.stringify({ id: `evt_${randomUUID()}`, object: 'event', type: 'checkout.session.completed', data: { object: {} } });
        const header = stripe.webhooks.generateTestHeaderString({ payload: body, secret });
        const response = await fetch(address, { method: 'POST', headers: { 'content-type': 'application/json', 'stripe-signature': header }, body });
        return { status: response.status, answer: (await response.json()) as { message?: string } };
      };
      const early = await sendSigned();
      expect(early.status).toBe(401);
      expect(early.answer.message).toMatch(/^This source is waiting for its signing secret/);

      await dialog.getByLabel('Stripe signing secret').fill(secret);
      await dialog.getByRole('button', { name: 'Save secret' }).click();
      await dialog.getByRole('status').filter({ hasText: 'Saved: Stripe’s signed webhooks get in now.' }).waitFor();
      expect((await sendSigned()).status).toBe(202);
      await dialog.getByRole('button', { name: 'Send a test' }).click();
      await dialog.getByRole('status').filter({ hasText: /^Accepted: webhook / }).waitFor();
      await dialog.getByRole('button', { name: 'Done' }).click();
      await page.getByRole('heading', { name, level: 1 }).waitFor();
      await page.goto('/admin/integrations');
      await page.locator('tr', { hasText: name }).getByText('Source: Stripe').waitFor();
      expect(await page.locator('tr', { hasText: name }).getByText('waiting for the secret').count()).toBe(0);
      await page.locator('tr', { hasText: name }).click();
      await page.getByRole('heading', { name, level: 1 }).waitFor();
      const source = page.getByRole('region', { name: 'Source', exact: true });
      await expect.poll(() => source.locator('.source-secrets-table tbody tr').count()).toBe(1);
      expect(await source.getByText('waiting for the secret').count()).toBe(0);
      expectClean(problems, refusals);
      await close();
    }
  });

  test('a source changed to Stripe without its secret waits for it on its page, and takes it there', async () => {
    const { page, problems, refusals, close } = await signedInTab();
    await createIntegration(page, 'Later Stripe', 'GitHub');
    await page.getByRole('dialog', { name: 'Connect GitHub' }).getByRole('button', { name: 'Done' }).click();
    await page.getByRole('heading', { name: 'Later Stripe', level: 1 }).waitFor();
    const source = page.getByRole('region', { name: 'Source', exact: true });
    await source.getByRole('button', { name: 'Change source' }).click();
    const change = page.getByRole('dialog', { name: 'Change source' });
    await change.getByLabel('Source').selectOption({ label: 'Stripe' });
    await change.getByRole('button', { name: 'Change source' }).click();
    await change.waitFor({ state: 'detached' });

    await source.locator('dl.details').getByText('waiting for the secret').waitFor();
    await source.getByRole('status').filter({ hasText: 'Waiting for the signing secret.' }).waitFor();
    expect(await source.getByRole('button', { name: 'Send a test' }).isDisabled()).toBe(true);
    expect(await source.getByRole('button', { name: 'Rotate secret' }).count()).toBe(0);
    // A secret in the wrong format is refused with the API's words; nothing is saved.
    await source.getByLabel('Stripe signing secret').fill('sk_live_not_a_webhook_secret');
    await source.getByRole('button', { name: 'Save secret' }).click();
    await source.getByRole('alert').filter({ hasText: 'A Stripe signing secret starts with whsec_' }).waitFor();
    await source.getByLabel('Stripe signing secret').fill(`whsec_${'Ab1'.repeat(12)}`);
    await source.getByRole('button', { name: 'Save secret' }).click();
    await expect.poll(() => source.locator('.source-secrets-table tbody tr').count()).toBe(1);
    expect(await source.locator('dl.details').getByText('waiting for the secret').count()).toBe(0);
    await source.getByRole('button', { name: 'Send a test' }).click();
    await source.getByRole('status').filter({ hasText: /^Accepted: webhook / }).waitFor();
    await source.getByRole('button', { name: 'Rotate secret' }).waitFor();

    // The one refusal the panel met is the badly formatted secret's 400.
    expectClean(problems, refusals, [SIGNED_OUT_CHECK, { path: '/api/v1/integrations/', status: 400 }]);
    await close();
  });
});
