import type { PageCursor } from '../domain/cursor.js';
import type { Role } from '../domain/permissions.js';
import type { NewUser } from './account-store.js';
import type { AuditEvent } from './audit-store.js';

/** Companies, their members and invitations, and the first-run setup that makes the first company. */
export interface CompanyStore {
  // Companies and users.
  /** Creates a tenant: the one write that has no company yet. */
  createCompany(company: NewCompany, audit?: AuditEvent): Promise<void>;
  getCompany(companyId: string): Promise<Company | undefined>;
  /** Creates the user (or finds it by email) and makes it a member with this role. */
  addUser(
    companyId: string,
    user: NewUser,
    role: Role,
    audit?: AuditEvent,
  ): Promise<{ id: string; email: string; created: boolean }>;
  /** Across all companies: first run is when nobody exists yet. */
  countUsers(): Promise<number>;
  createSetupToken(tokenHash: string, createdAt: number, expiresAt: number): Promise<void>;
  /** Whether a setup token exists, unused and unexpired at `now` (a cheap check before hashing a password). */
  isSetupTokenUsable(tokenHash: string, now: number): Promise<boolean>;
  /**
   * First-run setup, all or nothing: uses up the setup token (unused, unexpired at `now`),
   * creates the company and its first owner. Returns false, changing nothing, when the token
   * does not qualify. Not tenant-scoped: it makes the tenant.
   */
  completeSetup(
    tokenHash: string,
    now: number,
    company: NewCompany,
    owner: NewUser,
    audit: { company: AuditEvent; owner: AuditEvent },
  ): Promise<boolean>;

  // Invitations.
  /** Invites an email to the company (a pending invitation of the same email is revoked). */
  createInvitation(companyId: string, invitation: NewInvitation, audit: AuditEvent): Promise<InviteOutcome>;
  /** Pending invitations (not accepted, revoked or expired at `now`), newest first. */
  listInvitations(companyId: string, query: { limit: number; cursor?: PageCursor }, now: number): Promise<Invitation[]>;
  /** Revokes a pending invitation; false when there is none. */
  revokeInvitation(companyId: string, invitationId: string, at: number, audit: AuditEvent): Promise<boolean>;
  /** The pending invitation behind a link: the token names the tenant, so no company is given. */
  findInvitationByToken(tokenHash: string, now: number): Promise<InvitationForToken | undefined>;
  /** Accepts it as the signed-in user or as a new account; membership and audit in one transaction. */
  acceptInvitation(
    tokenHash: string,
    now: number,
    who: { userId: string } | { newUser: NewUser },
    audit: Omit<AuditEvent, 'targetId' | 'after'>,
  ): Promise<AcceptOutcome>;

  // --- management API: members and company settings ---
  /** The company's members with their email, newest first (cursor: when added and user id). */
  listMembers(companyId: string, query: { limit: number; cursor?: PageCursor }): Promise<Member[]>;
  getMember(companyId: string, userId: string): Promise<Member | undefined>;
  /** How many owners the company has (a last owner can be neither removed nor demoted). */
  countOwners(companyId: string): Promise<number>;
  /** Sets a member's role, or removes the member (role null), unless no owner would be left. */
  changeMember(companyId: string, userId: string, role: Role | null, audit: AuditEvent): Promise<MemberChange>;
  /** The company before and after the change, or undefined when there is none. */
  updateCompany(
    companyId: string,
    changes: CompanyChanges,
    audit: AuditEvent,
  ): Promise<{ before: Company; after: Company } | undefined>;
}

export type { Role } from '../domain/permissions.js';

export const ROLES: readonly Role[] = ['owner', 'admin', 'viewer'];

export interface Company {
  id: string;
  name: string;
  retentionDays: number;
  /** Members must have two-factor sign-in on to reach the company. */
  requireTwoFactor: boolean;
  createdAt: number;
}

/** A company as it starts: settings beyond these have their defaults. */
export type NewCompany = Pick<Company, 'id' | 'name' | 'retentionDays' | 'createdAt'>;

/** What a company's settings change may touch. */
export type CompanyChanges = Partial<Pick<Company, 'name' | 'retentionDays' | 'requireTwoFactor'>>;

/** The longest retention a company may choose: ten years. */
export const MAX_RETENTION_DAYS = 3650;

/** A company's retention unless it sets its own. */
export const DEFAULT_RETENTION_DAYS = 30;

/** A user as a member of one company (never with the password hash). */
export interface Member {
  userId: string;
  email: string;
  role: Role;
  addedAt: number;
}

export interface NewInvitation {
  id: string;
  /** Lower-cased. */
  email: string;
  role: Role;
  tokenHash: string;
  invitedBy: string | null;
  createdAt: number;
  expiresAt: number;
}

export interface Invitation {
  id: string;
  companyId: string;
  email: string;
  role: Role;
  invitedBy: { userId: string; email: string } | null;
  createdAt: number;
  expiresAt: number;
}

export interface InvitationForToken extends Invitation {
  companyName: string;
}

export type InviteOutcome = { kind: 'created'; invitation: Invitation } | { kind: 'already_member' } | { kind: 'no_company' };

export type AcceptOutcome =
  | { kind: 'joined'; userId: string; companyId: string }
  | { kind: 'invalid' }
  | { kind: 'email_taken' }
  | { kind: 'wrong_account'; invitationEmail: string; accountEmail: string };

/** `after` is absent when the member was removed. */
export type MemberChange =
  | { kind: 'done'; before: Member; after?: Member }
  | { kind: 'not_found' }
  | { kind: 'last_owner' };
