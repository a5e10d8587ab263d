/**
 * The shapes the panel reads from /api/v1, as the OpenAPI document (/api/openapi.json)
 * describes them. Times are ISO-8601 strings in UTC.
 */

export type Role = 'owner' | 'admin' | 'viewer';

/** POST /auth/login's 202: the password was right, the account's two-factor code is asked for next. */
export interface TwoFactorStep {
  two_factor_required: true;
  message: string;
}

export interface Session {
  user: { id: string; email: string; two_factor_enabled: boolean };
  companies: { id: string; name: string; role: Role; requires_two_factor: boolean }[];
  csrf_token: string;
  environment: string;
}

/** GET /account: the signed-in user's own account. */
export interface Account {
  id: string;
  email: string;
  two_factor_enabled: boolean;
  recovery_codes_left: number;
  created_at: string;
}

/** POST /account/two-factor/setup: what the authenticator app needs. */
export interface TwoFactorSetup {
  secret: string;
  otpauth_uri: string;
}

/** Enabling two-factor sign-in or replacing the codes: shown once. */
export interface RecoveryCodes {
  recovery_codes: string[];
}

/** POST /invitations/lookup: what an invitation link offers, before anyone accepts it. */
export interface InvitationOffer {
  company_name: string;
  role: Role;
  email: string;
  invited_by: string | null;
  expires_at: string;
}

/** GET /cli-logins/:user_code: a command-line sign-in (`intake login`) for a signed-in person to approve or deny. */
export interface CliLogin {
  /** ABCD-EFGH, as the terminal shows it. */
  user_code: string;
  /** The machine's name; the key's, once approved. */
  name: string;
  requested_ip: string;
  created_at: string;
  expires_at: string;
  state: 'pending' | 'approved' | 'denied' | 'issued';
}

/** The least a password must have (the API refuses shorter ones with a 400). */
export const MIN_PASSWORD_LENGTH = 12;

/** Erasure by data subject (/erasures): a preview (dry_run) or an erasure, and how far it got. */
export type ErasureState = 'counting' | 'previewed' | 'queued' | 'running' | 'completed' | 'failed' | 'expired';

export interface ErasureCounts {
  webhooks: number;
  deliveries: number;
  attempts: number;
  request_log: number;
}

export interface Erasure {
  id: string;
  state: ErasureState;
  /** A preview: it counts and changes nothing until confirmed. */
  dry_run: boolean;
  /** The value searched for, masked: the API never gives the value back. */
  value_hint: string;
  criteria: { since: string; until: string; integration_ids: string[] | null; paths: string[] };
  requested_by: { type: string; id: string | null };
  confirmed_by: { type: string; id: string | null } | null;
  created_at: string;
  confirmed_at: string | null;
  started_at: string | null;
  finished_at: string | null;
  /** A preview's value is dropped then unless it is confirmed. */
  expires_at: string | null;
  /** Webhooks of the range read so far. */
  scanned: number;
  counts: ErasureCounts;
  /** Up to ten matches: which webhooks and where the value was, never their bodies. */
  sample: { uuid: string; integration_id: string; event: string; received_at: string; matched_in: string }[];
  error: string | null;
}
