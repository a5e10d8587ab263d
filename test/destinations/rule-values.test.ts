import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { AppError } from '../../src/errors.js';
import { dedupeKey, filterInputOf, presentRules, rulesFromJson, rulesToJson, validRules } from '../../src/domain/rules/rules.js';

/** The rules' values as the API takes and shows them, and the deduplication key (pure). */

describe('validRules', () => {
  test('the API shape in seconds becomes milliseconds, and shows back as it was given', () => {
    const given = {
      filter: { body: { type: 'charge.succeeded' } },
      transformation: { code: 'function transform(r) { return r; }' },
      deduplicate: { fields: ['body.id', 'headers.X-Request-Id'], window_seconds: 300 },
      delay_seconds: 60,
      retry: { strategy: 'linear', attempts: 2, interval_seconds: 60, max_age_seconds: null },
    };
    const rules = validRules(given);
    expect(rules).toMatchObject({ delayMs: 60_000, deduplicate: { fields: ['body.id', 'headers.x-request-id'], windowMs: 300_000 }, retry: { intervalMs: 60_000 } });
    expect(presentRules(rules, 3)).toEqual({ ...given, version: 3, deduplicate: { fields: ['body.id', 'headers.x-request-id'], window_seconds: 300 } });
    expect(rulesFromJson(rulesToJson(rules))).toEqual(rules);
  });

  test('anything but an object or null is refused with invalid_request naming rules', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        try {
          validRules(value);
        } catch (error) {
          expect(error).toBeInstanceOf(AppError);
          expect((error as AppError).code).toBe('invalid_request');
          expect((error as AppError).details.field).toMatch(/^rules/);
        }
      }),
    );
  });
});

describe('dedupeKey', () => {
  const input = (body: unknown, headers: Record<string, string> = {}) => filterInputOf(Buffer.from(JSON.stringify(body)), 'json', JSON.stringify(headers));

  test('the same values at the fields give the same key, whatever else differs; different values differ', () => {
    const dedupe = { fields: ['body.id', 'headers.x-shop'], windowMs: 1000 };
    const a = dedupeKey(dedupe, input({ id: 1, n: 1 }, { 'x-shop': 's' }), Buffer.from('a'));
    const b = dedupeKey(dedupe, input({ id: 1, n: 2 }, { 'X-Shop': 's' }), Buffer.from('b'));
    const c = dedupeKey(dedupe, input({ id: 2, n: 1 }, { 'x-shop': 's' }), Buffer.from('c'));
    expect(a).toBe(b);
    expect(a).not.toBe(c);
  });

  test('a webhook without any of the fields has no key (it is never a duplicate); the whole body is hashed when fields is null', () => {
    expect(dedupeKey({ fields: ['body.id'], windowMs: 1000 }, input({ other: 1 }), Buffer.from('x'))).toBeNull();
    expect(dedupeKey({ fields: ['body.constructor'], windowMs: 1000 }, input({}), Buffer.from('x'))).toBeNull();
    const whole = { fields: null, windowMs: 1000 };
    expect(dedupeKey(whole, input({}), Buffer.from('{"a":1}'))).toBe(dedupeKey(whole, input({}), Buffer.from('{"a":1}')));
    expect(dedupeKey(whole, input({}), Buffer.from('{"a":1}'))).not.toBe(dedupeKey(whole, input({}), Buffer.from('{"a": 1}')));
  });
});
