import { createHmac } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { randomBase62 } from '../../domain/ids.js';
import type { Provider } from '../provider.js';
import {
  decodeDigest,
  firstMatch,
  headerOf,
  invalid,
  issuedByProvider,
  missing,
  outsideWindow,
  refusalOf,
  sameBytes,
  stringField,
  unixSeconds,
  type Checked,
} from './shared.js';

/**
 * Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…][,v0=…]`, each v1 the
 * HMAC-SHA256 of `<t>.<body>` keyed with the endpoint's signing secret (`whsec_…`, used as
 * it is); several v1 while a secret is being rolled. Five minutes of tolerance, as
 * Stripe's libraries default to; a timestamp that far ahead is refused too.
 * https://docs.stripe.com/webhooks#verify-manually
 */

const HEADER = 'Stripe-Signature';
const TOLERANCE_SECONDS = 300;

interface Signature {
  /** `t` as sent: it is what was signed. */
  timestamp: string;
  v1: Buffer[];
}

function sentSignature(headers: IncomingHttpHeaders, now: number): Checked<Signature> {
  const value = headerOf(headers, HEADER);
  if (value === undefined) return missing(HEADER);
  const pairs = value.split(',').map((item) => item.split('=', 2).map((part) => part.trim()));
  const timestamp = pairs.find(([key]) => key === 't')?.[1] ?? '';
  const seconds = unixSeconds(timestamp);
  if (seconds === undefined) return invalid(`${HEADER} header has no t= timestamp`);
  // A v1 that is not a SHA-256 digest cannot match; the others may.
  const v1 = pairs
    .filter(([key]) => key === 'v1')
    .map(([, text = '']) => decodeDigest(text, 'hex', 32))
    .filter((digest): digest is Buffer => digest !== undefined);
  if (v1.length === 0) return invalid(`${HEADER} header has no v1= signature`);
  const expired = outsideWindow(seconds, now, TOLERANCE_SECONDS);
  return expired ? { ok: false, refusal: expired } : { ok: true, value: { timestamp, v1 } };
}

export const stripe: Provider = {
  type: 'stripe',
  signatureHeader: () => HEADER,
  accepts: ['json'],
  generatesSecret: false,
  newSecret: issuedByProvider('Stripe'),
  checkSecret: (secret) =>
    /^whsec_[A-Za-z0-9]{16,}$/.test(secret)
      ? undefined
      : "A Stripe signing secret starts with whsec_: copy it from the endpoint's page in Stripe.",

  checkHeaders: (request) => refusalOf(sentSignature(request.headers, request.now)),

  verify(request, secrets) {
    const sent = sentSignature(request.headers, request.now);
    if (!sent.ok) return sent;
    const signedPrefix = `${sent.value.timestamp}.`;
    return firstMatch(
      secrets,
      (secret) => {
        const expected = createHmac('sha256', secret).update(signedPrefix).update(request.rawBody).digest();
        // Every v1 is compared, matched or not, so the timing does not say which one matched.
        return sent.value.v1.map((digest) => sameBytes(digest, expected)).includes(true);
      },
      [signedPrefix, request.rawBody],
    );
  },

  describe(_request, body) {
    const event = body.kind === 'json' ? body.value : undefined;
    return { event: stringField(event, 'type'), deliveryId: stringField(event, 'id') };
  },

  sample(secret, _config, _publicUrl, now) {
    const created = Math.floor(now / 1000);
    const paymentIntent = {
      id: `pi_${randomBase62(24)}`,
      object: 'payment_intent',
      amount: 2000,
      amount_received: 2000,
      currency: 'usd',
      status: 'succeeded',
      livemode: false,
    };
    const event = {
      id: `evt_test_${randomBase62(24)}`,
      object: 'event',
      api_version: '2024-06-20',
      created,
      data: { object: paymentIntent },
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type: 'payment_intent.succeeded',
    };
    const body = Buffer.from(JSON.stringify(event, null, 2));
    const v1 = createHmac('sha256', secret).update(`${created}.`).update(body).digest('hex');
    return {
      query: '',
      headers: {
        'Content-Type': 'application/json; charset=utf-8',
        'User-Agent': 'Stripe/1.0 (+https://stripe.com/docs/webhooks)',
        [HEADER]: `t=${created},v1=${v1}`,
      },
      body,
    };
  },
};
