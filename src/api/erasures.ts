import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { MAX_VALUE_CHARS, MIN_VALUE_CHARS } from '../domain/erasure-match.js';
import { isId } from '../domain/ids.js';
import { MAX_REDACTION_PATHS } from '../domain/redaction.js';
import { parseOptionalTime } from '../domain/time.js';
import { AppError } from '../errors.js';
import { erasureJson, erasureReport, MAX_OPEN_ERASURES, PREVIEW_TTL_MS } from '../services/erasures.js';
import { principalOf, type ApiDeps } from './context.js';
import { ERROR_RESPONSES, Id, NullableTimestamp, Timestamp } from './schemas.js';

const Counts = Type.Object({
  webhooks: Type.Integer({ description: 'Webhooks matching (a preview) or replaced by their tombstone (an erasure).' }),
  deliveries: Type.Integer({ description: 'Their deliveries: states and times kept; those still to be made are cancelled.' }),
  attempts: Type.Integer({ description: "Their delivery attempts holding a receiver's response excerpt (removed by an erasure)." }),
  request_log: Type.Integer({ description: "Request-log rows of theirs (their 202 and any replayed 200): the sender's address and user agent removed." }),
});

const Actor = Type.Object({ type: Type.String(), id: Type.Union([Type.String(), Type.Null()]) });

const ErasureSchema = Type.Object(
  {
    id: Id('ers'),
    state: Type.Union(
      [
        Type.Literal('counting'),
        Type.Literal('previewed'),
        Type.Literal('queued'),
        Type.Literal('running'),
        Type.Literal('completed'),
        Type.Literal('failed'),
        Type.Literal('expired'),
      ],
      {
      description:
          'A preview: counting → previewed (→ queued once confirmed, or expired). An erasure: queued → running → completed (or failed).',
      },
    ),
    dry_run: Type.Boolean({ description: 'A preview: it counts and changes nothing until confirmed.' }),
    value_hint: Type.String({ description: 'The value searched for, masked. The value itself is never shown, and is dropped when the erasure ends.' }),
    criteria: Type.Object({
      since: Timestamp,
      until: Timestamp,
      integration_ids: Type.Union([Type.Array(Id('int')), Type.Null()]),
      paths: Type.Array(Type.String()),
    }),
    requested_by: Actor,
    confirmed_by: Type.Union([Actor, Type.Null()]),
    created_at: Timestamp,
    confirmed_at: NullableTimestamp,
    started_at: NullableTimestamp,
    finished_at: NullableTimestamp,
    expires_at: Type.Union([Timestamp, Type.Null()], { description: "A preview's value is dropped then unless it is confirmed." }),
    scanned: Type.Integer({ description: 'Webhooks of the range read so far.' }),
    counts: Counts,
    sample: Type.Array(
      Type.Object({
        uuid: Type.String(),
        integration_id: Type.String(),
        event: Type.String(),
        received_at: Timestamp,
        matched_in: Type.String({ description: '`body`, `header <name>`, or the path where the value was.' }),
      }),
      { description: 'Up to ten matches: which webhooks, never their bodies.' },
    ),
    error: Type.Union([Type.String(), Type.Null()]),
  },
  { $id: 'Erasure' },
);

const ErasureId = Type.Object({ erasure_id: Id('ers') });

/**
 * /api/v1/erasures: erase a person's data on request (issue 40; docs/personal-data.md).
 * Owners, and management keys with the `data:erase` scope, only: an erasure cannot be
 * undone, and its preview says which webhooks hold the value.
 */
export async function erasureRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  app.post(
    '/erasures',
    {
      config: { permission: 'data:erase' },
      schema: {
        tags: ['Personal data'],
        summary: 'Preview or erase a person’s data',
        description:
          'Searches the company’s webhooks of a time range for a value (an email, a customer id, a phone number; case ignored), ' +
          'anywhere in the body and the headers, or only at the JSON `paths` given (the redaction’s syntax). ' +
          '`dry_run: true` makes a preview: it counts the matches and their deliveries, attempts and request-log rows, with a sample, ' +
          'and changes nothing; confirm it with POST /erasures/{id}/confirm. Without `dry_run`, each matching webhook is replaced by a tombstone: ' +
          'body, data and headers, the sender’s address and user agent, and its attempts’ response excerpts go; its id, integration, event, ' +
          'time and its deliveries’ states and times stay. Both run in the background in short steps: poll GET /erasures/{id}. ' +
          `Owners and keys with \`data:erase\` only. At most ${MAX_OPEN_ERASURES} under way per company (429 past it).`,
        body: Type.Object(
          {
            value: Type.String({ minLength: MIN_VALUE_CHARS, maxLength: MAX_VALUE_CHARS, description: 'The text to search for.' }),
            since: Type.Optional(Timestamp),
            until: Type.Optional(Timestamp),
            integration_ids: Type.Optional(Type.Array(Id('int'), { maxItems: 100, description: 'Only these integrations; all of them when left out.' })),
            paths: Type.Optional(Type.Array(Type.String({ maxLength: 200 }), { maxItems: MAX_REDACTION_PATHS, description: 'Only values at these paths, equal to the value.' })),
            dry_run: Type.Optional(Type.Boolean({ description: `A preview; its value is kept sealed ${PREVIEW_TTL_MS / 3_600_000} hours for a confirmation.` })),
          },
          { additionalProperties: false },
        ),
        response: { 202: ErasureSchema, ...ERROR_RESPONSES },
      },
    },
    async (request, reply) => {
      const { companyId, actor } = principalOf(request);
      const body = request.body;
      const erasure = await deps.erasures.create(
        companyId,
        {
          value: body.value,
          ...optional('since', parseOptionalTime(body.since, 'since')),
          ...optional('until', parseOptionalTime(body.until, 'until')),
          ...optional('integrationIds', body.integration_ids),
          ...optional('paths', body.paths),
          ...optional('dryRun', body.dry_run),
        },
        actor,
      );
      return reply.code(202).send(erasureJson(erasure));
    },
  );

  app.post(
    '/erasures/:erasure_id/confirm',
    {
      config: { permission: 'data:erase' },
      schema: {
        tags: ['Personal data'],
        summary: 'Confirm a preview: erase what it found',
        description:
          'Makes a finished preview an erasure. It searches its range again from the start; a range asked for without `until` now ends at the ' +
          'confirmation, so what arrived since the preview is erased too. Its counts may then differ from the preview’s. ' +
          '409 when the erasure is not a preview waiting for confirmation.',
        params: ErasureId,
        response: { 202: ErasureSchema, ...ERROR_RESPONSES },
      },
    },
    async (request, reply) => {
      const { companyId, actor } = principalOf(request);
      return reply.code(202).send(erasureJson(await deps.erasures.confirm(companyId, request.params.erasure_id, actor)));
    },
  );

  app.get(
    '/erasures',
    {
      config: { permission: 'data:erase' },
      schema: {
        tags: ['Personal data'],
        summary: 'List erasures and previews',
        description: 'Newest first.',
        querystring: Type.Object({
          limit: Type.Integer({ minimum: 1, maximum: 200, default: 50 }),
          cursor: Type.Optional(Type.String({ maxLength: 100, description: 'next_cursor of the previous page.' })),
        }),
        response: {
          200: Type.Object({ data: Type.Array(ErasureSchema), next_cursor: Type.Union([Type.String(), Type.Null()]) }),
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const { limit, cursor } = request.query;
      if (cursor !== undefined && !isId('ers', cursor)) throw new AppError('invalid_request', 'cursor is the next_cursor of a previous page.', { field: 'cursor' });
      const rows = await deps.erasures.list(companyId, { limit: limit + 1, ...optional('before', cursor) });
      const page = rows.slice(0, limit);
      return { data: page.map(erasureJson), next_cursor: rows.length > limit ? page.at(-1)!.id : null };
    },
  );

  app.get(
    '/erasures/:erasure_id',
    {
      config: { permission: 'data:erase' },
      schema: { tags: ['Personal data'], summary: 'Get an erasure', params: ErasureId, response: { 200: ErasureSchema, ...ERROR_RESPONSES } },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      return erasureJson(await deps.erasures.get(companyId, request.params.erasure_id));
    },
  );

  app.get(
    '/erasures/:erasure_id/report',
    {
      config: { permission: 'data:erase' },
      schema: {
        tags: ['Personal data'],
        summary: 'The report of an erasure, for the person who asked',
        description: 'Plain text: what was searched (masked), when and by whom, what was found and what became of it.',
        params: ErasureId,
        response: { 200: Type.String(), ...ERROR_RESPONSES },
      },
    },
    async (request, reply) => {
      const { companyId } = principalOf(request);
      const erasure = await deps.erasures.get(companyId, request.params.erasure_id);
      const company = await deps.store.getCompany(companyId);
      return reply
        .type('text/plain; charset=utf-8')
        .header('content-disposition', `attachment; filename="${erasure.id}.txt"`)
        .send(erasureReport(erasure, company?.name ?? companyId));
    },
  );
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}
