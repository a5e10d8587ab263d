import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { AppError } from '../errors.js';
import type { UsageBucket } from '../store/store.js';
import { principalOf, type ApiDeps } from './context.js';
import { ERROR_RESPONSES, Id, Timestamp, iso } from './schemas.js';
import { parseTime } from '../domain/time.js';

const MINUTE_MS = 60_000;
const BUCKETS = {
  minute: { ms: MINUTE_MS, defaultCount: 60 },
  hour: { ms: 60 * MINUTE_MS, defaultCount: 24 },
  day: { ms: 24 * 60 * MINUTE_MS, defaultCount: 30 },
} as const;

/** A chart's worth: a day of minutes, two months of hours. */
export const MAX_BUCKETS = 1440;

const Count = (description: string) => Type.Integer({ minimum: 0, description });

const UsageSchema = Type.Object(
  {
    bucket: Type.Union([Type.Literal('minute'), Type.Literal('hour'), Type.Literal('day')]),
    since: Timestamp,
    until: Timestamp,
    group_by: Type.Union([Type.Literal('integration'), Type.Literal('key'), Type.Null()]),
    data: Type.Array(
      Type.Object({
        start: Timestamp,
        integration_id: Type.Optional(Id('int', 'With group_by=integration.')),
        key_id: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 'With group_by=key; null: no valid key.' })),
        accepted: Count('Answered 202.'),
        replayed: Count('Answered 200: an idempotent repeat.'),
        rejected: Count('Answered 4xx.'),
        failed: Count('Answered 5xx.'),
        total: Count('Every request of the bucket.'),
      }),
    ),
  },
  { $id: 'Usage' },
);

/** /api/v1/usage: webhook sends over time by outcome. */
export async function usageRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  app.get(
    '/usage',
    {
      config: { permission: 'logs:read' },
      schema: {
        tags: ['Usage'],
        summary: 'Requests over time by outcome',
        description:
          'Webhooks sent (POST) to the company\'s addresses per UTC time bucket, counted by outcome: accepted (202), ' +
          'replayed (200), rejected (4xx), failed (5xx). `since` is moved back to the start of its bucket and is inclusive; ' +
          '`until` is exclusive and defaults to now; `since` defaults to 60 minutes, 24 hours or 30 days before `until`. ' +
          `The range may hold at most ${MAX_BUCKETS} buckets (400 otherwise: use a larger bucket). ` +
          'Buckets without requests are left out; with `group_by` each bucket has one item per integration or key.',
        querystring: Type.Object({
          bucket: Type.Union([Type.Literal('minute'), Type.Literal('hour'), Type.Literal('day')], { default: 'hour' }),
          since: Type.Optional(Type.String({ format: 'date-time', description: 'From (ISO-8601), moved back to its bucket start.' })),
          until: Type.Optional(Type.String({ format: 'date-time', description: 'Up to, exclusive (ISO-8601); default now.' })),
          integration_id: Type.Optional(Id('int', 'Only this integration.')),
          key_id: Type.Optional(Id('key', 'Only this key.')),
          group_by: Type.Optional(
            Type.Union([Type.Literal('integration'), Type.Literal('key')], { description: 'One item per integration or key in each bucket.' }),
          ),
        }),
        response: { 200: UsageSchema, ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const query = request.query;
      const bucket = BUCKETS[query.bucket];
      const until = query.until === undefined ? Date.now() : parseTime(query.until, 'until');
      const requested = query.since === undefined ? until - bucket.defaultCount * bucket.ms : parseTime(query.since, 'since');
      const since = requested - (((requested % bucket.ms) + bucket.ms) % bucket.ms);
      if (since >= until) throw new AppError('invalid_request', '`since` must be before `until`.', { field: 'since' });
      const buckets = Math.ceil((until - since) / bucket.ms);
      if (buckets > MAX_BUCKETS) {
        throw new AppError(
          'invalid_request',
          `The range holds ${buckets} ${query.bucket} buckets; at most ${MAX_BUCKETS}: narrow it or use a larger bucket.`,
          { field: 'since' },
        );
      }
      const counts = await deps.store.countUsage(companyId, {
        bucketMs: bucket.ms,
        since,
        until,
        integrationId: query.integration_id,
        keyId: query.key_id,
        groupBy: query.group_by,
      });
      return {
        bucket: query.bucket,
        since: iso(since),
        until: iso(until),
        group_by: query.group_by ?? null,
        data: counts.map((c) => presentBucket(c, query.group_by)),
      };
    },
  );
}

function presentBucket(counts: UsageBucket, groupBy: 'integration' | 'key' | undefined) {
  return {
    start: iso(counts.start),
    ...(groupBy === 'integration' && { integration_id: counts.group! }),
    ...(groupBy === 'key' && { key_id: counts.group }),
    accepted: counts.accepted,
    replayed: counts.replayed,
    rejected: counts.rejected,
    failed: counts.failed,
    total: counts.total,
  };
}
