import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { FilterError, matchesFilter, validateFilter, type Filter, type FilterInput } from './filter.js';

function input(parts: Partial<FilterInput>): FilterInput {
  return { body: null, headers: {}, query: {}, path: '', ...parts };
}

/** The request bodies of Hookdeck's filter examples (https://hookdeck.com/docs/filters). */
const ORDER = { type: 'order/created', order: { id: 123 } };
const PRODUCT = { product: { title: 'A product', inventory: 0 } };
const ITEMS = { order: { id: 123, items: [{ id: 456, title: 'My product' }] } };
const GIFT = { product: { title: 'Gift Card', tags: ['gift', 'something', 'another'], price: 25, created_at: '2024-03-01T10:00:00Z' } };

/** [what, filter, request, passes] */
const CASES: Array<[string, Filter, Partial<FilterInput>, boolean]> = [
  ['single value match', { body: false }, { body: false }, true],
  ['single value mismatch', { body: false }, { body: true }, false],
  ['simple primitive match', { body: { type: 'order/created' } }, { body: ORDER }, true],
  ['strings are case-sensitive', { body: { type: 'Order/Created' } }, { body: ORDER }, false],
  ['numbers by value, not as text', { body: { order: { id: '123' } } }, { body: ORDER }, false],
  ['null matches null', { body: { order: { coupon: null } } }, { body: { order: { coupon: null } } }, true],
  ['null is not a missing field', { body: { order: { coupon: null } } }, { body: ORDER }, false],
  ['nested object match', { body: { product: { inventory: 0 } } }, { body: PRODUCT }, true],
  ['nested mismatch', { body: { product: { inventory: 1 } } }, { body: PRODUCT }, false],
  ['a missing field fails', { body: { product: { discount: 0 } } }, { body: PRODUCT }, false],
  ['an object in an array', { body: { order: { items: { id: 456 } } } }, { body: ITEMS }, true],
  ['the fields of one element together', { body: { order: { items: { id: 456, title: 'Other' } } } }, { body: ITEMS }, false],
  ['array contains', { body: { product: { tags: 'gift' } } }, { body: GIFT }, true],
  ['array does not contain', { body: { product: { tags: 'card' } } }, { body: GIFT }, false],
  ['array contains all', { body: { product: { tags: ['gift', 'something'] } } }, { body: GIFT }, true],
  ['array lacks one', { body: { product: { tags: ['gift', 'missing'] } } }, { body: GIFT }, false],
  ['a filter array wants an array', { body: { product: { title: ['Gift Card'] } } }, { body: GIFT }, false],
  ['non-object match on the path', { path: '/webhooks/shop' }, { path: '/webhooks/shop' }, true],
  ['$eq', { body: { product: { title: { $eq: 'Gift Card' } } } }, { body: GIFT }, true],
  ['$eq is deep and exact on objects', { body: { order: { $eq: { id: 123 } } } }, { body: ORDER }, true],
  ['$eq on an object with more fields', { body: { $eq: { type: 'order/created' } } }, { body: ORDER }, false],
  ['$eq on an array element', { body: { product: { tags: { $eq: 'another' } } } }, { body: GIFT }, true],
  ['$neq', { body: { product: { inventory: { $neq: 0 } } } }, { body: PRODUCT }, false],
  ['$neq on another value', { body: { product: { inventory: { $neq: 5 } } } }, { body: PRODUCT }, true],
  ['$neq on an array: no element equal', { body: { product: { tags: { $neq: 'gift' } } } }, { body: GIFT }, false],
  ['$neq on a missing field fails', { body: { product: { discount: { $neq: 5 } } } }, { body: PRODUCT }, false],
  ['$in a list', { body: { type: { $in: ['order/created', 'order/updated'] } } }, { body: ORDER }, true],
  ['not $in a list', { body: { type: { $in: ['order/deleted'] } } }, { body: ORDER }, false],
  ['$in a string: contains', { body: { product: { title: { $in: 'Card' } } } }, { body: GIFT }, true],
  ['$in a string: does not contain', { body: { product: { title: { $in: 'card' } } } }, { body: GIFT }, false],
  ['$in on an array: some element', { body: { product: { tags: { $in: ['x', 'another'] } } } }, { body: GIFT }, true],
  ['$nin', { body: { type: { $nin: ['order/deleted'] } } }, { body: ORDER }, true],
  ['$nin a string', { body: { product: { title: { $nin: 'Gift' } } } }, { body: GIFT }, false],
  ['$nin on an array: no element', { body: { product: { tags: { $nin: ['gift'] } } } }, { body: GIFT }, false],
  ['$gt', { body: { product: { price: { $gt: 20 } } } }, { body: GIFT }, true],
  ['$gt at the value', { body: { product: { price: { $gt: 25 } } } }, { body: GIFT }, false],
  ['$gte', { body: { product: { price: { $gte: 25 } } } }, { body: GIFT }, true],
  ['$lt', { body: { product: { price: { $lt: 25 } } } }, { body: GIFT }, false],
  ['$lte', { body: { product: { price: { $lte: 25 } } } }, { body: GIFT }, true],
  ['a range', { body: { product: { price: { $gte: 10, $lt: 30 } } } }, { body: GIFT }, true],
  ['outside a range', { body: { product: { price: { $gte: 30, $lt: 50 } } } }, { body: GIFT }, false],
  ['ISO dates compare as text', { body: { product: { created_at: { $gte: '2024-01-01T00:00:00Z' } } } }, { body: GIFT }, true],
  ['ISO dates before', { body: { product: { created_at: { $lt: '2024-01-01T00:00:00Z' } } } }, { body: GIFT }, false],
  ['a number is not compared to text', { body: { product: { price: { $gt: '1' } } } }, { body: GIFT }, false],
  ['text is not compared to a number', { body: { product: { title: { $lt: 100 } } } }, { body: GIFT }, false],
  ['$startsWith', { body: { product: { title: { $startsWith: 'Gift' } } } }, { body: GIFT }, true],
  ['$startsWith, case-sensitive', { body: { product: { title: { $startsWith: 'gift' } } } }, { body: GIFT }, false],
  ['$startsWith on an array', { body: { product: { tags: { $startsWith: 'some' } } } }, { body: GIFT }, true],
  ['$endsWith', { body: { product: { title: { $endsWith: 'Card' } } } }, { body: GIFT }, true],
  ['$endsWith on a number', { body: { product: { price: { $endsWith: '5' } } } }, { body: GIFT }, false],
  ['$exist: true', { body: { product: { title: { $exist: true } } } }, { body: PRODUCT }, true],
  ['$exist: false on a missing field', { body: { product: { discount: { $exist: false } } } }, { body: PRODUCT }, true],
  ['$exist: false on a present field', { body: { product: { title: { $exist: false } } } }, { body: PRODUCT }, false],
  ['$exist: null is there', { body: { order: { coupon: { $exist: true } } } }, { body: { order: { coupon: null } } }, true],
  ['$or in a field', { body: { type: { $or: ['order/updated', 'order/created'] } } }, { body: ORDER }, true],
  ['$or, none', { body: { type: { $or: ['order/updated', 'order/deleted'] } } }, { body: ORDER }, false],
  ['$or of objects', { body: { $or: [{ product: { inventory: 0 } }, { product: { title: 'Gift Card' } }] } }, { body: PRODUCT }, true],
  ['$and', { body: { $and: [{ product: { inventory: 0 } }, { product: { title: 'A product' } }] } }, { body: PRODUCT }, true],
  ['$and, one fails', { body: { $and: [{ product: { inventory: 0 } }, { product: { title: 'Gift Card' } }] } }, { body: PRODUCT }, false],
  ['$not', { body: { product: { title: { $not: 'Gift Card' } } } }, { body: PRODUCT }, true],
  ['$not of a match', { body: { product: { $not: { title: 'A product' } } } }, { body: PRODUCT }, false],
  ['$not of an operator', { body: { product: { inventory: { $not: { $gt: 0 } } } } }, { body: PRODUCT }, true],
  ['$not of a missing field', { body: { product: { discount: { $not: { $eq: 5 } } } } }, { body: PRODUCT }, true],
  ['operators beside fields', { body: { product: { $exist: true, inventory: 0 } } }, { body: PRODUCT }, true],
  ['top-level $or', { $or: [{ body: { type: 'order/updated' } }, { path: '/shop' }] }, { body: ORDER, path: '/shop' }, true],
  ['top-level $or, none', { $or: [{ body: { type: 'order/updated' } }, { path: '/other' }] }, { body: ORDER, path: '/shop' }, false],
  ['top-level $and', { $and: [{ body: { type: 'order/created' } }, { path: { $startsWith: '/sh' } }] }, { body: ORDER, path: '/shop' }, true],
  ['top-level $not', { $not: { body: { type: 'order/created' } } }, { body: ORDER }, false],
  ['top-level $not, other', { $not: { body: { type: 'order/updated' } } }, { body: ORDER }, true],
  ['every part must match', { body: { type: 'order/created' }, path: '/other' }, { body: ORDER, path: '/shop' }, false],
  ['the empty filter passes all', {}, { body: ORDER }, true],
  ['headers by name, any case', { headers: { 'X-Shopify-Topic': 'orders/create' } }, { headers: { 'x-shopify-topic': 'orders/create' } }, true],
  ['header values are case-sensitive', { headers: { 'x-shopify-topic': 'Orders/Create' } }, { headers: { 'x-shopify-topic': 'orders/create' } }, false],
  ['headers any case inside $or', { headers: { $or: [{ 'X-A': '1' }, { 'X-B': '2' }] } }, { headers: { 'x-b': '2' } }, true],
  ['$exist: false on a header', { headers: { 'X-Test': { $exist: false } } }, { headers: { 'x-shopify-topic': 'a' } }, true],
  ['a query parameter', { query: { page: '2' } }, { query: { page: '2' } }, true],
  ['a repeated query parameter contains', { query: { tag: 'b' } }, { query: { tag: ['a', 'b'] } }, true],
  ['a query parameter is text', { query: { page: 2 } }, { query: { page: '2' } }, false],
];

describe('matchesFilter', () => {
  it.each(CASES)('%s', (_what, filter, request, passes) => {
    expect(matchesFilter(validateFilter(filter), input(request))).toBe(passes);
  });

  it('never reads a field through the prototype chain', () => {
    const request = input({ body: {} });
    expect(matchesFilter(validateFilter({ body: { constructor: { $exist: true } } }), request)).toBe(false);
    expect(matchesFilter(validateFilter({ body: { toString: { $exist: false } } }), request)).toBe(true);
    expect(matchesFilter(validateFilter({ headers: { constructor: { $exist: false } } }), request)).toBe(true);
    const filter = validateFilter(JSON.parse('{"body":{"__proto__":{"polluted":true}}}'));
    expect(matchesFilter(filter, input({ body: JSON.parse('{"__proto__":{"polluted":true}}') }))).toBe(true);
    expect(matchesFilter(filter, request)).toBe(false);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('is bounded on a huge array, a 16 MiB text and a deeply nested body', () => {
    // Past the work budget a webhook does not pass, whichever way the filter reads: F and
    // { $not: F } both refuse it. A filter of one node always finishes.
    const huge = Array.from({ length: 2_000_000 }, (_, i) => i);
    const broad = validateFilter({ body: Array.from({ length: 500 }, (_, i) => -i - 1) });
    const started = performance.now();
    expect(matchesFilter(broad, input({ body: huge }))).toBe(false);
    expect(matchesFilter(validateFilter({ $not: broad }), input({ body: huge }))).toBe(false);
    expect(matchesFilter(validateFilter({ body: 1_999_999 }), input({ body: huge }))).toBe(true);

    const text = 'ab'.repeat(8 * 1024 * 1024);
    expect(matchesFilter(validateFilter({ body: { $in: 'abx' } }), input({ body: text }))).toBe(false);
    expect(matchesFilter(validateFilter({ body: { $in: 'bab' } }), input({ body: text }))).toBe(true);
    const scans = validateFilter({ body: { $or: Array.from({ length: 200 }, () => ({ $in: 'abx' })) } });
    expect(matchesFilter(scans, input({ body: text }))).toBe(false);
    expect(matchesFilter(validateFilter({ $not: scans }), input({ body: text }))).toBe(false);
    expect(performance.now() - started).toBeLessThan(5_000);

    let deep: unknown = 'leaf';
    for (let i = 0; i < 200_000; i++) deep = { a: deep };
    let operand: unknown = 'leaf';
    for (let i = 0; i < 25; i++) operand = { a: operand };
    expect(matchesFilter(validateFilter({ body: { $eq: operand } }), input({ body: deep }))).toBe(false);
    expect(matchesFilter(validateFilter({ body: { a: { a: { $exist: true } } } }), input({ body: deep }))).toBe(true);
  });
});

/** [filter, path, message] */
const REFUSALS: Array<[unknown, string, string]> = [
  [{ body: { amount: { $gte: {} } } }, 'body.amount.$gte', 'body.amount.$gte: expects a number or a string'],
  [{ body: { amount: { $gt: true } } }, 'body.amount.$gt', 'body.amount.$gt: expects a number or a string'],
  [{ body: { name: { $regex: '^a' } } }, 'body.name.$regex', 'body.name.$regex: is not an operator; the operators are $eq,'],
  [{ body: { name: { $ref: 'body.other' } } }, 'body.name.$ref', 'is not an operator'],
  [{ body: { tags: { $in: 5 } } }, 'body.tags.$in', 'body.tags.$in: expects a list of values or a string'],
  [{ body: { tags: { $nin: { a: 1 } } } }, 'body.tags.$nin', 'expects a list of values or a string'],
  [{ body: { a: { $exist: 'yes' } } }, 'body.a.$exist', 'body.a.$exist: expects true or false'],
  [{ body: { a: { $startsWith: 1 } } }, 'body.a.$startsWith', 'expects a string'],
  [{ body: { $or: [] } }, 'body.$or', 'body.$or: expects a non-empty list of filters'],
  [{ body: { $and: { a: 1 } } }, 'body.$and', 'expects a non-empty list of filters'],
  [{ body: { $or: [{ a: { $lt: [] } }] } }, 'body.$or[0].a.$lt', 'expects a number or a string'],
  [{ body: { a: { $not: { $bad: 1 } } } }, 'body.a.$not.$bad', 'is not an operator'],
  [{ body: [1, { $nope: 1 }] }, 'body[1].$nope', 'is not an operator'],
  [{ headers: { 'x y': { $gt: null } } }, 'headers["x y"].$gt', 'expects a number or a string'],
  [{ event: 'order' }, 'event', "event: is not a part of the request; a filter's keys are among body, headers, query, path, $or, $and, $not"],
  [{ $or: [{ bdy: 1 }] }, '$or[0].bdy', 'is not a part of the request'],
  [{ $or: [] }, '$or', 'expects a non-empty list of filters of the same shape'],
  [{ $not: 'x' }, '$not', 'expects an object whose keys are among'],
  [{ $and: [{ body: 1 }, [1]] }, '$and[1]', 'expects an object'],
  ['body', '', 'filter: expects an object'],
  [null, '', 'filter: expects an object'],
  [[{ body: 1 }], '', 'filter: expects an object'],
  [{ body: { a: Number.NaN } }, 'body.a', 'is not a JSON value'],
  [{ body: { a: undefined } }, 'body.a', 'is not a JSON value'],
  [{ body: { a: new Date(0) } }, 'body.a', 'is not a JSON value'],
  [{ body: { a: { $eq: 10n } } }, 'body.a.$eq', 'is not a JSON value'],
  [{ body: { $in: Array.from({ length: 1000 }, (_, i) => i) } }, 'body.$in[997]', 'longer than 1000 operators and values'],
  [{ body: 'x'.repeat(70 * 1024) }, '', 'filter: is larger than 64 KiB as JSON'],
];

describe('validateFilter', () => {
  it.each(REFUSALS.map(([filter, path, message]) => ({ filter, path, message })))('refuses at $path: $message', ({ filter, path, message }) => {
    const error = refusal(filter);
    expect(error.path).toBe(path);
    expect(error.message).toContain(message);
  });

  it('refuses a filter deeper than 32 levels, and takes one of 32', () => {
    const nested = (levels: number) => {
      let value: unknown = 1;
      for (let i = 0; i < levels - 1; i++) value = { a: value };
      return { body: value };
    };
    expect(() => validateFilter(nested(31))).not.toThrow();
    const error = refusal(nested(32));
    expect(error.message).toContain('nested deeper than 32 levels');
    expect(error.path).toBe(`body${'.a'.repeat(31)}`);
  });

  it('refuses a cycle, a getter and a sparse array as not JSON, not by overflowing', () => {
    const cycle: Record<string, unknown> = {};
    cycle.body = cycle;
    expect(refusal(cycle).message).toContain('nested deeper');
    const getter = { body: Object.defineProperty({}, 'a', { enumerable: true, get: () => { throw new Error('read'); } }) };
    expect(refusal(getter).path).toBe('body.a');
    expect(refusal({ body: [1, , 3] }).path).toBe('body[1]');
  });

  it('returns the filter as it was given', () => {
    const filter = { headers: { 'X-Topic': 'a' }, body: { $or: [{ a: 1 }, { b: { $in: 'x' } }] } };
    expect(validateFilter(filter)).toBe(filter);
    expect(filter.headers).toEqual({ 'X-Topic': 'a' });
  });
});

function refusal(filter: unknown): FilterError {
  try {
    validateFilter(filter);
  } catch (error) {
    if (error instanceof FilterError) return error;
    throw error;
  }
  throw new Error(`validateFilter took ${JSON.stringify(filter)}`);
}

/** Small keys, so generated filters and bodies meet often enough for matches to happen. */
const key = fc.constantFrom('a', 'b', 'c', 'X-Id');
const scalar = fc.oneof(fc.constantFrom('a', 'b', 'ab', ''), fc.integer({ min: -3, max: 3 }), fc.boolean(), fc.constant(null));

const { value: filterValue } = fc.letrec<{ value: unknown; operators: Record<string, unknown> }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    scalar,
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(key, tie('value'), { maxKeys: 3 }),
    tie('operators'),
  ),
  operators: fc.oneof(
    fc.record({ $eq: fc.oneof(scalar, fc.jsonValue({ maxDepth: 2 })) }),
    fc.record({ $neq: scalar }),
    fc.record({ $in: fc.oneof(fc.array(scalar, { maxLength: 3 }), fc.string({ maxLength: 2 })) }),
    fc.record({ $nin: fc.oneof(fc.array(scalar, { maxLength: 3 }), fc.string({ maxLength: 2 })) }),
    fc.record({ $gt: fc.oneof(fc.integer({ min: -3, max: 3 }), fc.string({ maxLength: 2 })) }, { requiredKeys: [] }),
    fc.record({ $gte: fc.integer({ min: -3, max: 3 }), $lt: fc.string({ maxLength: 2 }), $lte: fc.double({ noNaN: true, noDefaultInfinity: true }) }, { requiredKeys: [] }),
    fc.record({ $startsWith: fc.string({ maxLength: 2 }), $endsWith: fc.string({ maxLength: 2 }) }, { requiredKeys: [] }),
    fc.record({ $exist: fc.boolean() }),
    fc.record({ $or: fc.array(tie('value'), { minLength: 1, maxLength: 3 }) }),
    fc.record({ $and: fc.array(tie('value'), { minLength: 1, maxLength: 3 }) }),
    fc.record({ $not: tie('value') }),
  ),
}));

const filterArbitrary: fc.Arbitrary<Filter> = fc.letrec<{ filter: Filter }>((tie) => ({
  filter: fc.oneof(
    { depthSize: 'small' },
    fc.record({ body: filterValue }),
    fc.record({ headers: filterValue }),
    fc.record({ query: filterValue }),
    fc.record({ path: filterValue }),
    fc.record({ body: filterValue, headers: filterValue, query: filterValue, path: filterValue }, { requiredKeys: [] }),
    fc.record({ $or: fc.array(tie('filter'), { minLength: 1, maxLength: 2 }), $and: fc.array(tie('filter'), { minLength: 1, maxLength: 2 }), $not: tie('filter') }, { requiredKeys: [] }),
  ),
})).filter;

const keyedJson = fc.letrec<{ json: unknown }>((tie) => ({
  json: fc.oneof({ depthSize: 'small' }, scalar, fc.array(tie('json'), { maxLength: 4 }), fc.dictionary(key, tie('json'), { maxKeys: 3 })),
})).json;

const inputArbitrary: fc.Arbitrary<FilterInput> = fc.record({
  body: fc.oneof({ arbitrary: keyedJson, weight: 3 }, { arbitrary: fc.jsonValue(), weight: 1 }),
  headers: fc.dictionary(fc.constantFrom('a', 'x-id'), fc.constantFrom('a', 'b', '1')),
  query: fc.dictionary(key, fc.oneof(fc.constantFrom('a', 'b'), fc.array(fc.constantFrom('a', 'b'), { maxLength: 3 }))),
  path: fc.constantFrom('', '/a', '/ab'),
});

/** Filters the generator makes within the bounds (it can make a few over 1,000 nodes). */
function bounded(filter: Filter): boolean {
  try {
    validateFilter({ $not: filter });
    return true;
  } catch (error) {
    if (error instanceof FilterError) return false;
    throw error;
  }
}

describe('properties', () => {
  it('the filter generator makes valid filters', () => {
    fc.assert(fc.property(filterArbitrary.filter(bounded), (filter) => validateFilter(filter) === filter), { numRuns: 500 });
  });

  it('matchesFilter never throws on a valid filter and any JSON request', () => {
    fc.assert(
      fc.property(filterArbitrary.filter(bounded), inputArbitrary, (filter, request) => {
        expect(typeof matchesFilter(validateFilter(filter), request)).toBe('boolean');
      }),
      { numRuns: 2000 },
    );
  });

  it('{ $not: F } at the top matches exactly when F does not', () => {
    const seen = { passed: 0, refused: 0 };
    fc.assert(
      fc.property(filterArbitrary.filter(bounded), inputArbitrary, (filter, request) => {
        const passes = matchesFilter(filter, request);
        seen[passes ? 'passed' : 'refused']++;
        expect(matchesFilter(validateFilter({ $not: filter }), request)).toBe(!passes);
      }),
      { numRuns: 2000 },
    );
    // The property says little unless both outcomes came up.
    expect(seen.passed).toBeGreaterThan(50);
    expect(seen.refused).toBeGreaterThan(50);
  });

  it('validateFilter throws nothing but FilterError on any JSON value', () => {
    const anyKey = fc.oneof(fc.constantFrom('body', 'headers', 'query', 'path', '$or', '$and', '$not', '$in', '$gt', '$exist', '__proto__'), fc.string());
    const jsonish = fc.oneof(
      fc.jsonValue(),
      fc.dictionary(anyKey, fc.jsonValue(), { maxKeys: 4 }),
      fc.record({ body: fc.dictionary(anyKey, fc.jsonValue(), { maxKeys: 4 }) }),
    );
    fc.assert(
      fc.property(jsonish, (value) => {
        try {
          validateFilter(value);
        } catch (error) {
          expect(error).toBeInstanceOf(FilterError);
        }
      }),
      { numRuns: 3000 },
    );
  });
});
