/**
 * The audit log: written by each change of the other aggregates in its own transaction (the
 * `audit` argument), and read here.
 */
export interface AuditStore {
  /** Records an action that changes no setting but is the company's to know of (a signed test sent). */
  recordAudit(companyId: string, audit: AuditEvent): Promise<void>;
  listAuditLog(companyId: string, query: AuditQuery): Promise<AuditRecord[]>;
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
