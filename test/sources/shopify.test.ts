import { createHmac, randomUUID } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { shopify } from '../../src/sources/providers/shopify.js';
import { expectAccepted, expectRefused, flipped, MISMATCH, parsedBody, sampleRequest, secrets, signedRequest, verdictOf, withHeaders } from './requests.js';

/**
 * X-Shopify-Hmac-Sha256. Shopify publishes no worked example with values, nor a verifier
 * outside its app framework: the signer is Node's crypto as Shopify's docs show it
 * (createHmac('sha256', secret).update(rawBody, 'utf8').digest('base64')).
 */

const SECRET = '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';
const BODY = JSON.stringify({ id: 820982911946154500, email: 'jon@example.com', total_price: '199.65', note: 'Größe M ✓' });

function shopifyHmac(body: string | Buffer, secret = SECRET): string {
  return createHmac('sha256', secret).update(body).digest('base64');
}

function shopifyRequest(hmac: string, body: string | Buffer = BODY) {
  const headers = { 'content-type': 'application/json', 'x-shopify-topic': 'orders/create', 'x-shopify-webhook-id': randomUUID(), 'x-shopify-hmac-sha256': hmac };
  return signedRequest({ headers, body });
}

describe('shopify', () => {
  test('the base64 HMAC of the body verifies; a changed byte, another secret, a missing or malformed header do not', async () => {
    const hmac = shopifyHmac(BODY);
    const request = shopifyRequest(hmac);
    expectAccepted(await verdictOf(shopify, request, secrets(SECRET)));
    expectAccepted(await verdictOf(shopify, request, secrets('shpss_the_secret_before_rotation', SECRET)), 'sec_2');
    expectRefused(await verdictOf(shopify, shopifyRequest(hmac, flipped(BODY)), secrets(SECRET)), 'invalid_signature', MISMATCH, [SECRET, hmac]);
    expectRefused(await verdictOf(shopify, request, secrets('shpss_ffffffffffffffffffffffffffffffff')), 'invalid_signature', MISMATCH, [SECRET, hmac]);
    expectRefused(shopify.checkHeaders(withHeaders(request, { 'x-shopify-hmac-sha256': undefined }), {}), 'invalid_signature', 'X-Shopify-Hmac-Sha256 header is missing');
    // Hex instead of base64 is a common mistake of senders that imitate Shopify.
    const hex = createHmac('sha256', SECRET).update(BODY).digest('hex');
    expectRefused(shopify.checkHeaders(shopifyRequest(hex), {}), 'invalid_signature', 'X-Shopify-Hmac-Sha256 header does not hold a base64 SHA-256 signature', [hex]);
  });

  test('describes X-Shopify-Topic and X-Shopify-Webhook-Id; the sample verifies with a fresh id', async () => {
    const request = shopifyRequest(shopifyHmac(BODY));
    expect(shopify.describe(request, parsedBody(request))).toEqual({ event: 'orders/create', deliveryId: request.headers['x-shopify-webhook-id'] });

    const now = Date.now();
    const sample = shopify.sample(SECRET, {}, '', now);
    const received = sampleRequest(sample, now);
    expectAccepted(await verdictOf(shopify, received, secrets(SECRET)));
    expect(sample.headers['X-Shopify-Hmac-Sha256']).toBe(shopifyHmac(sample.body));
    expect(shopify.describe(received, parsedBody(received))).toEqual({ event: 'orders/create', deliveryId: sample.headers['X-Shopify-Webhook-Id'] });
    expect(shopify.sample(SECRET, {}, '', now).headers['X-Shopify-Webhook-Id']).not.toBe(sample.headers['X-Shopify-Webhook-Id']);
  });
});
