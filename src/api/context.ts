import type {} from '@fastify/cookie';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppInstance } from '../app-instance.js';
import type { AddressGuard } from '../destinations/address-guard.js';
import type { SecretBox } from '../domain/secret-box.js';
import type { CompanyHashers } from '../domain/value-hash.js';
import type { Accounts } from '../admin/accounts.js';
import type { Mailer } from '../admin/mailer.js';
import { csrfTokenMatches, SESSION_COOKIE, type Sessions } from '../admin/sessions.js';
import type { SignIn } from '../admin/sign-in.js';
import type { SignInGuard } from '../admin/sign-in-guard.js';
import type { Config } from '../config.js';
import { permissionsOfScopes, ROLE_PERMISSIONS, type Permission } from '../domain/permissions.js';
import { AppError } from '../errors.js';
import type { Authenticator } from '../intake/authenticate.js';
import type { KeyCache } from '../intake/key-cache.js';
import type { LastUsedTracker } from '../intake/last-used.js';
import { DestinationManagement } from '../services/destinations.js';
import type { Erasures } from '../services/erasures.js';
import type { Redeliveries } from '../services/redeliveries.js';
import { Management, type ManagementOptions } from '../services/management.js';
import type { Actor, Role, SessionRecord, Store } from '../store/store.js';

export interface ApiDeps {
  config: Config;
  store: Store;
  authenticator: Authenticator;
  keyCache: KeyCache;
  sessions: Sessions;
  signIn: SignIn;
  /** Bounds on password work and failed sign-ins, shared by every route that checks or sets a password. */
  guard: SignInGuard;
  accounts: Accounts;
  mailer: Mailer;
  /** Where a management key's use is recorded (written behind, as for intake). */
  lastUsed: LastUsedTracker;
  /** Seals sources' signing secrets, and destinations' secrets and headers. */
  secrets: SecretBox;
  /** Judges destinations' URLs (server-side request forgery). */
  addressGuard: AddressGuard;
  /** Replays and sends, bounded per company and stepped on this node (one for the app). */
  redeliveries: Redeliveries;
  /** Erasure by data subject: requests here, their work on the node's ErasureRunner. */
  erasures: Erasures;
  /** Each company's keyed hashes, intake's own: a preview of a hashing redaction shows the hashes intake would store. */
  hashers: CompanyHashers;
}

/** Who is calling /api/v1, for which company, allowed to do what. */
export interface Principal {
  companyId: string;
  actor: Actor;
  permissions: ReadonlySet<Permission>;
  /** Set when the caller signed in to the panel (absent for a management key). */
  session?: SessionRecord;
  role?: Role;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyContextConfig {
    /** What a route needs; a route without it is open to any authenticated caller of the company. */
    permission?: Permission;
    /** Reachable without authentication (sign-in). */
    public?: boolean;
    /** For a signed-in session only, and about the user, not a company (sign-out, who am I). */
    sessionOnly?: boolean;
    /** The company may be named by a `company_id` query parameter (EventSource cannot send headers). */
    companyInQuery?: boolean;
  }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The onRequest hook of /api/v1: a management key (X-API-Key) or a panel session (cookie,
 * with X-CSRF-Token on every change) becomes a Principal; then the route's permission is
 * checked. A key wins when both are sent. Integration keys are valid keys without any
 * management permission: 403.
 */
export function authenticateApi(deps: ApiDeps) {
  return async (request: FastifyRequest): Promise<void> => {
    request.principal = null;
    if (request.routeOptions.config.public) return;
    const principal = await resolvePrincipal(deps, request);
    const needed = request.routeOptions.config.permission;
    if (needed !== undefined && !principal.permissions.has(needed)) {
      throw new AppError(principal.session ? 'role_required' : 'insufficient_permissions');
    }
    request.principal = principal;
  };
}

/**
 * Who the request speaks for, or the AppError refusing it. Also what a long-running answer
 * (the live tail) calls again to learn whether its caller still has access.
 */
export async function resolvePrincipal(deps: ApiDeps, request: FastifyRequest): Promise<Principal> {
  const apiKey = request.headers['x-api-key'];
  const cookie = request.cookies[SESSION_COOKIE];
  if (apiKey !== undefined || cookie === undefined) {
    const grant = await deps.authenticator.throttledGrant(typeof apiKey === 'string' ? apiKey : undefined, request.ip, Date.now());
    if (grant instanceof AppError) throw grant;
    // An integration's key (webhooks:*) is valid here but may do nothing.
    if (grant.integrationId !== null || request.routeOptions.config.sessionOnly) throw new AppError('insufficient_permissions');
    deps.lastUsed.record({ companyId: grant.companyId, keyId: grant.keyId, at: Date.now(), ip: request.ip });
    return {
      companyId: grant.companyId,
      actor: { type: 'key', id: grant.keyId, ip: request.ip },
      permissions: permissionsOfScopes(grant.scopes),
    };
  }
  // A cookie that opens no session counts against its address like a wrong key: a flood
  // of made-up cookies meets the same per-address limit as a flood of made-up keys.
  const session = await deps.authenticator.throttled(request.ip, () => deps.sessions.resume(cookie));
  if (session instanceof AppError) throw session;
  if (!session) throw new AppError('not_signed_in');
  if (!SAFE_METHODS.has(request.method) && !csrfTokenMatches(session, header(request, 'x-csrf-token'))) {
    throw new AppError('csrf_failed');
  }
  const actor: Actor = { type: 'user', id: session.userId, ip: request.ip };
  if (request.routeOptions.config.sessionOnly) return { companyId: '', actor, permissions: new Set(), session };
  const memberships = await deps.store.listMembershipsOfUser(session.userId);
  const chosen = header(request, 'x-company-id') ?? companyFromQuery(request);
  const membership =
    chosen === undefined ? (memberships.length === 1 ? memberships[0] : undefined) : memberships.find((m) => m.companyId === chosen);
  if (!membership) {
    if (chosen !== undefined) throw new AppError('not_found', `No company with id ${chosen}.`);
    // Removed from their last company: the session still stands, but reaches nothing.
    if (memberships.length === 0) throw new AppError('role_required', 'You are not a member of any company.');
    throw new AppError('invalid_request', 'You belong to several companies: name one in the X-Company-Id header.', {
      field: 'X-Company-Id',
    });
  }
  // Checked on every request, as membership is: turning the requirement on holds at once.
  if (membership.requiresTwoFactor && !session.userHasTwoFactor) {
    throw new AppError(
      'two_factor_setup_required',
      `${membership.companyName} requires two-factor sign-in: turn it on under Account to continue.`,
    );
  }
  return {
    companyId: membership.companyId,
    actor,
    permissions: new Set(ROLE_PERMISSIONS[membership.role]),
    session,
    role: membership.role,
  };
}

/**
 * Whether the caller of a long-running answer (a live tail, an export) still reaches the
 * company it started with, with `permission`: resolved afresh as for a new request, so a
 * revoked key, a removed member or an ended session is seen. False also when it cannot be
 * told (the database away): the client asks again and is authenticated anew.
 */
export async function stillAllowed(deps: ApiDeps, request: FastifyRequest, started: Principal, permission: Permission): Promise<boolean> {
  try {
    const current = await resolvePrincipal(deps, request);
    return current.companyId === started.companyId && current.permissions.has(permission);
  } catch (error) {
    if (!(error instanceof AppError)) request.log.warn({ err: error }, 'access re-check failed');
    return false;
  }
}

/**
 * The session of a public route's caller, when there is one (a route that works signed in
 * or out: accepting an invitation). A change needs its CSRF token as anywhere else; a
 * cookie that opens no session is as good as none.
 */
export async function optionalSession(deps: ApiDeps, request: FastifyRequest): Promise<SessionRecord | undefined> {
  const cookie = request.cookies[SESSION_COOKIE];
  if (cookie === undefined) return undefined;
  const session = await deps.sessions.resume(cookie);
  if (session && !SAFE_METHODS.has(request.method) && !csrfTokenMatches(session, header(request, 'x-csrf-token'))) {
    throw new AppError('csrf_failed');
  }
  return session;
}

function companyFromQuery(request: FastifyRequest): string | undefined {
  if (!request.routeOptions.config.companyInQuery) return undefined;
  const value = (request.query as { company_id?: unknown }).company_id;
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** The authenticated caller of a route that is not public. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new Error('an /api/v1 route ran without its authentication hook');
  return request.principal;
}

/** The change service acting for this request's caller (their audit records name them). */
export function managementFor(deps: ApiDeps, request: FastifyRequest): Management {
  return new Management(deps.store, managementOptions(deps.config, deps.secrets), principalOf(request).actor);
}

/** The destination service acting for this request's caller. */
export function destinationsFor(deps: ApiDeps, request: FastifyRequest): DestinationManagement {
  const options = {
    environment: deps.config.environment,
    secrets: deps.secrets,
    addressGuard: deps.addressGuard,
    baseUrl: deps.config.baseUrl,
    // The node's sandbox, the deliveries' own: a saved transformation compiles there.
    checkTransformation: (code: string) => (request.server as AppInstance).dispatcher.transformPool().check(code),
  };
  return new DestinationManagement(deps.store, options, principalOf(request).actor);
}

/** Refuses a caller without `permission`, which the route needs besides its own for what this request does; `message` says why. */
export function requirePermission(request: FastifyRequest, permission: Permission, message: string): void {
  const principal = principalOf(request);
  if (!principal.permissions.has(permission)) throw new AppError(principal.session ? 'role_required' : 'insufficient_permissions', message);
}

export function managementOptions(config: Config, secrets?: SecretBox): ManagementOptions {
  return { environment: config.environment, baseUrl: config.baseUrl, defaultBodyLimit: config.defaultBodyLimit, secrets, passwordHashCost: config.passwordHashCost };
}

/** For handlers that answer 204. */
export function noContent(reply: FastifyReply): FastifyReply {
  return reply.code(204).send();
}
