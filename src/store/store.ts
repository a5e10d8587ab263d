import type { Scope } from '../domain/api-key.js';
import type { Cursor, PageCursor } from '../domain/cursor.js';
import type { Role } from '../domain/permissions.js';
import type { PayloadFormat } from '../domain/webhook-body.js';
import type { ProviderType, SourceConfig, SourceType } from '../sources/provider.js';
import type {
  AttemptResult,
  ClaimedDelivery,
  ClaimOptions,
  Delivery,
  DeliveryAttempt,
  DeliveryBacklog,
  DeliveryQuery,
  Destination,
  DestinationChanges,
  DestinationStats,
  DisabledDestination,
  FeedItem,
  FeedQuery,
  NewDestination,
  RedeliveryBudget,
  RedeliveryLease,
  RedeliveryStart,
  RedeliveryStep,
  ReplayFilter,
  ReplayScan,
  SendCandidate,
  SendScan,
  SendSelection,
  SingleReplay,
  WebhookBody,
  WebhookRef,
} from './destination-types.js';

export type * from './destination-types.js';
export { DELIVERY_STATES, STATS_MAX_ATTEMPTS } from './destination-types.js';

/**
 * The storage interface. Every method that reads or changes a company's data takes the
 * company id first, so a query that forgets the tenant does not type-check; a row of
 * another company is "not found". The exceptions say why in their comment.
 */
export interface Store {
  readonly dialect: 'sqlite' | 'postgres';

  /** Applies pending migrations; returns the names applied now. */
  migrate(): Promise<string[]>;
  /** Resolves when the database answers a query. */
  ping(): Promise<void>;
  close(): Promise<void>;
  /** The connection pool's state now (for /metrics); undefined where there is none (SQLite). */
  connectionPool(): ConnectionPoolState | undefined;
  /** Seconds each thread of the store's own has been busy (for /metrics): SQLite's commit and read threads; none on PostgreSQL. */
  threadsBusySeconds(): StoreThreadBusy[];

  // Authentication: these find the tenant from a key, so they cannot take one.
  findKeyByHash(keyHash: string): Promise<KeyGrant | undefined>;
  findIntegrationByKey(integrationKey: string): Promise<IntegrationRoute | undefined>;
  /** The id of the newest change that may invalidate a cached key (0 when none). */
  latestAuthChange(): Promise<number>;
  /**
   * Calls `listener` as soon as the database tells of a change to keys or integrations
   * (PostgreSQL NOTIFY), and after a lost notification channel comes back. A store that
   * cannot push returns at once and never calls it: latestAuthChange is then the only way.
   * Returns the unsubscribe function.
   */
  subscribeAuthChanges(listener: () => void): () => void;
  /** Write-behind of keys' last use; each entry names its company. */
  recordKeyUsage(usages: KeyUsage[]): Promise<void>;

  // Intake: one transaction for a group of requests, rows carry their company.
  /**
   * Stores the group: webhooks (idempotency decided here), their request-log rows, and the
   * outbox: a delivery for every destination of the company each accepted webhook matches,
   * in the same transaction, so an acknowledged webhook never lacks its deliveries.
   */
  commitBatch(webhooks: PendingWebhook[], logs: RequestLogEntry[]): Promise<CommitOutcome[]>;

  // Delivery workers: like commitBatch, these serve every company; rows carry theirs.
  /**
   * One round of a delivery worker, in one transaction. First `results`: each attempt
   * recorded, and its delivery settled or rescheduled only while it still holds the lease it
   * was claimed with; each destination's failure streak kept, a destination failing for
   * `disableAfterMs` without a success (or answering 410) disabled, with its audit record.
   * Then, unless `claim` is null, due deliveries of active destinations claimed within each
   * destination's requests in flight and rate per second, each leased until now + its
   * timeout + claim.leaseMs (its next_attempt_at): a node that dies lets its claims go then.
   * Several nodes exchange at once without taking the same delivery.
   */
  exchangeDeliveries(
    results: AttemptResult[],
    now: number,
    claim: ClaimOptions | null,
    disableAfterMs: number,
  ): Promise<{ claimed: ClaimedDelivery[]; disabled: DisabledDestination[] }>;
  /** The bodies of webhooks to deliver that the worker does not have in memory, each with its uuid; purged ones absent. */
  readWebhookBodies(refs: WebhookRef[]): Promise<Array<WebhookBody & { uuid: string }>>;
  /**
   * Moves up to `limit` deliveries between `pending` and `held` to follow their
   * destination's status (paused or disabled: held; active again: pending, due now), so
   * claims never scan a paused destination's backlog. Returns how many moved.
   */
  reconcileHeldDeliveries(now: number, limit: number): Promise<number>;
  /**
   * Vacuums the deliveries table now (PostgreSQL; nothing on SQLite), skipping it when
   * another node is vacuuming it: the dead entries every lease and result leaves in the
   * claim's indexes go, whatever the server's autovacuum does.
   */
  vacuumDeliveries(): Promise<void>;

  /**
   * Retention: deletes webhooks and request-log rows older than their company's retention,
   * in small batches, and idempotency claims past their window. Safe to run on several
   * nodes at once (each delete finds what the others left).
   */
  purgeExpired(now: number): Promise<PurgeReport>;

  // Reading.
  listWebhooks(companyId: string, integrationId: string, query: WebhookQuery): Promise<StoredWebhook[]>;
  getWebhook(companyId: string, integrationId: string, uuid: string): Promise<StoredWebhook | undefined>;
  listRequestLog(companyId: string, integrationId: string, limit: number): Promise<RequestLogEntry[]>;

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

  // Integrations and keys.
  /** With a provider source, its first signing secret in the same transaction. */
  createIntegration(
    companyId: string,
    integration: Integration,
    firstKey: NewApiKey,
    audit?: AuditEvent,
    firstSecret?: NewSourceSecret,
  ): Promise<void>;
  getIntegration(companyId: string, integrationId: string): Promise<Integration | undefined>;
  setIntegrationEnabled(
    companyId: string,
    integrationId: string,
    enabled: boolean,
    at: number,
    audit?: AuditEvent,
  ): Promise<boolean>;
  createApiKey(companyId: string, key: NewApiKey, audit?: AuditEvent): Promise<void>;
  /**
   * Adds `newKey` and makes every other live key of the integration expire by
   * `previousExpiresAt`; throws not_found (changing nothing) unless the integration is the
   * company's. createApiKey checks an integration key the same way.
   */
  rotateIntegrationKey(
    companyId: string,
    integrationId: string,
    newKey: NewApiKey,
    previousExpiresAt: number,
    audit?: AuditEvent,
  ): Promise<void>;
  /** Revokes the key; the time it was revoked (the earlier one if it already was), or undefined. */
  revokeApiKey(companyId: string, keyId: string, at: number, audit?: AuditEvent): Promise<number | undefined>;
  listApiKeys(companyId: string, integrationId: string): Promise<ApiKeyRecord[]>;

  // Audit log: written by each change above in its own transaction (the `audit` argument).
  /** Records an action that changes no setting but is the company's to know of (a signed test sent). */
  recordAudit(companyId: string, audit: AuditEvent): Promise<void>;
  listAuditLog(companyId: string, query: AuditQuery): Promise<AuditRecord[]>;

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
  setPassword(userId: string, passwordHash: string, at: number, keepSession: string | null): Promise<void>;
  createPasswordReset(userId: string, tokenHash: string, createdAt: number, expiresAt: number): Promise<void>;
  /** Whether a reset link can be used at `now` (a cheap check before hashing a password). */
  isPasswordResetUsable(tokenHash: string, now: number): Promise<boolean>;
  /** Uses up the link and sets the password; every session ends. The user's id, or undefined. */
  resetPassword(tokenHash: string, now: number, passwordHash: string): Promise<string | undefined>;
  /** Starts (or restarts) two-factor enrolment with a sealed secret. */
  setPendingTwoFactor(userId: string, sealedSecret: string): Promise<void>;
  /**
   * Turns two-factor on with the pending secret, if it is still `sealedSecret`; replaces the
   * recovery codes; ends every session but `keepSession`. False when the pending secret changed.
   */
  enableTwoFactor(
    userId: string,
    change: { sealedSecret: string; step: number; recoveryCodeHashes: string[]; at: number; keepSession: string | null },
  ): Promise<boolean>;
  disableTwoFactor(userId: string): Promise<void>;
  replaceRecoveryCodes(userId: string, codeHashes: string[], at: number): Promise<void>;
  /** Marks the TOTP step used, unless it or a later one was: false means a replayed code. */
  useTotpStep(userId: string, step: number): Promise<boolean>;
  /** Uses up an unused recovery code; false when there is none with this hash. */
  useRecoveryCode(userId: string, codeHash: string, at: number): Promise<boolean>;
  countRecoveryCodes(userId: string): Promise<number>;

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

  // --- management API: integrations and keys ---
  /**
   * The company's keys of a live integration (integrationId) or its management keys (null),
   * newest first (cursor: created_at and id of the last).
   */
  listKeys(companyId: string, integrationId: string | null, query: { limit: number; cursor?: PageCursor }): Promise<KeyDetails[]>;
  /** One key of that integration (or a management key, for null), or undefined. */
  getKey(companyId: string, integrationId: string | null, keyId: string): Promise<KeyDetails | undefined>;
  /**
   * Revokes a key of that integration (or a management key, for null) and returns it, or
   * undefined when there is none. Revoking a revoked key changes nothing and writes no audit.
   */
  revokeKeyOf(
    companyId: string,
    integrationId: string | null,
    keyId: string,
    at: number,
    audit: AuditEvent,
  ): Promise<KeyDetails | undefined>;
  /** Request-log rows of each key at the integration's address since `since`, by key id. */
  countKeyRequests(companyId: string, integrationId: string, keyIds: string[], since: number): Promise<Map<string, number>>;
  /** Who sent requests with the key to the integration's address since `since`, most recent first. */
  listKeyCallers(
    companyId: string,
    integrationId: string,
    keyId: string,
    query: { since: number; limit: number },
  ): Promise<KeyCaller[]>;
  /** The company's live integrations, newest first (cursor: created_at and id of the last). */
  listIntegrations(companyId: string, query: { limit: number; cursor?: PageCursor }): Promise<Integration[]>;
  /** When each of these integrations of the company last took a webhook (absent: never, or all purged). */
  lastWebhookTimes(companyId: string, integrationIds: readonly string[]): Promise<Map<string, number>>;
  /** Changes a live integration; its state before and after, or undefined when there is none. */
  updateIntegration(
    companyId: string,
    integrationId: string,
    changes: IntegrationChanges,
    at: number,
    audit?: AuditEvent,
    secrets?: SourceSecretChange,
  ): Promise<{ before: Integration; after: Integration } | undefined>;
  /**
   * The source's secrets still verifying at `now` (not their values), oldest first; empty
   * for an integration the company does not have.
   */
  listSourceSecrets(companyId: string, integrationId: string, now: number): Promise<SourceSecretInfo[]>;
  /**
   * Adds a signing secret and ends every other live one at `change.othersExpireAt` (the
   * overlap of a rotation); false, changing nothing, unless the integration is the company's.
   */
  rotateSourceSecret(companyId: string, integrationId: string, change: SourceSecretChange, audit?: AuditEvent): Promise<boolean>;
  /** Ends one live secret at `at`; false when the integration has no such live secret. */
  endSourceSecret(companyId: string, integrationId: string, secretId: string, at: number, audit?: AuditEvent): Promise<boolean>;
  /**
   * Every value sealed with INTAKE_SECRETS_KEY (two-factor secrets, source secrets), across
   * companies: `intake secrets rotate` reseals them with the first key. Not tenant-scoped.
   */
  listSealedValues(): Promise<SealedValue[]>;
  /** Replaces each value still sealed as listed (one changed meanwhile is left alone); how many were replaced. */
  replaceSealedValues(values: Array<SealedValue & { resealed: string }>): Promise<number>;
  /** Deletes an integration: its address and keys stop working; false when there is none. */
  deleteIntegration(companyId: string, integrationId: string, at: number, audit: AuditEvent): Promise<boolean>;

  // --- management API: webhooks, request log, usage ---
  /**
   * The company's webhooks newest first, across its integrations or one, and where the
   * next page starts; without headers. A page stops at `limit` webhooks or when their bodies
   * reach WEBHOOK_PAGE_BYTES, whichever comes first (always one at least). A search (`text`)
   * reads at most SEARCH_SCAN_ROWS rows or SEARCH_SCAN_BYTES of bodies of the range per
   * call, so its page may hold fewer than `limit` webhooks and still have a next.
   */
  listCompanyWebhooks(companyId: string, query: WebhookSearch): Promise<WebhookPage>;
  /** The same page as listCompanyWebhooks, each webhook whole (headers and source IP): the export's read. */
  exportCompanyWebhooks(companyId: string, query: WebhookSearch): Promise<WebhookPage<StoredWebhook>>;
  getCompanyWebhook(companyId: string, uuid: string): Promise<StoredWebhook | undefined>;
  /** The newest webhooks of a range without their bodies (uuid, time, size): what the live tail polls. */
  listCompanyWebhookHeads(companyId: string, query: WebhookHeadQuery): Promise<WebhookHead[]>;
  /** One webhook's head, or undefined. */
  getCompanyWebhookHead(companyId: string, uuid: string): Promise<WebhookHead | undefined>;
  /** These webhooks of the company (heads the caller read), without headers, in the order given; purged ones left out. */
  getCompanyWebhookSummaries(companyId: string, heads: readonly WebhookHead[]): Promise<WebhookSummary[]>;
  /** The company's request log newest first (cursor: received_at and id of the last). */
  listCompanyRequestLog(companyId: string, query: RequestLogQuery): Promise<RequestLogEntry[]>;
  /** Webhook sends (POST) per time bucket by outcome, oldest bucket first; empty buckets left out. */
  countUsage(companyId: string, query: UsageQuery): Promise<UsageBucket[]>;

  // --- management API: destinations and their deliveries ---
  /**
   * Creates it unless the company has `maxLive` live destinations already (counted under
   * the company's lock, so parallel creates cannot all pass); undefined then, or when there
   * is no such company.
   */
  createDestination(companyId: string, destination: NewDestination, audit: AuditEvent, maxLive: number): Promise<Destination | undefined>;
  /** The company's live destinations, newest first (cursor: created_at and id of the last). */
  listDestinations(companyId: string, query: { limit: number; cursor?: PageCursor }): Promise<Destination[]>;
  getDestination(companyId: string, destinationId: string): Promise<Destination | undefined>;
  /** Changes a live destination; its state before and after, or undefined when there is none. */
  updateDestination(
    companyId: string,
    destinationId: string,
    changes: DestinationChanges,
    at: number,
    audit: AuditEvent,
  ): Promise<{ before: Destination; after: Destination } | undefined>;
  /** Deletes a destination; its pending and held deliveries are cancelled. False when there is none. */
  deleteDestination(companyId: string, destinationId: string, at: number, audit: AuditEvent): Promise<boolean>;
  /** Deliveries newest first, of one destination or one webhook (the query names one). */
  listDeliveries(companyId: string, query: DeliveryQuery): Promise<Delivery[]>;
  getDelivery(companyId: string, deliveryId: string): Promise<Delivery | undefined>;
  /** A delivery's attempts, newest first. */
  listDeliveryAttempts(companyId: string, deliveryId: string, limit: number): Promise<DeliveryAttempt[]>;
  /**
   * Starts a new attempt series for one delivery (whatever its state but cancelled), taking
   * one of the company's redelivery budget.
   */
  replayDelivery(companyId: string, deliveryId: string, at: number, budget: RedeliveryBudget, audit: AuditEvent): Promise<SingleReplay>;
  /**
   * Starts a bulk replay or send for the company: takes its lease unless another operation
   * holds it (one per company at a time, across nodes), and says what the budget allows.
   */
  beginRedelivery(companyId: string, lease: Omit<RedeliveryLease, 'destinationId'>): Promise<RedeliveryStart>;
  /**
   * Up to `limit` deliveries of a destination that a bulk replay would restart, oldest
   * first, read on the read side: not cancelled, not pending (their series runs), and not
   * replayed since `startedBefore`. At most `scanRows` deliveries are looked at.
   */
  scanReplay(companyId: string, filter: ReplayFilter, startedBefore: number, limit: number, scanRows: number): Promise<ReplayScan>;
  /**
   * Up to `limit` stored webhooks with no delivery to the destination yet (named ones
   * whatever the filters, or a range through them), oldest first, read on the read side.
   */
  scanSend(companyId: string, destinationId: string, selection: SendSelection, limit: number): Promise<SendScan>;
  /**
   * One transaction of a bulk replay: a new series for those of `ids` that still qualify,
   * as many as the budget allows, under the operation's lease (renewed). With `finish`, the
   * operation's audit record is written and its lease freed in the same transaction.
   */
  replayStep(companyId: string, lease: RedeliveryLease, ids: readonly string[], startedBefore: number, finish?: RedeliveryFinish): Promise<RedeliveryStep>;
  /** One transaction of a bulk send: deliveries for those of `webhooks` that still have none, as replayStep. */
  sendStep(companyId: string, lease: RedeliveryLease, webhooks: readonly SendCandidate[], finish?: RedeliveryFinish): Promise<RedeliveryStep>;
  /** Ends a bulk operation that stopped before its last step: its audit record, if it made anything, and its lease freed. */
  endRedelivery(companyId: string, token: string, record?: RedeliveryRecord): Promise<void>;
  /**
   * Across companies (an operator's figure, never shown to one): deliveries due at `now`
   * and not being attempted, counted up to `cap` so the count costs the same whatever the
   * backlog, and when the oldest came due. Paused and disabled destinations' (held) are not
   * waiting for a worker and are left out.
   */
  deliveryBacklog(now: number, cap: number): Promise<DeliveryBacklog>;
  /** Attempts of the range (the newest STATS_MAX_ATTEMPTS), in `bucketMs` buckets, and the backlog now. */
  destinationStats(
    companyId: string,
    destinationId: string,
    query: { since: number; until: number; bucketMs: number; now: number },
  ): Promise<DestinationStats>;
  /**
   * The company's webhooks oldest first after a position: each once, in the order their
   * transactions committed (PostgreSQL: only transactions that can no longer be overtaken
   * by one still running). Bounded by `limit` and WEBHOOK_PAGE_BYTES of bodies.
   */
  readFeed(companyId: string, query: FeedQuery): Promise<FeedItem[]>;

  // --- management API: members and company settings ---
  /** The company's members with their email, newest first (cursor: when added and user id). */
  listMembers(companyId: string, query: { limit: number; cursor?: PageCursor }): Promise<Member[]>;
  getMember(companyId: string, userId: string): Promise<Member | undefined>;
  /** Sets a member's role, or removes the member (role null), unless no owner would be left. */
  changeMember(companyId: string, userId: string, role: Role | null, audit: AuditEvent): Promise<MemberChange>;
  /** The company before and after the change, or undefined when there is none. */
  updateCompany(
    companyId: string,
    changes: CompanyChanges,
    audit: AuditEvent,
  ): Promise<{ before: Company; after: Company } | undefined>;

  // Operator lookups for the CLI, which is given bare ids: which company owns this?
  companyOfIntegration(integrationId: string): Promise<string | undefined>;
  companyOfKey(keyId: string): Promise<string | undefined>;
  /** The company of a live destination (the CLI names destinations by id alone). */
  companyOfDestination(destinationId: string): Promise<string | undefined>;
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

/** A user as a member of one company (never with the password hash). */
export interface Member {
  userId: string;
  email: string;
  role: Role;
  addedAt: number;
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

export interface UserMembership {
  companyId: string;
  companyName: string;
  role: Role;
  /** The company requires two-factor sign-in of its members. */
  requiresTwoFactor: boolean;
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

export interface NewUser {
  id: string;
  email: string;
  passwordHash: string;
  createdAt: number;
}

export interface Integration {
  id: string;
  companyId: string;
  integrationKey: string;
  name: string;
  description: string;
  enabled: boolean;
  bodyLimitBytes: number;
  rateLimitPerMinute: number | null;
  createdAt: number;
  updatedAt: number;
  source: IntegrationSource;
}

/** What an update may change in an integration. */
export type IntegrationChanges = Partial<
  Pick<Integration, 'name' | 'description' | 'enabled' | 'bodyLimitBytes' | 'rateLimitPerMinute' | 'source'>
>;

/** How an integration proves its requests: the API key alone, or a provider's signature too. */
export interface IntegrationSource {
  type: SourceType;
  /** The type's settings (empty for most types); never a secret. */
  config: SourceConfig;
}

export interface NewSourceSecret {
  id: string;
  /** Sealed with INTAKE_SECRETS_KEY. */
  sealed: string;
  createdAt: number;
}

/** A new secret (or none), and when the ones before it stop verifying (at once: now). */
export interface SourceSecretChange {
  add: NewSourceSecret | null;
  othersExpireAt: number;
}

/** A signing secret as the API shows it: never its value. */
export interface SourceSecretInfo {
  id: string;
  createdAt: number;
  /** Null: verifies until replaced. */
  expiresAt: number | null;
}

/** A value sealed with INTAKE_SECRETS_KEY, wherever it is kept. */
export interface SealedValue {
  kind: 'totp_secret' | 'totp_pending_secret' | 'source_secret' | 'secret_sealed' | 'previous_secret_sealed' | 'headers_sealed';
  /** The user's, the secret's or the destination's id (the destination's sealed columns are the last three kinds). */
  id: string;
  sealed: string;
}

export interface NewApiKey {
  id: string;
  /** Null for a company management key. */
  integrationId: string | null;
  scopes: Scope[];
  prefix: string;
  hash: string;
  createdAt: number;
  expiresAt: number | null;
  /** What the key is for, as its creator put it; unnamed when absent. */
  name?: string;
}

export interface ApiKeyRecord {
  id: string;
  companyId: string;
  integrationId: string | null;
  scopes: Scope[];
  prefix: string;
  createdAt: number;
  expiresAt: number | null;
  revokedAt: number | null;
  lastUsedAt: number | null;
  lastUsedIp: string | null;
}

/** A key as the management API shows it. */
export interface KeyDetails extends ApiKeyRecord {
  /** '' when unnamed. */
  name: string;
}

/** One sender seen using a key: its address and user agent, when last and how often. */
export interface KeyCaller {
  ip: string;
  userAgent: string | null;
  lastSeenAt: number;
  requests: number;
}

/** What a live key allows: found by hash, not revoked, its integration not deleted. */
export interface KeyGrant {
  keyId: string;
  keyHash: string;
  companyId: string;
  integrationId: string | null;
  scopes: Scope[];
  expiresAt: number | null;
}

/** What the intake path needs of the integration an address names. */
export interface IntegrationRoute {
  id: string;
  companyId: string;
  enabled: boolean;
  bodyLimitBytes: number;
  rateLimitPerMinute: number | null;
  /** Null for an `api_key` source: the key is the only way in. */
  source: RouteSource | null;
}

/** A provider source as intake verifies it: its secrets still sealed (opened per request). */
export interface RouteSource {
  type: ProviderType;
  config: SourceConfig;
  /** Live when found; each checked against `expiresAt` again when used, as the cache keeps them a while. */
  secrets: Array<{ id: string; sealed: string; expiresAt: number | null }>;
}

export interface KeyUsage {
  companyId: string;
  keyId: string;
  at: number;
  ip: string;
}

export interface PendingWebhook {
  uuid: string;
  companyId: string;
  integrationId: string;
  keyId: string;
  event: string;
  receivedAt: number;
  rawBody: Buffer;
  /** SHA-256 of the raw body, computed only when there is an idempotency key or a signature claim. */
  bodySha256: string | null;
  /** JSON object of the kept headers. */
  headers: string;
  sourceIp: string;
  idempotencyKey: string | null;
  /**
   * A provider's signed request: its signature claim (src/sources/verifier.ts), so that a
   * copy of it within the idempotency window is a replay whatever delivery id it carries.
   * Absent for API-key webhooks.
   */
  signatureClaim?: string;
  /** Where the webhook's `data` comes from (see PayloadFormat); absent: `envelope`. */
  payloadFormat?: PayloadFormat;
  /** This request's request-log row, but for what the transaction decides (see requestLogOf). */
  log: PendingLogEntry;
}

export type CommitOutcome =
  | {
      kind: 'accepted';
      uuid: string;
      receivedAt: number;
      /** The outbox holds a delivery of it due now (absent: none, or only to paused destinations). */
      deliveriesDue?: true;
    }
  | { kind: 'replayed'; uuid: string; receivedAt: number }
  | { kind: 'conflict' };

/**
 * A webhook's request-log row before its transaction runs. Plain data, not a callback, so a
 * batch can be handed to another thread (the SQLite commit thread) as it is.
 */
export type PendingLogEntry = Omit<RequestLogEntry, 'status' | 'errorCode' | 'webhookUuid' | 'durationMs' | 'errorDetail'> & {
  /** When the request arrived, in ms since the epoch (fractional): its duration runs to the commit. */
  startedAt: number;
};

/** The status each outcome is answered with. */
export const STATUS_OF_OUTCOME: Record<CommitOutcome['kind'], number> = { accepted: 202, replayed: 200, conflict: 422 };

/** The request-log row of a webhook, once the transaction holding it knows its outcome. */
export function requestLogOf(pending: PendingLogEntry, outcome: CommitOutcome, now = preciseNow()): RequestLogEntry {
  const { startedAt, ...row } = pending;
  return {
    ...row,
    status: STATUS_OF_OUTCOME[outcome.kind],
    errorCode: outcome.kind === 'conflict' ? 'idempotency_conflict' : null,
    webhookUuid: outcome.kind === 'conflict' ? null : outcome.uuid,
    durationMs: durationMsSince(startedAt, now),
  };
}

/** Milliseconds from `startedAt` to `now` (both preciseNow()), to the microsecond, as the log keeps them. */
export function durationMsSince(startedAt: number, now: number): number {
  return Math.round(Math.max(0, now - startedAt) * 1000) / 1000;
}

/**
 * Milliseconds since the epoch with sub-millisecond precision, comparable between threads
 * (performance.now() alone counts from each thread's own start).
 */
export function preciseNow(): number {
  return performance.timeOrigin + performance.now();
}

/** Repeats of an idempotency key (or of a signature claim) older than this are new webhooks. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;

export type { PayloadFormat };

export interface RequestLogEntry {
  id: string;
  companyId: string;
  integrationId: string;
  receivedAt: number;
  method: string;
  status: number;
  errorCode: string | null;
  keyId: string | null;
  ip: string;
  userAgent: string | null;
  sizeBytes: number;
  durationMs: number;
  webhookUuid: string | null;
  /** What was wrong, in words, where the code alone does not say (why a signature was refused); absent: nothing more. */
  errorDetail?: string | null;
}

export interface ConnectionPoolState {
  /** Connections open, idle or in use. */
  total: number;
  idle: number;
  /** Queries waiting for a connection. */
  waiting: number;
  /** The most connections the pool opens (INTAKE_DATABASE_POOL_SIZE). */
  max: number;
}

/** A thread of the store and the seconds it has been busy, as a counter. */
export interface StoreThreadBusy {
  thread: 'sqlite_commit' | 'sqlite_read';
  seconds: number;
}

export interface PurgeReport {
  webhooks: number;
  requestLog: number;
  idempotencyKeys: number;
  /** Deliveries (with their attempts) past their company's retention. */
  deliveries: number;
  /** Whole time partitions dropped (PostgreSQL), by table name. */
  partitionsDropped: string[];
}

/** A company's retention unless it sets its own. */
export const DEFAULT_RETENTION_DAYS = 30;

export interface WebhookQuery {
  limit: number;
  cursor?: Cursor;
  event?: string;
  /** Inclusive lower bound, ms. */
  since?: number;
  /** Exclusive upper bound, ms. */
  until?: number;
}

/** A webhook as lists show it: its body (lists show its `data`), not its headers. */
export interface WebhookSummary {
  uuid: string;
  integrationId: string;
  event: string;
  receivedAt: number;
  rawBody: Buffer;
  payloadFormat: PayloadFormat;
}

export interface StoredWebhook extends WebhookSummary {
  headers: Record<string, string>;
  sourceIp: string;
}

/** What a webhook is without reading its body: the size comes from the row, not the bytes. */
export interface WebhookHead {
  uuid: string;
  receivedAt: number;
  sizeBytes: number;
}

/**
 * Bodies one page of webhooks holds at most (a single larger webhook still makes a page):
 * what one read loads into memory and hands to the event loop, whatever the body sizes.
 */
export const WEBHOOK_PAGE_BYTES = 1024 * 1024;

/** Rows of the filtered range one payload search reads at most before it answers. */
export const SEARCH_SCAN_ROWS = 10_000;
/** Bytes of bodies one payload search reads at most before it answers (one more body at most). */
export const SEARCH_SCAN_BYTES = 16 * 1024 * 1024;

export interface WebhookSearch extends WebhookQuery {
  integrationId?: string;
  /** Only webhooks whose raw body contains this text, exactly. */
  text?: string;
}

/** A range of the live tail: no cursor, no search. */
export type WebhookHeadQuery = Omit<WebhookSearch, 'cursor' | 'text'>;

export interface WebhookPage<W extends WebhookSummary = WebhookSummary> {
  webhooks: W[];
  /** Where the next page starts, or null when there is none. */
  next: Cursor | null;
}

export interface RequestLogQuery {
  limit: number;
  cursor?: PageCursor;
  integrationId?: string;
  keyId?: string;
  errorCode?: string;
  /** Statuses from `from` (inclusive) to `to` (exclusive). */
  status?: { from: number; to: number };
  since?: number;
  until?: number;
}

export interface UsageQuery {
  bucketMs: number;
  /** Inclusive, ms; the first bucket starts here. */
  since: number;
  /** Exclusive, ms. */
  until: number;
  integrationId?: string;
  keyId?: string;
  /** Counts per integration or per key in each bucket, instead of one for the company. */
  groupBy?: 'integration' | 'key';
}

/** Counts of one time bucket (of one integration or key when grouped). */
export interface UsageBucket {
  start: number;
  /** The integration or key id when grouped (null: requests without a valid key); else null. */
  group: string | null;
  accepted: number;
  replayed: number;
  rejected: number;
  failed: number;
  total: number;
}

/** Who made a change: a panel user, a management key, or an operator at the command line. */
export interface Actor {
  /** `system`: intake itself (a destination disabled for failing). */
  type: 'user' | 'key' | 'cli' | 'system';
  /** usr_… or key_…; the operating-system user for the CLI; null for the system. */
  id: string | null;
  ip: string | null;
}

/** One change, recorded in the transaction that makes it. Never holds a key or a password. */
export interface AuditEvent {
  actor: Actor;
  /** `integration.create`, `key.revoke`, … */
  action: string;
  targetType: string;
  targetId: string;
  before?: unknown;
  after?: unknown;
  at: number;
}

/** What a bulk operation's last transaction also does: its audit record (with the total made), and the lease freed. */
export interface RedeliveryFinish {
  audit: AuditEvent;
  /** What the earlier transactions of the operation made, for the record's total. */
  countBefore: number;
  /** The total's name in the record's `after`: `replayed`, `created`. */
  countKey: string;
}

/** What a bulk operation that stopped early made, for its audit record. */
export interface RedeliveryRecord {
  audit: AuditEvent;
  countKey: string;
  count: number;
}

export interface AuditRecord extends AuditEvent {
  id: string;
  companyId: string;
}

export interface AuditQuery {
  limit: number;
  /** The last record of the previous page. */
  cursor?: { at: number; id: string };
  action?: string;
  actorId?: string;
  targetId?: string;
  since?: number;
  until?: number;
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
