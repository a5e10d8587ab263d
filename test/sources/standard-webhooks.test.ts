import { Webhook } from 'standardwebhooks';
import { describe, expect, test } from 'vitest';
import { standardWebhooks } from '../../src/sources/providers/standard-webhooks.js';
import { expectAccepted, expectRefused, flipped, MISMATCH, parsedBody, sampleRequest, secrets, signedRequest, verdictOf, verifyOnly, withHeaders } from './requests.js';

/** webhook-signature, against the reference implementation (the `standardwebhooks` package). */

// Svix's documented example secret.
const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const OTHER = 'whsec_0123456789abcdefghijABCDEFGHIJ+/';
const ID = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
const BODY = JSON.stringify({ type: 'contact.created', timestamp: '2022-11-03T20:26:10.344522Z', data: { id: 'contact_1', name: 'Zoë' } });

function swRequest(options: { secret?: string; body?: string | Buffer; seconds?: number; now?: number; signature?: string } = {}) {
  const now = options.now ?? Date.now();
  const seconds = options.seconds ?? Math.floor(now / 1000);
  const signature = options.signature ?? new Webhook(options.secret ?? SECRET).sign(ID, new Date(seconds * 1000), BODY);
  return signedRequest({
    headers: { 'content-type': 'application/json', 'webhook-id': ID, 'webhook-timestamp': String(seconds), 'webhook-signature': signature },
    body: options.body ?? BODY,
    now,
  });
}

describe('standard_webhooks', () => {
  test("the reference signer's signature verifies; a changed byte, another secret or a changed id do not", async () => {
    const request = swRequest();
    expectAccepted(await verdictOf(standardWebhooks, request, secrets(SECRET)));
    expectAccepted(await verdictOf(standardWebhooks, request, secrets(OTHER, SECRET)), 'sec_2');
    const signature = String(request.headers['webhook-signature']);
    const hidden = [SECRET, signature.slice(3)];
    expectRefused(await verdictOf(standardWebhooks, { ...request, rawBody: flipped(BODY) }, secrets(SECRET)), 'invalid_signature', MISMATCH, hidden);
    expectRefused(await verdictOf(standardWebhooks, request, secrets(OTHER)), 'invalid_signature', MISMATCH, hidden);
    expectRefused(await verdictOf(standardWebhooks, withHeaders(request, { 'webhook-id': 'msg_another' }), secrets(SECRET)), 'invalid_signature', MISMATCH);
  });

  test("Svix's own header names (svix-id, svix-timestamp, svix-signature) verify and describe alike", async () => {
    const standard = swRequest();
    const svix = signedRequest({
      headers: {
        'content-type': 'application/json',
        'svix-id': ID,
        'svix-timestamp': String(standard.headers['webhook-timestamp']),
        'svix-signature': String(standard.headers['webhook-signature']),
      },
      body: BODY,
      now: standard.now,
    });
    expect(standardWebhooks.checkHeaders(svix, {})).toBeUndefined();
    expectAccepted(await verdictOf(standardWebhooks, svix, secrets(SECRET)));
    expect(standardWebhooks.describe(svix, parsedBody(svix))).toMatchObject({ event: 'contact.created', deliveryId: ID });
    expectRefused(await verdictOf(standardWebhooks, { ...svix, rawBody: flipped(BODY) }, secrets(SECRET)), 'invalid_signature', MISMATCH);
  });

  test('any of several signatures may match; other versions are skipped', async () => {
    const mine = new Webhook(SECRET).sign(ID, new Date(), BODY);
    const other = new Webhook(OTHER).sign(ID, new Date(), BODY);
    const request = swRequest({ signature: `v1a,aGVsbG8= ${other} ${mine}` });
    expectAccepted(await verdictOf(standardWebhooks, request, secrets(SECRET)));
    expectRefused(standardWebhooks.checkHeaders(swRequest({ signature: 'v1a,aGVsbG8= v2,abc' }), {}), 'invalid_signature', 'webhook-signature header has no v1 signature');
  });

  test('five minutes of tolerance either way, refused before the body is read', async () => {
    const now = Date.now();
    const old = swRequest({ now, seconds: Math.floor(now / 1000) - 7 * 60 });
    expectRefused(standardWebhooks.checkHeaders(old, {}), 'signature_expired', 'timestamp 7 minutes old');
    expectRefused(await verifyOnly(standardWebhooks, old, secrets(SECRET)), 'signature_expired', 'timestamp 7 minutes old');
    expectRefused(standardWebhooks.checkHeaders(swRequest({ now, seconds: Math.floor(now / 1000) + 6 * 60 }), {}), 'signature_expired', 'timestamp 6 minutes in the future');
    expect(() => new Webhook(SECRET).verify(BODY, old.headers as Record<string, string>)).toThrow(/too old/);
  });

  test('each missing header is named', () => {
    const request = swRequest();
    for (const header of ['webhook-signature', 'webhook-id', 'webhook-timestamp']) {
      expectRefused(standardWebhooks.checkHeaders(withHeaders(request, { [header]: undefined }), {}), 'invalid_signature', `${header} header is missing`);
    }
    expectRefused(standardWebhooks.checkHeaders(withHeaders(request, { 'webhook-timestamp': '2024-01-01T00:00:00Z' }), {}), 'invalid_signature', 'webhook-timestamp header is not a Unix time in seconds');
  });

  test('signs the bytes received: a body changed in a byte that is not UTF-8 is refused (the reference package accepts it)', async () => {
    const seconds = Math.floor(Date.now() / 1000);
    const original = Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]);
    const changed = Buffer.from(original);
    changed[6] = 0xfe;
    const signature = new Webhook(SECRET).sign(ID, new Date(seconds * 1000), original);
    const request = swRequest({ seconds, body: changed, signature });
    expect(() => new Webhook(SECRET).verify(changed, request.headers as Record<string, string>, { jsonParse: false })).not.toThrow();
    expectRefused(await verifyOnly(standardWebhooks, request, secrets(SECRET)), 'invalid_signature', MISMATCH);
  });

  test('new secrets are whsec_ and 32 random bytes; the sample passes the reference Webhook.verify', async () => {
    const secret = standardWebhooks.newSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(standardWebhooks.checkSecret(secret)).toBeUndefined();
    expect(standardWebhooks.checkSecret(SECRET)).toBeUndefined();
    expect(standardWebhooks.checkSecret('whsec_c2hvcnQ=')).toMatch(/24 to 64 bytes/);
    expect(standardWebhooks.checkSecret('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')).toMatch(/whsec_/);

    const now = Date.now();
    const sample = standardWebhooks.sample(secret, {}, '', now);
    const request = sampleRequest(sample, now);
    expectAccepted(await verdictOf(standardWebhooks, request, secrets(secret)));
    expect(new Webhook(secret).verify(sample.body, sample.headers)).toMatchObject({ type: 'test.event' });
    expect(() => new Webhook(OTHER).verify(sample.body, sample.headers)).toThrow(/No matching signature/);
    expect(standardWebhooks.describe(request, parsedBody(request))).toEqual({ event: 'test.event', deliveryId: sample.headers['webhook-id'] });
    expect(standardWebhooks.sample(secret, {}, '', now).headers['webhook-id']).not.toBe(sample.headers['webhook-id']);
  });
});
