import { createHmac, randomBytes } from 'node:crypto';
import { sign as octokitSign } from '@octokit/webhooks-methods';
import fc from 'fast-check';
import { Webhook } from 'standardwebhooks';
import Stripe from 'stripe';
import twilioSdk from 'twilio';
import { describe, expect, test } from 'vitest';
import { SOURCE_TYPES, type ProviderType } from '../../src/domain/source-types.js';
import type { SignedRequest } from '../../src/sources/provider.js';
import { PROVIDERS, providerFor } from '../../src/sources/providers/index.js';
import { ADDRESS, expectAccepted, expectRefused, MISMATCH, parsedBody, sampleRequest, secrets, signedRequest, verdictOf } from './requests.js';

/**
 * Every provider type at once: the registry, each one's sample against its own verify, and
 * properties over any body and secret: what the providers' own SDKs sign verifies, and no
 * single changed byte does.
 */

/** A secret in the format of each provider that issues its own. */
const PASTED: Partial<Record<ProviderType, string>> = {
  stripe: 'whsec_0123456789abcdefghijklmnopqrstuv',
  shopify: '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',
  slack: '8f742231b10e8888abcd99e1f2a385a5',
  twilio: '0123456789abcdef0123456789abcdef',
};

function secretFor(type: ProviderType): string {
  const provider = providerFor(type);
  return provider.generatesSecret ? provider.newSecret() : PASTED[type]!;
}

const TYPES = SOURCE_TYPES.filter((type): type is ProviderType => type !== 'api_key');

describe('the providers', () => {
  test('every provider type has its module, under its own type', () => {
    expect(Object.keys(PROVIDERS).sort()).toEqual([...TYPES].sort());
    for (const type of TYPES) expect(providerFor(type).type).toBe(type);
    expect(TYPES.filter((type) => providerFor(type).generatesSecret).sort()).toEqual(['basic', 'github', 'gitlab', 'hmac', 'query_token', 'standard_webhooks']);
  });

  test.each(TYPES)('%s: new or pasted secrets pass checkSecret; a bad one is refused without being repeated', (type) => {
    const provider = providerFor(type);
    const secret = secretFor(type);
    expect(provider.checkSecret(secret)).toBeUndefined();
    if (provider.generatesSecret) expect(provider.newSecret()).not.toBe(secret);
    else expect(() => provider.newSecret()).toThrow(/pasted/);
    const bad = 'bad secret ☃';
    const problem = provider.checkSecret(bad);
    expect(problem).toMatch(/\.$/);
    expect(problem).not.toContain(bad);
  });

  test.each(TYPES)('%s: the sample passes checkHeaders and verify, describes an event, and fails with another secret', async (type) => {
    const provider = providerFor(type);
    const secret = secretFor(type);
    const now = Date.now();
    const sample = provider.sample(secret, {}, ADDRESS, now);
    const request = sampleRequest(sample, now);
    expect(provider.checkHeaders(request, {})).toBeUndefined();
    expectAccepted(await verdictOf(provider, request, secrets(secret)));
    const described = provider.describe(request, parsedBody(request));
    expect(described.event).toEqual(expect.any(String));
    expect(described.answer).toBeUndefined();
    const other = type === 'twilio' ? 'fedcba9876543210fedcba9876543210' : type === 'standard_webhooks' ? provider.newSecret() : `${secret}-other`;
    expectRefused(await verdictOf(provider, request, secrets(other)), 'invalid_signature', /does not match/, [secret, other]);
    const body = parsedBody(request);
    const kinds = provider.accepts as readonly string[];
    expect(kinds).toContain(body.kind);
  });
});

/** Signers written from each provider's documentation, over bytes (the SDKs sign strings only). */
const BYTE_SIGNERS: Array<[ProviderType, (secret: string, body: Buffer, seconds: number) => Record<string, string>]> = [
  ['github', (secret, body) => ({ 'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}` })],
  ['shopify', (secret, body) => ({ 'x-shopify-hmac-sha256': createHmac('sha256', secret).update(body).digest('base64') })],
  ['hmac', (secret, body) => ({ 'x-signature': createHmac('sha256', secret).update(body).digest('hex') })],
  [
    'slack',
    (secret, body, seconds) => ({
      'x-slack-request-timestamp': String(seconds),
      'x-slack-signature': `v0=${createHmac('sha256', secret).update(Buffer.concat([Buffer.from(`v0:${seconds}:`), body])).digest('hex')}`,
    }),
  ],
  ['stripe', (secret, body, seconds) => ({ 'stripe-signature': `t=${seconds},v1=${createHmac('sha256', secret).update(`${seconds}.`).update(body).digest('hex')}` })],
  [
    'standard_webhooks',
    (secret, body, seconds) => ({
      'webhook-id': 'msg_1',
      'webhook-timestamp': String(seconds),
      'webhook-signature': `v1,${createHmac('sha256', Buffer.from(secret.slice(6), 'base64')).update(`msg_1.${seconds}.`).update(body).digest('base64')}`,
    }),
  ],
];

const secretArbitrary: Record<string, fc.Arbitrary<string>> = {
  github: fc.string({ minLength: 1, maxLength: 64, unit: 'grapheme' }),
  shopify: fc.string({ minLength: 1, maxLength: 64, unit: 'grapheme' }),
  hmac: fc.string({ minLength: 1, maxLength: 64, unit: 'grapheme' }),
  slack: fc.string({ minLength: 32, maxLength: 32, unit: fc.constantFrom(...'0123456789abcdefghijklmnopqrstuvwxyz') }),
  stripe: fc.string({ minLength: 16, maxLength: 40, unit: fc.constantFrom(...'0123456789abcdefABCDEF') }).map((rest) => `whsec_${rest}`),
  standard_webhooks: fc.uint8Array({ minLength: 24, maxLength: 64 }).map((key) => `whsec_${Buffer.from(key).toString('base64')}`),
};

describe('properties', () => {
  test.each(BYTE_SIGNERS)('%s: any body and any secret: signed verifies, and any single changed byte is refused', async (type, signer) => {
    const provider = providerFor(type);
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 1, maxLength: 512 }), secretArbitrary[type]!, fc.nat(), fc.integer({ min: 1, max: 255 }), async (bytes, secret, at, change) => {
        const now = Date.now();
        const body = Buffer.from(bytes);
        const request = signedRequest({ headers: signer(secret, body, Math.floor(now / 1000)), body, now });
        expectAccepted(await provider.verify(request, secrets(secret), {}, () => ({ kind: 'json', value: null })));
        const changed = Buffer.from(body);
        changed[at % changed.length]! ^= change;
        const verdict = await provider.verify({ ...request, rawBody: changed }, secrets(secret), {}, () => ({ kind: 'json', value: null }));
        expectRefused(verdict, 'invalid_signature', MISMATCH);
      }),
      { numRuns: 150 },
    );
  });

  test("any text and any secret, signed by the providers' own SDKs, verifies", async () => {
    const text = fc.string({ minLength: 1, maxLength: 400, unit: 'grapheme' });
    const now = Date.now();
    const seconds = Math.floor(now / 1000);
    const accepted = async (type: ProviderType, request: SignedRequest, secret: string) =>
      expectAccepted(await verdictOf(providerFor(type), request, secrets(secret)));

    await fc.assert(
      fc.asyncProperty(text, secretArbitrary.github!, async (payload, secret) => {
        await accepted('github', signedRequest({ headers: { 'x-hub-signature-256': await octokitSign(secret, payload) }, body: payload, now }), secret);
      }),
    );
    await fc.assert(
      fc.asyncProperty(text, secretArbitrary.stripe!, async (payload, secret) => {
        const header = Stripe.webhooks.generateTestHeaderString({ payload, secret, timestamp: seconds });
        await accepted('stripe', signedRequest({ headers: { 'stripe-signature': header }, body: payload, now }), secret);
      }),
    );
    await fc.assert(
      fc.asyncProperty(text, secretArbitrary.standard_webhooks!, async (payload, secret) => {
        const signature = new Webhook(secret).sign('msg_2', new Date(seconds * 1000), payload);
        const headers = { 'webhook-id': 'msg_2', 'webhook-timestamp': String(seconds), 'webhook-signature': signature };
        await accepted('standard_webhooks', signedRequest({ headers, body: payload, now }), secret);
      }),
    );
  });

  test('any form Twilio could send, signed by twilio-node, verifies', async () => {
    const token = randomBytes(16).toString('hex');
    const field = fc.tuple(fc.string({ maxLength: 12, unit: 'grapheme' }), fc.string({ maxLength: 40, unit: 'grapheme' }));
    await fc.assert(
      fc.asyncProperty(fc.array(field, { maxLength: 12 }), fc.constantFrom('', '?a=1&b=%20', ':443', ':8080/x?y'), async (fields, suffix) => {
        // The object a body parser would give twilio-node; no prototype, so a field may be called `valueOf`.
        const params: Record<string, string | string[]> = Object.create(null);
        for (const [name, value] of fields) {
          const seen = params[name];
          params[name] = seen === undefined ? value : [...(Array.isArray(seen) ? seen : [seen]), value];
        }
        const url = suffix.startsWith(':') ? `https://intake.example.com${suffix}` : `${ADDRESS}${suffix}`;
        const headers = { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': twilioSdk.getExpectedTwilioSignature(token, url, params) };
        const request = signedRequest({ headers, body: new URLSearchParams(fields).toString(), publicUrl: url });
        expectAccepted(await verdictOf(providerFor('twilio'), request, secrets(token)));
      }),
    );
  });
});
