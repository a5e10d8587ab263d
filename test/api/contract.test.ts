import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AddressGuard } from '../../src/destinations/address-guard.js';
import { DestinationManagement } from '../../src/services/destinations.js';
import { buildTestApp, sendWebhook, testSecretBox, type TestApp } from '../helpers.js';
import { member } from '../support/api.js';
import { quickMember } from '../support/members.js';

/**
 * Rules that hold for every route, written against the list of routes the app registered,
 * so a route added later is held to them without editing this file, except to add its
 * audit case below (which the second test demands).
 */
let t: TestApp;
let companyId: string;
/** The two kinds of caller a change names in the audit log. */
const callers = {} as Record<'owner' | 'key', { type: 'user' | 'key'; id: string; headers: Record<string, string> }>;

beforeAll(async () => {
  // The erasure runner is driven here (runOnce), not started: a preview is counted when the case says so.
  t = await buildTestApp({}, { erasures: { start: false, restRatio: 0 } });
  companyId = (await t.management.createCompany('Contract')).id;
  const owner = await member(t, companyId, 'owner');
  callers.owner = { type: 'user', id: owner.userId, headers: owner.change };
  const key = await t.management.createManagementKey(companyId, ['integrations:manage', 'logs:read']);
  callers.key = { type: 'key', id: key.id, headers: { 'x-api-key': key.apiKey } };
});
afterAll(() => t.close());

const CHANGING_METHODS = new Set(['POST', 'PATCH', 'PUT', 'DELETE']);
const OPENAPI_METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

/** Fastify's `/a/:id` as OpenAPI writes it: `/a/{id}`. */
const openApiPath = (url: string) => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

describe('the OpenAPI document', () => {
  test('lists every route that is not hidden, and no route that does not exist', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/api/openapi.json' });
    expect(response.statusCode).toBe(200);
    const paths = response.json<{ paths: Record<string, Record<string, unknown>> }>().paths;
    const documented = Object.entries(paths).flatMap(([path, operations]) =>
      Object.keys(operations)
        .filter((method) => OPENAPI_METHODS.has(method))
        .map((method) => `${method.toUpperCase()} ${path}`),
    );
    const registered = t.app.registeredRoutes.filter((r) => !r.hidden).map((r) => `${r.method} ${openApiPath(r.url)}`);
    expect(registered.length).toBeGreaterThan(0);
    expect(registered.filter((route) => !documented.includes(route)), 'routes missing from the document').toEqual([]);
    expect(documented.filter((route) => !registered.includes(route)), 'documented routes that do not exist').toEqual([]);
  });

  test('is OpenAPI 3.1 with both ways in, and has a readable reference page at /api/docs', async () => {
    const document = (await t.app.inject({ method: 'GET', url: '/api/openapi.json' })).json();
    expect(document.openapi).toBe('3.1.0');
    expect(Object.keys(document.components.securitySchemes).sort()).toEqual(['apiKey', 'session']);
    const page = await t.app.inject({ method: 'GET', url: '/api/docs' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toContain('text/html');
    expect(page.body).toContain('swagger-ui');
  });
});

/** A fresh integration of the company and its first key, made as the CLI (another actor). */
async function integration() {
  const created = await t.management.createIntegration(companyId, { name: 'Audited' });
  return { id: created.integration.id, keyId: created.keyId };
}

interface AuditCase {
  /** The route as registered: `METHOD /api/v1/path/:param`. */
  route: string;
  /** Who calls it: the owner's panel session or a management key (integrations:manage, logs:read). */
  as: 'owner' | 'key';
  /** The audit action the call must record. */
  action: string;
  /** Makes what the call needs (as the CLI, so those records name another actor); the call's URL and body. */
  request(): Promise<{ url: string; payload?: object }>;
}

/**
 * Changes of a person, not of a company: sessions, their own account (in the log of each of
 * their companies as account.*, test/api/account-audit.test.ts), and the invitation links
 * used by whoever holds them (accepting one is in its company's log as member.add,
 * test/api/invitations.test.ts). And POSTs that change nothing: trying a destination's rules,
 * previewing an integration's redaction on a stored webhook (test/api/redaction.test.ts).
 */
const NOT_A_COMPANY_CHANGE =
  /^\/api\/v1\/(auth|account)\/|^\/api\/v1\/invitations\/(lookup|accept)$|^\/api\/v1\/cli-logins(\/:user_code\/(approve|deny))?$|^\/api\/v1\/destinations\/:destination_id\/rules\/try$|^\/api\/v1\/integrations\/:integration_id\/redaction\/preview$/;

/** A fresh integration with a GitHub source (its secret generated), made as the CLI. */
async function githubIntegration() {
  const { id } = await integration();
  const set = await t.management.setSource(companyId, id, { type: 'github' });
  return { id, secretId: set.sourceSecretId! };
}

/** The destination service acting as the CLI. */
const destinations = () =>
  new DestinationManagement(t.store, { environment: t.config.environment, secrets: testSecretBox(), addressGuard: new AddressGuard([]), baseUrl: t.config.baseUrl }, { type: 'cli', id: 'test', ip: null });

/**
 * A destination of a fresh integration (made as the CLI) and a webhook stored for it: with
 * `held`, the destination is paused first, so the delivery waits for a replay untouched by
 * the workers; otherwise it matches no event, so the webhook is there to be sent.
 */
async function destinationWithWebhook(held: boolean) {
  const created = await t.management.createIntegration(companyId, { name: 'Delivered' });
  const { destination } = await destinations().create(companyId, {
    name: 'Audited',
    url: 'https://audited.example.invalid/hooks',
    integrationIds: [created.integration.id],
    eventPatterns: held ? ['*'] : ['never.*'],
  });
  if (held) await destinations().setPaused(companyId, destination.id, true);
  const sent = await sendWebhook(t.app, created.integration.integrationKey, { apiKey: created.apiKey });
  const [delivery] = await t.store.listDeliveries(companyId, { destinationId: destination.id, limit: 1 });
  return { destinationId: destination.id, webhookUuid: sent.json<{ uuid: string }>().uuid, deliveryId: delivery?.id };
}

/** One successful call per changing /api/v1 route (auth aside). A new route needs a row here. */
const AUDIT_CASES: AuditCase[] = [
  { route: 'POST /api/v1/integrations', as: 'key', action: 'integration.create', request: async () => ({ url: '/api/v1/integrations', payload: { name: 'New' } }) },
  {
    route: 'PATCH /api/v1/integrations/:integration_id',
    as: 'owner',
    action: 'integration.update',
    request: async () => ({ url: `/api/v1/integrations/${(await integration()).id}`, payload: { name: 'Renamed' } }),
  },
  {
    route: 'DELETE /api/v1/integrations/:integration_id',
    as: 'key',
    action: 'integration.delete',
    request: async () => ({ url: `/api/v1/integrations/${(await integration()).id}` }),
  },
  {
    route: 'POST /api/v1/integrations/:integration_id/keys',
    as: 'key',
    action: 'key.create',
    request: async () => ({ url: `/api/v1/integrations/${(await integration()).id}/keys`, payload: { name: 'Second sender' } }),
  },
  {
    route: 'POST /api/v1/integrations/:integration_id/keys/rotate',
    as: 'owner',
    action: 'key.rotate',
    request: async () => ({ url: `/api/v1/integrations/${(await integration()).id}/keys/rotate`, payload: { grace_seconds: 60 } }),
  },
  {
    route: 'POST /api/v1/integrations/:integration_id/keys/:key_id/revoke',
    as: 'key',
    action: 'key.revoke',
    request: async () => {
      const { id, keyId } = await integration();
      return { url: `/api/v1/integrations/${id}/keys/${keyId}/revoke` };
    },
  },
  {
    route: 'POST /api/v1/management-keys',
    as: 'owner',
    action: 'management_key.create',
    request: async () => ({ url: '/api/v1/management-keys', payload: { name: 'CI', scopes: ['logs:read'] } }),
  },
  {
    route: 'POST /api/v1/management-keys/:key_id/revoke',
    as: 'owner',
    action: 'management_key.revoke',
    request: async () => ({ url: `/api/v1/management-keys/${(await t.management.createManagementKey(companyId, ['logs:read'])).id}/revoke` }),
  },
  {
    route: 'POST /api/v1/invitations',
    as: 'owner',
    action: 'invitation.create',
    request: async () => ({ url: '/api/v1/invitations', payload: { email: `invited-${Date.now()}@example.com`, role: 'viewer' } }),
  },
  {
    route: 'DELETE /api/v1/invitations/:invitation_id',
    as: 'owner',
    action: 'invitation.revoke',
    request: async () => {
      const invited = await t.app.inject({
        method: 'POST',
        url: '/api/v1/invitations',
        headers: callers.owner.headers,
        payload: { email: `to-revoke-${Date.now()}@example.com`, role: 'viewer' },
      });
      return { url: `/api/v1/invitations/${invited.json().invitation.id}` };
    },
  },
  {
    route: 'PATCH /api/v1/members/:user_id',
    as: 'owner',
    action: 'member.role_change',
    request: async () => ({ url: `/api/v1/members/${(await quickMember(t.store, companyId, 'viewer')).userId}`, payload: { role: 'admin' } }),
  },
  {
    route: 'DELETE /api/v1/members/:user_id',
    as: 'owner',
    action: 'member.remove',
    request: async () => ({ url: `/api/v1/members/${(await quickMember(t.store, companyId, 'viewer')).userId}` }),
  },
  {
    route: 'PUT /api/v1/integrations/:integration_id/source',
    as: 'owner',
    action: 'integration.source',
    request: async () => ({ url: `/api/v1/integrations/${(await integration()).id}/source`, payload: { type: 'github' } }),
  },
  {
    route: 'POST /api/v1/integrations/:integration_id/source-secrets',
    as: 'key',
    action: 'source_secret.rotate',
    request: async () => ({ url: `/api/v1/integrations/${(await githubIntegration()).id}/source-secrets`, payload: { previous_expires_in_seconds: 60 } }),
  },
  {
    route: 'DELETE /api/v1/integrations/:integration_id/source-secrets/:secret_id',
    as: 'owner',
    action: 'source_secret.end',
    request: async () => {
      const { id, secretId } = await githubIntegration();
      await t.management.rotateSourceSecret(companyId, id, undefined, 600);
      return { url: `/api/v1/integrations/${id}/source-secrets/${secretId}` };
    },
  },
  {
    route: 'POST /api/v1/integrations/:integration_id/source-test',
    as: 'key',
    action: 'integration.source_test',
    request: async () => ({ url: `/api/v1/integrations/${(await githubIntegration()).id}/source-test` }),
  },
  { route: 'PATCH /api/v1/company', as: 'owner', action: 'company.update', request: async () => ({ url: '/api/v1/company', payload: { retention_days: 45 } }) },
  {
    route: 'POST /api/v1/destinations',
    as: 'key',
    action: 'destination.create',
    request: async () => ({ url: '/api/v1/destinations', payload: { name: 'New', url: 'https://new.example.invalid/hooks', headers: { 'X-Token': 'header-secret' } } }),
  },
  {
    route: 'PATCH /api/v1/destinations/:destination_id',
    as: 'owner',
    action: 'destination.update',
    request: async () => ({
      url: `/api/v1/destinations/${(await destinationWithWebhook(false)).destinationId}`,
      payload: { name: 'Renamed', headers: { 'X-Token': 'header-secret' } },
    }),
  },
  {
    route: 'DELETE /api/v1/destinations/:destination_id',
    as: 'key',
    action: 'destination.delete',
    request: async () => ({ url: `/api/v1/destinations/${(await destinationWithWebhook(true)).destinationId}` }),
  },
  {
    route: 'POST /api/v1/destinations/:destination_id/pause',
    as: 'owner',
    action: 'destination.pause',
    request: async () => ({ url: `/api/v1/destinations/${(await destinationWithWebhook(false)).destinationId}/pause` }),
  },
  {
    route: 'POST /api/v1/destinations/:destination_id/resume',
    as: 'key',
    action: 'destination.resume',
    request: async () => ({ url: `/api/v1/destinations/${(await destinationWithWebhook(true)).destinationId}/resume` }),
  },
  {
    route: 'POST /api/v1/destinations/:destination_id/secret/rotate',
    as: 'owner',
    action: 'destination.secret_rotate',
    request: async () => ({
      url: `/api/v1/destinations/${(await destinationWithWebhook(false)).destinationId}/secret/rotate`,
      payload: { previous_expires_in_seconds: 60 },
    }),
  },
  {
    route: 'POST /api/v1/destinations/:destination_id/send',
    as: 'key',
    action: 'destination.send',
    request: async () => {
      const { destinationId, webhookUuid } = await destinationWithWebhook(false);
      return { url: `/api/v1/destinations/${destinationId}/send`, payload: { webhook_uuids: [webhookUuid] } };
    },
  },
  {
    route: 'POST /api/v1/deliveries/:delivery_id/replay',
    as: 'owner',
    action: 'delivery.replay',
    request: async () => ({ url: `/api/v1/deliveries/${(await destinationWithWebhook(true)).deliveryId}/replay` }),
  },
  {
    route: 'POST /api/v1/deliveries/replay',
    as: 'key',
    action: 'delivery.replay',
    request: async () => ({ url: '/api/v1/deliveries/replay', payload: { destination_id: (await destinationWithWebhook(true)).destinationId } }),
  },
  {
    // The terminal's poll: the key it gets is made as the person who approved the sign-in.
    route: 'POST /api/v1/cli-logins/token',
    as: 'owner',
    action: 'management_key.create',
    request: async () => {
      const started = (await t.app.inject({ method: 'POST', url: '/api/v1/cli-logins', payload: { name: 'contract' } })).json();
      const url = `/api/v1/cli-logins/${started.user_code}/approve`;
      await t.app.inject({ method: 'POST', url, headers: callers.owner.headers, payload: { company_id: companyId } });
      return { url: '/api/v1/cli-logins/token', payload: { device_code: started.device_code } };
    },
  },
  {
    route: 'POST /api/v1/erasures',
    as: 'owner',
    action: 'erasure.preview',
    request: async () => ({ url: '/api/v1/erasures', payload: { value: 'nobody.here@example.invalid', dry_run: true } }),
  },
  {
    route: 'POST /api/v1/erasures/:erasure_id/confirm',
    as: 'owner',
    action: 'erasure.confirm',
    request: async () => {
      const preview = await t.app.inject({
        method: 'POST',
        url: '/api/v1/erasures',
        headers: callers.owner.headers,
        payload: { value: 'nobody.else@example.invalid', dry_run: true },
      });
      const id = preview.json<{ id: string }>().id;
      await t.app.erasureRunner.runOnce();
      return { url: `/api/v1/erasures/${id}/confirm` };
    },
  },
  {
    // Last: the key revokes itself, and no case after it could use it.
    route: 'DELETE /api/v1/cli-logins/current',
    as: 'key',
    action: 'management_key.revoke',
    request: async () => ({ url: '/api/v1/cli-logins/current' }),
  },
];

describe('the audit log', () => {
  test('every changing /api/v1 route has a case below, and every case names a route that exists', () => {
    const changing = t.app.registeredRoutes
      .filter((r) => CHANGING_METHODS.has(r.method) && r.url.startsWith('/api/v1/') && !NOT_A_COMPANY_CHANGE.test(r.url))
      .map((r) => `${r.method} ${r.url}`);
    const listed = AUDIT_CASES.map((c) => c.route);
    expect(changing.filter((route) => !listed.includes(route)), 'changing routes without an audit case in AUDIT_CASES').toEqual([]);
    expect(listed.filter((route) => !changing.includes(route)), 'audit cases of routes that do not exist').toEqual([]);
  });

  test.each(AUDIT_CASES.map((c) => [c.route, c.action, c] as const))('%s records %s, naming its caller', async (_route, _action, auditCase) => {
    const caller = callers[auditCase.as];
    const [method, pattern] = auditCase.route.split(' ') as ['POST' | 'PATCH' | 'PUT' | 'DELETE', string];
    const { url, payload } = await auditCase.request();
    // The case must call the route it stands for, not another one.
    expect(url).toMatch(new RegExp(`^${pattern.replace(/:[A-Za-z0-9_]+/g, '[^/]+')}$`));
    const known = new Set((await t.store.listAuditLog(companyId, { limit: 200 })).map((r) => r.id));
    const response = await t.app.inject({ method, url, headers: caller.headers, ...(payload && { payload }) });
    expect(response.statusCode, response.body).toBeLessThan(300);
    const written = (await t.store.listAuditLog(companyId, { limit: 200 })).filter((r) => !known.has(r.id));
    expect(written.map((r) => ({ action: r.action, actor: r.actor }))).toContainEqual({
      action: auditCase.action,
      actor: { type: caller.type, id: caller.id, ip: '127.0.0.1' },
    });
    const answer: Record<string, unknown> = response.body ? response.json() : {};
    for (const shownOnce of [answer.api_key, answer.signing_secret]) {
      if (typeof shownOnce === 'string') expect(JSON.stringify(written)).not.toContain(shownOnce);
    }
    expect(JSON.stringify(written)).not.toContain('scrypt$');
    // A destination's header values are sealed and write-only, in the audit log too.
    expect(JSON.stringify(written)).not.toContain('header-secret');
  });
});
