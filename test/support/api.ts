import type { AppInstance } from '../../src/app.js';
import type { TestApp } from '../helpers.js';

export const PASSWORD = 'correct horse battery staple';

/** A signed-in panel session: its cookie, CSRF token, and the headers to send with each. */
export interface SignedIn {
  cookie: string;
  csrfToken: string;
  /** Headers for a read. */
  read: Record<string, string>;
  /** Headers for a change (the CSRF token too). */
  change: Record<string, string>;
}

/** Signs in through POST /api/v1/auth/login, as the panel does. */
export async function signIn(app: AppInstance, email: string, password = PASSWORD): Promise<SignedIn> {
  const response = await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email, password } });
  if (response.statusCode !== 200) throw new Error(`sign-in failed: ${response.statusCode} ${response.body}`);
  const cookie = String(response.headers['set-cookie']).split(';', 1)[0]!;
  const csrfToken = response.json<{ csrf_token: string }>().csrf_token;
  return { cookie, csrfToken, read: { cookie }, change: { cookie, 'x-csrf-token': csrfToken } };
}

/** A user of the company with this role, signed in. */
export async function member(t: TestApp, companyId: string, role: 'owner' | 'admin' | 'viewer'): Promise<SignedIn & { userId: string }> {
  const email = `${role}-${Math.random().toString(36).slice(2)}@example.com`;
  const user = await t.management.addUser(companyId, email, PASSWORD, role);
  return { ...(await signIn(t.app, email)), userId: user.id };
}

/** A company management key's X-API-Key header. */
export async function managementKey(
  t: TestApp,
  companyId: string,
  scopes: Array<'integrations:manage' | 'logs:read' | 'data:erase'> = ['integrations:manage', 'logs:read'],
): Promise<Record<string, string>> {
  const key = await t.management.createManagementKey(companyId, scopes);
  return { 'x-api-key': key.apiKey };
}
