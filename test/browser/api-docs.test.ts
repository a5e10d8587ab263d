import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers.js';
import { launchChromium } from '../support/browser.js';

/**
 * The API reference page (Swagger UI at /api/docs) under its Content-Security-Policy, in a
 * real browser: it renders the operations, and the browser reports no violation or error.
 */

let browser: Browser;
let t: TestApp;
let baseUrl: string;

beforeAll(async () => {
  browser = await launchChromium();
  t = await buildTestApp();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await browser?.close();
  await t?.close();
});

test('/api/docs renders its operations with no policy violation', async () => {
  const page = await browser.newPage();
  const problems: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' || /Content.Security.Policy/i.test(message.text())) problems.push(message.text());
  });
  page.on('pageerror', (error) => problems.push(error.message));
  const response = await page.goto(`${baseUrl}/api/docs/`);
  expect(response?.headers()['content-security-policy']).toContain("script-src 'self'");
  await page.locator('.opblock').first().waitFor();
  expect(await page.locator('.opblock').count()).toBeGreaterThan(10);
  await expect.poll(() => page.locator('.info .title').textContent()).toContain('intake');
  // An operation opens, as a reader would use the page.
  await page.locator('.opblock-summary').first().click();
  await page.locator('.opblock-body').first().waitFor();
  expect(problems).toEqual([]);
  await page.close();
});
