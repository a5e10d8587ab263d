import { createHash, createHmac, randomBytes, randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { isFormContentType } from '../../domain/webhook-body.js';
import type { ParsedBody } from '../../domain/source-types.js';
import type { Provider, SignedRequest } from '../provider.js';
import {
  decodeDigest,
  firstMatch,
  formField,
  headerOf,
  invalid,
  issuedByProvider,
  missing,
  refusalOf,
  sameBytes,
  stringField,
  type Checked,
} from './shared.js';

/**
 * Twilio: `X-Twilio-Signature`, the base64 HMAC-SHA1 keyed with the account's auth token of
 * the full URL Twilio requested, followed for a form by each field's name and value, sorted
 * by name. A JSON body is not signed field by field: Twilio adds `bodySHA256` (the body's
 * hex SHA-256) to the URL's query and signs the URL alone, so a JSON body without it is
 * refused, as twilio-node's validateRequestWithBody refuses it: taken as the URL alone, any
 * JSON body would pass with a captured form's signature, its fields appended to the query.
 * No timestamp, no replay window.
 * https://www.twilio.com/docs/usage/webhooks/webhooks-security#validating-signatures-from-twilio
 *
 * Where the docs are silent this follows twilio-node's validateRequest: a name sent several
 * times contributes each distinct value once, values sorted; and the URL is tried without
 * and with an explicit default port, since the address set in Twilio and INTAKE_BASE_URL
 * may differ in writing it.
 */

const HEADER = 'X-Twilio-Signature';

function sentSignature(headers: IncomingHttpHeaders): Checked<Buffer> {
  const value = headerOf(headers, HEADER);
  if (value === undefined) return missing(HEADER);
  const digest = decodeDigest(value, 'base64', 20);
  return digest ? { ok: true, value: digest } : invalid(`${HEADER} header does not hold a base64 SHA-1 signature`);
}

/** The URL without its port, and with the scheme's default port when it has none (twilio-node's removePort/addPort). */
function urlVariants(url: string): string[] {
  const match = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#@]*@)?(\[[^\]]*\]|[^/?#:]*)(:\d*)?(.*)$/is.exec(url);
  if (!match) return [url];
  const [, scheme = '', user = '', host = '', port, rest = ''] = match;
  const defaultPort = scheme.toLowerCase() === 'https://' ? ':443' : ':80';
  return [scheme + user + host + rest, scheme + user + host + (port ?? defaultPort) + rest];
}

/** What is signed after the URL: each name, sorted, with each of its distinct values, sorted. */
function signedFields(fields: ReadonlyArray<[string, string]>): string {
  const values = new Map<string, Set<string>>();
  for (const [name, value] of fields) values.set(name, (values.get(name) ?? new Set()).add(value));
  return [...values.keys()]
    .sort()
    .map((name) => [...values.get(name)!].sort().map((value) => name + value).join(''))
    .join('');
}

/** What follows the URL in the signed text: a form's fields, or nothing when the URL's bodySHA256 matches the body. */
function signedText(request: SignedRequest, body: () => ParsedBody): Checked<string> {
  const bodySha256 = request.query.get('bodySHA256');
  if (bodySha256 !== null) {
    const hash = createHash('sha256').update(request.rawBody).digest('hex');
    return sameBytes(Buffer.from(bodySha256.toLowerCase()), Buffer.from(hash))
      ? { ok: true, value: '' }
      : invalid('the body does not match the bodySHA256 in the address');
  }
  // From the Content-Type, not the parsed body: a body that is not JSON gets its 401 before any 400.
  if (!isFormContentType(request.headers['content-type'])) return invalid('the address has no bodySHA256, which Twilio adds for a JSON body');
  const parsed = body();
  return parsed.kind === 'form' ? { ok: true, value: signedFields(parsed.fields) } : invalid('the body is not a form');
}

export const twilio: Provider = {
  type: 'twilio',
  signatureHeader: () => HEADER,
  accepts: ['form', 'json'],
  generatesSecret: false,
  newSecret: issuedByProvider('Twilio'),
  checkSecret: (secret) =>
    /^[0-9a-f]{32}$/.test(secret) ? undefined : 'A Twilio auth token is 32 lower-case hexadecimal digits: copy it from the Twilio Console.',

  checkHeaders: (request) => refusalOf(sentSignature(request.headers)),

  verify(request, secrets, _config, body) {
    const sent = sentSignature(request.headers);
    if (!sent.ok) return sent;
    const fields = signedText(request, body);
    if (!fields.ok) return fields;
    const candidates = urlVariants(request.publicUrl).map((url) => Buffer.from(url + fields.value));
    return firstMatch(
      secrets,
      (secret) => candidates.map((data) => sameBytes(sent.value, createHmac('sha1', secret).update(data).digest())).includes(true),
      // Either way of writing the port is the same address, and so the same signed request.
      [request.publicUrl, fields.value],
    );
  },

  describe(request, body) {
    const deliveryId = headerOf(request.headers, 'I-Twilio-Idempotency-Token');
    if (body.kind === 'json') return { event: stringField(body.value, 'type'), deliveryId };
    const of = (name: string) => formField(body.fields, name);
    const message = of('MessageStatus') ?? of('SmsStatus');
    const call = of('CallStatus');
    const event = of('EventType') ?? (message ? `message.${message}` : call ? `call.${call}` : undefined);
    return { event, deliveryId };
  },

  sample(secret, _config, publicUrl) {
    const sid = `SM${randomBytes(16).toString('hex')}`;
    const fields: Array<[string, string]> = [
      ['ApiVersion', '2010-04-01'],
      ['AccountSid', 'AC00000000000000000000000000000000'],
      ['MessageSid', sid],
      ['SmsSid', sid],
      ['From', '+15005550006'],
      ['To', '+15005550001'],
      ['MessageStatus', 'delivered'],
      ['SmsStatus', 'delivered'],
    ];
    const signature = createHmac('sha1', secret).update(Buffer.from(publicUrl + signedFields(fields))).digest('base64');
    return {
      query: '',
      headers: {
        'Content-Type': 'application/x-www-form-urlencoded',
        'User-Agent': 'TwilioProxy/1.1',
        'I-Twilio-Idempotency-Token': randomUUID(),
        [HEADER]: signature,
      },
      body: Buffer.from(new URLSearchParams(fields).toString()),
    };
  },
};
