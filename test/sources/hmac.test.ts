import { createHmac } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import type { HmacConfig } from '../../src/domain/source-types.js';
import type { SignedRequest } from '../../src/sources/provider.js';
import { checkHmacConfig, DEFAULT_HMAC_CONFIG, hmac } from '../../src/sources/providers/hmac.js';
import { expectAccepted, expectRefused, flipped, MISMATCH, parsedBody, sampleRequest, secrets, signedRequest, verdictOf, verifyOnly, withHeaders } from './requests.js';

/**
 * The generic hmac type over every setting it has: each request is signed here by a signer
 * written from the settings' description alone (the signed payload built as bytes).
 */

const SECRET = 'generic-hmac-secret-0123456789';
const BODY = Buffer.from(JSON.stringify({ event: 'invoice.paid', data: { id: 'inv_1', note: 'naïve' } }));

function sign(config: HmacConfig, secret: string, body: Buffer, timestamp: string): string {
  const [before, after] = config.signedPayload.split('{body}').map((part) => Buffer.from(part.replaceAll('{timestamp}', timestamp)));
  return config.prefix + createHmac(config.algorithm, secret).update(Buffer.concat([before!, body, after!])).digest(config.encoding);
}

function hmacRequest(config: HmacConfig, options: { body?: Buffer; secret?: string; seconds?: number; now?: number } = {}) {
  const now = options.now ?? Date.now();
  const timestamp = String(options.seconds ?? Math.floor(now / 1000));
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (config.timestampHeader) headers[config.timestampHeader] = timestamp;
  headers[config.header] = sign(config, options.secret ?? SECRET, BODY, timestamp);
  return signedRequest({ headers, body: options.body ?? BODY, now });
}

const MATRIX: HmacConfig[] = [];
for (const algorithm of ['sha1', 'sha256', 'sha512'] as const) {
  for (const encoding of ['hex', 'base64'] as const) {
    for (const prefix of ['', `${algorithm}=`]) {
      MATRIX.push({ ...DEFAULT_HMAC_CONFIG, header: 'X-Signature', algorithm, encoding, prefix });
      for (const signedPayload of ['v1:{timestamp}:{body}', '{body}.{timestamp}']) {
        const timestampHeader = 'X-Webhook-Timestamp';
        MATRIX.push({ ...DEFAULT_HMAC_CONFIG, header: 'X-Webhook-Signature', algorithm, encoding, prefix, timestampHeader, toleranceSeconds: 600, signedPayload });
      }
    }
  }
}

describe('hmac', () => {
  test.each(MATRIX.map((config) => [`${config.algorithm} ${config.encoding} "${config.prefix}" ${config.signedPayload}`, config] as const))(
    '%s: signed verifies; a changed byte of the body or the signature, another secret, a missing header do not',
    async (_name, config) => {
      const run = (request: SignedRequest, secret = SECRET) => verdictOf(hmac, request, secrets(secret), { hmac: config });
      const check = (request: SignedRequest) => hmac.checkHeaders(request, { hmac: config });
      const request = hmacRequest(config);
      expectAccepted(await run(request));
      const digits = String(request.headers[config.header.toLowerCase()]).slice(config.prefix.length);
      const hidden = [SECRET, digits];
      expectRefused(await run({ ...request, rawBody: flipped(BODY) }), 'invalid_signature', MISMATCH, hidden);
      expectRefused(await run(request, 'another-secret-0123456789'), 'invalid_signature', MISMATCH, hidden);
      const digest = Buffer.from(digits, config.encoding);
      digest[digest.length - 1]! ^= 0x80;
      expectRefused(await run(withHeaders(request, { [config.header]: config.prefix + digest.toString(config.encoding) })), 'invalid_signature', MISMATCH);

      expectRefused(check(withHeaders(request, { [config.header]: undefined })), 'invalid_signature', `${config.header} header is missing`);
      if (config.prefix !== '') {
        const unprefixed = withHeaders(request, { [config.header]: digits });
        expectRefused(check(unprefixed), 'invalid_signature', `${config.header} header does not start with ${config.prefix}`);
      }
      const short = withHeaders(request, { [config.header]: `${config.prefix}${digits.slice(2)}` });
      expectRefused(check(short), 'invalid_signature', /header does not hold a (hex|base64) SHA-\d+ signature$/, hidden);

      if (config.timestampHeader) {
        const now = Date.now();
        const seconds = Math.floor(now / 1000);
        expectRefused(check(hmacRequest(config, { now, seconds: seconds - 11 * 60 })), 'signature_expired', 'timestamp 11 minutes old');
        const ahead = hmacRequest(config, { now, seconds: seconds + 20 * 60 });
        expectRefused(await verifyOnly(hmac, ahead, secrets(SECRET), { hmac: config }), 'signature_expired', 'timestamp 20 minutes in the future');
        const sent = Number(request.headers[config.timestampHeader.toLowerCase()]);
        expectRefused(await run(withHeaders(request, { [config.timestampHeader]: String(sent - 1) })), 'invalid_signature', MISMATCH);
        expectRefused(check(withHeaders(request, { [config.timestampHeader]: undefined })), 'invalid_signature', `${config.timestampHeader} header is missing`);
      }
    },
  );

  test('the window words: seconds, minutes, hours, days', () => {
    const config: HmacConfig = { ...DEFAULT_HMAC_CONFIG, timestampHeader: 'X-Timestamp', toleranceSeconds: 60, signedPayload: '{timestamp}.{body}' };
    const now = Date.UTC(2025, 5, 1);
    const at = (offset: number) => hmac.checkHeaders(hmacRequest(config, { now, seconds: now / 1000 + offset }), { hmac: config });
    expectRefused(at(-90), 'signature_expired', 'timestamp 90 seconds old');
    expectRefused(at(3 * 60 + 30), 'signature_expired', 'timestamp 3 minutes in the future');
    expectRefused(at(-5 * 3600), 'signature_expired', 'timestamp 5 hours old');
    expectRefused(at(-3 * 86400), 'signature_expired', 'timestamp 3 days old');
    expect(at(-60)).toBeUndefined();
    expect(at(60)).toBeUndefined();
    const fractional = withHeaders(hmacRequest(config, { now }), { 'x-timestamp': `${now / 1000}.5` });
    expectRefused(hmac.checkHeaders(fractional, { hmac: config }), 'invalid_signature', 'X-Timestamp header is not a Unix time in seconds');
  });

  test('without settings it takes the defaults; the sample verifies under any settings', async () => {
    expect(hmac.signatureHeader({})).toBe('X-Signature');
    expect(checkHmacConfig(DEFAULT_HMAC_CONFIG)).toBeUndefined();
    const now = Date.now();
    for (const config of [undefined, ...MATRIX]) {
      const sample = hmac.sample(SECRET, config ? { hmac: config } : {}, '', now);
      const request = sampleRequest(sample, now);
      expectAccepted(await verdictOf(hmac, request, secrets(SECRET), config ? { hmac: config } : {}));
      expect(hmac.describe(request, parsedBody(request))).toEqual({ event: 'test.ping', deliveryId: undefined });
    }
  });

  test('describes the body’s event, type or event_type', () => {
    for (const [body, event] of [
      [{ event: 'a.b', type: 'ignored' }, 'a.b'],
      [{ type: 'order.created' }, 'order.created'],
      [{ event_type: 'user_signup' }, 'user_signup'],
      [{ event: '', type: 7, event_type: ['x'] }, undefined],
      [['event'], undefined],
    ] as const) {
      const request = signedRequest({ headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      expect(hmac.describe(request, parsedBody(request)).event).toBe(event);
    }
    const form = signedRequest({ headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'type=form.sent&x=1' });
    expect(hmac.describe(form, parsedBody(form)).event).toBe('form.sent');
  });

  test('checkHmacConfig refuses what cannot work, saying what', () => {
    const problem = (change: Partial<HmacConfig>) => checkHmacConfig({ ...DEFAULT_HMAC_CONFIG, ...change });
    expect(problem({ header: 'X Signature' })).toMatch(/signature header must be a header name/);
    expect(problem({ header: 'X-Sig:nature' })).toMatch(/signature header/);
    expect(problem({ header: 'X'.repeat(101) })).toMatch(/at most 100/);
    expect(problem({ header: 'X'.repeat(100) })).toBeUndefined();
    expect(problem({ algorithm: 'md5' as HmacConfig['algorithm'] })).toMatch(/sha1, sha256 or sha512/);
    expect(problem({ encoding: 'base32' as HmacConfig['encoding'] })).toMatch(/hex or base64/);
    expect(problem({ prefix: 'p'.repeat(51) })).toMatch(/at most 50 printable/);
    expect(problem({ prefix: 'sha256=\n' })).toMatch(/printable/);
    expect(problem({ prefix: ' sha256=' })).toMatch(/not starting with a space/);
    expect(problem({ prefix: 'HMAC-SHA256 ' })).toBeUndefined();
    for (const toleranceSeconds of [0, 86401, 1.5, Number.NaN]) expect(problem({ toleranceSeconds })).toMatch(/1 to 86400/);
    expect(problem({ toleranceSeconds: 86400 })).toBeUndefined();
    expect(problem({ signedPayload: 'no body here' })).toMatch(/\{body\} exactly once/);
    expect(problem({ signedPayload: '{body}{body}' })).toMatch(/\{body\} exactly once/);
    expect(problem({ signedPayload: '{timestamp}.{body}' })).toMatch(/\{timestamp\} only with a timestamp header/);
    expect(problem({ timestampHeader: 'X-Timestamp', signedPayload: '{body}' })).toMatch(/must contain \{timestamp\} once/);
    expect(problem({ timestampHeader: 'X Timestamp', signedPayload: '{timestamp}.{body}' })).toMatch(/timestamp header must be a header name/);
    expect(problem({ timestampHeader: 'X-Timestamp', signedPayload: '{timestamp}.{body}' })).toBeUndefined();
  });
});
