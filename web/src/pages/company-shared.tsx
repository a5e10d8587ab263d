import type { Role } from '../api/types';
import type { Tone } from '../components/ui';

/**
 * What the company pages (Members, Management keys, Audit log, Settings) read from /api/v1,
 * as src/api/{members,management-keys,audit,company}.ts describe it.
 */

export interface Member {
  user_id: string;
  email: string;
  role: Role;
  added_at: string;
  /** The only owner: the API refuses to remove or demote them until another member is an owner. */
  last_owner: boolean;
}

/** A pending invitation (GET /invitations): who is asked to join, with which role, until when. */
export interface Invitation {
  id: string;
  email: string;
  role: Role;
  invited_by: { user_id: string; email: string } | null;
  created_at: string;
  expires_at: string;
}

/** POST /invitations: the link is in this answer only. */
export interface CreatedInvitation {
  invitation: Invitation;
  invite_url: string;
  /** Whether the server emailed the link (it does when SMTP is configured). */
  emailed: boolean;
}

export type ManagementScope = 'integrations:manage' | 'logs:read';

export interface ManagementKey {
  id: string;
  name: string;
  prefix: string;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  status: 'active' | 'expiring' | 'expired' | 'revoked';
  scopes: string[];
  last_used_at: string | null;
  last_used_ip: string | null;
}

export interface CreatedManagementKey {
  key: ManagementKey;
  api_key: string;
}

export interface AuditRecord {
  id: string;
  at: string;
  actor: { type: 'user' | 'key' | 'cli' | 'system'; id: string | null; ip: string | null };
  action: string;
  target: { type: string; id: string };
  before: unknown;
  after: unknown;
}

export interface Company {
  id: string;
  name: string;
  retention_days: number;
  created_at: string;
  environment: string;
  /** Every member must have two-factor sign-in on to use the company. */
  require_two_factor: boolean;
}

export const ROLES: { role: Role; label: string; description: string }[] = [
  { role: 'viewer', label: 'Viewer', description: 'reads integrations, logs, usage and members' },
  { role: 'admin', label: 'Admin', description: 'also creates and changes integrations and their keys' },
  { role: 'owner', label: 'Owner', description: 'also manages members, management keys and company settings' },
];

export const ROLE_TONES: Record<Role, Tone> = { owner: 'info', admin: 'good', viewer: 'neutral' };

export const MANAGEMENT_SCOPES: { scope: ManagementScope; description: string }[] = [
  { scope: 'integrations:manage', description: 'read, create, change and delete integrations and their keys' },
  { scope: 'logs:read', description: 'read the webhook log, the request log, usage and the audit log' },
];

export const KEY_STATUS_TONES: Record<ManagementKey['status'], Tone> = {
  active: 'good',
  expiring: 'warn',
  expired: 'neutral',
  revoked: 'bad',
};

/** Every action the API records (docs/api.md, "Members, company settings, audit log"). */
export const AUDIT_ACTIONS = [
  'company.create',
  'company.update',
  'invitation.create',
  'invitation.revoke',
  'member.add',
  'member.role_change',
  'member.remove',
  'integration.create',
  'integration.update',
  'integration.enable',
  'integration.disable',
  'integration.delete',
  'integration.source',
  'integration.source_test',
  'source_secret.rotate',
  'source_secret.end',
  'key.create',
  'key.rotate',
  'key.revoke',
  'management_key.create',
  'management_key.revoke',
  'destination.create',
  'destination.update',
  'destination.pause',
  'destination.resume',
  'destination.disable',
  'destination.delete',
  'destination.secret_rotate',
  'destination.send',
  'delivery.replay',
  'account.two_factor_enable',
  'account.two_factor_disable',
  'account.recovery_codes_renew',
  'account.password_change',
  'account.password_reset',
  'erasure.preview',
  'erasure.create',
  'erasure.confirm',
  'erasure.complete',
  'erasure.fail',
] as const;

export const MAX_RETENTION_DAYS = 3650;
