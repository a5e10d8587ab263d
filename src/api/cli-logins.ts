import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { linkTokenHash } from '../admin/links.js';
import type { AppInstance } from '../app-instance.js';
import { displayUserCode, newDeviceCode, newUserCode, normalizeUserCode } from '../domain/cli-login-codes.js';
import { FailureWindows } from '../domain/failure-windows.js';
import { ROLE_PERMISSIONS } from '../domain/permissions.js';
import { AppError } from '../errors.js';
import { addressKey } from '../intake/auth-failures.js';
import { Management } from '../services/management.js';
import type { CliLogin, Store } from '../store/store.js';
import { sessionOf } from './auth.js';
import { managementFor, managementOptions, noContent, principalOf, type ApiDeps } from './context.js';
import { ERROR_RESPONSES, ErrorResponse, Id, Timestamp, iso } from './schemas.js';

/** How long a sign-in waits for its approval, and then for the terminal to collect its key. */
export const CLI_LOGIN_LIFETIME_MS = 10 * 60 * 1000;
/** Seconds the terminal waits between polls. */
export const CLI_LOGIN_POLL_SECONDS = 2;
/** A poll this much early still counts as on time: the network does not keep a terminal's spacing. */
const POLL_TOLERANCE_MS = 500;
/** Sign-ins asked for per address (IPv6: its /64) in a lifetime's window, on each node. */
export const CLI_LOGINS_PER_ADDRESS = 10;
/** Sign-ins waiting at once, all nodes together (the database counts them). */
export const MAX_PENDING_CLI_LOGINS = 500;
/** What the terminal's key may do: read the company's webhooks and logs, nothing else. */
const CLI_LOGIN_SCOPES = ['logs:read'];

const CliLoginSchema = Type.Object(
  {
    user_code: Type.String({ description: 'The code the terminal shows, as ABCD-EFGH: compare the two before approving.' }),
    name: Type.String({ description: "The machine's name, as the terminal sent it; the key's name once approved." }),
    requested_ip: Type.String({ description: 'The address the sign-in was asked for from.' }),
    created_at: Timestamp,
    expires_at: Timestamp,
    state: Type.Union([Type.Literal('pending'), Type.Literal('approved'), Type.Literal('denied'), Type.Literal('issued')], {
      description: 'pending (waiting for a decision), approved (the terminal collects its key next), denied, or issued (the terminal has its key).',
    }),
  },
  { $id: 'CliLogin' },
);
const UserCodeParams = Type.Object({ user_code: Type.String({ maxLength: 32, description: 'ABCD-EFGH (any case, the dash optional).' }) });
const RFC_8628 = 'Modelled on the OAuth 2.0 device authorization grant (RFC 8628), in this API\'s error format.';

/**
 * /api/v1/cli-logins: `intake login`. The terminal asks (anonymous) and polls with its device
 * code; a signed-in person opens the user code in the panel and approves it for one of their
 * companies, or denies it; the next poll creates a management key with logs:read only, once.
 */
export async function cliLoginRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const tags = ['Command-line sign-in'];
  const requestsByAddress = new FailureWindows(CLI_LOGIN_LIFETIME_MS);

  app.post(
    '/cli-logins',
    {
      config: { public: true },
      schema: {
        tags,
        summary: 'Start a command-line sign-in',
        description:
          `${RFC_8628} Answers a device code for the terminal to poll with (shown only here; only its hash is kept) and a ` +
          'user code for a person to approve at `verification_url`, both good for 10 minutes. At most ' +
          `${CLI_LOGINS_PER_ADDRESS} sign-ins per address in 10 minutes and ${MAX_PENDING_CLI_LOGINS} waiting at once in all; ` +
          'past either, 429 with Retry-After.',
        security: [],
        body: Type.Object({
          name: Type.String({ minLength: 1, maxLength: 200, description: "The machine's name: the key is named after it." }),
        }),
        response: {
          201: Type.Object({
            device_code: Type.String({ description: 'The terminal\'s secret for polling: shown only in this answer.' }),
            user_code: Type.String({ description: 'ABCD-EFGH: what the person compares and approves.' }),
            verification_url: Type.String({ description: "The panel's page for this sign-in, the user code in its query." }),
            expires_at: Timestamp,
            interval: Type.Integer({ description: 'Seconds to wait between polls.' }),
          }),
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request, reply) => {
      const name = request.body.name.trim();
      if (name === '') throw new AppError('invalid_request', 'The name must not be blank.', { field: 'name' });
      const address = `ip:${addressKey(request.ip)}`;
      const wait = requestsByAddress.blockedFor(address, CLI_LOGINS_PER_ADDRESS);
      if (wait > 0) {
        throw new AppError('rate_limited', 'Too many command-line sign-ins from this address; try again later.', {
          retryAfterSeconds: Math.ceil(wait / 1000),
        });
      }
      requestsByAddress.count(address);
      const now = Date.now();
      const deviceCode = newDeviceCode();
      // A drawn user code may be another waiting login's (1 in 25 billion a login); a third draw is past any chance.
      for (let draw = 1; draw <= 3; draw++) {
        const login = {
          deviceCodeHash: linkTokenHash(deviceCode),
          userCode: newUserCode(),
          name,
          requestedIp: request.ip,
          createdAt: now,
          expiresAt: now + CLI_LOGIN_LIFETIME_MS,
        };
        const created = await deps.store.createCliLogin(login, MAX_PENDING_CLI_LOGINS);
        if (created.outcome === 'full') {
          throw new AppError('rate_limited', 'Too many command-line sign-ins are waiting for approval; try again later.', {
            retryAfterSeconds: Math.max(1, Math.ceil((created.retryAt - now) / 1000)),
          });
        }
        if (created.outcome === 'created') {
          const userCode = displayUserCode(login.userCode);
          return reply.code(201).send({
            device_code: deviceCode,
            user_code: userCode,
            verification_url: `${deps.config.baseUrl}/admin/cli-login?code=${userCode}`,
            expires_at: iso(login.expiresAt),
            interval: CLI_LOGIN_POLL_SECONDS,
          });
        }
      }
      throw new Error('three user codes drawn were all taken');
    },
  );

  app.post(
    '/cli-logins/token',
    {
      config: { public: true },
      schema: {
        tags,
        summary: "Collect a command-line sign-in's key",
        description:
          `${RFC_8628} Poll every \`interval\` seconds: 400 \`authorization_pending\` while nobody has decided, 400 ` +
          '`slow_down` for a poll sooner than that (wait 5 seconds more from then on), 403 `access_denied` once denied, ' +
          '400 `expired_token` for a device code unknown, expired or already used. Once approved, the next poll creates ' +
          'the management key (logs:read only, named after the machine, in the audit log as made by the person who ' +
          'approved) and answers it, that once: the key is stored nowhere but in the answer. A device code that finds ' +
          'nothing counts against the address as a wrong API key does.',
        security: [],
        body: Type.Object({ device_code: Type.String({ minLength: 1, maxLength: 200 }) }),
        response: {
          200: Type.Object({
            api_key: Type.String({ description: 'The whole key, shown only in this answer: store it now.' }),
            key_id: Id('key'),
            company_id: Id('cmp'),
            company_name: Type.String(),
            name: Type.String({ description: "The key's name: the machine's." }),
          }),
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request) => {
      const now = Date.now();
      const deviceCodeHash = linkTokenHash(request.body.device_code);
      const minGapMs = CLI_LOGIN_POLL_SECONDS * 1000 - POLL_TOLERANCE_MS;
      const polled = await deps.authenticator.throttled(request.ip, () => deps.store.pollCliLogin(deviceCodeHash, now, minGapMs));
      if (polled instanceof AppError) throw polled;
      if (!polled) throw new AppError('expired_token');
      const { login, tooSoon } = polled;
      if (tooSoon) throw new AppError('slow_down', `Poll this sign-in at most once every ${CLI_LOGIN_POLL_SECONDS} seconds.`);
      if (login.state === 'pending') throw new AppError('authorization_pending');
      if (login.state === 'denied') throw new AppError('access_denied');
      if (login.state === 'issued') throw new AppError('expired_token', "This sign-in's key was already handed out: run intake login again.");
      return issueKey(deps, login, now);
    },
  );

  app.get(
    '/cli-logins/:user_code',
    {
      config: { sessionOnly: true },
      schema: {
        tags,
        summary: 'Look at a command-line sign-in',
        description:
          'What the panel shows before you approve: the machine, the address it asked from, and whether it still waits. ' +
          'Any signed-in person; a code that finds nothing counts against the address as a wrong API key does.',
        security: [{ session: [] }],
        params: UserCodeParams,
        response: { 200: CliLoginSchema, ...ERROR_RESPONSES },
      },
    },
    async (request) => present(await findLogin(deps, request, request.params.user_code, Date.now())),
  );

  app.post(
    '/cli-logins/:user_code/approve',
    {
      config: { sessionOnly: true },
      schema: {
        tags,
        summary: 'Approve a command-line sign-in',
        description:
          'For one of your companies, in which your role reads logs (every role does): the terminal then receives a ' +
          'management key with logs:read only, which reads nothing your role cannot, but is the company\'s, not yours: ' +
          'it works until revoked (by `intake logout`, or by an owner under Management keys), also after you leave. ' +
          '409 when the sign-in was decided already.',
        security: [{ session: [] }],
        params: UserCodeParams,
        body: Type.Object({ company_id: Id('cmp', 'The company the key is for.') }),
        response: { 200: CliLoginSchema, ...ERROR_RESPONSES, 409: ErrorResponse },
      },
    },
    async (request) => {
      const session = sessionOf(request);
      const now = Date.now();
      const login = await findWaitingLogin(deps, request, request.params.user_code, now);
      const companyId = request.body.company_id;
      const membership = (await deps.store.listMembershipsOfUser(session.userId)).find((m) => m.companyId === companyId);
      if (!membership) throw new AppError('not_found', `No company with id ${companyId}.`);
      // As resolvePrincipal holds every other route of the company to it.
      if (membership.requiresTwoFactor && !session.userHasTwoFactor) {
        throw new AppError('two_factor_setup_required', `${membership.companyName} requires two-factor sign-in: turn it on under Account to continue.`);
      }
      if (!ROLE_PERMISSIONS[membership.role].includes('logs:read')) {
        throw new AppError('role_required', 'The key would read the webhooks and logs of the company, which your role does not.');
      }
      const decided = await deps.store.approveCliLogin(companyId, login.userCode, { userId: session.userId, ip: request.ip, at: now });
      if (!decided) throw new AppError('conflict', 'This sign-in was decided or expired meanwhile.');
      return present({ ...login, state: 'approved' });
    },
  );

  app.post(
    '/cli-logins/:user_code/deny',
    {
      config: { sessionOnly: true },
      schema: {
        tags,
        summary: 'Deny a command-line sign-in',
        description: 'The terminal is told at its next poll (403 `access_denied`); nothing is issued. 409 when it was decided already.',
        security: [{ session: [] }],
        params: UserCodeParams,
        response: { 200: CliLoginSchema, ...ERROR_RESPONSES, 409: ErrorResponse },
      },
    },
    async (request) => {
      const now = Date.now();
      const login = await findWaitingLogin(deps, request, request.params.user_code, now);
      const decided = await deps.store.denyCliLogin(login.userCode, { userId: sessionOf(request).userId, ip: request.ip, at: now });
      if (!decided) throw new AppError('conflict', 'This sign-in was decided or expired meanwhile.');
      return present({ ...login, state: 'denied' });
    },
  );

  app.delete(
    '/cli-logins/current',
    {
      schema: {
        tags,
        summary: 'Revoke the calling key',
        description:
          '`intake logout`: the management key in X-API-Key revokes itself, on every node within a second. Any management ' +
          'key may; it can do nothing else here. A panel session cannot: owners revoke keys under Management keys.',
        security: [{ apiKey: [] }],
        response: { 204: Type.Null(), ...ERROR_RESPONSES },
      },
    },
    async (request, reply) => {
      const { actor, companyId } = principalOf(request);
      if (actor.type !== 'key' || actor.id === null) {
        throw new AppError('invalid_request', 'Only a key revokes itself here (X-API-Key); owners revoke keys under Management keys.');
      }
      await managementFor(deps, request).revokeManagementKey(companyId, actor.id);
      return noContent(reply);
    },
  );
}

/**
 * The approved login's key, made by the management service as the person who approved it,
 * in the transaction that marks the login issued.
 */
async function issueKey(deps: ApiDeps, login: CliLogin, now: number) {
  const companyId = login.companyId!;
  const approver = login.decidedBy!;
  // Acted on only while its author may still give it: removed from the company since, no key.
  const membership = (await deps.store.listMembershipsOfUser(approver)).find((m) => m.companyId === companyId);
  if (!membership || !ROLE_PERMISSIONS[membership.role].includes('logs:read')) {
    throw new AppError('access_denied', 'The person who approved this sign-in can no longer give access to that company.');
  }
  const actor = { type: 'user' as const, id: approver, ip: login.decidedIp };
  const management = new Management(deps.store, managementOptions(deps.config, deps.secrets), actor);
  const created = await management.createManagementKey(companyId, CLI_LOGIN_SCOPES, login.name, issuingWrite(deps.store, login.deviceCodeHash, now));
  const company = await deps.store.getCompany(companyId);
  return { api_key: created.apiKey, key_id: created.id, company_id: companyId, company_name: company?.name ?? '', name: login.name };
}

/**
 * How a login's key is written: only if the same transaction marks the login issued
 * (issueCliLoginKey). Of two polls at once, one gets the key and the other expired_token.
 */
function issuingWrite(store: Store, deviceCodeHash: string, now: number): Store['createApiKey'] {
  return async (companyId, key, audit) => {
    if (!audit) throw new Error("a command-line sign-in's key is created with its audit record");
    if (!(await store.issueCliLoginKey(companyId, deviceCodeHash, key, audit, now))) {
      throw new AppError('expired_token', "This sign-in's key was already handed out, or it expired: run intake login again.");
    }
  };
}

/** The login a user code names, not expired; 404 otherwise, counted against the address. */
async function findLogin(deps: ApiDeps, request: FastifyRequest, typed: string, now: number): Promise<CliLogin> {
  const userCode = normalizeUserCode(typed);
  const found = await deps.authenticator.throttled(request.ip, async () =>
    userCode === undefined ? undefined : deps.store.findCliLoginByUserCode(userCode, now),
  );
  if (found instanceof AppError) throw found;
  if (!found) throw new AppError('not_found', 'No command-line sign-in has this code: it may have expired (after 10 minutes). Run intake login again.');
  return found;
}

async function findWaitingLogin(deps: ApiDeps, request: FastifyRequest, typed: string, now: number): Promise<CliLogin> {
  const login = await findLogin(deps, request, typed, now);
  if (login.state !== 'pending') throw new AppError('conflict', `This sign-in was ${login.state === 'denied' ? 'denied' : 'approved'} already.`);
  return login;
}

function present(login: CliLogin) {
  return {
    user_code: displayUserCode(login.userCode),
    name: login.name,
    requested_ip: login.requestedIp,
    created_at: iso(login.createdAt),
    expires_at: iso(login.expiresAt),
    state: login.state,
  };
}
