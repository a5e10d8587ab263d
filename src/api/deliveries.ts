import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { parseOptionalTime } from '../domain/time.js';
import { AppError } from '../errors.js';
import { DEFAULT_REPLAY_COOLDOWN_MS, MAX_PER_CALL, MAX_REPLAY_IDS, MAX_SEND_UUIDS } from '../services/redeliveries.js';
import { STATS_MAX_ATTEMPTS } from '../store/store.js';
import { principalOf, requirePermission, type ApiDeps } from './context.js';
import { PAYLOADS_NEED_LOGS_READ } from './destinations.js';
import {
  AttemptSchema,
  DeliverySchema,
  DeliveryStateSchema,
  WebhookUuid,
  presentAttempt,
  presentDelivery,
} from './destination-schemas.js';
import { ERROR_RESPONSES, Id, Page, PageQuery, Timestamp, iso, pageOf } from './schemas.js';

/** Attempts shown with a delivery, newest first. */
const ATTEMPTS_SHOWN = 100;
const HOUR_MS = 60 * 60 * 1000;
const DAY_MS = 24 * HOUR_MS;
const MAX_STATS_RANGE_MS = 31 * DAY_MS;
const MAX_BUCKETS = 100;
/** The bucket sizes stats choose from: the smallest that makes at most MAX_BUCKETS of the range. */
const BUCKET_SIZES_MS = [60_000, 5 * 60_000, 15 * 60_000, 30 * 60_000, HOUR_MS, 3 * HOUR_MS, 6 * HOUR_MS, 12 * HOUR_MS, DAY_MS];

const Since = Type.String({ format: 'date-time', description: 'At or after (ISO-8601).' });
const Until = Type.String({ format: 'date-time', description: 'Before (ISO-8601).' });
const Event = Type.String({ minLength: 1, maxLength: 200, description: 'Only this event, exactly.' });
const DestinationParams = Type.Object({ destination_id: Id('dst') });
const DeliveryParams = Type.Object({ delivery_id: Id('dlv') });

/** /api/v1/deliveries and a destination's sends and stats: what was delivered, how it went, and doing it again. */
export async function deliveryRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const tags = ['Deliveries'];
  const limits = app.readLimits;
  const busyText = limits.describeHeavyReads();
  const budgetText = `${deps.redeliveries.perHour} an hour, ${deps.redeliveries.burst} at once`;

  app.get(
    '/deliveries',
    {
      config: { permission: 'logs:read' },
      schema: {
        tags,
        summary: 'List deliveries',
        description:
          "One destination's deliveries (destination_id) or one webhook's (webhook_uuid): one of them is required. Newest " +
          `first (by when the delivery was made); \`since\` is inclusive, \`until\` exclusive. ${busyText}`,
        querystring: Type.Object({
          ...PageQuery,
          destination_id: Type.Optional(Id('dst')),
          webhook_uuid: Type.Optional(WebhookUuid),
          state: Type.Optional(DeliveryStateSchema),
          event: Type.Optional(Event),
          since: Type.Optional(Since),
          until: Type.Optional(Until),
        }),
        response: { 200: Page(DeliverySchema), ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const q = request.query;
      if (q.destination_id === undefined && q.webhook_uuid === undefined) {
        throw new AppError('invalid_request', 'Name a destination (destination_id) or a webhook (webhook_uuid).', { field: 'destination_id' });
      }
      const filter = {
        destinationId: q.destination_id,
        webhookUuid: q.webhook_uuid,
        state: q.state,
        event: q.event,
        since: parseOptionalTime(q.since, 'since'),
        until: parseOptionalTime(q.until, 'until'),
      };
      const page = await limits.read(companyId, () =>
        pageOf(
          q,
          (query) => deps.store.listDeliveries(companyId, { ...filter, ...query }),
          (last) => ({ at: last.createdAt, id: last.id }),
        ),
      );
      return { data: page.items.map(presentDelivery), next_cursor: page.next_cursor };
    },
  );

  app.get(
    '/deliveries/:delivery_id',
    {
      config: { permission: 'logs:read' },
      schema: {
        tags,
        summary: 'Read a delivery',
        description: `The delivery and its attempts, newest first (the last ${ATTEMPTS_SHOWN}, every series). ${busyText}`,
        params: DeliveryParams,
        response: { 200: Type.Object({ delivery: DeliverySchema, attempts: Type.Array(AttemptSchema) }), ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const id = request.params.delivery_id;
      const found = await limits.read(companyId, async () => {
        const delivery = await deps.store.getDelivery(companyId, id);
        return delivery && { delivery, attempts: await deps.store.listDeliveryAttempts(companyId, id, ATTEMPTS_SHOWN) };
      });
      if (!found) throw new AppError('not_found', `No delivery with id ${id}.`);
      return { delivery: presentDelivery(found.delivery), attempts: found.attempts.map(presentAttempt) };
    },
  );

  app.post(
    '/deliveries/:delivery_id/replay',
    {
      config: { permission: 'integrations:manage' },
      schema: {
        tags,
        summary: 'Replay a delivery',
        description:
          'Starts a new attempt series (series + 1, attempts from 0), due now, or held while its destination is paused or ' +
          'disabled; whatever its state, but cancelled (409: its destination was deleted). An attempt in flight is not counted. ' +
          `Takes one of the company's redelivery budget (${budgetText}): 429 with Retry-After once it is spent.`,
        params: DeliveryParams,
        response: { 200: Type.Object({ delivery: DeliverySchema }), ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId, actor } = principalOf(request);
      return { delivery: presentDelivery(await deps.redeliveries.replayOne(companyId, request.params.delivery_id, actor)) };
    },
  );

  app.post(
    '/deliveries/replay',
    {
      config: { permission: 'integrations:manage' },
      schema: {
        tags,
        summary: "Replay a destination's deliveries",
        description:
          'A new series for each of its deliveries that match the filters (`since` and `until` on when the delivery was made), ' +
          `oldest first, at most ${MAX_PER_CALL} per call: \`more\` says to call again (from \`next_since\` when given). ` +
          'Left out: cancelled deliveries, pending ones (their series is still running) unless `state` is `pending`, which ' +
          'retries now those failing and waiting for their next attempt (at least one attempt made, none in flight), and ' +
          `those replayed less than ${DEFAULT_REPLAY_COOLDOWN_MS / 1000} s ago, so a repeated call sends nothing twice. ` +
          `One replay or send per company at a time (429 redelivery_busy with Retry-After otherwise); each delivery replayed ` +
          `takes one of the company's budget (${budgetText}; 429 redelivery_budget_spent once spent).`,
        body: Type.Object({
          destination_id: Id('dst'),
          state: Type.Optional(
            Type.Union(DeliveryStateSchema.anyOf, {
              description:
                'Only deliveries in this state: held, succeeded or failed; `pending`: retry now those failing and waiting for their next attempt. Cancelled ones are never replayed (400).',
            }),
          ),
          event: Type.Optional(Event),
          since: Type.Optional(Since),
          until: Type.Optional(Until),
          delivery_ids: Type.Optional(
            Type.Array(Type.String(), {
              description:
                `Instead of a range: these deliveries of the destination (1 to ${MAX_REPLAY_IDS}, dlv_…), picked one by one. Each is ` +
                'replayed if settled (held, succeeded, failed) or retried now if failing and waiting for its next attempt, unless `state` narrows them.',
            }),
          ),
          dry_run: Type.Optional(
            Type.Boolean({ description: 'Replay nothing: `would_replay` says how many this call would take now, to say so before it runs.' }),
          ),
        }),
        response: {
          200: Type.Object({
            replayed: Type.Integer(),
            would_replay: Type.Optional(Type.Integer({ description: 'With `dry_run`: how many this call would replay now (`more`: and more after them).' })),
            more: Type.Boolean(),
            next_since: Type.Optional(Type.String({ format: 'date-time', description: 'Where the next call should start its range.' })),
          }),
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request) => {
      const { companyId, actor } = principalOf(request);
      const body = request.body;
      const filter = {
        destinationId: body.destination_id,
        state: body.state,
        event: body.event,
        since: parseOptionalTime(body.since, 'since'),
        until: parseOptionalTime(body.until, 'until'),
        deliveryIds: body.delivery_ids,
      };
      if (body.dry_run === true) {
        const preview = await deps.redeliveries.preview(companyId, filter);
        return { replayed: 0, would_replay: preview.count, more: preview.more };
      }
      const outcome = await deps.redeliveries.replay(companyId, filter, actor);
      return { replayed: outcome.count, more: outcome.more, ...(outcome.nextSince !== undefined && { next_since: iso(outcome.nextSince) }) };
    },
  );

  app.post(
    '/destinations/:destination_id/send',
    {
      config: { permission: 'integrations:manage' },
      schema: {
        tags: ['Destinations'],
        summary: 'Send stored webhooks to a destination',
        description:
          'Makes deliveries for webhooks already stored that have none to this destination (one added after they arrived): ' +
          `up to ${MAX_SEND_UUIDS} named by uuid (whatever the filters), or the range from \`since\` (to \`until\`, of one ` +
          `\`event\`) that the destination's integrations and event patterns match, oldest first, at most ${MAX_PER_CALL} per ` +
          'call. `skipped`: those it already had. `more`: call again, from `next_since` when given. Needs logs:read as well. ' +
          `One replay or send per company at a time (429 redelivery_busy with Retry-After otherwise); each delivery made takes ` +
          `one of the company's redelivery budget (${budgetText}; 429 redelivery_budget_spent once spent).`,
        params: DestinationParams,
        body: Type.Object({
          webhook_uuids: Type.Optional(Type.Array(WebhookUuid, { minItems: 1, maxItems: MAX_SEND_UUIDS })),
          since: Type.Optional(Type.String({ format: 'date-time', description: 'Received at or after (ISO-8601).' })),
          until: Type.Optional(Type.String({ format: 'date-time', description: 'Received before (ISO-8601).' })),
          event: Type.Optional(Event),
        }),
        response: {
          200: Type.Object({
            created: Type.Integer(),
            skipped: Type.Integer(),
            more: Type.Boolean(),
            next_since: Type.Optional(Type.String({ format: 'date-time', description: 'Where the next call should start its range.' })),
          }),
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request) => {
      requirePermission(request, 'logs:read', PAYLOADS_NEED_LOGS_READ);
      const { companyId, actor } = principalOf(request);
      const body = request.body;
      const outcome = await deps.redeliveries.send(companyId, request.params.destination_id, {
        webhookUuids: body.webhook_uuids,
        since: parseOptionalTime(body.since, 'since'),
        until: parseOptionalTime(body.until, 'until'),
        event: body.event,
      }, actor);
      return {
        created: outcome.count,
        skipped: outcome.skipped,
        more: outcome.more,
        ...(outcome.nextSince !== undefined && { next_since: iso(outcome.nextSince) }),
      };
    },
  );

  app.get(
    '/destinations/:destination_id/stats',
    {
      config: { permission: 'logs:read' },
      schema: {
        tags: ['Destinations'],
        summary: "A destination's health",
        description:
          'Attempts of the range (default: the last 24 hours; at most 31 days) with their outcome and latency, overall and by ' +
          `bucket (\`bucket_seconds\` is chosen so that there are at most ${MAX_BUCKETS}; buckets start on the clock, at multiples of ` +
          '`bucket_seconds` since the epoch as usage\'s do, so the first may begin before `since`; empty buckets are left out), and the ' +
          `backlog now. A range of more than ${STATS_MAX_ATTEMPTS} attempts counts its newest ${STATS_MAX_ATTEMPTS} (\`truncated\`). ${busyText}`,
        params: DestinationParams,
        querystring: Type.Object({ since: Type.Optional(Since), until: Type.Optional(Until) }),
        response: { 200: StatsSchema, ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const id = request.params.destination_id;
      const range = statsRange(request.query.since, request.query.until);
      const stats = await limits.read(companyId, async () => {
        if (!(await deps.store.getDestination(companyId, id))) return undefined;
        return deps.store.destinationStats(companyId, id, { ...range, now: Date.now() });
      });
      if (!stats) throw new AppError('not_found', `No destination with id ${id}.`);
      return {
        since: iso(range.since),
        until: iso(range.until),
        bucket_seconds: range.bucketMs / 1000,
        attempts: stats.attempts,
        succeeded: stats.succeeded,
        failed: stats.failed,
        success_rate: stats.attempts === 0 ? null : stats.succeeded / stats.attempts,
        latency_ms: stats.latencyMs,
        backlog: {
          pending: stats.backlog.pending,
          held: stats.backlog.held,
          in_flight: stats.backlog.inFlight,
          oldest_due_at: iso(stats.backlog.oldestDueAt),
        },
        buckets: stats.buckets.map((b) => ({ start: iso(b.start), succeeded: b.succeeded, failed: b.failed, p50_ms: b.p50Ms, p99_ms: b.p99Ms })),
        truncated: stats.truncated,
      };
    },
  );
}

const NullableMs = Type.Union([Type.Integer(), Type.Null()]);

const StatsSchema = Type.Object({
  since: Timestamp,
  until: Timestamp,
  bucket_seconds: Type.Integer(),
  attempts: Type.Integer(),
  succeeded: Type.Integer({ description: 'Attempts answered with a 2xx in time.' }),
  failed: Type.Integer(),
  success_rate: Type.Union([Type.Number(), Type.Null()], { description: 'succeeded / attempts, 0 to 1; null without attempts.' }),
  latency_ms: Type.Object({ p50: NullableMs, p90: NullableMs, p99: NullableMs }, { description: "Attempts' durations, all outcomes." }),
  backlog: Type.Object({
    pending: Type.Integer({ description: 'Waiting for an attempt, or in flight.' }),
    held: Type.Integer({ description: 'Held while the destination is paused or disabled.' }),
    in_flight: Type.Integer(),
    oldest_due_at: Type.Union([Timestamp, Type.Null()], { description: 'The earliest next attempt among those waiting.' }),
  }),
  buckets: Type.Array(
    Type.Object({ start: Timestamp, succeeded: Type.Integer(), failed: Type.Integer(), p50_ms: NullableMs, p99_ms: NullableMs }),
  ),
  truncated: Type.Boolean({ description: `Whether the range held more than ${STATS_MAX_ATTEMPTS} attempts (the newest were counted).` }),
});

/** The stats' range (default the last 24 hours, at most 31 days) and the bucket that makes at most MAX_BUCKETS of it. */
function statsRange(sinceText: string | undefined, untilText: string | undefined) {
  const given = { since: parseOptionalTime(sinceText, 'since'), until: parseOptionalTime(untilText, 'until') };
  const until = given.until ?? Date.now();
  const since = given.since ?? until - DAY_MS;
  if (since >= until) throw new AppError('invalid_request', '`until` must be after `since`.', { field: 'until' });
  if (until - since > MAX_STATS_RANGE_MS) throw new AppError('invalid_request', 'The range is at most 31 days.', { field: 'since' });
  const bucketMs = BUCKET_SIZES_MS.find((size) => Math.ceil((until - since) / size) <= MAX_BUCKETS)!;
  return { since, until, bucketMs };
}
