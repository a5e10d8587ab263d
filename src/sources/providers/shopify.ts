import { createHmac, randomInt, randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { Provider } from '../provider.js';
import { decodeDigest, firstMatch, headerOf, invalid, issuedByProvider, missing, refusalOf, sameBytes, type Checked } from './shared.js';

/**
 * Shopify: `X-Shopify-Hmac-Sha256`, the base64 HMAC-SHA256 of the body keyed with the app's
 * client secret; no timestamp is signed, so no replay window.
 * https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook
 * The topic, and the id retries repeat: `X-Shopify-Webhook-Id`, which Shopify's own app
 * library calls the idempotency key (`X-Shopify-Event-Id` is the event's, the same in every
 * subscription it reaches):
 * https://shopify.dev/docs/apps/build/webhooks/delivery-structure#headers
 */

const HEADER = 'X-Shopify-Hmac-Sha256';

function sentSignature(headers: IncomingHttpHeaders): Checked<Buffer> {
  const value = headerOf(headers, HEADER);
  if (value === undefined) return missing(HEADER);
  const digest = decodeDigest(value, 'base64', 32);
  return digest ? { ok: true, value: digest } : invalid(`${HEADER} header does not hold a base64 SHA-256 signature`);
}

export const shopify: Provider = {
  type: 'shopify',
  signatureHeader: () => HEADER,
  accepts: ['json'],
  generatesSecret: false,
  newSecret: issuedByProvider('Shopify'),
  // Client secrets have been 32 hex digits, lately with a `shpss_` prefix; the format is not
  // documented, so only what cannot be one is refused.
  checkSecret: (secret) =>
    /^[\x21-\x7e]{16,}$/.test(secret)
      ? undefined
      : "A Shopify client secret is at least 16 characters without spaces: copy it from the app's settings.",

  checkHeaders: (request) => refusalOf(sentSignature(request.headers)),

  verify(request, secrets) {
    const sent = sentSignature(request.headers);
    if (!sent.ok) return sent;
    return firstMatch(secrets, (secret) => sameBytes(sent.value, createHmac('sha256', secret).update(request.rawBody).digest()), [request.rawBody]);
  },

  describe: (request) => ({
    event: headerOf(request.headers, 'X-Shopify-Topic'),
    deliveryId: headerOf(request.headers, 'X-Shopify-Webhook-Id'),
  }),

  sample(secret, _config, _publicUrl, now) {
    const at = new Date(now).toISOString();
    const id = randomInt(1e12, 9e12);
    const order = {
      id,
      admin_graphql_api_id: `gid://shopify/Order/${id}`,
      name: '#1001',
      email: 'jon@example.com',
      created_at: at,
      currency: 'USD',
      total_price: '19.99',
      financial_status: 'paid',
      line_items: [{ id: randomInt(1e12, 9e12), title: 'Test product', quantity: 1, price: '19.99' }],
      test: true,
    };
    const body = Buffer.from(JSON.stringify(order));
    return {
      query: '',
      headers: {
        'Content-Type': 'application/json',
        'X-Shopify-Topic': 'orders/create',
        'X-Shopify-Shop-Domain': 'intake-test.myshopify.com',
        'X-Shopify-API-Version': '2025-07',
        'X-Shopify-Webhook-Id': randomUUID(),
        'X-Shopify-Event-Id': randomUUID(),
        'X-Shopify-Triggered-At': at,
        [HEADER]: createHmac('sha256', secret).update(body).digest('base64'),
      },
      body,
    };
  },
};
