import { createHash, randomBytes } from 'node:crypto';

/**
 * One-time links (first-run setup, invitations, password resets): 256 random bits in the
 * URL, only their SHA-256 in the database, so a copy of the database opens nothing.
 */
export function newLinkToken(): { token: string; hash: string } {
  const token = randomBytes(32).toString('base64url');
  return { token, hash: linkTokenHash(token) };
}

/** What the database keeps of a link's token. */
export function linkTokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

export const INVITATION_LIFETIME_MS = 7 * 24 * 60 * 60 * 1000;
export const PASSWORD_RESET_LIFETIME_MS = 60 * 60 * 1000;

export function invitationUrl(baseUrl: string, token: string): string {
  return `${baseUrl}/admin/invite?token=${token}`;
}

export function passwordResetUrl(baseUrl: string, token: string): string {
  return `${baseUrl}/admin/reset-password?token=${token}`;
}
