import type { Role } from '../domain/permissions.js';
import type { AuditEvent } from './audit-store.js';

/**
 * Accounts, their sessions, passwords and second factors. A change's `audit` goes into the
 * audit log of every company the user belongs to, in the change's transaction.
 */
export interface AccountStore {
  // Accounts, sessions and sign-in: a user is not a company's, so these take no company.
  findUserByEmail(email: string): Promise<UserAccount | undefined>;
  findUserById(userId: string): Promise<UserAccount | undefined>;
  /** The companies the user belongs to, with the role in each. */
  listMembershipsOfUser(userId: string): Promise<UserMembership[]>;
  createSession(session: NewSession): Promise<void>;
  /** The live session with this id hash (not expired at `now`), or undefined. */
  findSession(idHash: string, now: number): Promise<SessionRecord | undefined>;
  touchSession(idHash: string, at: number): Promise<void>;
  deleteSession(idHash: string): Promise<void>;
  deleteSessionsOfUser(userId: string): Promise<number>;
  /** A new password; every session of the user but `keepSession` ends, every reset link is used up. */
  setPassword(userId: string, passwordHash: string, at: number, keepSession: string | null, audit?: AuditEvent): Promise<void>;
  createPasswordReset(userId: string, tokenHash: string, createdAt: number, expiresAt: number): Promise<void>;
  /** The reset link if it can be used at `now`, and whose it is (a cheap check, reading only). */
  findUsablePasswordReset(tokenHash: string, now: number): Promise<PasswordReset | undefined>;
  /** Uses up the link and sets the password; every session ends. The user's id, or undefined. */
  resetPassword(tokenHash: string, now: number, passwordHash: string, audit?: AuditEvent): Promise<string | undefined>;
  /** Starts (or restarts) two-factor enrolment with a sealed secret. */
  setPendingTwoFactor(userId: string, sealedSecret: string): Promise<void>;
  /**
   * Turns two-factor on with the pending secret, if it is still `sealedSecret`; replaces the
   * recovery codes; ends every session but `keepSession`. False when the pending secret changed.
   */
  enableTwoFactor(
    userId: string,
    change: { sealedSecret: string; step: number; recoveryCodeHashes: string[]; at: number; keepSession: string | null },
    audit?: AuditEvent,
  ): Promise<boolean>;
  disableTwoFactor(userId: string, audit?: AuditEvent): Promise<void>;
  replaceRecoveryCodes(userId: string, codeHashes: string[], at: number, audit?: AuditEvent): Promise<void>;
  /** Marks the TOTP step used, unless it or a later one was: false means a replayed code. */
  useTotpStep(userId: string, step: number): Promise<boolean>;
  /** Uses up an unused recovery code; false when there is none with this hash. */
  useRecoveryCode(userId: string, codeHash: string, at: number): Promise<boolean>;
  countRecoveryCodes(userId: string): Promise<number>;
}

/** An account as sign-in and the account routes see it. */
export interface UserAccount {
  id: string;
  email: string;
  passwordHash: string;
  createdAt: number;
  /** Sealed (domain/secret-box.ts); null while two-factor sign-in is off. */
  totpSecret: string | null;
  /** Sealed; set while an enrolment waits for its first code. */
  totpPendingSecret: string | null;
  /** The last TOTP step accepted. */
  totpLastStep: number | null;
}

/** A usable password reset link: whose account it sets the password of, and until when. */
export interface PasswordReset {
  userId: string;
  email: string;
  expiresAt: number;
}

export interface UserMembership {
  companyId: string;
  companyName: string;
  role: Role;
  /** The company requires two-factor sign-in of its members. */
  requiresTwoFactor: boolean;
}

export interface NewUser {
  id: string;
  email: string;
  passwordHash: string;
  createdAt: number;
}

export interface NewSession {
  idHash: string;
  userId: string;
  csrfToken: string;
  createdAt: number;
  lastSeenAt: number;
  /** Absolute expiry; idle expiry is checked against lastSeenAt by the caller. */
  expiresAt: number;
  ip: string | null;
  userAgent: string | null;
}

/** A live session, with what every request checks of its user. */
export interface SessionRecord extends NewSession {
  /** The user has two-factor sign-in on (so this session passed it: turning it on ends the others). */
  userHasTwoFactor: boolean;
}
