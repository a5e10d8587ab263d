import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { checkRedaction, REDACTED, Redactor, type Redaction } from '../src/domain/redaction.js';
import { HASH_PREFIX, ValueHasher } from '../src/domain/value-hash.js';

/**
 * Redaction before storing: the named values replaced in the body's own text, the rest of
 * the bytes as they came; checked against a model that redacts the parsed value instead, for
 * any JSON and any paths, and for bodies that are not JSON (nothing thrown, nothing lost).
 */

const redactor = (paths: string[], headers: string[] = []) => new Redactor(checkRedaction({ paths, headers }) as Redaction);
const json = (text: string, paths: string[]) => redactor(paths).body(Buffer.from(text), 'json').toString('utf8');

/** The model: the same paths applied to the parsed value, one value at a time. */
function model(value: unknown, paths: string[], path: string[] = []): unknown {
  if (path.length > 0 && paths.some((p) => matches(p, path))) return REDACTED;
  if (Array.isArray(value)) return value.map((item, index) => model(item, paths, [...path, String(index)]));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, model(item, paths, [...path, key])]));
  }
  return value;
}

function matches(pattern: string, path: string[]): boolean {
  const anywhere = pattern.startsWith('$..');
  const segments = (anywhere ? pattern.slice(3) : pattern).split('.');
  if (anywhere ? path.length < segments.length : path.length !== segments.length) return false;
  const offset = path.length - segments.length;
  return segments.every((segment, i) => segment === '*' || segment === path[offset + i]);
}

/** Paths that name parts of the value (and some that name nothing), as a person would write them. */
function pathsOf(value: unknown): fc.Arbitrary<string[]> {
  const found: string[][] = [];
  const walk = (item: unknown, path: string[]) => {
    if (path.length > 0) found.push(path);
    if (Array.isArray(item)) item.forEach((child, index) => walk(child, [...path, String(index)]));
    else if (item !== null && typeof item === 'object') for (const [key, child] of Object.entries(item)) walk(child, [...path, key]);
  };
  walk(value, []);
  const usable = found.filter((path) => path.every((key) => key !== '' && !key.includes('.') && !key.includes('$')));
  const one = fc.oneof(
    usable.length > 0 ? fc.constantFrom(...usable).map((path) => path.join('.')) : fc.constant('nothing.here'),
    usable.length > 0 ? fc.constantFrom(...usable).map((path) => `$..${path[path.length - 1]}`) : fc.constant('$..absent'),
    usable.length > 0 ? fc.constantFrom(...usable).map((path) => [...path.slice(0, -1), '*'].join('.')) : fc.constant('*'),
    fc.constant('no.such.path'),
  );
  return fc.array(one, { minLength: 1, maxLength: 5 });
}

describe('redaction of a JSON body', () => {
  test('for any JSON and any paths: the stored text parses to the model, and a redacted value is gone from it', () => {
    const bodies = fc.jsonValue({ maxDepth: 5 }).chain((value) => fc.tuple(fc.constant(value), pathsOf(value), fc.constantFrom(0, 2)));
    fc.assert(
      fc.property(bodies, ([value, paths, indent]) => {
        const text = JSON.stringify(value, null, indent);
        const out = json(text, paths);
        expect(JSON.parse(out)).toEqual(JSON.parse(JSON.stringify(model(JSON.parse(text), paths))));
      }),
      { numRuns: 500 },
    );
  });

  test('the rest stays byte for byte: spacing, key order, escapes and numbers as sent', () => {
    const text = '{ "data" : {"customer":{"email" : "ada@example.com","name":"Ada"},\n  "amount":1.50e2, "note":"caf\\u00e9" }, "event":"order.paid"}';
    expect(json(text, ['data.customer.email'])).toBe(
      '{ "data" : {"customer":{"email" : "[redacted]","name":"Ada"},\n  "amount":1.50e2, "note":"caf\\u00e9" }, "event":"order.paid"}',
    );
    // A whole object or array goes at once; * takes every field; $.. any depth.
    expect(json(text, ['data.customer'])).toBe(text.replace('{"email" : "ada@example.com","name":"Ada"}', '"[redacted]"'));
    expect(json('{"card":{"number":"4242","cvc":123},"x":[1,{"phone":"+1"}]}', ['card.*', '$..phone'])).toBe(
      '{"card":{"number":"[redacted]","cvc":"[redacted]"},"x":[1,{"phone":"[redacted]"}]}',
    );
    expect(json('{"items":[{"sku":"a"},{"sku":"b"}]}', ['items.1.sku'])).toBe('{"items":[{"sku":"a"},{"sku":"[redacted]"}]}');
  });

  test('a key written with escapes is still found', () => {
    expect(json('{"e\\u006dail":"ada@example.com"}', ['email'])).toBe('{"e\\u006dail":"[redacted]"}');
  });

  test('nothing matching, or not JSON: the same bytes, nothing thrown', () => {
    const raw = Buffer.from('{"a":1}');
    expect(redactor(['b']).body(raw, 'json')).toBe(raw);
    fc.assert(
      fc.property(fc.string(), (text) => {
        const body = Buffer.from(text);
        const out = redactor(['$..a', '*']).body(body, 'json');
        // Not JSON: kept as it came. JSON: redacted as the model says.
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {
          expect(out.toString('utf8')).toBe(body.toString('utf8'));
          return;
        }
        expect(JSON.parse(out.toString('utf8'))).toEqual(JSON.parse(JSON.stringify(model(parsed, ['$..a', '*']))));
      }),
      { numRuns: 300 },
    );
  });

  test('a body nested 100,000 deep is read without exhausting the stack', () => {
    const deep = `${'['.repeat(100_000)}{"email":"x"}${']'.repeat(100_000)}`;
    expect(json(deep, ['$..email'])).toBe(`${'['.repeat(100_000)}{"email":"[redacted]"}${']'.repeat(100_000)}`);
  });
});

describe('redaction of a form body and of headers', () => {
  test('a named field of a form, the others as sent', () => {
    const form = 'From=%2B15551234567&Body=Hello+there&To=%2B15557654321';
    expect(redactor(['From', '$..Body']).body(Buffer.from(form), 'form').toString()).toBe('From=%5Bredacted%5D&Body=%5Bredacted%5D&To=%2B15557654321');
    // A name is read as the form is read back: escapes decoded, a stray % kept as it is.
    expect(redactor(['From', 'a%zz']).body(Buffer.from('Fr%6Fm=x&a%zz=y&b=z'), 'form').toString()).toBe('Fr%6Fm=%5Bredacted%5D&a%zz=%5Bredacted%5D&b=z');
    const read = new URLSearchParams(redactor(['From', 'a%zz']).body(Buffer.from('Fr%6Fm=x&a%zz=y&b=z'), 'form').toString());
    expect([...read]).toEqual([['From', REDACTED], ['a%zz', REDACTED], ['b', 'z']]);
  });

  test('a preview counts the values named, a value already "[redacted]" too, a whole object once', () => {
    const count = (paths: string[], text: string, format: 'json' | 'form' = 'json') => redactor(paths).redactedBody(Buffer.from(text), format).values;
    expect(count(['$..email', 'card'], '{"a":{"email":"x"},"b":[{"email":"[redacted]"}],"card":{"number":"4242","cvc":1}}')).toBe(3);
    expect(count(['From', 'Body'], 'From=%2B1&Body=%5Bredacted%5D&To=x', 'form')).toBe(2);
    expect(count(['nothing'], '{"a":1}')).toBe(0);
    const raw = Buffer.from('{"email":"[redacted]"}');
    // Named but stored so already: the same bytes, the same Buffer.
    expect(redactor(['email']).redactedBody(raw, 'json')).toEqual({ body: raw, values: 1 });
    expect(redactor(['email']).redactedBody(raw, 'json').body).toBe(raw);
  });

  test('named headers, whatever their case', () => {
    const headers = { 'x-customer-email': 'ada@example.com', 'content-type': 'application/json' };
    expect(redactor([], ['X-Customer-Email']).headersOf(headers)).toEqual({ 'x-customer-email': REDACTED, 'content-type': 'application/json' });
    expect(redactor([], ['x-other']).headersOf(headers)).toBe(headers);
  });
});

describe('checking what is asked for', () => {
  test('paths and header names in their forms; the bounds', () => {
    expect(checkRedaction({ paths: ['data.customer.email', '$..phone', 'card.*'], headers: ['X-Email'] })).toEqual({
      paths: ['data.customer.email', '$..phone', 'card.*'],
      headers: ['x-email'],
      mode: 'redact',
    });
    expect(checkRedaction({ paths: ['a'], mode: 'hash' })).toMatchObject({ mode: 'hash' });
    expect(typeof checkRedaction({ paths: ['a'], mode: 'encrypt' })).toBe('string');
    for (const paths of [['a..b'], [''], ['$..'], ['a.$b'], ['x'.repeat(201)], Array.from({ length: 21 }, (_, i) => `p${i}`), 'a', [1]]) {
      expect(typeof checkRedaction({ paths })).toBe('string');
    }
    for (const headers of [['bad header'], Array.from({ length: 21 }, (_, i) => `h${i}`), 'x']) {
      expect(typeof checkRedaction({ headers })).toBe('string');
    }
  });
});

describe('hash mode', () => {
  const hasher = new ValueHasher(Buffer.alloc(32, 7));
  const hashing = (paths: string[], headers: string[] = []) => new Redactor(checkRedaction({ paths, headers, mode: 'hash' }) as Redaction, hasher);
  const HASH = new RegExp(`^${HASH_PREFIX}[0-9a-f]{32}$`);

  test('each value becomes its keyed hash: equal values (case aside) alike, the value itself gone', () => {
    const body = '{"a":{"email":"Ada@Example.com"},"b":{"email":"ada@example.com"},"c":{"email":"bob@example.com"},"n":{"email":15551234567}}';
    const stored = JSON.parse(hashing(['$..email']).body(Buffer.from(body), 'json').toString()) as Record<string, { email: string }>;
    expect(stored.a!.email).toMatch(HASH);
    expect(stored.a!.email).toBe(stored.b!.email);
    expect(stored.c!.email).not.toBe(stored.a!.email);
    expect(stored.a!.email).toBe(hasher.hash('ada@example.com'));
    // A number is hashed as it was written.
    expect(stored.n!.email).toBe(hasher.hash('15551234567'));
    expect(JSON.stringify(stored).toLowerCase()).not.toContain('example.com');
  });

  test("another key (another company's) gives other hashes", () => {
    expect(new ValueHasher(Buffer.alloc(32, 8)).hash('ada@example.com')).not.toBe(hasher.hash('ada@example.com'));
  });

  test('a JSON escape is read before hashing; a form field and a header are hashed as read', () => {
    expect(hashing(['e']).body(Buffer.from('{"e":"ada\\u0040example.com"}'), 'json').toString()).toBe(`{"e":"${hasher.hash('ada@example.com')}"}`);
    const form = new URLSearchParams(hashing(['From']).body(Buffer.from('From=%2B15551234567&To=x'), 'form').toString());
    expect([...form]).toEqual([['From', hasher.hash('+15551234567')], ['To', 'x']]);
    expect(hashing([], ['x-email']).headersOf({ 'X-Email': 'Ada@example.com' })).toEqual({ 'X-Email': hasher.hash('ada@example.com') });
  });

  test('a hashing redaction cannot be made without its hasher', () => {
    expect(() => new Redactor(checkRedaction({ paths: ['a'], mode: 'hash' }) as Redaction)).toThrow();
  });
});
