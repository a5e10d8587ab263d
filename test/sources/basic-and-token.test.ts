import { describe, expect, test } from 'vitest';
import { basic } from '../../src/sources/providers/basic.js';
import { queryToken } from '../../src/sources/providers/query-token.js';
import { ADDRESS, expectAccepted, expectRefused, parsedBody, sampleRequest, secrets, signedRequest, verdictOf, verifyOnly, withHeaders } from './requests.js';

/** The two types that prove only who sent: a password in Authorization, a token in the address. */

const PASSWORD = 'correct-horse-battery-staple';
const BODY = JSON.stringify({ type: 'build.finished', data: { id: 1 } });

function basicRequest(credentials: string, scheme = 'Basic') {
  return signedRequest({ headers: { 'content-type': 'application/json', authorization: `${scheme} ${Buffer.from(credentials).toString('base64')}` }, body: BODY });
}

describe('basic', () => {
  test('the user name and password verify; either wrong, or no header, does not', async () => {
    expectAccepted(await verdictOf(basic, basicRequest(`intake:${PASSWORD}`), secrets(PASSWORD)));
    expectAccepted(await verdictOf(basic, basicRequest(`intake:${PASSWORD}`, 'basic'), secrets('the old password', PASSWORD)), 'sec_2');
    expectAccepted(await verdictOf(basic, basicRequest(`ci-bot:${PASSWORD}`), secrets(PASSWORD), { username: 'ci-bot' }));
    // A password may hold colons: the user name ends at the first.
    expectAccepted(await verdictOf(basic, basicRequest('intake:a:b:c-0123456789abc'), secrets('a:b:c-0123456789abc')));

    for (const credentials of [`intake:${PASSWORD}x`, `Intake:${PASSWORD}`, `ci-bot:${PASSWORD}`, `intake${PASSWORD}:`]) {
      expectRefused(await verdictOf(basic, basicRequest(credentials), secrets(PASSWORD)), 'invalid_signature', 'user name or password does not match', [PASSWORD]);
    }
    const request = basicRequest(`intake:${PASSWORD}`);
    expectRefused(basic.checkHeaders(withHeaders(request, { authorization: undefined }), {}), 'invalid_signature', 'Authorization header is missing');
    expectRefused(await verifyOnly(basic, withHeaders(request, { authorization: undefined }), secrets(PASSWORD)), 'invalid_signature', 'Authorization header is missing');
    expectRefused(basic.checkHeaders(withHeaders(request, { authorization: `Bearer ${PASSWORD}` }), {}), 'invalid_signature', 'Authorization header is not Basic', [PASSWORD]);
    expectRefused(basic.checkHeaders(basicRequest('no colon here'), {}), 'invalid_signature', 'Authorization header holds no user name and password');
  });

  test('its sample verifies with the configured user name, and describes the body’s event', async () => {
    const now = Date.now();
    const secret = basic.newSecret();
    expect(basic.checkSecret(secret)).toBeUndefined();
    const sample = basic.sample(secret, { username: 'deploys' }, '', now);
    const request = sampleRequest(sample, now);
    expectAccepted(await verdictOf(basic, request, secrets(secret), { username: 'deploys' }));
    expectRefused(await verdictOf(basic, request, secrets(secret), {}), 'invalid_signature', 'user name or password does not match');
    expect(basic.describe(request, parsedBody(request))).toEqual({ event: 'test.ping', deliveryId: undefined });
    expect(basic.checkSecret('short')).toMatch(/at least 16/);
    expect(basic.checkSecret(' padded-secret-0123456789 ')).toMatch(/spaces at either end/);
  });
});

describe('query_token', () => {
  const TOKEN = 'qt_9f8e7d6c5b4a3210fedcba';
  const at = (query: string) => signedRequest({ headers: { 'content-type': 'application/json' }, body: BODY, publicUrl: `${ADDRESS}${query}` });

  test('the token in the query verifies; another, none or two do not', async () => {
    expectAccepted(await verdictOf(queryToken, at(`?token=${TOKEN}`), secrets(TOKEN)));
    expectAccepted(await verdictOf(queryToken, at(`?x=1&key=${TOKEN}`), secrets('an-older-token-0123456789', TOKEN), { parameter: 'key' }), 'sec_2');
    expectRefused(await verdictOf(queryToken, at(`?token=${TOKEN}0`), secrets(TOKEN)), 'invalid_signature', 'token does not match the secret', [TOKEN]);
    expectRefused(await verdictOf(queryToken, at(`?token=${TOKEN}`), secrets('another-token-0123456789', 'a-third-token-0123456789')), 'invalid_signature', 'token does not match any of the 2 secrets', [TOKEN]);
    expectRefused(queryToken.checkHeaders(at(''), {}), 'invalid_signature', 'token query parameter is missing');
    expectRefused(queryToken.checkHeaders(at('?token='), {}), 'invalid_signature', 'token query parameter is missing');
    expectRefused(queryToken.checkHeaders(at(`?token=${TOKEN}`), { parameter: 'key' }), 'invalid_signature', 'key query parameter is missing');
    expectRefused(await verifyOnly(queryToken, at(`?token=${TOKEN}&token=${TOKEN}`), secrets(TOKEN)), 'invalid_signature', 'token query parameter is given more than once');
    expect(queryToken.signatureHeader({})).toBe('?token=');
  });

  test('its sample puts the token, encoded, in the query', async () => {
    const now = Date.now();
    const secret = 'a token with +/& and é-0123';
    const sample = queryToken.sample(secret, { parameter: 'auth' }, '', now);
    expect(sample.query).toBe(`?auth=${new URLSearchParams({ x: secret }).toString().slice(2)}`);
    const request = sampleRequest(sample, now);
    expectAccepted(await verdictOf(queryToken, request, secrets(secret), { parameter: 'auth' }));
    expect(queryToken.describe(request, parsedBody(request)).event).toBe('test.ping');
  });
});
