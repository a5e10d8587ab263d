import { createHmac } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { slack } from '../../src/sources/providers/slack.js';
import { expectAccepted, expectRefused, flipped, MISMATCH, parsedBody, sampleRequest, secrets, signedRequest, verdictOf, verifyOnly, withHeaders } from './requests.js';

/** X-Slack-Signature, against the example Slack documents with its values. */

// https://api.slack.com/authentication/verifying-requests-from-slack#a_recipe_for_security
const DOC_SECRET = '8f742231b10e8888abcd99yyyzzz85a5';
const DOC_TIMESTAMP = 1531420618;
const DOC_BODY =
  'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar' +
  '&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=' +
  '&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN' +
  '&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c';
const DOC_SIGNATURE = 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503';

function slackRequest(options: { body?: string | Buffer; signature?: string; timestamp?: number; now?: number; type?: string } = {}) {
  const timestamp = options.timestamp ?? DOC_TIMESTAMP;
  return signedRequest({
    headers: {
      'content-type': options.type ?? 'application/x-www-form-urlencoded',
      'x-slack-request-timestamp': String(timestamp),
      'x-slack-signature': options.signature ?? DOC_SIGNATURE,
    },
    body: options.body ?? DOC_BODY,
    now: options.now ?? (timestamp + 60) * 1000,
  });
}

function signed(body: string, secret = DOC_SECRET, timestamp = DOC_TIMESTAMP): string {
  return `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
}

describe('slack', () => {
  test("Slack's documented example verifies, and describes as a slash command", async () => {
    const request = slackRequest();
    expectAccepted(await verdictOf(slack, request, secrets(DOC_SECRET)));
    expect(slack.describe(request, parsedBody(request))).toEqual({ event: 'slash_command', deliveryId: undefined });
  });

  test('a changed byte, another secret, a stale timestamp or a missing header are refused', async () => {
    const hidden = [DOC_SECRET, DOC_SIGNATURE.slice(3)];
    expectRefused(await verdictOf(slack, slackRequest({ body: flipped(DOC_BODY) }), secrets(DOC_SECRET)), 'invalid_signature', MISMATCH, hidden);
    expectRefused(await verdictOf(slack, slackRequest(), secrets('8f742231b10e8888abcd99yyyzzz85a6')), 'invalid_signature', MISMATCH, hidden);
    // The timestamp is signed: moving it into the window breaks the signature.
    expectRefused(await verdictOf(slack, slackRequest({ timestamp: DOC_TIMESTAMP + 1 }), secrets(DOC_SECRET)), 'invalid_signature', MISMATCH);

    const stale = slackRequest({ now: (DOC_TIMESTAMP + 7 * 60 + 5) * 1000 });
    expectRefused(slack.checkHeaders(stale, {}), 'signature_expired', 'timestamp 7 minutes old');
    expectRefused(await verifyOnly(slack, stale, secrets(DOC_SECRET)), 'signature_expired', 'timestamp 7 minutes old');
    expectRefused(slack.checkHeaders(slackRequest({ now: (DOC_TIMESTAMP - 6 * 60) * 1000 }), {}), 'signature_expired', 'timestamp 6 minutes in the future');

    const request = slackRequest();
    expectRefused(slack.checkHeaders(withHeaders(request, { 'x-slack-signature': undefined }), {}), 'invalid_signature', 'X-Slack-Signature header is missing');
    expectRefused(slack.checkHeaders(withHeaders(request, { 'x-slack-request-timestamp': undefined }), {}), 'invalid_signature', 'X-Slack-Request-Timestamp header is missing');
    expectRefused(slack.checkHeaders(withHeaders(request, { 'x-slack-request-timestamp': '2018-07-12' }), {}), 'invalid_signature', 'X-Slack-Request-Timestamp header is not a Unix time in seconds');
    expectRefused(slack.checkHeaders(withHeaders(request, { 'x-slack-signature': DOC_SIGNATURE.slice(3) }), {}), 'invalid_signature', /^X-Slack-Signature header is not v0=/, hidden);
  });

  test('answers url_verification with its challenge; describes event callbacks and interactive payloads', async () => {
    const challenge = JSON.stringify({ token: 'Jhj5dZrVaK7ZwHHjRyZWjbDl', challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P', type: 'url_verification' });
    const verification = slackRequest({ body: challenge, signature: signed(challenge), type: 'application/json' });
    expectAccepted(await verdictOf(slack, verification, secrets(DOC_SECRET)));
    expect(slack.describe(verification, parsedBody(verification)).answer).toEqual({ challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P' });

    const callback = JSON.stringify({ type: 'event_callback', event_id: 'Ev08MFMKH6', event: { type: 'reaction_added', reaction: 'thumbsup' } });
    const event = slackRequest({ body: callback, signature: signed(callback), type: 'application/json' });
    expect(slack.describe(event, parsedBody(event))).toEqual({ event: 'reaction_added', deliveryId: 'Ev08MFMKH6' });

    const interactive = `payload=${encodeURIComponent(JSON.stringify({ type: 'block_actions', trigger_id: '1.2.3', actions: [] }))}`;
    const action = slackRequest({ body: interactive, signature: signed(interactive) });
    expectAccepted(await verdictOf(slack, action, secrets(DOC_SECRET)));
    expect(slack.describe(action, parsedBody(action))).toEqual({ event: 'block_actions', deliveryId: undefined });
  });

  test('its sample is an app_mention event callback that verifies, with a fresh event_id', async () => {
    const secret = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
    const now = Date.now();
    const sample = slack.sample(secret, {}, '', now);
    const request = sampleRequest(sample, now);
    expectAccepted(await verdictOf(slack, request, secrets(secret)));
    const described = slack.describe(request, parsedBody(request));
    expect(described.event).toBe('app_mention');
    expect(described.deliveryId).toMatch(/^Ev[0-9A-Z]+$/);
    const again = sampleRequest(slack.sample(secret, {}, '', now), now);
    expect(slack.describe(again, parsedBody(again)).deliveryId).not.toBe(described.deliveryId);
    expect(slack.checkSecret(secret)).toBeUndefined();
    expect(slack.checkSecret(`${secret} `)).toMatch(/32 letters and digits/);
  });
});
