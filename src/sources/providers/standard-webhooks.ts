import { createHmac } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { randomBase62 } from '../../domain/ids.js';
import { newWhsecSecret, WHSEC_PREFIX as PREFIX, whsecKey as keyOf } from '../../domain/standard-webhooks-secret.js';
import type { Provider } from '../provider.js';
import {
  decodeDigest,
  firstMatch,
  headerOf,
  invalid,
  missing,
  outsideWindow,
  refusalOf,
  sameBytes,
  stringField,
  unixSeconds,
  type Checked,
} from './shared.js';

/**
 * Standard Webhooks (Svix and every sender built on it): `webhook-signature` lists
 * space-separated `v1,<base64>`, each the HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>`
 * keyed with the base64 after the secret's `whsec_`; five minutes of tolerance either way.
 * https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md
 *
 * node:crypto rather than the `standardwebhooks` package's Webhook.verify (the tests use it
 * as the reference): it reads the clock itself instead of the request's arrival time,
 * decodes the body to a string before the HMAC (so two bodies that differ only in bytes
 * that are not UTF-8 get one signature), and its pure-JS SHA-256 costs ten times as much.
 *
 * Svix's own senders name the same three headers `svix-id`, `svix-timestamp` and
 * `svix-signature` (the `webhook-` names are its white-label option): either set is read,
 * the standard's first.
 */

const ID = 'webhook-id';
const TIMESTAMP = 'webhook-timestamp';
const HEADER = 'webhook-signature';
const TOLERANCE_SECONDS = 300;

interface Signature {
  /** What comes before the body in the signed content: `<id>.<timestamp>.` as sent. */
  signedPrefix: string;
  v1: Buffer[];
}

/** A standard header, or its Svix name. */
function standardHeader(headers: IncomingHttpHeaders, name: string): string | undefined {
  return headerOf(headers, name) ?? headerOf(headers, name.replace(/^webhook-/, 'svix-'));
}

function sentSignature(headers: IncomingHttpHeaders, now: number): Checked<Signature> {
  const value = standardHeader(headers, HEADER);
  if (value === undefined) return missing(HEADER);
  const id = standardHeader(headers, ID);
  if (id === undefined) return missing(ID);
  const timestamp = standardHeader(headers, TIMESTAMP);
  if (timestamp === undefined) return missing(TIMESTAMP);
  const seconds = unixSeconds(timestamp);
  if (seconds === undefined) return invalid(`${TIMESTAMP} header is not a Unix time in seconds`);
  // Other versions (v1a: asymmetric) are skipped, as the spec asks.
  const v1 = value
    .split(' ')
    .map((entry) => (entry.startsWith('v1,') ? decodeDigest(entry.slice(3), 'base64', 32) : undefined))
    .filter((digest): digest is Buffer => digest !== undefined);
  if (v1.length === 0) return invalid(`${HEADER} header has no v1 signature`);
  const expired = outsideWindow(seconds, now, TOLERANCE_SECONDS);
  return expired ? { ok: false, refusal: expired } : { ok: true, value: { signedPrefix: `${id}.${timestamp}.`, v1 } };
}

export const standardWebhooks: Provider = {
  type: 'standard_webhooks',
  signatureHeader: () => HEADER,
  accepts: ['json'],
  generatesSecret: true,
  newSecret: newWhsecSecret,
  checkSecret(secret) {
    const bytes = keyOf(secret).length;
    const valid = secret.startsWith(PREFIX) && /^[A-Za-z0-9+/]+={0,2}$/.test(secret.slice(PREFIX.length)) && bytes >= 24 && bytes <= 64;
    return valid ? undefined : 'A Standard Webhooks secret is whsec_ followed by the base64 of 24 to 64 bytes.';
  },

  checkHeaders: (request) => refusalOf(sentSignature(request.headers, request.now)),

  verify(request, secrets) {
    const sent = sentSignature(request.headers, request.now);
    if (!sent.ok) return sent;
    const { signedPrefix, v1 } = sent.value;
    return firstMatch(
      secrets,
      (secret) => {
        const expected = createHmac('sha256', keyOf(secret)).update(signedPrefix).update(request.rawBody).digest();
        return v1.map((digest) => sameBytes(digest, expected)).includes(true);
      },
      [signedPrefix, request.rawBody],
    );
  },

  describe: (request, body) => ({
    // `type` is Svix's convention; the spec leaves the body's shape to the sender.
    event: body.kind === 'json' ? stringField(body.value, 'type') : undefined,
    deliveryId: standardHeader(request.headers, ID),
  }),

  sample(secret, _config, _publicUrl, now) {
    const id = `msg_${randomBase62(27)}`;
    const timestamp = String(Math.floor(now / 1000));
    const data = { message: 'A test event sent from the intake panel.' };
    const body = Buffer.from(JSON.stringify({ type: 'test.event', timestamp: new Date(now).toISOString(), data }));
    const signature = createHmac('sha256', keyOf(secret)).update(`${id}.${timestamp}.`).update(body).digest('base64');
    return {
      query: '',
      headers: { 'Content-Type': 'application/json', [ID]: id, [TIMESTAMP]: timestamp, [HEADER]: `v1,${signature}` },
      body,
    };
  },
};
