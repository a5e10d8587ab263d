import Stripe from 'stripe';
import { describe, expect, test } from 'vitest';
import { stripe } from '../../src/sources/providers/stripe.js';
import { expectAccepted, expectRefused, flipped, MISMATCH, parsedBody, sampleRequest, secrets, signedRequest, verdictOf, verifyOnly, withHeaders } from './requests.js';

/** Stripe-Signature, against the stripe package's own signer and verifier. */

const SECRET = 'whsec_0123456789abcdefghijklmnopqrstuv';
const OTHER = 'whsec_5f2b7c0d9e8a41f3b6c2d7e9a0b1c2d3';
const NOW = Date.UTC(2025, 0, 15, 12, 0, 0);
const T = Math.floor(NOW / 1000);
const BODY = JSON.stringify({ id: 'evt_1QzX', object: 'event', type: 'invoice.paid', data: { object: { id: 'in_1' } } }, null, 2);

function header(payload: string, secret: string, timestamp = T): string {
  return Stripe.webhooks.generateTestHeaderString({ payload, secret, timestamp });
}

function stripeRequest(signature: string, body: string | Buffer = BODY, now = NOW) {
  return signedRequest({ headers: { 'content-type': 'application/json', 'stripe-signature': signature }, body, now });
}

describe('stripe', () => {
  test("a header from stripe's generateTestHeaderString verifies; a changed byte or another secret does not", async () => {
    const signature = header(BODY, SECRET);
    expectAccepted(await verdictOf(stripe, stripeRequest(signature), secrets(SECRET)));
    const hidden = [SECRET, signature.split('v1=')[1]!];
    expectRefused(await verdictOf(stripe, stripeRequest(signature, flipped(BODY)), secrets(SECRET)), 'invalid_signature', MISMATCH, hidden);
    expectRefused(await verdictOf(stripe, stripeRequest(signature), secrets(OTHER)), 'invalid_signature', MISMATCH, hidden);
  });

  test('any v1 may match any live secret: several v1 values, and two secrets', async () => {
    const mine = header(BODY, SECRET).split(',')[1]!;
    const other = header(BODY, OTHER).split(',')[1]!;
    expectAccepted(await verdictOf(stripe, stripeRequest(`t=${T},${other},${mine},v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39`), secrets(SECRET)));
    expectAccepted(await verdictOf(stripe, stripeRequest(`t=${T},${mine}`), secrets(OTHER, SECRET)), 'sec_2');
    expectRefused(await verdictOf(stripe, stripeRequest(`t=${T},${mine}`), secrets(OTHER, 'whsec_abcdefghijklmnopqrstuvwxyz')), 'invalid_signature', 'signature does not match any of the 2 secrets');
  });

  test('the timestamp is signed and must be within five minutes, refused before the body is read', async () => {
    const late = header(BODY, SECRET, T - 7 * 60);
    expectRefused(stripe.checkHeaders(stripeRequest(late), {}), 'signature_expired', 'timestamp 7 minutes old');
    expectRefused(await verifyOnly(stripe, stripeRequest(late), secrets(SECRET)), 'signature_expired', 'timestamp 7 minutes old');
    expectRefused(stripe.checkHeaders(stripeRequest(header(BODY, SECRET, T + 8 * 60)), {}), 'signature_expired', 'timestamp 8 minutes in the future');
    expect(stripe.checkHeaders(stripeRequest(header(BODY, SECRET, T - 299)), {})).toBeUndefined();
    const moved = header(BODY, SECRET).replace(`t=${T}`, `t=${T - 1}`);
    expectRefused(await verdictOf(stripe, stripeRequest(moved), secrets(SECRET)), 'invalid_signature', MISMATCH);
  });

  test('a missing or malformed header is refused with what is wrong', () => {
    const request = stripeRequest(header(BODY, SECRET));
    expectRefused(stripe.checkHeaders(withHeaders(request, { 'stripe-signature': undefined }), {}), 'invalid_signature', 'Stripe-Signature header is missing');
    const v1 = header(BODY, SECRET).split(',')[1]!;
    expectRefused(stripe.checkHeaders(stripeRequest(v1), {}), 'invalid_signature', 'Stripe-Signature header has no t= timestamp', [v1.slice(3)]);
    expectRefused(stripe.checkHeaders(stripeRequest(`t=soon,${v1}`), {}), 'invalid_signature', 'Stripe-Signature header has no t= timestamp');
    expectRefused(stripe.checkHeaders(stripeRequest(`t=${T},v0=${v1.slice(3)}`), {}), 'invalid_signature', 'Stripe-Signature header has no v1= signature');
  });

  test('describes the event type and id; the sample passes verify and stripe.webhooks.constructEvent', async () => {
    const now = Date.now();
    const sample = stripe.sample(SECRET, {}, '', now);
    const request = sampleRequest(sample, now);
    expectAccepted(await verdictOf(stripe, request, secrets(SECRET)));
    const event = Stripe.webhooks.constructEvent(sample.body, sample.headers['Stripe-Signature']!, SECRET, 300, undefined, now);
    expect(event.type).toBe('payment_intent.succeeded');
    expect(() => Stripe.webhooks.constructEvent(sample.body, sample.headers['Stripe-Signature']!, OTHER, 300, undefined, now)).toThrow(/No signatures found/);
    const described = stripe.describe(request, parsedBody(request));
    expect(described).toEqual({ event: 'payment_intent.succeeded', deliveryId: event.id });
    expect(described.deliveryId).toMatch(/^evt_test_/);
    const again = sampleRequest(stripe.sample(SECRET, {}, '', now), now);
    expect(stripe.describe(again, parsedBody(again)).deliveryId).not.toBe(event.id);
  });

  test('secrets are pasted and must look like whsec_…', () => {
    expect(stripe.generatesSecret).toBe(false);
    expect(stripe.checkSecret(SECRET)).toBeUndefined();
    const problem = stripe.checkSecret('sk_live_0123456789abcdef');
    expect(problem).toMatch(/whsec_/);
    expect(problem).not.toContain('sk_live_0123456789abcdef');
  });
});
