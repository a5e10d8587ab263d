import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { maskValue, ValueMatcher } from '../src/domain/erasure-match.js';

/**
 * Where an erasure finds a person's value: anywhere in a body however JSON or a form writes
 * it, or only at the paths named; for any document, the value put anywhere in it is found,
 * a document without it is not matched, and nothing thrown for any bytes.
 */

const VALUE = 'Ada.Lovelace+1@Example.org';

/** A JSON document with the value somewhere in one of its strings (or none). */
function documentHolding(value: string | undefined) {
  return fc.tuple(fc.jsonValue({ maxDepth: 4 }), fc.array(fc.string({ maxLength: 6 }), { maxLength: 4 }), fc.string({ maxLength: 5 })).map(([base, path, around]) => {
    if (value === undefined) return base;
    let holder: Record<string, unknown> = { wrapper: base };
    const root = holder;
    for (const key of path) holder = (holder[`k${key}`] = {}) as Record<string, unknown>;
    holder.leaf = `${around}${value}${around}`;
    return root;
  });
}

describe('without paths', () => {
  test('the value anywhere in a JSON document is found, whatever its case and escapes', () => {
    fc.assert(
      fc.property(documentHolding(VALUE), fc.boolean(), fc.boolean(), (document, upper, escapeAll) => {
        const value = upper ? VALUE.toUpperCase() : VALUE;
        // The value's @, dots and + written as \u escapes: the same document once read.
        const written = escapeAll ? value.replace(/[@.+]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) : value;
        const text = JSON.stringify(document).replace(VALUE, written);
        expect(new ValueMatcher(VALUE).find(Buffer.from(text), 'json', {})).toBe('body');
      }),
    );
  });

  test('a document without the value is not matched', () => {
    fc.assert(
      fc.property(documentHolding(undefined), (document) => {
        const text = JSON.stringify(document);
        fc.pre(!text.toLowerCase().includes('lovelace'));
        expect(new ValueMatcher(VALUE).find(Buffer.from(text), 'json', { 'x-other': 'abc' })).toBeNull();
      }),
    );
  });

  test('in a form, encoded as forms encode it; in a header, by its name', () => {
    const form = new URLSearchParams({ From: VALUE, Body: 'hello there' }).toString();
    expect(form).toContain('%40');
    expect(new ValueMatcher(VALUE).find(Buffer.from(form), 'form', {})).toBe('body');
    expect(new ValueMatcher('Ada Lovelace').find(Buffer.from(new URLSearchParams({ name: 'ada lovelace' }).toString()), 'form', {})).toBe('body');
    expect(new ValueMatcher(VALUE).find(Buffer.from('{}'), 'json', { 'X-Customer': `<${VALUE.toLowerCase()}>` })).toBe('header x-customer');
  });

  test('any bytes, any format: never throws', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.constantFrom('json', 'form', 'envelope') as fc.Arbitrary<'json' | 'form' | 'envelope'>, (bytes, format) => {
        for (const paths of [[], ['data.x'], ['$..x']]) new ValueMatcher('abc', paths).find(Buffer.from(bytes), format, {});
      }),
    );
  });
});

describe('with paths', () => {
  const body = JSON.stringify({ event: 'e', data: { customer: { email: 'ADA@example.org', notes: ['ada@example.org'] }, other: 'ada@example.org' } });

  test('only a value at a path counts, equal to the value (case ignored)', () => {
    expect(new ValueMatcher('ada@example.org', ['data.customer.email']).find(Buffer.from(body), 'envelope', {})).toBe('data.customer.email');
    expect(new ValueMatcher('ada@example', ['data.customer.email']).find(Buffer.from(body), 'envelope', {})).toBeNull();
    expect(new ValueMatcher('ada@example.org', ['data.missing']).find(Buffer.from(body), 'envelope', { 'x-email': 'ada@example.org' })).toBeNull();
  });

  test('a container at a path holds the value when a value inside it equals it; $.. at any depth', () => {
    expect(new ValueMatcher('ada@example.org', ['data.customer.notes']).find(Buffer.from(body), 'envelope', {})).toBe('data.customer.notes');
    expect(new ValueMatcher('ada@example.org', ['$..other']).find(Buffer.from(body), 'envelope', {})).toBe('data.other');
  });

  test("a form's field by its name", () => {
    const form = new URLSearchParams({ From: '+15551234567', To: '+15557654321' }).toString();
    expect(new ValueMatcher('+15551234567', ['From']).find(Buffer.from(form), 'form', {})).toBe('From');
    expect(new ValueMatcher('+15551234567', ['To']).find(Buffer.from(form), 'form', {})).toBeNull();
  });
});

test('the mask keeps an email’s domain and little else', () => {
  expect(maskValue('jane.doe@example.com')).toBe('j•••@example.com');
  expect(maskValue('cus_4Fh2Xk9')).toBe('cu•••k9');
  expect(maskValue('1234')).toBe('••••');
});
