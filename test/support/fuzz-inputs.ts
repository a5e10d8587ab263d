import fc from 'fast-check';
import { issueApiKey } from '../../src/domain/api-key.js';
import { MAX_NESTING_DEPTH } from '../../src/domain/webhook-body.js';
import type { TestTenant } from '../helpers.js';

/**
 * The fast-check generators of the intake fuzz tests (intake-fuzz.test.ts and
 * intake-fuzz-tcp.test.ts): bodies, keys, numbers, headers, content types, times. Those
 * that need the tenants of a run take them as arguments.
 */

/** JSON text of a value, as JSON.stringify writes it. */
export const jsonText = (value: unknown) => JSON.stringify(value);

/** Keys an attacker reaches for, and some that collide with the webhook's own fields. */
const EVIL_KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  'polluted',
  'toString',
  'valueOf',
  'hasOwnProperty',
  '__defineGetter__',
  '__lookupGetter__',
  'isPrototypeOf',
  'isAdmin',
  'length',
  'then',
];
const jsonKey = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...EVIL_KEYS) }, { weight: 1, arbitrary: fc.string({ maxLength: 6 }) });

/** Number literals JSON allows, however large, small or long. */
const numberText = fc.oneof(
  fc.constantFrom(
    '1e400',
    '-1e400',
    '1e-400',
    '123456789012345678901234567890',
    '-0',
    '0.0000001',
    '9007199254740993',
    '1.7976931348623157e309',
    '4.9e-325',
    '0e999999999',
    '1E+99999999999999999999',
  ),
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => jsonText(n)),
  fc
    .tuple(
      fc.stringMatching(/^-?[1-9][0-9]{0,400}$/),
      fc.option(fc.stringMatching(/^\.[0-9]{1,60}$/), { nil: '' }),
      fc.option(fc.stringMatching(/^[eE][+-]?[0-9]{1,8}$/), { nil: '' }),
    )
    .map(([whole, fraction, exponent]) => whole + fraction + exponent),
);

/** Strings of any code points, lone surrogates and U+0000 included, JSON-escaped. */
const stringText = fc.string({ unit: 'binary', maxLength: 20 }).map(jsonText);

const leafText = fc.oneof(fc.constantFrom('null', 'true', 'false'), numberText, stringText);

const objectText = (entries: Array<[string, string]>) => `{${entries.map(([key, value]) => `${jsonText(key)}:${value}`).join(',')}}`;

/**
 * JSON text written by hand, not by JSON.stringify: objects are lists of entries, so the
 * same key may come twice and `__proto__` is an ordinary key, at any depth.
 */
const { value: evilValue, object: evilObject } = fc.letrec<{ value: string; array: string; object: string }>((tie) => ({
  value: fc.oneof({ depthSize: 'small', maxDepth: 6 }, leafText, tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 4 }).map((items) => `[${items.join(',')}]`),
  object: fc.array(fc.tuple(jsonKey, tie('value')), { maxLength: 5 }).map(objectText),
}));

/** What a prototype-pollution payload looks like once it lands on Object.prototype. */
const POISON = '{"polluted":"yes","isAdmin":true,"event":"polluted-event","data":{"polluted":"yes"},"prototype":{"polluted":"yes"}}';

/** A pollution payload under __proto__, constructor or prototype, below 0 to 60 levels of objects and arrays. */
const poisonAtDepth = fc
  .tuple(
    fc.array(fc.constantFrom('[', '__proto__', 'constructor', 'prototype', 'x'), { maxLength: 60 }),
    fc.constantFrom('{"__proto__":P}', '{"constructor":{"prototype":P}}', '{"prototype":P}', '{"__proto__":{"__proto__":P}}'),
  )
  .map(([path, shape]) => {
    let text = shape.replace('P', POISON);
    for (const step of [...path].reverse()) text = step === '[' ? `[${text}]` : `{${jsonText(step)}:${text}}`;
    return text;
  });

/** A valid event: 1 to 200 characters of printable text. */
const validEvent = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 50 });

/** Extra top-level entries (neither event nor data), evil ones most of all. */
const extraEntries = fc.array(
  fc.tuple(
    jsonKey.filter((key) => key !== 'event' && key !== 'data'),
    fc.oneof(evilValue, poisonAtDepth),
  ),
  { maxLength: 3 },
);

/** Valid webhooks whose keys are __proto__, constructor and the like, at every depth, repeated. */
export const evilValidBody = fc
  .tuple(validEvent, fc.oneof(evilObject, poisonAtDepth.map((p) => (p.startsWith('[') ? `{"k":${p}}` : p))), extraEntries, fc.boolean())
  .map(([event, data, extra, eventLast]) => {
    const entries: Array<[string, string]> = [['data', data], ...extra];
    if (eventLast) entries.push(['event', jsonText(event)]);
    else entries.unshift(['event', jsonText(event)]);
    return Buffer.from(objectText(entries));
  });

/** Byte sequences that are not UTF-8: stray continuations, overlongs, surrogates, past U+10FFFF, truncated. */
const INVALID_UTF8 = [
  [0x80],
  [0xbf],
  [0xc0, 0x80],
  [0xc1, 0xbf],
  [0xe0, 0x80, 0x80],
  [0xed, 0xa0, 0x80],
  [0xed, 0xbf, 0xbf],
  [0xf0, 0x80, 0x80, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf5, 0x80, 0x80, 0x80],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0xfc, 0x84, 0x80, 0x80, 0x80, 0x80],
  [0xfe],
  [0xff],
  [0xc3],
  [0xe2, 0x82],
  [0xf0, 0x9f, 0x98],
].map((bytes) => Buffer.from(bytes));

/** A valid webhook with invalid UTF-8 bytes spliced into its event, a data key or a data value. */
export const invalidUtf8Body = fc
  .tuple(
    fc.constantFrom('event', 'key', 'value', 'extra'),
    fc.array(fc.constantFrom(...INVALID_UTF8), { minLength: 1, maxLength: 3 }),
    fc.string({ unit: 'grapheme', maxLength: 10 }),
  )
  .map(([where, bad, text]) => {
    const before = Buffer.from(text.slice(0, 5).replace(/["\\]/g, ''));
    // Each bad sequence between ASCII letters, so that two of them never make a valid one.
    const inside = Buffer.concat([before, ...bad.flatMap((sequence) => [Buffer.from('x'), sequence]), Buffer.from('xé😀')]);
    const parts: Record<string, [string, string]> = {
      event: ['{"event":"', '","data":{}}'],
      key: ['{"event":"e","data":{"', '":1}}'],
      value: ['{"event":"e","data":{"k":"', '"}}'],
      extra: ['{"event":"e","', '":null}'],
    };
    const [head, tail] = parts[where]!;
    return Buffer.concat([Buffer.from(head), inside, Buffer.from(tail)]);
  });

/** Nesting from 100 levels (some under the limit) to 100,000, of arrays or objects, here or there. */
export const deepBody = fc
  .tuple(
    fc.oneof(fc.integer({ min: 100, max: 200 }), fc.constantFrom(MAX_NESTING_DEPTH - 2, MAX_NESTING_DEPTH - 1, 1000, 10_000, 100_000)),
    fc.constantFrom('[', '{"a":'),
    fc.constantFrom('data', 'extra', 'whole', 'string'),
  )
  .map(([depth, open, where]): { body: string; depth: number; withinLimit?: number } => {
    const close = open === '[' ? ']' : '}';
    const nested = `${open.repeat(depth)}1${close.repeat(depth)}`;
    // Depth counted as the service counts it: every [ and { outside strings.
    switch (where) {
      case 'data':
        return { body: `{"event":"deep","data":{"x":${nested}}}`, depth: depth + 2 };
      case 'extra':
        return { body: `{"event":"deep","x":${nested}}`, depth: depth + 1 };
      case 'whole':
        // An array is not a webhook (400); an object without event is one that breaks the rules (422).
        return { body: nested, depth, withinLimit: open === '[' ? 400 : 422 };
      default:
        // Brackets inside a string are text, not nesting.
        return { body: `{"event":"deep","data":{"s":${jsonText(nested)}}}`, depth: 2 };
    }
  });

/** Bodies a sender, a buggy client or an attacker may send. */
export const bodies: fc.Arbitrary<Buffer> = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 300 }).map((s) => Buffer.from(s, 'utf8')),
  fc.uint8Array({ maxLength: 600 }).map((bytes) => Buffer.from(bytes)),
  fc.json({ maxDepth: 4 }).map((text) => Buffer.from(text)),
  fc
    .record({ event: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 210 }), data: fc.jsonValue({ maxDepth: 3 }) })
    .map((doc) => Buffer.from(jsonText(doc))),
  fc
    .record({ event: fc.string({ unit: 'binary', minLength: 1, maxLength: 20 }), data: fc.object({ maxDepth: 2 }) })
    .map((doc) => Buffer.from(jsonText(doc))),
  fc
    .record({ event: fc.string({ maxLength: 20 }), data: fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })) }, { requiredKeys: ['event'] })
    .map((doc) => Buffer.from(jsonText(doc))),
  deepBody.map(({ body }) => Buffer.from(body)),
  numberText.chain((n) => fc.constantFrom(`{"event":"number","data":{"n":${n}}}`, `{"event":${n}}`, `{"event":"n","data":${n}}`, n)).map((s) => Buffer.from(s)),
  evilValidBody,
  fc.tuple(extraEntries, evilObject).map(([extra, object]) => Buffer.from(objectText([...extra, ['x', object]]))),
  poisonAtDepth.map((p) => Buffer.from(p)),
  fc
    .tuple(fc.string({ maxLength: 10 }), fc.jsonValue({ maxDepth: 1 }))
    .map(([event, other]) => Buffer.from(`{"event":${jsonText(event)},"event":${jsonText(other)},"data":{"k":1,"k":2}}`)),
  fc
    .tuple(fc.integer({ min: 190, max: 1000 }), fc.constantFrom('a', 'é', '😀', '\u0000', '"', '\ud800'))
    .map(([length, char]) => Buffer.from(jsonText({ event: char.repeat(length), data: {} }))),
  fc.integer({ min: 1000, max: 200_000 }).map((length) => Buffer.from(`{"event":"long key","data":{${jsonText('k'.repeat(length))}:1}}`)),
  invalidUtf8Body,
  fc.constantFrom('', ' ', 'null', '[]', '{}', '"x"', '{"event":null}', '{"event":"e","data":null}', '\ufeff{"event":"bom"}', '{"event":"\\u0000"}').map((s) =>
    Buffer.from(s),
  ),
);

/** Valid webhooks: an event of 1 to 50 graphemes and JSON data. */
export const validBody = fc
  .record({ event: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 50 }), data: fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })) })
  .map((doc) => Buffer.from(jsonText(doc)));

/** Characters a header value may carry on the wire: visible ASCII, space, tab, obs-text. */
const headerChar = fc.oneof(
  fc.integer({ min: 0x20, max: 0x7e }),
  fc.constant(0x09),
  fc.integer({ min: 0x80, max: 0xff }),
).map((code) => String.fromCharCode(code));
/** A header value of up to 300 such characters. */
export const headerValue = fc.string({ unit: headerChar, maxLength: 300 });

/** Content types, right, wrong and malformed, or any header value. */
export const contentTypes = fc.oneof(
  fc.constantFrom(
    'application/json',
    'application/json; charset=utf-8',
    'APPLICATION/JSON;charset=UTF-8',
    'application/cloudevents+json',
    'text/plain',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=----x',
    'application/json; charset=latin1',
    'application/json;;;',
    ';',
    '',
  ),
  headerValue,
);

/** No idempotency key, one of a few that repeat, or any header value. */
export const idempotencyKeys = fc.option(fc.oneof(fc.constantFrom('a', 'b', 'same-key'), headerValue), { nil: undefined });

/** One of the tenants given, for a property that may send as any of them. */
export const tenants = (...choices: [TestTenant, ...TestTenant[]]) => fc.constantFrom(...choices);

/**
 * Keys that look real: right shape and checksum, but unknown, or of another environment;
 * some are `apiKey` (a real development key) slightly changed.
 */
export const lookalikeKeys = (apiKey: string) =>
  fc.constantFrom(
    issueApiKey('development').plaintext,
    issueApiKey('production').plaintext,
    issueApiKey('staging').plaintext,
    `${apiKey.slice(0, -1)}${apiKey.endsWith('0') ? '1' : '0'}`,
    apiKey.replace('whk_dev_', 'whk_live_'),
    apiKey.toUpperCase(),
    ` ${apiKey}`,
    `${apiKey}\t`,
    `Bearer ${apiKey}`,
  );

const pad = (n: number, width = 2) => String(n).padStart(width, '0');
/** An instant long before or long after the webhooks above, written in one of RFC 3339's forms. */
export const stamp = fc
  .record({
    future: fc.boolean(),
    date: fc.date({ min: new Date('1971-01-01T00:00:00Z'), max: new Date('2018-12-31T00:00:00Z'), noInvalidDate: true }),
    leapSecond: fc.boolean(),
    fraction: fc.option(fc.stringMatching(/^[0-9]{1,12}$/), { nil: undefined }),
    offset: fc.option(fc.tuple(fc.constantFrom('+', '-'), fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 59 })), {
      nil: undefined,
    }),
    lowerCase: fc.boolean(),
  })
  .map(({ future, date, leapSecond, fraction, offset, lowerCase }) => {
    const year = date.getUTCFullYear() + (future ? 200 : 0);
    const time = leapSecond ? '23:59:60' : `${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())}`;
    const zone = offset === undefined ? 'Z' : `${offset[0]}${pad(offset[1])}:${pad(offset[2])}`;
    const text = `${pad(year, 4)}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())}T${time}${fraction ? `.${fraction}` : ''}${zone}`;
    return { future, text: lowerCase ? text.toLowerCase() : text };
  });

/** Text with U+0000 somewhere, as a query value or path segment may carry it. */
export const withNul = fc.tuple(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 })).map(([a, b]) => `${a}\u0000${b}`);

/**
 * Integration keys in the address: any text, very long, with U+0000, dot segments, and
 * `tenant`'s own key or `other`'s, slightly changed or as they are.
 */
export const pathSegments = (tenant: TestTenant, other: TestTenant) =>
  fc.oneof(
    fc.string({ unit: 'grapheme', maxLength: 250 }).map((s) => encodeURIComponent(s)),
    fc.string({ unit: fc.constantFrom(...'abcXYZ019%._~-+!$&\'()*,;=:@'), minLength: 1, maxLength: 60 }),
    fc.integer({ min: 100, max: 20_000 }).map((n) => 'k'.repeat(n)),
    withNul.map((s) => encodeURIComponent(s)),
    fc.constantFrom('%00', '%2F', '..', '.', '%2e%2e', `${tenant.integrationKey}%00`, `${tenant.integrationKey}/`, `${tenant.integrationKey}?x=1`),
    fc.constantFrom(tenant.integrationKey, other.integrationKey, `${tenant.integrationKey}x`, tenant.integrationKey.toLowerCase()),
  );

/** An X-API-Key or none: any header value, very long, a lookalike of `tenant`'s, or the real keys of `tenant` and `others`. */
export const apiKeyHeaders = (tenant: TestTenant, others: TestTenant[]) =>
  fc.option(
    fc.oneof(
      headerValue,
      fc.integer({ min: 1000, max: 20_000 }).map((n) => `whk_dev_${'A'.repeat(n)}`),
      lookalikeKeys(tenant.apiKey),
      fc.constantFrom(tenant.apiKey, ...others.map((other) => other.apiKey), tenant.apiKey.slice(0, -1), `${tenant.apiKey} `),
    ),
    { nil: undefined },
  );

/** Headers that carry `apiKey` as a credential, none to all of them. */
export const credentialHeaders = (apiKey: string) =>
  fc.record(
    {
      authorization: fc.constantFrom(`Bearer ${apiKey}`, `Basic ${Buffer.from(`u:${apiKey}`).toString('base64')}`),
      cookie: fc.constant(`intake_session=${apiKey}`),
      'proxy-authorization': fc.constant(`Bearer ${apiKey}`),
    },
    { requiredKeys: [] },
  );

/** Valid JSON whose text a database may refuse to store: U+0000, lone surrogates, in the event or the data. */
export const awkwardBodies = fc
  .tuple(fc.constantFrom('\\u0000', 'a\\u0000b', '\\ud800', '\\udfff\\ud800', '\\u0000\\u0000'), fc.constantFrom('event', 'data', 'key'))
  .map(([text, where]) =>
    Buffer.from(
      where === 'event' ? `{"event":"${text}"}` : where === 'data' ? `{"event":"e","data":{"s":"${text}"}}` : `{"event":"e","data":{"${text}":1}}`,
    ),
  );

/** JSON bodies for the management API: a name with evil extra entries, or evil JSON of any shape. */
export const managementBodies = fc.oneof(
  fc.tuple(fc.string({ minLength: 1, maxLength: 20 }), extraEntries).map(([name, extra]) => objectText([['name', jsonText(name)], ...extra])),
  evilObject,
  poisonAtDepth,
  evilValue,
);

/** Query fields of the management API's reads, some of them junk; the ids are `tenant`'s. */
export const managementQueries = (tenant: TestTenant) => {
  const junk = fc.oneof(fc.string({ unit: 'grapheme', maxLength: 30 }), withNul, fc.constantFrom('-1', '0', '1e9', '', '%'));
  /** Mostly values the route takes, so that most requests get past validation to the query. */
  const field = <T extends string>(valid: fc.Arbitrary<T>) => fc.oneof({ weight: 6, arbitrary: valid }, { weight: 1, arbitrary: junk });
  return fc.record(
    {
      limit: field(fc.integer({ min: 1, max: 200 }).map(String)),
      cursor: junk,
      event: field(fc.oneof(fc.constantFrom('e', 'victim'), withNul)),
      since: field(fc.oneof(stamp.map(({ text }) => text), fc.constantFrom('2016-12-31T23:59:60Z', '2020-01-01T00:00:00+01'))),
      until: field(fc.oneof(stamp.map(({ text }) => text), fc.constantFrom('2016-12-31T23:59:60Z', '2020-01-01T00:00:00+01'))),
      q: field(fc.oneof(fc.constantFrom('event', '%', '_'), withNul)),
      integration_id: field(fc.constant(tenant.integrationId)),
      key_id: field(fc.constant(tenant.keyId)),
      status_class: field(fc.constantFrom('2xx', '4xx', '5xx')),
      error_code: field(fc.constantFrom('invalid_api_key', 'validation_failed')),
      bucket: field(fc.constantFrom('minute', 'hour', 'day')),
      group_by: field(fc.constantFrom('integration', 'key')),
    },
    { requiredKeys: [] },
  );
};
