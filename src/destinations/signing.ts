import { createHmac } from 'node:crypto';
import { newWhsecSecret, whsecKey } from '../domain/standard-webhooks-secret.js';

/**
 * How a destination's requests are signed: the Standard Webhooks spec, so that a receiver
 * verifies with any of its libraries.
 * https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md
 * The HMAC runs over the body's bytes as stored, never over a decoded string: a body that
 * is not UTF-8 is signed as the receiver gets it.
 */

/** A new signing secret: `whsec_` and the base64 of 32 random bytes. */
export const newSigningSecret = newWhsecSecret;

/** The three Standard Webhooks headers of one request. */
export interface SignatureHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/**
 * The headers signing `body`: `webhook-signature` holds one `v1,<base64>` per secret,
 * space-separated, in the order given (newest first, so that during a rotation a receiver
 * that knows only the new secret finds its signature first).
 */
export function signatureHeaders(request: { webhookId: string; timestampSeconds: number; body: Buffer; secrets: readonly string[] }): SignatureHeaders {
  if (request.secrets.length === 0) throw new Error('a destination signs with at least one secret');
  const timestamp = String(request.timestampSeconds);
  const signedPrefix = `${request.webhookId}.${timestamp}.`;
  const signatures = request.secrets.map(
    (secret) => `v1,${createHmac('sha256', whsecKey(secret)).update(signedPrefix).update(request.body).digest('base64')}`,
  );
  return { 'webhook-id': request.webhookId, 'webhook-timestamp': timestamp, 'webhook-signature': signatures.join(' ') };
}
