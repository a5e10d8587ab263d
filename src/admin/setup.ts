import type { Store } from '../store/store.js';
import { newLinkToken } from './links.js';

const SETUP_TOKEN_LIFETIME_MS = 24 * 60 * 60 * 1000;

/**
 * On a first run (nobody has an account yet) makes a one-time setup token and returns the
 * link to print; undefined once any user exists. Only the token's hash is stored.
 */
export async function setupLinkIfFirstRun(store: Store, baseUrl: string, now = Date.now()): Promise<string | undefined> {
  if ((await store.countUsers()) > 0) return undefined;
  const { token, hash } = newLinkToken();
  await store.createSetupToken(hash, now, now + SETUP_TOKEN_LIFETIME_MS);
  return `${baseUrl}/admin/setup?token=${token}`;
}
