import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { AppInstance } from '../../src/app.js';
import { SESSION_COOKIE, Sessions } from '../../src/admin/sessions.js';
import { AddressGuard } from '../../src/destinations/address-guard.js';
import { DestinationManagement } from '../../src/services/destinations.js';
import { Erasures } from '../../src/services/erasures.js';
import type { Store } from '../../src/store/store.js';
import { sendWebhook, testSecretBox, type TestApp } from '../helpers.js';
import { SignInGuard } from '../../src/admin/sign-in-guard.js';
import { Invitations } from '../../src/services/invitations.js';
import { quickMember } from './members.js';

/** Two companies for the tenant isolation matrix: A, whose data is aimed at, and B, who aims. */
export interface IsolationWorld {
  a: CompanyA;
  b: CompanyB;
  /** A person of a third company, for a body that adds a member (nobody of A's). */
  outsider: Person;
  /** Headers of a new session of this person: cookie and CSRF token. */
  sessionOf(person: Person): Promise<Record<string, string>>;
  /** Everything of A's that another caller must never be shown: ids, names, keys, emails, the payload's text. */
  markers: string[];
}

export interface Person {
  userId: string;
  email: string;
}

interface Key {
  id: string;
  apiKey: string;
}

interface IntegrationOfA extends Key {
  /** The integration's id (`id` and `apiKey` are its first key's). */
  integrationId: string;
  integrationKey: string;
}

export interface CompanyA {
  companyId: string;
  owner: Person;
  admin: Person;
  viewer: Person;
  /** A member no caller stands for, to change and remove. */
  spareMember: Person;
  integration: IntegrationOfA;
  /** A second signing secret of `integration`'s github source, to stop. */
  spareSourceSecretId: string;
  /** A second key of `integration`, to revoke and to ask the callers of. */
  spareKey: Key;
  /** Another integration of A: its key must not reach `integration`'s address either. */
  other: IntegrationOfA;
  logsKey: Key;
  manageKey: Key;
  /** A management key no caller stands for, to revoke. */
  spareManagementKey: Key;
  webhookUuid: string;
  /** A pending invitation, to revoke. */
  invitationId: string;
  /** A destination, paused so that its delivery of the webhook stays as it is until a control resumes it. */
  destinationId: string;
  /** The destination's delivery of `webhookUuid`. */
  deliveryId: string;
  /** A finished preview of an erasure (of a value A holds nowhere), to confirm. */
  erasureId: string;
}

export interface CompanyB {
  companyId: string;
  owner: Person;
  managementKey: Key;
  integration: IntegrationOfA;
}

const NO_MAIL = { enabled: false, send: async () => false };
/** The operator acting for A's owner-to-be, to invite someone before the matrix runs. */
const owner = (companyId: string) => ({ type: 'cli' as const, id: `isolation ${companyId}`, ip: null });

/** Random enough that nothing of B's, and no error message, contains it by chance. */
const token = () => randomBytes(6).toString('hex');

/**
 * Makes A with every kind of thing a route can name (members of each role, two integrations,
 * keys of every kind, a webhook whose body carries a marker), and B with its own of each,
 * so B's answers about itself are not empty.
 */
export async function isolationWorld(t: TestApp): Promise<IsolationWorld> {
  const sessions = new Sessions(t.store);
  const management = t.management;

  const aId = (await management.createCompany(`Alpha ${token()}`)).id;
  const integrationOf = async (companyId: string, name: string, source?: { type: string }): Promise<IntegrationOfA> => {
    const created = await management.createIntegration(companyId, { name, source });
    const { id: integrationId, integrationKey } = created.integration;
    return { integrationId, integrationKey, id: created.keyId, apiKey: created.apiKey };
  };
  const managementKeyOf = async (companyId: string, scopes: Array<'integrations:manage' | 'logs:read'>) => {
    const key = await management.createManagementKey(companyId, scopes, `matrix ${token()}`);
    return { id: key.id, apiKey: key.apiKey };
  };
  const personOf = async (companyId: string, role: 'owner' | 'admin' | 'viewer') => {
    const { userId, email } = await quickMember(t.store, companyId, role);
    return { userId, email };
  };
  const destinations = new DestinationManagement(
    t.store,
    { environment: t.config.environment, secrets: testSecretBox(), addressGuard: new AddressGuard([]), baseUrl: t.config.baseUrl },
    owner('destinations'),
  );
  /** A paused destination of the company (what it is sent is held, never attempted), and its header's sealed value. */
  const pausedDestination = async (companyId: string, name: string) => {
    const headerValue = `${name} header ${token()}`;
    const { destination } = await destinations.create(companyId, {
      name: `${name} ${token()}`,
      url: `https://${name}-${token()}.example.invalid/hooks`,
      headers: { 'X-Token': headerValue },
    });
    await destinations.setPaused(companyId, destination.id, true);
    return { id: destination.id, headerValue };
  };

  // A github source: its signing secrets are A's data too (its key still sends below).
  const integration = await integrationOf(aId, `alpha integration ${token()}`, { type: 'github' });
  const spareSourceSecret = await management.rotateSourceSecret(aId, integration.integrationId, undefined, 3600);
  const spareKey = await management.createIntegrationKey(aId, integration.integrationId, { name: `alpha spare ${token()}` });
  const { id: destinationId, headerValue } = await pausedDestination(aId, 'alpha');
  const payloadMarker = `alpha payload ${token()}`;
  const sent = await sendWebhook(t.app, integration.integrationKey, {
    apiKey: integration.apiKey,
    body: JSON.stringify({ event: 'alpha.event', data: { note: payloadMarker } }),
  });
  if (sent.statusCode !== 202) throw new Error(`A's webhook was not taken: ${sent.statusCode} ${sent.body}`);
  const [delivery] = await t.store.listDeliveries(aId, { destinationId, limit: 1 });
  if (!delivery) throw new Error("A's webhook made no delivery to A's destination");
  const preview = await new Erasures(t.store, testSecretBox(), { wake() {} }).create(aId, { value: `nobody ${token()}`, dryRun: true }, owner(aId));
  await t.app.erasureRunner.runOnce();
  if ((await t.store.getErasure(aId, preview.id))?.state !== 'previewed') throw new Error("A's preview was not counted");
  const a: CompanyA = {
    companyId: aId,
    owner: await personOf(aId, 'owner'),
    admin: await personOf(aId, 'admin'),
    viewer: await personOf(aId, 'viewer'),
    spareMember: await personOf(aId, 'viewer'),
    integration,
    spareKey: { id: spareKey.id, apiKey: spareKey.apiKey },
    spareSourceSecretId: spareSourceSecret.id,
    other: await integrationOf(aId, `alpha other ${token()}`),
    logsKey: await managementKeyOf(aId, ['logs:read']),
    manageKey: await managementKeyOf(aId, ['integrations:manage']),
    spareManagementKey: await managementKeyOf(aId, ['logs:read']),
    webhookUuid: sent.json<{ uuid: string }>().uuid,
    invitationId: (await new Invitations(t.store, { baseUrl: t.config.baseUrl, mailer: NO_MAIL, guard: new SignInGuard(t.config.passwordHashCost) }, owner(aId)).invite(aId, {
      email: `alpha-invitee-${token()}@example.com`,
      role: 'admin',
    })).invitation.id,
    destinationId,
    deliveryId: delivery.id,
    erasureId: preview.id,
  };

  const bId = (await management.createCompany(`Bravo ${token()}`)).id;
  const b: CompanyB = {
    companyId: bId,
    owner: await personOf(bId, 'owner'),
    managementKey: await managementKeyOf(bId, ['integrations:manage', 'logs:read']),
    integration: await integrationOf(bId, `bravo integration ${token()}`),
  };
  await pausedDestination(bId, 'bravo');
  const bSent = await sendWebhook(t.app, b.integration.integrationKey, { apiKey: b.integration.apiKey });
  if (bSent.statusCode !== 202) throw new Error(`B's webhook was not taken: ${bSent.statusCode} ${bSent.body}`);

  const outsider = await personOf((await management.createCompany(`Charlie ${token()}`)).id, 'viewer');
  const apiKeys = [a.integration, a.spareKey, a.other, a.logsKey, a.manageKey, a.spareManagementKey].map((k) => k.apiKey);

  return {
    a,
    b,
    outsider,
    async sessionOf(person) {
      const signedIn = await sessions.start({ id: person.userId, email: person.email }, '127.0.0.1', 'isolation-matrix');
      return { cookie: `${SESSION_COOKIE}=${signedIn.cookieValue}`, 'x-csrf-token': signedIn.session.csrfToken };
    },
    markers: [...(await storedMarkers(t.store, aId)), ...apiKeys, payloadMarker, headerValue],
  };
}

/** What the store holds of a company that names it: ids, names, addresses, key prefixes, emails, webhook uuids. */
async function storedMarkers(store: Store, companyId: string): Promise<string[]> {
  const company = await store.getCompany(companyId);
  const integrations = await store.listIntegrations(companyId, { limit: 200 });
  const keys = await keysOf(store, companyId, integrations);
  const members = await store.listMembers(companyId, { limit: 200 });
  const webhooks = (await store.listCompanyWebhooks(companyId, { limit: 200 })).webhooks;
  const invitations = await store.listInvitations(companyId, { limit: 200 }, Date.now());
  const destinations = await store.listDestinations(companyId, { limit: 200 });
  const deliveries = (await Promise.all(destinations.map((d) => store.listDeliveries(companyId, { destinationId: d.id, limit: 200 })))).flat();
  return [
    ...invitations.flatMap((i) => [i.id, i.email]),
    ...destinations.flatMap((d) => [d.id, d.name, d.url]),
    ...deliveries.map((d) => d.id),
    companyId,
    company!.name,
    ...integrations.flatMap((i) => [i.id, i.name, i.integrationKey]),
    ...keys.flatMap((k) => [k.id, k.prefix, ...(k.name ? [k.name] : [])]),
    ...members.flatMap((m) => [m.userId, m.email]),
    ...webhooks.map((w) => w.uuid),
  ];
}

/**
 * What a company's data is, in what a refused caller could have changed: its settings,
 * integrations, keys (revoked? expiring?), members and roles, webhooks and audit log.
 * Not when keys were last used: a refused call with a valid key still counts as its use.
 */
export async function companySnapshot(store: Store, companyId: string) {
  const company = await store.getCompany(companyId);
  const integrations = await store.listIntegrations(companyId, { limit: 200 });
  const keys = await keysOf(store, companyId, integrations);
  return {
    company: company && { name: company.name, retentionDays: company.retentionDays, requireTwoFactor: company.requireTwoFactor },
    integrations: integrations.map(({ id, name, description, enabled, bodyLimitBytes, rateLimitPerMinute, updatedAt }) => ({
      id,
      name,
      description,
      enabled,
      bodyLimitBytes,
      rateLimitPerMinute,
      updatedAt,
    })),
    keys: keys.map(({ id, name, scopes, expiresAt, revokedAt }) => ({ id, name, scopes, expiresAt, revokedAt })),
    members: (await store.listMembers(companyId, { limit: 200 })).map(({ userId, email, role }) => ({ userId, email, role })),
    invitations: (await store.listInvitations(companyId, { limit: 200 }, Date.now())).map(({ id, email, role }) => ({ id, email, role })),
    webhooks: (await store.listCompanyWebhooks(companyId, { limit: 200 })).webhooks.map((w) => w.uuid),
    destinations: await Promise.all(
      (await store.listDestinations(companyId, { limit: 200 })).map(async (d) => ({
        ...d,
        deliveries: (await store.listDeliveries(companyId, { destinationId: d.id, limit: 200 })).map(({ id, state, series, attempts }) => ({
          id,
          state,
          series,
          attempts,
        })),
      })),
    ),
    audit: (await store.listAuditLog(companyId, { limit: 200 })).map((r) => `${r.action} ${r.targetId}`),
  };
}

/** The company's management keys and every key of its integrations. */
async function keysOf(store: Store, companyId: string, integrations: Array<{ id: string }>) {
  const lists = await Promise.all([null, ...integrations.map((i) => i.id)].map((id) => store.listKeys(companyId, id, { limit: 200 })));
  return lists.flat();
}

export interface Answer {
  status: number;
  headers: Record<string, unknown>;
  body: string;
}

/**
 * One call through app.inject, its body read as a stream: an event stream (the live tail)
 * never ends, so only its first chunk is read, and then the connection is closed as a
 * browser leaving would close it (which stops the stream's timers on the server).
 */
export async function callRoute(
  app: AppInstance,
  request: { method: string; url: string; headers: Record<string, string>; payload?: object; remoteAddress: string },
): Promise<Answer> {
  const response = await app.inject({
    method: request.method as 'GET',
    url: request.url,
    headers: request.headers,
    remoteAddress: request.remoteAddress,
    ...(request.payload !== undefined && { payload: request.payload }),
    payloadAsStream: true,
  });
  const stream = response.stream();
  const answer = { status: response.statusCode, headers: response.headers };
  if (String(response.headers['content-type']).startsWith('text/event-stream')) {
    const first = await firstChunk(stream);
    response.raw.res.destroy();
    return { ...answer, body: first };
  }
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return { ...answer, body: Buffer.concat(chunks).toString('utf8') };
}

async function firstChunk(stream: Readable): Promise<string> {
  for await (const chunk of stream) return String(chunk);
  return '';
}
