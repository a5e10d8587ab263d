import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { MAX_ROTATION_GRACE_SECONDS } from '../domain/api-key.js';
import { AppError } from '../errors.js';
import { DEFAULT_PREVIOUS_SECRET_SECONDS, type DestinationEdit } from '../services/destinations.js';
import { destinationsFor, noContent, principalOf, requirePermission, type ApiDeps } from './context.js';
import { DestinationSchema, DestinationSettings, presentDestination } from './destination-schemas.js';
import { ERROR_RESPONSES, Id, Page, PageQuery, Timestamp, iso, pageOf } from './schemas.js';

const DestinationParams = Type.Object({ destination_id: Id('dst') });
const SigningSecret = Type.String({
  description: 'whsec_ and the base64 of 32 bytes: give it to the receiver, which verifies `webhook-signature` with it. Shown in this answer only.',
});

/**
 * What a destination receives is the webhooks' payloads: choosing where they go (`url`)
 * or which go there (`integration_ids`, `event_patterns`) is reading them, so it needs
 * logs:read as well, as issuing a key that reads webhooks does.
 */
export const PAYLOADS_NEED_LOGS_READ =
  'Choosing where webhooks are sent (url), which are sent and in what shape (integration_ids, event_patterns, rules, a send) needs logs:read as well as integrations:manage.';

/** /api/v1/destinations: where the company's webhooks are delivered. */
export async function destinationRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const tags = ['Destinations'];

  app.get(
    '/destinations',
    {
      config: { permission: 'integrations:read' },
      schema: {
        tags,
        summary: 'List destinations',
        description: 'Newest first.',
        querystring: Type.Object(PageQuery),
        response: { 200: Page(DestinationSchema), ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const page = await pageOf(
        request.query,
        (query) => deps.store.listDestinations(companyId, query),
        (last) => ({ at: last.createdAt, id: last.id }),
      );
      return { data: page.items.map(presentDestination), next_cursor: page.next_cursor };
    },
  );

  app.post(
    '/destinations',
    {
      config: { permission: 'integrations:manage' },
      schema: {
        tags,
        summary: 'Create a destination',
        description:
          'From now on, every webhook accepted that matches its integrations and event patterns is delivered to it, at least ' +
          'once, signed with its secret (Standard Webhooks), retried on failure. The signing secret is in this answer only. ' +
          `Needs logs:read as well (what it receives is the payloads).`,
        body: Type.Object({
          name: DestinationSettings.name,
          url: DestinationSettings.url,
          integration_ids: Type.Optional(DestinationSettings.integration_ids),
          event_patterns: Type.Optional(DestinationSettings.event_patterns),
          headers: Type.Optional(DestinationSettings.headers),
          timeout_ms: Type.Optional(DestinationSettings.timeout_ms),
          rate_per_second: Type.Optional(DestinationSettings.rate_per_second),
          max_in_flight: Type.Optional(DestinationSettings.max_in_flight),
          rules: Type.Optional(DestinationSettings.rules),
        }),
        response: { 201: Type.Object({ destination: DestinationSchema, signing_secret: SigningSecret }), ...ERROR_RESPONSES },
      },
    },
    async (request, reply) => {
      requirePermission(request, 'logs:read', PAYLOADS_NEED_LOGS_READ);
      const { companyId } = principalOf(request);
      const body = request.body;
      const created = await destinationsFor(deps, request).create(companyId, {
        name: body.name,
        url: body.url,
        integrationIds: body.integration_ids,
        eventPatterns: body.event_patterns,
        headers: body.headers,
        timeoutMs: body.timeout_ms,
        ratePerSecond: body.rate_per_second,
        maxInFlight: body.max_in_flight,
        rules: body.rules,
      });
      return reply.code(201).send({ destination: presentDestination(created.destination), signing_secret: created.signingSecret });
    },
  );

  app.get(
    '/destinations/:destination_id',
    {
      config: { permission: 'integrations:read' },
      schema: { tags, summary: 'Read a destination', params: DestinationParams, response: { 200: DestinationSchema, ...ERROR_RESPONSES } },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const destination = await deps.store.getDestination(companyId, request.params.destination_id);
      if (!destination) throw new AppError('not_found', `No destination with id ${request.params.destination_id}.`);
      return presentDestination(destination);
    },
  );

  app.patch(
    '/destinations/:destination_id',
    {
      config: { permission: 'integrations:manage' },
      schema: {
        tags,
        summary: 'Update a destination',
        description:
          'Changes only the fields sent; `headers` replaces the whole set ({} removes them). A `url` of another origin (scheme, ' +
          'host or port) than the current one removes the headers unless the same request sets them: they are most often ' +
          "credentials for the current receiver (`header_names` in the answer shows what is kept). Webhooks accepted from now on " +
          'follow the new filters; deliveries already made keep theirs. Changing url, integration_ids, event_patterns or rules needs ' +
          'logs:read as well.',
        params: DestinationParams,
        body: Type.Partial(Type.Object(DestinationSettings), { minProperties: 1 }),
        response: { 200: DestinationSchema, ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const body = request.body;
      if (body.url !== undefined || body.integration_ids !== undefined || body.event_patterns !== undefined || body.rules !== undefined) {
        requirePermission(request, 'logs:read', PAYLOADS_NEED_LOGS_READ);
      }
      const edit: DestinationEdit = {
        ...(body.name !== undefined && { name: body.name }),
        ...(body.url !== undefined && { url: body.url }),
        ...(body.integration_ids !== undefined && { integrationIds: body.integration_ids }),
        ...(body.event_patterns !== undefined && { eventPatterns: body.event_patterns }),
        ...(body.headers !== undefined && { headers: body.headers }),
        ...(body.timeout_ms !== undefined && { timeoutMs: body.timeout_ms }),
        ...(body.rate_per_second !== undefined && { ratePerSecond: body.rate_per_second }),
        ...(body.max_in_flight !== undefined && { maxInFlight: body.max_in_flight }),
        ...(body.rules !== undefined && { rules: body.rules }),
      };
      const { companyId } = principalOf(request);
      return presentDestination(await destinationsFor(deps, request).update(companyId, request.params.destination_id, edit));
    },
  );

  app.delete(
    '/destinations/:destination_id',
    {
      config: { permission: 'integrations:manage' },
      schema: {
        tags,
        summary: 'Delete a destination',
        description: 'Nothing more is sent to it: its pending and held deliveries become `cancelled`. Its deliveries stay readable.',
        params: DestinationParams,
        response: { 204: Type.Null(), ...ERROR_RESPONSES },
      },
    },
    async (request, reply) => {
      await destinationsFor(deps, request).remove(principalOf(request).companyId, request.params.destination_id);
      return noContent(reply);
    },
  );

  for (const paused of [true, false]) {
    app.post(
      `/destinations/:destination_id/${paused ? 'pause' : 'resume'}`,
      {
        config: { permission: 'integrations:manage' },
        schema: {
          tags,
          summary: paused ? 'Pause a destination' : 'Resume a destination',
          description: paused
            ? 'Its deliveries are held (new ones too) until it is resumed; an attempt in flight finishes.'
            : 'Its held deliveries are sent again. Also re-enables a destination intake disabled, and clears its failure streak.',
          params: DestinationParams,
          // The destination as it is now, as GET and PATCH answer it (and as integrations' routes do).
          response: { 200: DestinationSchema, ...ERROR_RESPONSES },
        },
      },
      async (request: FastifyRequest<{ Params: { destination_id: string } }>) => {
        const { companyId } = principalOf(request);
        return presentDestination(await destinationsFor(deps, request).setPaused(companyId, request.params.destination_id, paused));
      },
    );
  }

  app.post(
    '/destinations/:destination_id/secret/rotate',
    {
      config: { permission: 'integrations:manage' },
      schema: {
        tags,
        summary: "Rotate a destination's signing secret",
        description:
          'A new secret, in this answer only. Until previous_secret_expires_at (previous_expires_in_seconds from now: 0 to ' +
          '604800, default 86400) requests carry two signatures, the new one first, so the receiver can move over without a refusal.',
        params: DestinationParams,
        // Null stands for no body at all (Fastify validates an absent body as null).
        body: Type.Union([
          Type.Object({
            previous_expires_in_seconds: Type.Optional(
              Type.Integer({
                minimum: 0,
                maximum: MAX_ROTATION_GRACE_SECONDS,
                description: `How long the previous secret also signs; ${DEFAULT_PREVIOUS_SECRET_SECONDS} when absent.`,
              }),
            ),
          }),
          Type.Null(),
        ]),
        response: { 200: Type.Object({ signing_secret: SigningSecret, previous_secret_expires_at: Timestamp }), ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const rotated = await destinationsFor(deps, request).rotateSecret(
        companyId,
        request.params.destination_id,
        request.body?.previous_expires_in_seconds,
      );
      return { signing_secret: rotated.signingSecret, previous_secret_expires_at: iso(rotated.previousSecretExpiresAt) };
    },
  );
}
