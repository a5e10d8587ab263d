import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { timeOfTimeOrderedId } from '../domain/ids.js';
import { AppError, ERRORS, type ErrorCode } from '../errors.js';
import type { RequestLogEntry } from '../store/store.js';
import { principalOf, type ApiDeps } from './context.js';
import { ERROR_RESPONSES, Id, Page, PageQuery, Timestamp, iso, pageOf } from './schemas.js';
import { parseOptionalTime } from '../domain/time.js';

/**
 * Where a request found by id may lie, around the time its id was made: a request's record
 * is stamped when it began (refused ones) or when its body had come and passed its checks
 * (a stored webhook's), within the 30 s a request may take.
 */
const ID_WINDOW_BEFORE_MS = 1_000;
const ID_WINDOW_AFTER_MS = 60_000;

const NullableString = (description: string) => Type.Union([Type.String(), Type.Null()], { description });

export const RequestLogRecordSchema = Type.Object(
  {
    id: Id('req'),
    integration_id: Id('int'),
    received_at: Timestamp,
    method: Type.String(),
    status: Type.Integer({ description: 'The HTTP status answered.' }),
    error_code: NullableString('The error code answered (see the error table), null when accepted.'),
    reason: NullableString('Why the request was refused, in words; null when accepted.'),
    key_id: NullableString('The key sent, when it was valid (never the key itself), or the source secret (sec_…) whose signature verified.'),
    ip: Type.String({ description: "The sender's IP." }),
    user_agent: NullableString('As sent, cut to 512 characters.'),
    size_bytes: Type.Integer({ description: 'Body size in bytes.' }),
    duration_ms: Type.Number({ description: 'Time to answer (for accepted webhooks, up to the commit).' }),
    webhook_uuid: NullableString('The webhook stored (or replayed) by this request.'),
    trace_id: NullableString(
      "The request's OpenTelemetry trace id (32 hex digits) when the operator turned tracing on and it was sampled; null otherwise (docs/operations.md, Traces).",
    ),
  },
  { $id: 'RequestLogRecord' },
);

const STATUS_CLASSES = { '2xx': { from: 200, to: 300 }, '4xx': { from: 400, to: 500 }, '5xx': { from: 500, to: 600 } } as const;

/** /api/v1/requests: every request to the company's webhook addresses, accepted or not. */
export async function requestLogRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  app.get(
    '/requests',
    {
      config: { permission: 'logs:read' },
      schema: {
        tags: ['Request log'],
        summary: 'List requests',
        description:
          "Every request to the company's webhook addresses (sends and reads with an integration key), accepted or " +
          'refused, with why; newest first. `since` is inclusive, `until` exclusive.',
        querystring: Type.Object({
          ...PageQuery,
          id: Type.Optional(
            Type.String({
              maxLength: 40,
              description: 'One request by its id (`req_…`), the `request_id` of the answer its sender got. Other filters still apply.',
            }),
          ),
          integration_id: Type.Optional(Id('int', "Only this integration's requests.")),
          status_class: Type.Optional(
            Type.Union([Type.Literal('2xx'), Type.Literal('4xx'), Type.Literal('5xx')], {
              description: '2xx: accepted or replayed; 4xx: refused; 5xx: failed.',
            }),
          ),
          error_code: Type.Optional(Type.String({ pattern: '^[a-z][a-z0-9_]{0,63}$', description: 'Only this error code.' })),
          key_id: Type.Optional(
            Type.String({
              pattern: '^(?:key|sec)_[A-Za-z0-9]{22}$',
              description: 'Only requests made with this key (key_…), or verified with this source secret (sec_…).',
            }),
          ),
          since: Type.Optional(Type.String({ format: 'date-time', description: 'Received at or after (ISO-8601).' })),
          until: Type.Optional(Type.String({ format: 'date-time', description: 'Received before (ISO-8601).' })),
        }),
        response: { 200: Page(RequestLogRecordSchema), ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const query = request.query;
      const range = { since: parseOptionalTime(query.since, 'since'), until: parseOptionalTime(query.until, 'until') };
      if (query.id !== undefined) {
        // The id says when the request began (a time-ordered id): the read takes the time
        // index over the minute after it instead of looking at every row for the id.
        const began = timeOfTimeOrderedId(query.id, 'req');
        if (began === undefined) throw new AppError('invalid_request', 'id must be a request id (req_…).', { field: 'id' });
        range.since = Math.max(range.since ?? 0, began - ID_WINDOW_BEFORE_MS);
        range.until = Math.min(range.until ?? Number.MAX_SAFE_INTEGER, began + ID_WINDOW_AFTER_MS);
      }
      const page = await pageOf(
        query,
        (rows) =>
          deps.store.listCompanyRequestLog(companyId, {
            ...rows,
            integrationId: query.integration_id,
            keyId: query.key_id,
            errorCode: query.error_code,
            status: query.status_class === undefined ? undefined : STATUS_CLASSES[query.status_class],
            id: query.id,
            since: range.since,
            until: range.until,
          }),
        (last) => ({ at: last.receivedAt, id: last.id }),
      );
      return { data: page.items.map(presentRequest), next_cursor: page.next_cursor };
    },
  );
}

function presentRequest(entry: RequestLogEntry) {
  return {
    id: entry.id,
    integration_id: entry.integrationId,
    received_at: iso(entry.receivedAt),
    method: entry.method,
    status: entry.status,
    error_code: entry.errorCode,
    reason: entry.errorDetail ?? reasonOf(entry.errorCode),
    key_id: entry.keyId,
    ip: entry.ip,
    user_agent: entry.userAgent,
    size_bytes: entry.sizeBytes,
    duration_ms: entry.durationMs,
    webhook_uuid: entry.webhookUuid,
    trace_id: entry.traceId ?? null,
  };
}

/** The error table's sentence for a logged code (null for none, or one no longer in the table). */
function reasonOf(code: string | null): string | null {
  return code !== null && Object.hasOwn(ERRORS, code) ? ERRORS[code as ErrorCode].message : null;
}
