import { Webhook } from 'standardwebhooks';
import { describe, expect, test } from 'vitest';
import { newSigningSecret, signatureHeaders } from '../../src/destinations/signing.js';
import { standardWebhooks } from '../../src/sources/providers/standard-webhooks.js';
import { expectAccepted, expectRefused, flipped, MISMATCH, secrets, signedRequest, verdictOf } from '../sources/requests.js';

/** What a destination sends is verified by the reference library, as a receiver would. */

const BODY = Buffer.from(JSON.stringify({ type: 'order.created', data: { id: 'ord_1', name: 'Zoë' } }));
const ID = '0195f3a2-7c1e-7d3a-9b1e-2f4c6a8b0d1e';

function headersFor(body: Buffer, signingSecrets: string[], now = Date.now()) {
  return signatureHeaders({ webhookId: ID, timestampSeconds: Math.floor(now / 1000), body, secrets: signingSecrets });
}

describe('newSigningSecret', () => {
  test('whsec_ and the base64 of 32 random bytes, which intake itself accepts as a Standard Webhooks secret', () => {
    const secret = newSigningSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
    expect(standardWebhooks.checkSecret(secret)).toBeUndefined();
    expect(newSigningSecret()).not.toBe(secret);
  });
});

describe('signatureHeaders', () => {
  test('the id, the Unix seconds, and one v1 signature that the standardwebhooks package verifies', () => {
    const secret = newSigningSecret();
    const now = Date.now();
    const headers = headersFor(BODY, [secret], now);
    expect(headers['webhook-id']).toBe(ID);
    expect(headers['webhook-timestamp']).toBe(String(Math.floor(now / 1000)));
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(new Webhook(secret).verify(BODY, { ...headers })).toEqual(JSON.parse(BODY.toString()));
  });

  test('during a rotation two signatures, the new first; a receiver with either secret verifies', () => {
    const [fresh, previous, stranger] = [newSigningSecret(), newSigningSecret(), newSigningSecret()];
    // One time for all three: each call reading the clock apart failed when a second ended between them.
    const now = Date.now();
    const headers = headersFor(BODY, [fresh, previous], now);
    const [first, second, ...rest] = headers['webhook-signature'].split(' ');
    expect(rest).toEqual([]);
    expect(first).toBe(headersFor(BODY, [fresh], now)['webhook-signature']);
    expect(second).toBe(headersFor(BODY, [previous], now)['webhook-signature']);
    expect(() => new Webhook(fresh).verify(BODY, { ...headers })).not.toThrow();
    expect(() => new Webhook(previous).verify(BODY, { ...headers })).not.toThrow();
    expect(() => new Webhook(stranger).verify(BODY, { ...headers })).toThrow(/No matching signature/);
  });

  test('a flipped byte, another id or another timestamp is refused', () => {
    const secret = newSigningSecret();
    const headers = headersFor(BODY, [secret]);
    expect(() => new Webhook(secret).verify(flipped(BODY), { ...headers })).toThrow(/No matching signature/);
    expect(() => new Webhook(secret).verify(BODY, { ...headers, 'webhook-id': 'msg_other' })).toThrow(/No matching signature/);
    const later = String(Number(headers['webhook-timestamp']) + 1);
    expect(() => new Webhook(secret).verify(BODY, { ...headers, 'webhook-timestamp': later })).toThrow(/No matching signature/);
  });

  test('signs the bytes, not a decoded string: bodies differing only in bytes that are not UTF-8 differ', async () => {
    // standardwebhooks decodes the body before its HMAC, so intake's own verifier (raw bytes) checks these.
    const secret = newSigningSecret();
    const [one, other] = [Buffer.from([0x7b, 0xff, 0xfe, 0x00, 0x7d]), Buffer.from([0x7b, 0xfe, 0xff, 0x00, 0x7d])];
    const headers = headersFor(one, [secret]);
    expect(headersFor(other, [secret])['webhook-signature']).not.toBe(headers['webhook-signature']);
    const request = (body: Buffer) => signedRequest({ headers: { ...headers }, body });
    expectAccepted(await verdictOf(standardWebhooks, request(one), secrets(secret)));
    expectRefused(await verdictOf(standardWebhooks, request(other), secrets(secret)), 'invalid_signature', MISMATCH);
  });

  test('at least one secret', () => {
    expect(() => headersFor(BODY, [])).toThrow(/at least one secret/);
  });
});
