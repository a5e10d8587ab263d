import { expect } from 'vitest';
import type { Page } from 'playwright-core';
import { totpCode } from '../support/accounts.js';
import { PASSWORD } from '../support/api.js';
import { runCliJson, sleep, type ServerProcess } from '../support/processes.js';

/**
 * Steps the account tests (invitations, passwords, two-factor sign-in) share: each goes
 * through the panel as a person would, and the checks from outside go over real HTTP.
 */

/** A company with this name and its owner, made with the CLI (as an operator would). */
export async function companyWithOwner(server: ServerProcess, name: string): Promise<{ companyId: string; email: string; password: string }> {
  const company = await runCliJson<{ id: string }>(['company', 'create', '--name', name, '--json'], server.cliEnv);
  const email = `owner-${Math.random().toString(36).slice(2, 8)}@example.com`;
  await runCliJson(['user', 'create', '--company', company.json.id, '--email', email, '--password', PASSWORD, '--role', 'owner', '--json'], server.cliEnv);
  return { companyId: company.json.id, email, password: PASSWORD };
}

/** Invites `email` from the Members page; returns the link the panel shows once, and whether it was emailed. */
export async function inviteThroughPanel(page: Page, email: string, role: 'owner' | 'admin' | 'viewer'): Promise<{ link: string; emailedNote: string }> {
  await page.getByRole('link', { name: 'Members' }).click();
  await page.getByRole('button', { name: 'Invite member' }).click();
  const invite = page.getByRole('dialog', { name: 'Invite member' });
  await invite.getByLabel('Email').fill(email);
  await invite.getByLabel('Role').selectOption(role);
  await invite.getByRole('button', { name: 'Create invitation' }).click();
  const created = page.getByRole('dialog', { name: 'Invitation created' });
  await created.getByText('This link will not be shown again. Copy it now.').waitFor();
  // One sentence, no punctuation after the role's badge (it read "is invited as viewer .").
  expect(await created.locator('.invite-link > p').first().textContent()).toContain(`${email} is invited as ${role} with a link that works once`);
  const link = ((await created.locator('.copy-field code').textContent()) ?? '').trim();
  expect(link).toMatch(/\/admin\/invite\?token=[\w-]+$/);
  const emailedNote = (await created.locator('.invite-emailed').textContent()) ?? '';
  await created.getByRole('button', { name: 'Done' }).click();
  await created.waitFor({ state: 'detached' });
  return { link, emailedNote };
}

/** The last TOTP time step each secret's code was used in: the API refuses a step used already, or an earlier one. */
const usedSteps = new Map<string, number>();
const STEP_MS = 30_000;

/**
 * A code for `secret` of a time step after the last one used, as an authenticator app shows
 * a while later: the current step's, else the next one's, which the server accepts too (a
 * window of one step either side, for drifting clocks). Only a third code within one step
 * waits for the clock (at most 30 s); the tests here use two a secret at most.
 */
export async function freshCode(secret: string): Promise<string> {
  const last = usedSteps.get(secret);
  let now = Math.floor(Date.now() / STEP_MS);
  if (last !== undefined && last > now) {
    await sleep(last * STEP_MS - Date.now() + 250);
    now = Math.floor(Date.now() / STEP_MS);
  }
  const step = last === undefined ? now : Math.max(now, last + 1);
  usedSteps.set(secret, step);
  return totpCode(secret, step * STEP_MS);
}

/** A code that is not the current one (nor, with a one-step window, the one before or after). */
export function wrongCode(secret: string): string {
  const current = Number(totpCode(secret));
  return String((current + 500_000) % 1_000_000).padStart(6, '0');
}

/**
 * Sets up two-factor sign-in on the Account page, confirming with a code from the secret
 * the page shows; returns the secret, the app's URI and the recovery codes shown once.
 */
export async function setUpTwoFactorThroughPanel(page: Page): Promise<{ secret: string; uri: string; codes: string[] }> {
  await page.getByRole('complementary').getByRole('link', { name: 'Account' }).click();
  await page.getByRole('heading', { name: 'Account', level: 1 }).waitFor();
  await page.getByRole('button', { name: 'Set up two-factor sign-in' }).click();
  await page.getByRole('img', { name: 'QR code for your authenticator app' }).waitFor();
  const secret = ((await page.locator('.copy-field').filter({ hasText: 'Secret key' }).locator('code').textContent()) ?? '').trim();
  const uri = (await page.getByRole('link', { name: 'Open it in your authenticator app' }).getAttribute('href')) ?? '';
  await page.getByLabel('6-digit code').fill(await freshCode(secret));
  await page.getByRole('button', { name: 'Turn on two-factor sign-in' }).click();
  const list = page.getByRole('list', { name: 'Recovery codes' });
  await list.waitFor();
  const codes = (await list.locator('code').allTextContents()).map((code) => code.trim());
  return { secret, uri, codes };
}

/** Signs in through the panel's form, answering the two-factor step with `code`. */
export async function signInWithCode(page: Page, email: string, password: string, code: string): Promise<void> {
  await page.goto('/admin/login');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByLabel('Code').fill(code);
  await page.getByRole('button', { name: 'Verify code' }).click();
}

/** POST /api/v1/auth/login from outside the browser: the status and the error code, if any. */
export async function apiSignIn(server: ServerProcess, body: { email: string; password: string; two_factor_code?: string }): Promise<{ status: number; code?: string }> {
  const response = await fetch(server.url('/api/v1/auth/login'), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await response.json()) as { code?: string };
  return { status: response.status, code: json.code };
}
