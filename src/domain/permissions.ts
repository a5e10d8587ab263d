import type { Scope } from './api-key.js';

/** What a caller of the management API may do in its company. */
export const PERMISSIONS = [
  'integrations:read',
  'integrations:manage',
  'logs:read',
  'members:read',
  'members:manage',
  'company:manage',
] as const;
export type Permission = (typeof PERMISSIONS)[number];

export type Role = 'owner' | 'admin' | 'viewer';

/**
 * The permission table of docs/api.md: a viewer reads, an admin also manages integrations
 * and keys, an owner also members and company settings.
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
};

export function permissionsOfScopes(scopes: readonly Scope[]): Set<Permission> {
  return new Set(scopes.flatMap((scope) => SCOPE_PERMISSIONS[scope] ?? []));
}
