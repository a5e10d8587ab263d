import type { AuditEvent } from './audit-store.js';
import type { NewApiKey } from './key-store.js';

/**
 * Command-line sign-ins (`intake login`): asked for by a terminal, decided by a signed-in
 * person in the panel, collected by the terminal. A login belongs to no company until it is
 * approved (nobody has chosen one yet), so only the methods past the approval take one.
 * Every read is of the logins not expired at `now`; an expired one is as good as none.
 */
export interface CliLoginStore {
  /**
   * Stores a new login, unless `maxPending` logins are already waiting (`full`, with the time
   * the first of them expires). Deletes the expired logins first: nothing else does. `taken`
   * when another login holds the user code (the caller draws another).
   */
  createCliLogin(login: NewCliLogin, maxPending: number): Promise<{ outcome: 'created' | 'taken' } | { outcome: 'full'; retryAt: number }>;
  findCliLoginByUserCode(userCode: string, now: number): Promise<CliLogin | undefined>;
  /**
   * The terminal's poll: records it and returns the login, with `tooSoon` (and nothing
   * recorded) when the previous poll was less than `minGapMs` ago.
   */
  pollCliLogin(deviceCodeHash: string, now: number, minGapMs: number): Promise<{ login: CliLogin; tooSoon: boolean } | undefined>;
  /** Approves a waiting login for the company; false when it is no longer waiting (decided meanwhile, expired). */
  approveCliLogin(companyId: string, userCode: string, decision: CliLoginDecision): Promise<boolean>;
  /** Denies a waiting login; false when it is no longer waiting. */
  denyCliLogin(userCode: string, decision: CliLoginDecision): Promise<boolean>;
  /**
   * Creates the approved login's key and marks the login issued, in one transaction, unless
   * it is not approved for the company any more (issued already, expired): then false and
   * nothing is written. Of two polls at once, one gets the key.
   */
  issueCliLoginKey(companyId: string, deviceCodeHash: string, key: NewApiKey, audit: AuditEvent, now: number): Promise<boolean>;
}

/** Waiting for a decision; approved (the terminal collects its key next); denied; issued (the terminal has its key). */
export type CliLoginState = 'pending' | 'approved' | 'denied' | 'issued';

export interface NewCliLogin {
  deviceCodeHash: string;
  userCode: string;
  name: string;
  requestedIp: string;
  createdAt: number;
  expiresAt: number;
}

export interface CliLogin extends NewCliLogin {
  state: CliLoginState;
  lastPolledAt: number | null;
  /** Set by the approval. */
  companyId: string | null;
  /** Who approved or denied it, from which address, when. */
  decidedBy: string | null;
  decidedIp: string | null;
  decidedAt: number | null;
  /** Set once the terminal has its key. */
  keyId: string | null;
}

export interface CliLoginDecision {
  userId: string;
  ip: string;
  at: number;
}
