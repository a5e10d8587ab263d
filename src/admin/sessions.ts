import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { NewSession, SessionRecord, Store, UserMembership } from '../store/store.js';

export const SESSION_COOKIE = 'intake_session';
/** A session unused this long ends (OWASP: idle timeout). */
export const IDLE_TIMEOUT_MS = 12 * 60 * 60 * 1000;
/** A session ends this long after sign-in whatever happens (OWASP: absolute timeout). */
export const ABSOLUTE_TIMEOUT_MS = 7 * 24 * 60 * 60 * 1000;
/** last_seen_at is written at most this often, so reading pages costs no write each. */
const TOUCH_EVERY_MS = 60 * 1000;

export interface SignedIn {
  /** The cookie's value: shown to the browser once, stored only as its SHA-256. */
  cookieValue: string;
  session: NewSession;
  user: { id: string; email: string };
  companies: UserMembership[];
}

/**
 * Panel sessions, kept server-side: the cookie holds 256 random bits, the database their
 * SHA-256, so a leaked database cannot be replayed as cookies. Each session has its own
 * CSRF token, which state-changing requests must send back in a header (synchronizer token
 * pattern); a cross-site form cannot read it.
 */
export class Sessions {
  constructor(
    private readonly store: Store,
    private readonly now: () => number = Date.now,
  ) {}

  /** A new session for a user whose identity is established (signed in, or just set up). */
  async start(user: { id: string; email: string }, ip: string, userAgent: string | null): Promise<SignedIn> {
    const now = this.now();
    // A new id at every sign-in: a session id planted before sign-in is worth nothing.
    const cookieValue = randomBytes(32).toString('base64url');
    const session: NewSession = {
      idHash: sessionHash(cookieValue),
      userId: user.id,
      csrfToken: randomBytes(32).toString('base64url'),
      createdAt: now,
      lastSeenAt: now,
      expiresAt: now + ABSOLUTE_TIMEOUT_MS,
      ip,
      userAgent: userAgent?.slice(0, 512) ?? null,
    };
    await this.store.createSession(session);
    const companies = await this.store.listMembershipsOfUser(user.id);
    return { cookieValue, session, user: { id: user.id, email: user.email }, companies };
  }

  /** The live session behind a cookie value, or undefined (expired, idle too long, unknown). */
  async resume(cookieValue: string): Promise<SessionRecord | undefined> {
    const now = this.now();
    const idHash = sessionHash(cookieValue);
    const session = await this.store.findSession(idHash, now);
    if (!session) return undefined;
    if (now - session.lastSeenAt > IDLE_TIMEOUT_MS) {
      await this.store.deleteSession(idHash);
      return undefined;
    }
    if (now - session.lastSeenAt > TOUCH_EVERY_MS) await this.store.touchSession(idHash, now);
    return session;
  }

  async signOut(session: NewSession): Promise<void> {
    await this.store.deleteSession(session.idHash);
  }

  /** Ends every session of the user, on every device. */
  async signOutEverywhere(userId: string): Promise<number> {
    return this.store.deleteSessionsOfUser(userId);
  }
}

/** Whether the header carries the session's CSRF token (compared in constant time). */
export function csrfTokenMatches(session: NewSession, header: string | undefined): boolean {
  if (header === undefined) return false;
  const expected = Buffer.from(session.csrfToken);
  const given = Buffer.from(header);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

/** What the database keeps of a session's cookie value. */
export function sessionHash(cookieValue: string): string {
  return createHash('sha256').update(cookieValue).digest('hex');
}
