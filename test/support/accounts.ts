import { totpCodeAt } from '../../src/domain/two-factor.js';

/** The authenticator app's current code for a base32 secret (what a person would type). */
export function totpCode(secret: string, at = Date.now()): string {
  return totpCodeAt(secret, at);
}

/** The token of a one-time link (`…?token=…`). */
export function tokenOf(link: string): string {
  const token = new URL(link).searchParams.get('token');
  if (!token) throw new Error(`no token in ${link}`);
  return token;
}
