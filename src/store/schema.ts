import type { ColumnType, Generated } from 'kysely';

/**
 * The tables as Kysely sees them. Times are integer milliseconds since the epoch in every
 * dialect (one comparison, one index order); flags are 0/1 integers for the same reason.
 */
export interface Database {
  companies: CompaniesTable;
  users: UsersTable;
  memberships: MembershipsTable;
  integrations: IntegrationsTable;
  api_keys: ApiKeysTable;
  webhooks: WebhooksTable;
  idempotency_keys: IdempotencyKeysTable;
  request_log: RequestLogTable;
  auth_changes: AuthChangesTable;
  setup_tokens: SetupTokensTable;
  audit_log: AuditLogTable;
  sessions: SessionsTable;
  recovery_codes: RecoveryCodesTable;
  invitations: InvitationsTable;
  password_resets: PasswordResetsTable;
  source_secrets: SourceSecretsTable;
  destinations: DestinationsTable;
  deliveries: DeliveriesTable;
  delivery_attempts: DeliveryAttemptsTable;
  feed_sequence: FeedSequenceTable;
  redelivery_state: RedeliveryStateTable;
  cli_logins: CliLoginsTable;
  destination_rules: DestinationRulesTable;
  delivery_dedupe_keys: DeliveryDedupeKeysTable;
  erasures: ErasuresTable;
}

export interface CompaniesTable {
  id: string;
  name: string;
  retention_days: number;
  created_at: number;
  /** 1: members must sign in with a second factor to reach the company. */
  require_two_factor: Generated<number>;
}

export interface UsersTable {
  id: string;
  email: string;
  password_hash: string;
  created_at: number;
  /** The TOTP secret, sealed with INTAKE_SECRETS_KEY (see domain/secret-box.ts); null: two-factor off. */
  totp_secret: string | null;
  /** A secret being enrolled (sealed), until a code from it turns two-factor on. */
  totp_pending_secret: string | null;
  totp_enabled_at: number | null;
  /** The last TOTP time step accepted: a code is good once (RFC 6238, section 5.2). */
  totp_last_step: number | null;
  password_changed_at: number | null;
}

export interface MembershipsTable {
  company_id: string;
  user_id: string;
  role: string;
  created_at: number;
}

export interface IntegrationsTable {
  id: string;
  company_id: string;
  integration_key: string;
  name: string;
  description: string;
  enabled: number;
  body_limit_bytes: number;
  rate_limit_per_minute: number | null;
  created_at: number;
  updated_at: number;
  deleted_at: number | null;
  /** `api_key`, or the provider whose signature is a second way in (src/sources/provider.ts). */
  source_type: Generated<string>;
  /** JSON of the source's settings (never a secret): the hmac type's header and algorithm… */
  source_config: Generated<string>;
  /** JSON of what is redacted before storing, `{paths, headers}` (src/domain/redaction.ts); null: nothing. */
  redaction: string | null;
  /**
   * Days its webhooks are kept when shorter than the company's retention (migration 0019);
   * null: the company's. The company's wins when it is shorter: the purge keeps the minimum.
   */
  retention_days: number | null;
}

export interface ApiKeysTable {
  id: string;
  company_id: string;
  /** Null for a company management key. */
  integration_id: string | null;
  /** Space-separated scopes. */
  scopes: string;
  prefix: string;
  key_hash: string;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
  last_used_at: number | null;
  last_used_ip: string | null;
  /** What the key is for, as its creator put it ('' when unnamed). */
  name: Generated<string>;
}

export interface WebhooksTable {
  uuid: string;
  company_id: string;
  integration_id: string;
  event: string;
  received_at: number;
  raw_body: Buffer;
  /** JSON object of the headers kept (see intake/headers.ts). */
  headers: string;
  source_ip: string;
  /** The API key, or the source secret (`sec_…`) whose signature admitted it. */
  key_id: string;
  idempotency_key: string | null;
  /** `envelope` (the API key's `{event, data}`), or a provider's own `json` or `form`: where `data` comes from. */
  payload_format: Generated<string>;
  /** The feed's position (store/sqlite/feed.ts, store/postgres/feed.ts); null for webhooks older than the feed. */
  feed_seq: Generated<number | null>;
  /**
   * The request-log record of the 202 that stored it (migration 0010): its id, user agent and
   * time to answer. Null for webhooks stored before, whose record is a row of `request_log`.
   */
  request_id: string | null;
  user_agent: string | null;
  duration_ms: number | null;
  /** Its request's OpenTelemetry trace id, when traced and sampled (migration 0014). */
  trace_id: string | null;
  /** The erasure that replaced it by a tombstone (migration 0018); null: as stored. */
  erasure_id: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface IdempotencyKeysTable {
  integration_id: string;
  idempotency_key: string;
  company_id: string;
  webhook_uuid: string;
  body_sha256: string;
  created_at: number;
}

export interface RequestLogTable {
  id: string;
  company_id: string;
  integration_id: string;
  received_at: number;
  method: string;
  status: number;
  error_code: string | null;
  key_id: string | null;
  ip: string;
  user_agent: string | null;
  size_bytes: number;
  duration_ms: number;
  webhook_uuid: string | null;
  /** What was wrong, in words, where the error code alone does not say (a signature's refusal). */
  error_detail: string | null;
  /** The request's OpenTelemetry trace id, when traced and sampled (migration 0014). */
  trace_id: string | null;
}

/** One row per change that can make a cached key answer stale; nodes poll its max id. */
export interface AuthChangesTable {
  id: Generated<number>;
  changed_at: number;
}

export interface SetupTokensTable {
  token_hash: string;
  created_at: number;
  expires_at: number;
  used_at: number | null;
}

/** Every change made through the API, the panel or the CLI; before/after are JSON without secrets. */
export interface AuditLogTable {
  id: string;
  company_id: string;
  at: number;
  actor_type: string;
  actor_id: string | null;
  actor_ip: string | null;
  action: string;
  target_type: string;
  target_id: string;
  before: string | null;
  after: string | null;
}

/** Panel sessions, by the SHA-256 of the cookie's value. */
export interface SessionsTable {
  id_hash: string;
  user_id: string;
  csrf_token: string;
  created_at: number;
  last_seen_at: number;
  expires_at: number;
  ip: string | null;
  user_agent: string | null;
}

/** One-time recovery codes of a user's two-factor sign-in, by SHA-256. */
export interface RecoveryCodesTable {
  user_id: string;
  code_hash: string;
  created_at: number;
  used_at: number | null;
}

/** An invitation to join a company; its link's token only by SHA-256. */
export interface InvitationsTable {
  id: string;
  company_id: string;
  /** Lower-cased; only the account with this email may accept. */
  email: string;
  role: string;
  token_hash: string;
  invited_by: string | null;
  created_at: number;
  expires_at: number;
  accepted_at: number | null;
  accepted_by: string | null;
  revoked_at: number | null;
}

/** One-time password reset links, by the SHA-256 of their token. */
export interface PasswordResetsTable {
  token_hash: string;
  user_id: string;
  created_at: number;
  expires_at: number;
  used_at: number | null;
}

/** A source's signing secrets, sealed with INTAKE_SECRETS_KEY; several live at once during a rotation. */
export interface SourceSecretsTable {
  id: string;
  company_id: string;
  integration_id: string;
  /** The secret, sealed (src/domain/secret-box.ts): it must be read back to verify. */
  sealed: string;
  created_at: number;
  /** Null: live until replaced; otherwise the end of its overlap with its successor. */
  expires_at: number | null;
}

/** A company's URL that receives its matching webhooks (src/store/destination-types.ts). */
export interface DestinationsTable {
  id: string;
  company_id: string;
  name: string;
  url: string;
  /** JSON list of integration ids; null: every integration. */
  integration_ids: string | null;
  /** JSON list of patterns. */
  event_patterns: string;
  /** The extra headers as a JSON object, sealed with INTAKE_SECRETS_KEY; null: none. */
  headers_sealed: string | null;
  /** JSON list of the extra headers' names (shown; the values are not). */
  header_names: Generated<string>;
  /** The `whsec_` signing secret, sealed. */
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_secret_expires_at: number | null;
  timeout_ms: number;
  rate_per_second: number | null;
  max_in_flight: number;
  status: Generated<string>;
  disabled_reason: string | null;
  status_changed_at: number;
  needs_reconcile: Generated<number>;
  failing_since: number | null;
  last_success_at: number | null;
  /** The rate's one-second window of the nodes before migration 0013, which still read it during an upgrade. */
  rate_window_start: Generated<number>;
  rate_window_count: Generated<number>;
  /** The earliest time (µs since the epoch) the destination's next request may go out (migration 0013). */
  rate_next_send_at_us: Generated<number>;
  /** The current version of its rules in destination_rules; 0: none (migration 0016). */
  rules_version: Generated<number>;
  /** How long after its webhook arrived a delivery is first due (the rules' delay). */
  delay_ms: Generated<number>;
  created_at: number;
  updated_at: number;
  deleted_at: number | null;
}

/** One webhook to one destination: the outbox row, written with its webhook. */
export interface DeliveriesTable {
  id: string;
  company_id: string;
  destination_id: string;
  webhook_uuid: string;
  webhook_received_at: number;
  integration_id: string;
  event: string;
  state: string;
  attempts: Generated<number>;
  series: Generated<number>;
  /** Due time; while leased, the lease's end. */
  next_attempt_at: number | null;
  /** Set while an attempt is in flight: its result applies only with the same token. */
  lease_token: string | null;
  last_attempt_at: number | null;
  last_status: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  /** When the current series began, for a replayed delivery; null for series 0. */
  series_started_at: ColumnType<number | null, number | null | undefined, number | null>;
  /** The destination's rules version its last attempt (or skip) used; null before rules existed (migration 0016). */
  rules_version: ColumnType<number | null, number | null | undefined, number | null>;
  /** For a `filtered` delivery: `filter` or `transformation` (it returned nothing). */
  skipped_by: ColumnType<string | null, string | null | undefined, string | null>;
  /** For a `deduplicated` delivery: the delivery it repeats. */
  duplicate_of: ColumnType<string | null, string | null | undefined, string | null>;
}

/** Every saved version of a destination's rules (migration 0016). */
export interface DestinationRulesTable {
  destination_id: string;
  version: number;
  company_id: string;
  /** JSON of the rules (src/domain/rules/rules.ts). */
  rules: string;
  created_at: number;
}

/** Deduplication keys within their window: the first delivery with a key holds it. */
export interface DeliveryDedupeKeysTable {
  destination_id: string;
  key: string;
  delivery_id: string;
  expires_at: number;
}

export interface DeliveryAttemptsTable {
  id: string;
  company_id: string;
  delivery_id: string;
  destination_id: string;
  series: number;
  number: number;
  attempted_at: number;
  duration_ms: number;
  status: number | null;
  error: string | null;
  response_excerpt: string | null;
  next_attempt_at: number | null;
}

/** SQLite only: the next feed position (store/sqlite/feed.ts). */
export interface FeedSequenceTable {
  id: number;
  next: number;
}

/** A company's replays and sends (migration 0012): the bulk operation under way, and the budget. */
export interface RedeliveryStateTable {
  company_id: string;
  /** The bulk operation under way holds it until lease_expires_at; null: none. */
  lease_token: string | null;
  lease_expires_at: Generated<number>;
  /** Deliveries the company may still make again now (a token bucket, refilled by the hour). */
  budget_tokens: number;
  budget_counted_at: number;
}

/** Command-line sign-ins waiting for, or just past, a person's approval (migration 0015). */
export interface CliLoginsTable {
  /** SHA-256 of the terminal's device code; the code itself is never stored. */
  device_code_hash: string;
  /** The code a person compares and types, 8 letters without the dash. */
  user_code: string;
  /** The key's name once issued: the machine's, as the terminal sent it. */
  name: string;
  requested_ip: string;
  created_at: number;
  expires_at: number;
  last_polled_at: number | null;
  state: string;
  company_id: string | null;
  decided_by: string | null;
  decided_ip: string | null;
  decided_at: number | null;
  key_id: string | null;
}

/** A request to erase a person's data (migration 0018, src/services/erasures.ts). */
export interface ErasuresTable {
  id: string;
  company_id: string;
  /** `counting` → `previewed` (a dry run), or `queued` → `running` → `completed`; `failed`, `expired`. */
  state: string;
  /** 1: a preview: it counts and changes nothing until confirmed. */
  dry_run: number;
  /** The value searched for, sealed with INTAKE_SECRETS_KEY; null once the erasure has ended. */
  value_sealed: string | null;
  /** The value masked (`j•••@example.com`): what people and the report see. */
  value_hint: string;
  /** JSON of the criteria but the value: since, until, integration_ids, paths. */
  criteria: string;
  requested_by_type: string;
  requested_by_id: string | null;
  confirmed_by_type: string | null;
  confirmed_by_id: string | null;
  created_at: number;
  confirmed_at: number | null;
  started_at: number | null;
  finished_at: number | null;
  /** A preview not confirmed by then is dropped with its value. */
  expires_at: number | null;
  /** Where the scan has reached: the last webhook read, by (received_at, uuid). */
  cursor_received_at: number | null;
  cursor_uuid: string | null;
  scanned: Generated<number>;
  webhooks: Generated<number>;
  deliveries: Generated<number>;
  attempts: Generated<number>;
  request_log: Generated<number>;
  sample: Generated<string>;
  error: string | null;
  lease_token: string | null;
  lease_expires_at: Generated<number>;
}
