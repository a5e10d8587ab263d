import { AppError } from '../errors.js';
import { INTEGRATION_SCOPES, type IntegrationScope, type Scope } from './api-key.js';

/** What a caller of the management API may do in its company. */
export const PERMISSIONS = [
  'integrations:read',
  'integrations:manage',
  'logs:read',
  'members:read',
  'members:manage',
  'company:manage',
  /** Erasing a person's data (issue 40): owners, and keys given the scope, only. */
  'data:erase',
] as const;
export type Permission = (typeof PERMISSIONS)[number];

export type Role = 'owner' | 'admin' | 'viewer';

/**
 * The permission table of docs/api.md: a viewer reads, an admin also manages integrations
 * and keys, an owner also members and company settings, and erases personal data.
 */
export const ROLE_PERMISSIONS: Record<Role, readonly Permission[]> = {
  viewer: ['integrations:read', 'logs:read', 'members:read'],
  admin: ['integrations:read', 'integrations:manage', 'logs:read', 'members:read'],
  owner: PERMISSIONS,
};

/**
 * What a management key's scopes allow. A key never manages members or company settings:
 * who has access is decided by people signed in, so a leaked key cannot add anyone.
 */
export const SCOPE_PERMISSIONS: Partial<Record<Scope, readonly Permission[]>> = {
  'integrations:manage': ['integrations:read', 'integrations:manage'],
  'logs:read': ['integrations:read', 'logs:read'],
  // A data-protection script erases and reads its erasures; it reads no webhook (a preview's sample never shows a body).
  'data:erase': ['data:erase'],
};

export function permissionsOfScopes(scopes: readonly Scope[]): Set<Permission> {
  return new Set(scopes.flatMap((scope) => SCOPE_PERMISSIONS[scope] ?? []));
}

/**
 * The scopes of an integration key issued by a caller holding `permissions`: those it asks
 * for, or by default all it may give. Reading webhooks with the key is reading logs, so
 * only a caller who may read logs (logs:read) gives webhooks:read; asking for it without
 * is a 403. Whoever may manage integrations may give webhooks:write.
 */
export function issuableIntegrationScopes(permissions: ReadonlySet<Permission>, requested?: readonly IntegrationScope[]): IntegrationScope[] {
  const issuable = INTEGRATION_SCOPES.filter((scope) => scope !== 'webhooks:read' || permissions.has('logs:read'));
  if (requested === undefined) return issuable;
  if (requested.some((scope) => !issuable.includes(scope))) {
    throw new AppError('insufficient_permissions', 'A key with webhooks:read can only be issued by a caller who may read logs (logs:read).', {
      field: 'scopes',
    });
  }
  return [...requested];
}
