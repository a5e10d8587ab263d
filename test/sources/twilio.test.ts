import { createHash, randomUUID } from 'node:crypto';
import twilioSdk from 'twilio';
import { describe, expect, test } from 'vitest';
import { twilio } from '../../src/sources/providers/twilio.js';
import { expectAccepted, expectRefused, MISMATCH, parsedBody, sampleRequest, secrets, signedRequest, verdictOf, withHeaders } from './requests.js';

/** X-Twilio-Signature, against twilio-node's getExpectedTwilioSignature and validateRequest. */

const TOKEN = '12345678901234567890123456789012';
const OTHER = 'abcdefabcdefabcdefabcdefabcdef12';
const URL = 'https://intake.example.com/in/7f3kQ2?source=sms';
const FIELDS: Array<[string, string]> = [
  ['MessageSid', 'SM1f0e8ae6ade43cb3c0ce4525424e404f'],
  ['AccountSid', 'AC00000000000000000000000000000000'],
  ['From', '+14158675310'],
  ['To', '+15558675310'],
  ['Body', 'Ahoy! Ça va? 50% off & more'],
  ['MessageStatus', 'received'],
];

function formRequest(fields: Array<[string, string]>, signature: string, publicUrl = URL) {
  const headers = { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': signature, 'i-twilio-idempotency-token': randomUUID() };
  return signedRequest({ headers, body: new URLSearchParams(fields).toString(), publicUrl });
}

/** The fields as Twilio signs them after the URL: each name and its value, sorted by name. */
function signedText(fields: Array<[string, string]>): string {
  return [...fields].sort(([a], [b]) => (a < b ? -1 : 1)).map(([name, value]) => name + value).join('');
}

function sdkSignature(url: string, params: Record<string, string | string[]>, token = TOKEN): string {
  return twilioSdk.getExpectedTwilioSignature(token, url, params);
}

describe('twilio', () => {
  test("a form signed by twilio-node verifies; a changed value, another token or a missing header do not", async () => {
    const signature = sdkSignature(URL, Object.fromEntries(FIELDS));
    const request = formRequest(FIELDS, signature);
    expectAccepted(await verdictOf(twilio, request, secrets(TOKEN)));
    expectAccepted(await verdictOf(twilio, request, secrets(OTHER, TOKEN)), 'sec_2');
    const changed = FIELDS.map(([name, value]): [string, string] => [name, name === 'Body' ? `${value}!` : value]);
    expectRefused(await verdictOf(twilio, formRequest(changed, signature), secrets(TOKEN)), 'invalid_signature', MISMATCH, [TOKEN, signature]);
    expectRefused(await verdictOf(twilio, request, secrets(OTHER)), 'invalid_signature', MISMATCH, [OTHER, signature]);
    expectRefused(await verdictOf(twilio, formRequest(FIELDS, signature, URL.replace('sms', 'voice')), secrets(TOKEN)), 'invalid_signature', MISMATCH);
    expectRefused(twilio.checkHeaders(withHeaders(request, { 'x-twilio-signature': undefined }), {}), 'invalid_signature', 'X-Twilio-Signature header is missing');
    expectRefused(twilio.checkHeaders(withHeaders(request, { 'x-twilio-signature': 'not base64!' }), {}), 'invalid_signature', 'X-Twilio-Signature header does not hold a base64 SHA-1 signature');
  });

  test('a name sent several times: each distinct value once, sorted, as twilio-node signs it', async () => {
    const fields: Array<[string, string]> = [...FIELDS, ['MediaUrl', 'https://b.example/2'], ['MediaUrl', 'https://a.example/1'], ['MediaUrl', 'https://b.example/2']];
    const signature = sdkSignature(URL, { ...Object.fromEntries(FIELDS), MediaUrl: ['https://b.example/2', 'https://a.example/1', 'https://b.example/2'] });
    expectAccepted(await verdictOf(twilio, formRequest(fields, signature), secrets(TOKEN)));
  });

  test('the address is tried without and with its default port, as validateRequest does', async () => {
    const params = Object.fromEntries(FIELDS);
    const withPort = 'https://intake.example.com:443/in/7f3kQ2?source=sms';
    expectAccepted(await verdictOf(twilio, formRequest(FIELDS, sdkSignature(withPort, params)), secrets(TOKEN)));
    expectAccepted(await verdictOf(twilio, formRequest(FIELDS, sdkSignature(URL, params), withPort), secrets(TOKEN)));
    const otherPort = 'https://intake.example.com:8443/in/7f3kQ2?source=sms';
    expectRefused(await verdictOf(twilio, formRequest(FIELDS, sdkSignature(otherPort, params)), secrets(TOKEN)), 'invalid_signature', MISMATCH);
  });

  test('a JSON body: the address carries bodySHA256 and only the address is signed', async () => {
    const body = JSON.stringify({ type: 'com.twilio.messaging.message.delivered', data: { messageSid: 'SM1' } });
    const url = `https://intake.example.com/in/7f3kQ2?bodySHA256=${twilioSdk.getExpectedBodyHash(body)}`;
    const signature = sdkSignature(url, {});
    expect(twilioSdk.validateRequestWithBody(TOKEN, signature, url, body)).toBe(true);
    const request = signedRequest({ headers: { 'content-type': 'application/json', 'x-twilio-signature': signature }, body, publicUrl: url });
    expectAccepted(await verdictOf(twilio, request, secrets(TOKEN)));
    expect(twilio.describe(request, parsedBody(request)).event).toBe('com.twilio.messaging.message.delivered');
    const other = JSON.stringify({ type: 'com.twilio.messaging.message.failed' });
    expectRefused(await verdictOf(twilio, { ...request, rawBody: Buffer.from(other) }, secrets(TOKEN)), 'invalid_signature', 'the body does not match the bodySHA256 in the address');
    expect(createHash('sha256').update(body).digest('hex')).toBe(twilioSdk.getExpectedBodyHash(body));
  });

  test('a JSON body without bodySHA256 in the address is refused, as validateRequestWithBody refuses it', async () => {
    // A form's fields appended to an address with a query: the address alone matches the form's signature.
    const signature = sdkSignature(URL, Object.fromEntries(FIELDS));
    const forged = URL + signedText(FIELDS);
    const body = JSON.stringify({ type: 'com.twilio.messaging.message.delivered' });
    expect(twilioSdk.validateRequest(TOKEN, signature, forged, {})).toBe(true);
    expect(twilioSdk.validateRequestWithBody(TOKEN, signature, forged, body)).toBe(false);
    const request = signedRequest({ headers: { 'content-type': 'application/json', 'x-twilio-signature': signature }, body, publicUrl: forged });
    expectRefused(await verdictOf(twilio, request, secrets(TOKEN)), 'invalid_signature', 'the address has no bodySHA256, which Twilio adds for a JSON body', [TOKEN, signature]);
    // Refused before the body is parsed: a body that is not JSON gets its 401, not a 400.
    expectRefused(await verdictOf(twilio, { ...request, rawBody: Buffer.from('not json') }, secrets(TOKEN)), 'invalid_signature', /bodySHA256/);
  });

  test('describes EventType, else message.<status> or call.<status>; the id is I-Twilio-Idempotency-Token', () => {
    const cases: Array<[Array<[string, string]>, string | undefined]> = [
      [FIELDS, 'message.received'],
      [[['SmsStatus', 'sent']], 'message.sent'],
      [[['CallSid', 'CA1'], ['CallStatus', 'completed']], 'call.completed'],
      [[['EventType', 'onMessageAdded'], ['MessageStatus', 'sent']], 'onMessageAdded'],
      [[['Digits', '1']], undefined],
    ];
    for (const [fields, event] of cases) {
      const request = formRequest(fields, 'x');
      expect(twilio.describe(request, parsedBody(request))).toEqual({ event, deliveryId: request.headers['i-twilio-idempotency-token'] });
    }
  });

  test('its sample is a signed SMS status callback that twilio-node validateRequest accepts for the address given', async () => {
    const now = Date.now();
    const address = 'https://intake.example.com/in/7f3kQ2';
    const sample = twilio.sample(TOKEN, {}, address, now);
    const request = sampleRequest(sample, now, address);
    expectAccepted(await verdictOf(twilio, request, secrets(TOKEN)));
    const params = Object.fromEntries(new URLSearchParams(sample.body.toString()));
    expect(twilioSdk.validateRequest(TOKEN, sample.headers['X-Twilio-Signature']!, address, params)).toBe(true);
    expect(twilioSdk.validateRequest(OTHER, sample.headers['X-Twilio-Signature']!, address, params)).toBe(false);
    expect(twilio.describe(request, parsedBody(request))).toEqual({ event: 'message.delivered', deliveryId: sample.headers['I-Twilio-Idempotency-Token'] });
    expect(twilio.sample(TOKEN, {}, address, now).headers['I-Twilio-Idempotency-Token']).not.toBe(sample.headers['I-Twilio-Idempotency-Token']);
    expect(twilio.checkSecret(TOKEN)).toBeUndefined();
    expect(twilio.checkSecret('SK0123')).toMatch(/32 lower-case hexadecimal/);
  });
});
