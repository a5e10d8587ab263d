import { afterAll, beforeAll, expect, test } from 'vitest';
import type { RegisteredRoute } from '../../src/app-instance.js';
import type { Permission } from '../../src/domain/permissions.js';
import { buildTestApp, type TestApp } from '../helpers.js';
import { callRoute, companySnapshot, isolationWorld, type Answer, type CompanyA, type IsolationWorld } from '../support/isolation.js';

/**
 * The tenant isolation matrix: every route of the route table that reaches a company's data
 * (all of /api/v1, and the webhook addresses), called with A's real ids by everyone who must
 * not reach them: B's management key and B's owner (also naming A in X-Company-Id), B's
 * integration key, keys and roles of A without the permission, and nobody at all. Each must
 * be 401, 403 or 404 and show nothing of A's; then A must be as it was. (On a route naming
 * nothing of A's, such as a list, B's own callers are answered about B: that may succeed, but
 * must show nothing of A's.) The same calls made by A's owner must succeed, which proves the
 * ids and bodies below reach the handlers, past validation.
 *
 * A new route is in the matrix by being registered. It needs a line here only when it has a
 * path parameter not in PARAMS, or is under /api/v1 without a line in NEEDS: either makes the
 * first test fail, saying which line to add.
 */

/** What each /api/v1 route needs, from docs/api.md's permission table ('session': a signed-in person, not a key). */
type Need = Permission | 'session';
const NEEDS: Record<string, Need> = {
  'GET /api/v1/auth/session': 'session',
  'POST /api/v1/auth/logout': 'session',
  'POST /api/v1/auth/logout-everywhere': 'session',
  'GET /api/v1/integrations': 'integrations:read',
  'POST /api/v1/integrations': 'integrations:manage',
  'GET /api/v1/integrations/:integration_id': 'integrations:read',
  'PATCH /api/v1/integrations/:integration_id': 'integrations:manage',
  'DELETE /api/v1/integrations/:integration_id': 'integrations:manage',
  'POST /api/v1/integrations/:integration_id/redaction/preview': 'logs:read',
  'GET /api/v1/integrations/:integration_id/keys': 'integrations:read',
  'POST /api/v1/integrations/:integration_id/keys': 'integrations:manage',
  'POST /api/v1/integrations/:integration_id/keys/rotate': 'integrations:manage',
  'POST /api/v1/integrations/:integration_id/keys/:key_id/revoke': 'integrations:manage',
  'GET /api/v1/integrations/:integration_id/keys/:key_id/callers': 'logs:read',
  'GET /api/v1/management-keys': 'members:manage',
  'POST /api/v1/management-keys': 'members:manage',
  'POST /api/v1/management-keys/:key_id/revoke': 'members:manage',
  'GET /api/v1/webhooks': 'logs:read',
  'GET /api/v1/webhooks/export': 'logs:read',
  'GET /api/v1/webhooks/stream': 'logs:read',
  'GET /api/v1/webhooks/:uuid': 'logs:read',
  'GET /api/v1/requests': 'logs:read',
  'GET /api/v1/usage': 'logs:read',
  'GET /api/v1/members': 'members:read',
  'GET /api/v1/members/:user_id': 'members:read',
  'GET /api/v1/invitations': 'members:read',
  'POST /api/v1/invitations': 'members:manage',
  'DELETE /api/v1/invitations/:invitation_id': 'members:manage',
  'GET /api/v1/account': 'session',
  'POST /api/v1/account/password': 'session',
  'POST /api/v1/account/two-factor/setup': 'session',
  'POST /api/v1/account/two-factor/enable': 'session',
  'POST /api/v1/account/two-factor/disable': 'session',
  'POST /api/v1/account/two-factor/recovery-codes': 'session',
  'PATCH /api/v1/members/:user_id': 'members:manage',
  'DELETE /api/v1/members/:user_id': 'members:manage',
  'GET /api/v1/company': 'integrations:read',
  'PATCH /api/v1/company': 'company:manage',
  'GET /api/v1/audit-log': 'logs:read',
  'GET /api/v1/sources': 'integrations:read',
  'PUT /api/v1/integrations/:integration_id/source': 'integrations:manage',
  'GET /api/v1/integrations/:integration_id/source-secrets': 'integrations:read',
  'POST /api/v1/integrations/:integration_id/source-secrets': 'integrations:manage',
  'DELETE /api/v1/integrations/:integration_id/source-secrets/:secret_id': 'integrations:manage',
  'POST /api/v1/integrations/:integration_id/source-test': 'integrations:manage',
  'GET /api/v1/destinations': 'integrations:read',
  'POST /api/v1/destinations': 'integrations:manage',
  'GET /api/v1/destinations/:destination_id': 'integrations:read',
  'PATCH /api/v1/destinations/:destination_id': 'integrations:manage',
  'DELETE /api/v1/destinations/:destination_id': 'integrations:manage',
  'POST /api/v1/destinations/:destination_id/pause': 'integrations:manage',
  'POST /api/v1/destinations/:destination_id/resume': 'integrations:manage',
  'POST /api/v1/destinations/:destination_id/secret/rotate': 'integrations:manage',
  'POST /api/v1/destinations/:destination_id/send': 'integrations:manage',
  'POST /api/v1/destinations/:destination_id/rules/try': 'integrations:read',
  'GET /api/v1/destinations/:destination_id/stats': 'logs:read',
  'GET /api/v1/deliveries': 'logs:read',
  'GET /api/v1/deliveries/:delivery_id': 'logs:read',
  'POST /api/v1/deliveries/:delivery_id/replay': 'integrations:manage',
  'POST /api/v1/deliveries/replay': 'integrations:manage',
  'GET /api/v1/webhooks/feed': 'logs:read',
  'GET /api/v1/cli-logins/:user_code': 'session',
  'POST /api/v1/cli-logins/:user_code/approve': 'session',
  'POST /api/v1/cli-logins/:user_code/deny': 'session',
  'DELETE /api/v1/cli-logins/current': 'logs:read',
  'POST /api/v1/erasures': 'data:erase',
  'GET /api/v1/erasures': 'data:erase',
  'GET /api/v1/erasures/:erasure_id': 'data:erase',
  'GET /api/v1/erasures/:erasure_id/report': 'data:erase',
  'POST /api/v1/erasures/:erasure_id/confirm': 'data:erase',
};

/** Routes reachable without credentials: no caller is tried on them (what they check is in their body). */
const PUBLIC: Record<string, string> = {
  'POST /api/v1/auth/login': 'signs in with the email and password of its body, whoever calls (test/api/auth.test.ts)',
  'POST /api/v1/auth/setup': 'spends the one-time setup token of its body, whoever calls (test/api/setup.test.ts)',
  'POST /api/v1/auth/password-reset': 'asks for a reset email for the address of its body, answered the same for any (test/api/account.test.ts)',
  'POST /api/v1/auth/password-reset/check': 'reads whose account the reset token of its body is for, nothing else (test/api/account.test.ts)',
  'POST /api/v1/auth/password-reset/complete': 'spends the one-time reset token of its body (test/api/account.test.ts)',
  'POST /api/v1/invitations/lookup': 'reads the invitation its token names, nothing else (test/api/invitations.test.ts)',
  'POST /api/v1/invitations/accept': "spends the invitation its token names, for the caller's own account (test/api/invitations.test.ts)",
  'POST /api/v1/cli-logins': 'starts a command-line sign-in, which belongs to no company until approved (test/api/cli-logins.test.ts)',
  'POST /api/v1/cli-logins/token': 'collects the sign-in its device code names, approved by a member (test/api/cli-logins.test.ts)',
};

/**
 * Routes about the signed-in person's own account, never a company: every caller above is
 * tried on them (keys and nobody must be refused; B's sessions act on B's own account),
 * but no positive control runs here, since each needs the person's password or an app's
 * code (test/api/account.test.ts runs them).
 */
const PERSONAL = new Set(
  Object.entries(NEEDS)
    .filter(([name, need]) => need === 'session' && (name.includes('/account') || name.includes('/cli-logins/')))
    .map(([name]) => name),
);

/**
 * Routes tried by no caller here, each with why and where it is tested. The one route a key
 * revokes itself by would end B's key (or A's) for every case after it.
 */
const SELF: Record<string, string> = {
  'DELETE /api/v1/cli-logins/current': 'revokes the calling key itself, nothing else (test/api/cli-logins.test.ts)',
};

/** Routes outside the matrix, each with why: none of them reads or changes a company's data. */
const OUTSIDE: Array<[RegExp, string]> = [
  [/^\/(healthz|readyz|metrics)$/, 'operations: this node and its database, no company in them'],
  [/^\/(admin(\/.*)?)?$/, "the panel's static files, the same for everyone; its data comes from /api/v1"],
  [/^\/api\/(docs(\/.*)?|openapi\.json)$/, 'the API reference, the same for everyone'],
];

/** A's real id for each path parameter. A `:key_id` is a management key's under /management-keys, else an integration's. */
const PARAMS: Record<string, (a: CompanyA, url: string) => string> = {
  integration_id: (a) => a.integration.integrationId,
  key_id: (a, url) => (url.startsWith('/api/v1/management-keys/') ? a.spareManagementKey.id : a.spareKey.id),
  user_id: (a) => a.spareMember.userId,
  // A sign-in belongs to no company until approved: any code stands for one.
  user_code: () => 'BCDF-GHJK',
  uuid: (a) => a.webhookUuid,
  invitation_id: (a) => a.invitationId,
  integration_key: (a) => a.integration.integrationKey,
  secret_id: (a) => a.spareSourceSecretId,
  destination_id: (a) => a.destinationId,
  delivery_id: (a) => a.deliveryId,
  erasure_id: (a) => a.erasureId,
};

/**
 * Bodies that succeed for A's owner (the positive controls prove it): a body refused by
 * validation would hide a missing company check behind a 400. Other changing routes get {}.
 */
const BODIES: Record<string, (world: IsolationWorld) => object> = {
  'POST /api/v1/integrations': () => ({ name: 'Made by the isolation matrix' }),
  'PATCH /api/v1/integrations/:integration_id': () => ({ description: 'Changed by the isolation matrix' }),
  'POST /api/v1/integrations/:integration_id/redaction/preview': (world) => ({ redaction: { paths: ['data.note'] }, webhook_uuid: world.a.webhookUuid }),
  'POST /api/v1/integrations/:integration_id/keys': () => ({ name: 'Made by the isolation matrix' }),
  'POST /api/v1/integrations/:integration_id/keys/rotate': () => ({ grace_seconds: 3600 }),
  'POST /api/v1/management-keys': () => ({ name: 'Made by the isolation matrix', scopes: ['logs:read'] }),
  'POST /api/v1/invitations': (world) => ({ email: world.outsider.email, role: 'viewer' }),
  'PATCH /api/v1/members/:user_id': () => ({ role: 'admin' }),
  'PATCH /api/v1/company': () => ({ retention_days: 45 }),
  'PUT /api/v1/integrations/:integration_id/source': () => ({ type: 'github' }),
  'POST /api/v1/integrations/:integration_id/source-secrets': () => ({ previous_expires_in_seconds: 3600 }),
  'POST /api/v1/destinations': () => ({ name: 'Made by the isolation matrix', url: 'https://matrix.example.invalid/hooks' }),
  'PATCH /api/v1/destinations/:destination_id': () => ({ name: 'Changed by the isolation matrix' }),
  'POST /api/v1/destinations/:destination_id/send': (world) => ({ webhook_uuids: [world.a.webhookUuid] }),
  'POST /api/v1/destinations/:destination_id/rules/try': (world) => ({ webhook_uuid: world.a.webhookUuid }),
  'POST /api/v1/deliveries/replay': (world) => ({ destination_id: world.a.destinationId }),
  'POST /api/v1/cli-logins/:user_code/approve': (world) => ({ company_id: world.a.companyId }),
  // A value no company holds: the control's erasure finds nothing to erase.
  'POST /api/v1/erasures': () => ({ value: 'isolation.matrix.probe@example.invalid', dry_run: true }),
  'POST /api/webhooks/:integration_key': () => ({ event: 'isolation.probe', data: {} }),
  'POST /api/webhook/:integration_key': () => ({ event: 'isolation.probe', data: {} }),
};

/**
 * The lists are also called with A's integration (or key) as their filter: a filter that
 * skipped the company would show A's rows to B. Usage is grouped by key, so counts of A's
 * would show up as A's key ids.
 */
const QUERIES: Record<string, (a: CompanyA) => string[]> = {
  'GET /api/v1/webhooks': (a) => ['', `integration_id=${a.integration.integrationId}`],
  'GET /api/v1/webhooks/export': (a) => ['', `integration_id=${a.integration.integrationId}`],
  'GET /api/v1/webhooks/stream': (a) => ['', `integration_id=${a.integration.integrationId}`],
  'GET /api/v1/requests': (a) => ['', `integration_id=${a.integration.integrationId}`, `key_id=${a.integration.id}`],
  'GET /api/v1/usage': (a) => ['group_by=key', `integration_id=${a.integration.integrationId}&group_by=key`],
  'GET /api/v1/audit-log': (a) => ['', `target_id=${a.integration.integrationId}`],
  // One of the two is required, so neither alone is left out.
  'GET /api/v1/deliveries': (a) => [`destination_id=${a.destinationId}`, `webhook_uuid=${a.webhookUuid}`],
  'GET /api/v1/webhooks/feed': (a) => ['', `integration_id=${a.integration.integrationId}`],
};

interface Route extends RegisteredRoute {
  name: string;
  intake: boolean;
  need: Need | undefined;
  /** A path parameter names something of A's; without one, B's callers are answered about B. */
  addressed: boolean;
}

/**
 * 'refused': must be 401, 403 or 404. 'own': the caller acts on its own company (B on a route
 * naming nothing of A's), so it may succeed, but must show nothing of A's. undefined: not tried.
 */
type Rule = 'refused' | 'own' | undefined;

interface Caller {
  name: string;
  headers(world: IsolationWorld): Promise<Record<string, string>>;
  rule(route: Route): Rule;
}

/** What A's keys and roles may do, as docs/api.md's table says (keys never hold 'session'). */
const HOLDS: Record<'logsKey' | 'manageKey' | 'admin' | 'viewer', Need[]> = {
  logsKey: ['integrations:read', 'logs:read'],
  manageKey: ['integrations:read', 'integrations:manage'],
  admin: ['session', 'integrations:read', 'integrations:manage', 'logs:read', 'members:read'],
  viewer: ['session', 'integrations:read', 'logs:read', 'members:read'],
};

const key = (apiKey: string) => ({ 'x-api-key': apiKey });
/** A caller of A is tried where it lacks the permission (and at the webhook addresses, which take only the integration's key). */
const lacks = (holds: Need[]) => (route: Route): Rule => (route.intake || !holds.includes(route.need!) ? 'refused' : undefined);
const bOnItsOwn = (route: Route): Rule => (route.addressed ? 'refused' : 'own');
const onIntake = (rule: Rule) => (route: Route): Rule => (route.intake ? rule : undefined);
const onApi = (rule: Rule) => (route: Route): Rule => (route.intake ? undefined : rule);

const CALLERS: Caller[] = [
  { name: 'no credentials', headers: async () => ({}), rule: () => 'refused' },
  { name: "B's management key (both scopes)", headers: async ({ b }) => key(b.managementKey.apiKey), rule: bOnItsOwn },
  { name: "B's owner session", headers: (w) => w.sessionOf(w.b.owner), rule: bOnItsOwn },
  {
    name: "B's owner session naming A in X-Company-Id",
    headers: async (w) => ({ ...(await w.sessionOf(w.b.owner)), 'x-company-id': w.a.companyId }),
    // Sign-out and "who am I" are about the person, not a company: they answer for B's owner.
    rule: (route) => (route.need === 'session' ? 'own' : 'refused'),
  },
  { name: "B's integration key", headers: async ({ b }) => key(b.integration.apiKey), rule: () => 'refused' },
  { name: "A's integration key", headers: async ({ a }) => key(a.integration.apiKey), rule: onApi('refused') },
  { name: "A's other integration's key", headers: async ({ a }) => key(a.other.apiKey), rule: onIntake('refused') },
  { name: "A's management key with logs:read only", headers: async ({ a }) => key(a.logsKey.apiKey), rule: lacks(HOLDS.logsKey) },
  {
    name: "A's management key with integrations:manage only",
    headers: async ({ a }) => key(a.manageKey.apiKey),
    rule: lacks(HOLDS.manageKey),
  },
  { name: "A's admin session", headers: (w) => w.sessionOf(w.a.admin), rule: lacks(HOLDS.admin) },
  { name: "A's viewer session", headers: (w) => w.sessionOf(w.a.viewer), rule: lacks(HOLDS.viewer) },
  { name: "A's owner session", headers: (w) => w.sessionOf(w.a.owner), rule: onIntake('refused') },
];

/** Who must succeed with the same calls: A's owner on /api/v1, A's integration key at its own address. */
const A_OWNER: Caller = { name: "A's owner session", headers: (w) => w.sessionOf(w.a.owner), rule: () => undefined };
const A_KEY: Caller = { name: "A's integration key", headers: async ({ a }) => key(a.integration.apiKey), rule: () => undefined };

interface Case {
  caller: Caller;
  rule: Rule | 'granted';
  method: string;
  url: string;
  payload: object | undefined;
}

let t: TestApp;
let world: IsolationWorld;
let routes: Route[];
let before: Awaited<ReturnType<typeof companySnapshot>>;
const ran = { refused: 0, own: 0, granted: 0 };
/** Each call comes from an address of its own: a per-address limit on failed authentication must not turn a 401 into a 429. */
let addresses = 0;
const nextAddress = () => `10.77.${(++addresses >> 8) & 255}.${addresses & 255}`;
const IN_MATRIX = /^\/api\/(v1|webhooks?)\//;

beforeAll(async () => {
  // The erasure runner is driven by the world's set-up (runOnce), not started.
  t = await buildTestApp({}, { erasures: { start: false, restRatio: 0 } });
  world = await isolationWorld(t);
  routes = t.app.registeredRoutes
    .filter((r) => IN_MATRIX.test(r.url))
    .map((r) => {
      const name = `${r.method} ${r.url}`;
      return { ...r, name, intake: !r.url.startsWith('/api/v1/'), need: NEEDS[name], addressed: r.url.includes('/:') };
    });
  before = await companySnapshot(t.store, world.a.companyId);
}, 60_000);
afterAll(async () => {
  console.log(
    `isolation matrix: ${routes?.length ?? 0} routes, ${ran.refused + ran.own + ran.granted} (route × caller) cases ran ` +
      `(${ran.refused} refused, ${ran.own} answered for the caller's own company, ${ran.granted} positive controls)`,
  );
  await t?.close();
});

const HERE = 'test/api/isolation-matrix.test.ts';

/** Why the matrix cannot describe the route table, one line per missing entry. */
function tableProblems(): string[] {
  const problems: string[] = [];
  for (const r of t.app.registeredRoutes) {
    if (!IN_MATRIX.test(r.url) && !OUTSIDE.some(([pattern]) => pattern.test(r.url))) {
      problems.push(`${r.method} ${r.url} is not in the matrix: add it to OUTSIDE in ${HERE} with why it reads no company's data`);
    }
  }
  for (const route of routes) {
    for (const [, param] of route.url.matchAll(/:([A-Za-z0-9_]+)/g)) {
      if (!PARAMS[param!]) problems.push(`${route.name}: add "${param}" to PARAMS in ${HERE} (A's real id for it)`);
    }
    if (!route.intake && !PUBLIC[route.name] && !route.need) {
      problems.push(`${route.name}: add it to NEEDS in ${HERE} (its permission, from docs/api.md)`);
    }
  }
  const names = new Set(routes.map((r) => r.name));
  for (const listed of [...Object.keys(NEEDS), ...Object.keys(PUBLIC), ...Object.keys(BODIES), ...Object.keys(QUERIES)]) {
    if (!names.has(listed)) problems.push(`${listed} is listed in ${HERE} but is no route`);
  }
  return problems;
}

/** Every (route × caller) case, positive controls included; throws when a route cannot be filled in. */
function matrix(): Case[] {
  const problems = tableProblems();
  if (problems.length > 0) throw new Error(`the matrix does not cover the route table:\n${problems.join('\n')}`);
  return routes
    .filter((route) => !PUBLIC[route.name] && !SELF[route.name])
    .flatMap((route) => {
      const path = route.url.replace(/:([A-Za-z0-9_]+)/g, (_, param: string) => encodeURIComponent(PARAMS[param]!(world.a, route.url)));
      const payload = ['POST', 'PUT', 'PATCH'].includes(route.method) ? (BODIES[route.name]?.(world) ?? {}) : undefined;
      return (QUERIES[route.name]?.(world.a) ?? ['']).flatMap((query) => {
        const call = { method: route.method, url: query === '' ? path : `${path}?${query}`, payload };
        const refused = CALLERS.flatMap((caller) => {
          const rule = caller.rule(route);
          return rule ? [{ ...call, caller, rule }] : [];
        });
        if (PERSONAL.has(route.name)) return refused;
        return [...refused, { ...call, caller: route.intake ? A_KEY : A_OWNER, rule: 'granted' as const }];
      });
    });
}

async function run(c: Case): Promise<{ headers: Record<string, string>; answer: Answer }> {
  const headers = await c.caller.headers(world);
  const answer = await callRoute(t.app, { method: c.method, url: c.url, headers, payload: c.payload, remoteAddress: nextAddress() });
  return { headers, answer };
}

/** What is wrong with an answer to a caller who must not reach A: its status, or A's data in it. */
function violation(c: Case, headers: Record<string, string>, answer: Answer): string | undefined {
  // An id the caller sent may come back in the message ("No integration with id …"): that tells it nothing.
  const sent = `${c.url} ${JSON.stringify(headers)} ${JSON.stringify(c.payload ?? null)}`;
  const shown = `${JSON.stringify(answer.headers)} ${answer.body}`;
  const leaked = world.markers.filter((marker) => !sent.includes(marker) && shown.includes(marker));
  if (leaked.length > 0) return `answered ${answer.status} showing A's ${leaked.join(', ')}`;
  if (c.rule === 'refused' && ![401, 403, 404].includes(answer.status)) return `answered ${answer.status}, not 401, 403 or 404`;
  if (c.rule === 'own' && answer.status >= 500) return `answered ${answer.status}`;
  return undefined;
}

const report = (c: Case, answer: Answer, problem: string) =>
  `${c.caller.name} → ${c.method} ${c.url}: ${problem}\n    ${answer.body.slice(0, 300)}`;

test('every route is in the matrix or listed outside it, with A ids for its parameters and its permission', () => {
  expect(tableProblems()).toEqual([]);
  expect(routes.filter((r) => !PUBLIC[r.name]).length).toBeGreaterThan(30);
});

test("no caller of another company, no key or role of A without the permission, and nobody unauthenticated reaches A's data", async () => {
  const problems: string[] = [];
  for (const c of matrix().filter((c) => c.rule !== 'granted')) {
    const { headers, answer } = await run(c);
    ran[c.rule === 'own' ? 'own' : 'refused']++;
    const problem = violation(c, headers, answer);
    if (problem) problems.push(report(c, answer, problem));
  }
  expect(problems, 'calls that reached company A').toEqual([]);
}, 180_000);

test('company A is as it was: settings, integrations, keys, members, webhooks, audit log', async () => {
  expect(await companySnapshot(t.store, world.a.companyId)).toEqual(before);
});

test('the routes listed as public answer without credentials (so the list hides no route that needs them)', async () => {
  for (const name of Object.keys(PUBLIC)) {
    const [method, url] = name.split(' ') as [string, string];
    const answer = await callRoute(t.app, { method, url, headers: {}, payload: {}, remoteAddress: nextAddress() });
    expect(answer.status, `${name}: ${answer.body}`).not.toBe(401);
  }
});

test("the same calls succeed for A's owner (A's integration key at its address): the ids and bodies reach the handlers", async () => {
  // Reads first, then changes, deletions last: no control removes what a later one names.
  const rank = (method: string) => ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].indexOf(method);
  const controls = matrix()
    .filter((c) => c.rule === 'granted')
    .sort((x, y) => rank(x.method) - rank(y.method));
  const problems: string[] = [];
  for (const c of controls) {
    const { answer } = await run(c);
    ran.granted++;
    if (answer.status < 200 || answer.status >= 300) problems.push(report(c, answer, `answered ${answer.status}, not 2xx`));
  }
  expect(problems, 'positive controls that failed: fix the id in PARAMS or the body in BODIES').toEqual([]);
}, 120_000);
