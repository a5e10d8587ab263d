import { Type } from 'typebox';
import { MAX_HEADERS } from '../domain/destination-headers.js';
import { presentRules, RULE_BOUNDS } from '../domain/rules/rules.js';
import { DEFAULT_RATE_PER_SECOND, MAX_INTEGRATION_IDS } from '../services/destinations.js';
import type { Delivery, DeliveryAttempt, Destination } from '../store/store.js';
import { Id, NullableInteger, NullableTimestamp, Timestamp, iso } from './schemas.js';

/** How the API shows destinations, their deliveries and attempts, and how it takes a destination's settings. */

export const WebhookUuid = Type.String({
  pattern: '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$',
  description: 'A webhook uuid.',
});

export const DestinationStatusSchema = Type.Union([Type.Literal('active'), Type.Literal('paused'), Type.Literal('disabled')], {
  description: 'active: sends; paused: by a person; disabled: by intake (failing for days without a success, or a 410 Gone). Paused and disabled hold their deliveries.',
});

export const DeliveryStateSchema = Type.Union(
  [
    Type.Literal('pending'),
    Type.Literal('held'),
    Type.Literal('succeeded'),
    Type.Literal('failed'),
    Type.Literal('cancelled'),
    Type.Literal('filtered'),
    Type.Literal('deduplicated'),
  ],
  {
    description:
      'pending: waiting for its next attempt, or in flight; held: its destination is paused or disabled; succeeded; ' +
      'failed: the schedule ran out, or the webhook was purged first (replayable); cancelled: its destination was deleted; ' +
      "filtered: the destination's filter refused it, or its transformation returned nothing (skipped_by says which; no " +
      'attempt); deduplicated: it repeats the delivery duplicate_of within the deduplication window (no attempt).',
  },
);

/** A destination's rules as the API shows them (src/domain/rules/rules.ts). */
export const RulesSchema = Type.Object(
  {
    version: Type.Integer({ description: 'Every save of the rules is a new version; a delivery records the version it went out under. 0: never set.' }),
    filter: Type.Unsafe<unknown>({
      description:
        'Null, or a JSON filter over body, headers, query and path (Hookdeck\'s shape): values match by equality, objects ' +
        'nest, an array contains; operators $eq $neq $in $nin $gt $gte $lt $lte $startsWith $endsWith $exist $or $and $not.',
    }),
    transformation: Type.Union([Type.Object({ code: Type.String() }), Type.Null()], {
      description: 'Null, or the JavaScript of `function transform(request, context) { … return request; }`; returning nothing drops the delivery.',
    }),
    deduplicate: Type.Union(
      [Type.Object({ fields: Type.Union([Type.Array(Type.String()), Type.Null()]), window_seconds: Type.Integer() }), Type.Null()],
      { description: 'Null, or: a second webhook with the same values at fields (or the same body, fields null) within the window is deduplicated.' },
    ),
    delay_seconds: Type.Integer({ description: 'Each delivery is first due this long after its webhook arrived.' }),
    retry: Type.Union(
      [
        Type.Object({
          strategy: Type.Union([Type.Literal('exponential'), Type.Literal('linear')]),
          attempts: Type.Integer(),
          interval_seconds: Type.Integer(),
          max_age_seconds: Type.Union([Type.Integer(), Type.Null()]),
        }),
        Type.Null(),
      ],
      { description: 'Null: the standard schedule. Else the destination\'s own.' },
    ),
  },
  { $id: 'DestinationRules' },
);

export const DestinationSchema = Type.Object(
  {
    id: Id('dst'),
    name: Type.String(),
    url: Type.String(),
    integration_ids: Type.Union([Type.Array(Id('int')), Type.Null()], { description: 'null: every integration of the company.' }),
    event_patterns: Type.Array(Type.String(), { description: '`*` matches any run of characters, dots included.' }),
    header_names: Type.Array(Type.String(), { description: 'The extra headers sent; their values are write-only.' }),
    timeout_ms: Type.Integer(),
    rate_per_second: Type.Union([Type.Integer(), Type.Null()], { description: 'Requests a second at most, spaced 1/rate apart; null: no limit.' }),
    max_in_flight: Type.Integer(),
    status: DestinationStatusSchema,
    disabled_reason: Type.Union([Type.String(), Type.Null()], { description: 'Why intake disabled it, in words.' }),
    disabled_at: NullableTimestamp,
    failing_since: Type.Union([Timestamp, Type.Null()], { description: 'The first failed attempt since the last success.' }),
    last_success_at: NullableTimestamp,
    previous_secret_expires_at: Type.Union([Timestamp, Type.Null()], {
      description: 'After a rotation, the previous signing secret also signs until then.',
    }),
    rules: RulesSchema,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Destination' },
);

export const DeliverySchema = Type.Object(
  {
    id: Id('dlv'),
    destination_id: Id('dst'),
    webhook_uuid: WebhookUuid,
    integration_id: Id('int'),
    event: Type.String(),
    state: DeliveryStateSchema,
    attempts: Type.Integer({ description: 'Attempts made in the current series.' }),
    series: Type.Integer({ description: '0: the original; n: the n-th replay.' }),
    next_attempt_at: Type.Union([Timestamp, Type.Null()], { description: 'In flight: when its claim ends. Null once settled, or while held.' }),
    last_attempt_at: NullableTimestamp,
    last_status: Type.Union([Type.Integer(), Type.Null()], { description: "The last attempt's HTTP status." }),
    last_error: Type.Union([Type.String(), Type.Null()], { description: "The last attempt's error class (see Attempt)." }),
    rules_version: Type.Union([Type.Integer(), Type.Null()], { description: "The destination's rules version its last attempt (or skip) went out under." }),
    skipped_by: Type.Union([Type.Literal('filter'), Type.Literal('transformation'), Type.Null()], { description: 'For a filtered delivery: what refused it.' }),
    duplicate_of: Type.Union([Id('dlv'), Type.Null()], { description: 'For a deduplicated delivery: the delivery it repeats.' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Delivery' },
);

export const AttemptSchema = Type.Object(
  {
    id: Id('att'),
    series: Type.Integer(),
    number: Type.Integer({ description: '1-based within its series.' }),
    attempted_at: Timestamp,
    duration_ms: Type.Integer(),
    status: Type.Union([Type.Integer(), Type.Null()], { description: 'The HTTP status; null when there was no answer.' }),
    error: Type.Union([Type.String(), Type.Null()], {
      description:
        'null on a 2xx; else http_status, redirect (never followed), timeout, connection_refused, connection_reset, dns, tls, ' +
        'blocked_address (resolved to an address intake refuses), webhook_purged, transformation_error (the destination\'s ' +
        'transformation threw, ran out of time or memory, or returned what cannot be sent: response_excerpt has its message) or other.',
    }),
    response_excerpt: Type.Union([Type.String(), Type.Null()], { description: "The first 1 KiB of the answer's body, as text." }),
    next_attempt_at: Type.Union([Timestamp, Type.Null()], { description: 'When the next attempt was scheduled; null when none.' }),
  },
  { $id: 'DeliveryAttempt' },
);

/** A destination's settings as a request sets them; PATCH takes any of them. */
export const DestinationSettings = {
  name: Type.String({ minLength: 1, maxLength: 200 }),
  url: Type.String({
    minLength: 1,
    maxLength: 2048,
    description:
      'https:// (http:// too outside production). Refused when it is, or resolves to, a loopback, private, link-local, ' +
      'multicast or metadata address, unless INTAKE_DESTINATION_ALLOW lists it; no user:password in it.',
  }),
  integration_ids: Type.Unsafe<string[] | null>({
    type: ['array', 'null'],
    items: Id('int'),
    minItems: 1,
    maxItems: MAX_INTEGRATION_IDS,
    description: 'The integrations whose webhooks it receives; null (the default): every integration, those made later too.',
  }),
  event_patterns: Type.Array(Type.String(), {
    description: 'Default ["*"]. `*` matches any run of characters, dots included (`order.*`, `*.failed`); the rest is literal.',
  }),
  headers: Type.Record(Type.String(), Type.String(), {
    maxProperties: MAX_HEADERS,
    description:
      `Up to ${MAX_HEADERS} extra headers to send, {name: value}: names up to 100 characters, values up to 4096, no control ` +
      'characters nor anything beyond Latin-1. Not user-agent, content-*, webhook-* or x-intake-* (intake sets them), nor ' +
      'the connection\'s: host, connection, keep-alive, proxy-connection, te, trailer, transfer-encoding, upgrade, expect, ' +
      'http2-settings. The values are sealed and never shown again; a change replaces the whole set, and a change of the ' +
      "url to another origin removes it unless the same request sets it.",
  }),
  timeout_ms: Type.Integer({ minimum: 1000, maximum: 60_000, description: 'Per attempt; default 15000.' }),
  rate_per_second: NullableInteger({
    minimum: 1,
    maximum: 10_000,
    description: `Requests a second at most, across every node, spaced 1/rate apart (no second ever holds more); default ${DEFAULT_RATE_PER_SECOND}; null: no limit.`,
  }),
  max_in_flight: Type.Integer({ minimum: 1, maximum: 1000, description: 'Requests in flight at once at most; default 100.' }),
  rules: Type.Unsafe<unknown>({
    type: ['object', 'null'],
    description:
      'The whole set of rules (a change replaces it; null removes them): filter, transformation {code} (at most ' +
      `${RULE_BOUNDS.codeBytes / 1024} KiB), deduplicate {fields, window_seconds: 1 to 3600}, delay_seconds (0 to 86400), ` +
      `retry {strategy: exponential | linear, attempts: 1 to ${RULE_BOUNDS.attempts.max}, interval_seconds: 10 to 86400, ` +
      'max_age_seconds}. Applied when each delivery is made, in that order: delay, filter, deduplicate, transformation. ' +
      'A replay applies the rules as they are when it runs.',
  }),
};

/** What the API shows of a destination: never its secrets nor its headers' values. */
export function presentDestination(destination: Destination) {
  return {
    id: destination.id,
    name: destination.name,
    url: destination.url,
    integration_ids: destination.integrationIds,
    event_patterns: destination.eventPatterns,
    header_names: destination.headerNames,
    timeout_ms: destination.timeoutMs,
    rate_per_second: destination.ratePerSecond,
    max_in_flight: destination.maxInFlight,
    status: destination.status,
    disabled_reason: destination.disabledReason,
    disabled_at: destination.status === 'disabled' ? iso(destination.statusChangedAt) : null,
    failing_since: iso(destination.failingSince),
    last_success_at: iso(destination.lastSuccessAt),
    previous_secret_expires_at: iso(destination.previousSecretExpiresAt),
    rules: presentRules(destination.rules, destination.rulesVersion),
    created_at: iso(destination.createdAt),
    updated_at: iso(destination.updatedAt),
  };
}

export function presentDelivery(delivery: Delivery) {
  return {
    id: delivery.id,
    destination_id: delivery.destinationId,
    webhook_uuid: delivery.webhookUuid,
    integration_id: delivery.integrationId,
    event: delivery.event,
    state: delivery.state,
    attempts: delivery.attempts,
    series: delivery.series,
    next_attempt_at: iso(delivery.nextAttemptAt),
    last_attempt_at: iso(delivery.lastAttemptAt),
    last_status: delivery.lastStatus,
    last_error: delivery.lastError,
    rules_version: delivery.rulesVersion,
    skipped_by: delivery.skippedBy,
    duplicate_of: delivery.duplicateOf,
    created_at: iso(delivery.createdAt),
    updated_at: iso(delivery.updatedAt),
  };
}

export function presentAttempt(attempt: DeliveryAttempt) {
  return {
    id: attempt.id,
    series: attempt.series,
    number: attempt.number,
    attempted_at: iso(attempt.attemptedAt),
    duration_ms: attempt.durationMs,
    status: attempt.status,
    error: attempt.error,
    response_excerpt: attempt.responseExcerpt,
    next_attempt_at: iso(attempt.nextAttemptAt),
  };
}
