import { createHash } from 'node:crypto';
import { AppError } from '../../errors.js';
import { formObject, type PayloadFormat } from '../webhook-body.js';
import { FilterError, matchesFilter, validateFilter, type Filter, type FilterInput } from './filter.js';

/**
 * A destination's rules (docs/destinations.md, "Rules"): what of its matching webhooks it
 * is sent, when, in what shape, and how it is retried. The webhook is always stored as it
 * arrived; the delivery worker applies these at each delivery, in a fixed order:
 *
 *   delay (the first due time, set by the outbox) → filter → deduplicate → transformation → send
 *
 * The filter and the deduplication key read the request as it arrived (so a key never
 * depends on code the company may change); the transformation shapes only what is sent.
 * Pure: no clock, no store, no HTTP.
 */

export interface DestinationRules {
  /** Null: every webhook that matches the destination's integrations and events. */
  filter: Filter | null;
  /** Null: sent as received. */
  transformation: { code: string } | null;
  /** Null: every webhook is delivered, repeats too. */
  deduplicate: Deduplication | null;
  /** 0: due at once. */
  delayMs: number;
  /** Null: the standard schedule (src/destinations/schedule.ts). */
  retry: RetryPolicy | null;
}

export interface Deduplication {
  /** Paths such as `body.id` or `headers.x-request-id`; null: the whole body. */
  fields: string[] | null;
  windowMs: number;
}

export interface RetryPolicy {
  /** exponential: interval × 2^(n-1) after the n-th failure; linear: the interval each time. */
  strategy: 'exponential' | 'linear';
  /** Attempts in a series, the first included. */
  attempts: number;
  intervalMs: number;
  /** No retry starts later than this after the webhook arrived (a replay: after it began); null: no bound. */
  maxAgeMs: number | null;
}

export const NO_RULES: DestinationRules = { filter: null, transformation: null, deduplicate: null, delayMs: 0, retry: null };

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

export const RULE_BOUNDS = {
  dedupeWindowMs: { min: SECOND, max: HOUR },
  delayMs: { min: 0, max: DAY },
  attempts: { min: 1, max: 50 },
  /**
   * Ten seconds at least between two attempts: a policy is the company's to choose, the
   * receiver is a third party's, and 50 attempts a second apart would be a flood.
   */
  intervalMs: { min: 10 * SECOND, max: DAY },
  maxAgeMs: { min: MINUTE, max: 30 * DAY },
  /** A transformation's source, in UTF-8 bytes. */
  codeBytes: 64 * 1024,
  dedupeFields: 10,
  fieldLength: 200,
} as const;

/** Rules as the API takes them (snake_case, seconds), checked; throws `invalid_request` naming the part. */
export function validRules(input: unknown): DestinationRules {
  if (input === null) return NO_RULES;
  const rules = object(input, 'rules');
  for (const key of Object.keys(rules)) {
    if (!['filter', 'transformation', 'deduplicate', 'delay_seconds', 'retry', 'version'].includes(key)) {
      throw invalid(`rules.${key}`, `rules.${key} is not a rule; the rules are filter, transformation, deduplicate, delay_seconds and retry.`);
    }
  }
  return {
    filter: rules.filter === undefined || rules.filter === null ? null : validFilterRule(rules.filter),
    transformation: rules.transformation === undefined || rules.transformation === null ? null : validTransformation(rules.transformation),
    deduplicate: rules.deduplicate === undefined || rules.deduplicate === null ? null : validDeduplication(rules.deduplicate),
    delayMs: rules.delay_seconds === undefined ? 0 : seconds(rules.delay_seconds, 'rules.delay_seconds', RULE_BOUNDS.delayMs),
    retry: rules.retry === undefined || rules.retry === null ? null : validRetry(rules.retry),
  };
}

/** The rules as the API shows them. */
export function presentRules(rules: DestinationRules, version: number) {
  return {
    version,
    filter: rules.filter,
    transformation: rules.transformation,
    deduplicate: rules.deduplicate && { fields: rules.deduplicate.fields, window_seconds: rules.deduplicate.windowMs / SECOND },
    delay_seconds: rules.delayMs / SECOND,
    retry: rules.retry && {
      strategy: rules.retry.strategy,
      attempts: rules.retry.attempts,
      interval_seconds: rules.retry.intervalMs / SECOND,
      max_age_seconds: rules.retry.maxAgeMs === null ? null : rules.retry.maxAgeMs / SECOND,
    },
  };
}

/** Whether the rules do anything: a destination without any keeps rules_version 0. */
export function hasRules(rules: DestinationRules): boolean {
  return rules.filter !== null || rules.transformation !== null || rules.deduplicate !== null || rules.delayMs !== 0 || rules.retry !== null;
}

/** The rules as stored (destination_rules.rules): the same fields, in milliseconds. */
export function rulesToJson(rules: DestinationRules): string {
  return JSON.stringify(rules);
}

/** Stored rules, read back; anything missing takes its default. */
export function rulesFromJson(text: string): DestinationRules {
  const parsed = JSON.parse(text) as Partial<DestinationRules>;
  return { ...NO_RULES, ...parsed };
}

function validFilterRule(value: unknown): Filter {
  try {
    return validateFilter(value);
  } catch (error) {
    if (error instanceof FilterError) {
      const where = error.path === '' ? 'rules.filter' : error.path.startsWith('[') ? `rules.filter${error.path}` : `rules.filter.${error.path}`;
      throw invalid('rules.filter', `${where}: ${error.reason}`);
    }
    throw error;
  }
}

function validTransformation(value: unknown): { code: string } {
  const transformation = object(value, 'rules.transformation');
  const { code } = transformation;
  if (typeof code !== 'string' || code.trim().length === 0) {
    throw invalid('rules.transformation.code', 'rules.transformation.code must be the JavaScript source of a transform(request, context) function.');
  }
  if (Buffer.byteLength(code, 'utf8') > RULE_BOUNDS.codeBytes) {
    throw invalid('rules.transformation.code', `rules.transformation.code is at most ${RULE_BOUNDS.codeBytes / 1024} KiB.`);
  }
  return { code };
}

function validDeduplication(value: unknown): Deduplication {
  const dedupe = object(value, 'rules.deduplicate');
  const windowMs = seconds(dedupe.window_seconds, 'rules.deduplicate.window_seconds', RULE_BOUNDS.dedupeWindowMs);
  if (dedupe.fields === undefined || dedupe.fields === null) return { fields: null, windowMs };
  const { fields } = dedupe;
  if (!Array.isArray(fields) || fields.length === 0 || fields.length > RULE_BOUNDS.dedupeFields) {
    throw invalid('rules.deduplicate.fields', `rules.deduplicate.fields must list 1 to ${RULE_BOUNDS.dedupeFields} paths such as "body.id" or "headers.x-request-id", or be null for the whole body.`);
  }
  return {
    windowMs,
    fields: fields.map((field: unknown, index) => {
      if (typeof field !== 'string' || field.length > RULE_BOUNDS.fieldLength || !FIELD_PATH.test(field)) {
        throw invalid('rules.deduplicate.fields', `rules.deduplicate.fields[${index}] must be a path that starts with body. or headers., such as "body.id" or "headers.x-request-id".`);
      }
      return field.startsWith('headers.') ? field.toLowerCase() : field;
    }),
  };
}

/** `body.a.b.0` or `headers.name`: dot-separated, no empty parts. */
const FIELD_PATH = /^(body(\.[^.]+)+|headers\.[A-Za-z0-9!#$%&'*+^_`|~.-]+)$/;

function validRetry(value: unknown): RetryPolicy {
  const retry = object(value, 'rules.retry');
  const strategy = retry.strategy ?? 'exponential';
  if (strategy !== 'exponential' && strategy !== 'linear') throw invalid('rules.retry.strategy', 'rules.retry.strategy is exponential or linear.');
  const { attempts } = retry;
  if (typeof attempts !== 'number' || !Number.isInteger(attempts) || attempts < RULE_BOUNDS.attempts.min || attempts > RULE_BOUNDS.attempts.max) {
    throw invalid('rules.retry.attempts', `rules.retry.attempts must be a whole number from ${RULE_BOUNDS.attempts.min} to ${RULE_BOUNDS.attempts.max} (the first attempt included).`);
  }
  const intervalMs = seconds(retry.interval_seconds, 'rules.retry.interval_seconds', RULE_BOUNDS.intervalMs);
  const maxAgeMs = retry.max_age_seconds === undefined || retry.max_age_seconds === null ? null : seconds(retry.max_age_seconds, 'rules.retry.max_age_seconds', RULE_BOUNDS.maxAgeMs);
  return { strategy, attempts, intervalMs, maxAgeMs };
}

function seconds(value: unknown, field: string, bounds: { min: number; max: number }): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value * SECOND < bounds.min || value * SECOND > bounds.max) {
    throw invalid(field, `${field} must be a whole number of seconds from ${bounds.min / SECOND} to ${bounds.max / SECOND}.`);
  }
  return value * SECOND;
}

function object(value: unknown, field: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid(field, `${field} must be an object.`);
  return value as Record<string, unknown>;
}

function invalid(field: string, message: string): AppError {
  return new AppError('invalid_request', message, { field });
}

/** What the filter and the deduplication see of a stored webhook. */
export function filterInputOf(rawBody: Buffer, payloadFormat: PayloadFormat, headersJson: string): FilterInput {
  return { body: bodyValue(rawBody, payloadFormat), headers: headersOf(headersJson), query: {}, path: '' };
}

/**
 * The body as the rules see it: the JSON value (the envelope's whole object, a provider's
 * document), a form as an object, or the text itself when it is not what its format says.
 */
export function bodyValue(rawBody: Buffer, payloadFormat: PayloadFormat): unknown {
  const text = rawBody.toString('utf8');
  if (payloadFormat === 'form') return formObject([...new URLSearchParams(text)]);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

function headersOf(json: string): Record<string, string> {
  try {
    const parsed = JSON.parse(json) as unknown;
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return {};
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(parsed)) if (typeof value === 'string') headers[name.toLowerCase()] = value;
    return headers;
  } catch {
    return {};
  }
}

/** Whether the filter lets this webhook through (no filter: always). */
export function passesFilter(rules: DestinationRules, input: FilterInput): boolean {
  return rules.filter === null || matchesFilter(rules.filter, input);
}

/**
 * The deduplication key of a webhook: the SHA-256 of the chosen fields' values (or of the
 * whole body), hex; null when none of the fields is present, so such a webhook is never
 * taken for a duplicate of another that lacks them too.
 */
export function dedupeKey(dedupe: Deduplication, input: FilterInput, rawBody: Buffer): string | null {
  const hash = createHash('sha256');
  if (dedupe.fields === null) return hash.update(rawBody).digest('hex');
  const values = dedupe.fields.map((field) => valueAt(input, field));
  if (values.every((value) => value === undefined)) return null;
  return hash.update(JSON.stringify(values.map((value) => (value === undefined ? { missing: true } : { value })))).digest('hex');
}

function valueAt(input: FilterInput, field: string): unknown {
  const [root, ...rest] = field.split('.');
  if (root === 'headers') return input.headers[rest.join('.')];
  let value: unknown = input.body;
  for (const part of rest) {
    if (typeof value !== 'object' || value === null || !Object.hasOwn(value, part)) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}
