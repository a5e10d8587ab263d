import { createHmac, randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { HmacConfig, SourceConfig } from '../../domain/source-types.js';
import type { Provider } from '../provider.js';
import {
  checkOwnSecret,
  decodeDigest,
  firstMatch,
  genericEvent,
  genericSampleBody,
  headerOf,
  invalid,
  missing,
  newRandomSecret,
  outsideWindow,
  refusalOf,
  sameBytes,
  unixSeconds,
  type Checked,
} from './shared.js';

/**
 * Any sender that signs with an HMAC of its own design, described by HmacConfig: which
 * header, which hash and encoding, what comes before the signature, and what is signed
 * (the body, or a template such as `{timestamp}.{body}` with a timestamp header and its
 * window). The scheme GitHub, Stripe and most others follow; RFC 2104 for the HMAC itself.
 * https://www.rfc-editor.org/rfc/rfc2104
 *
 * No delivery id: senders name it in too many ways, and intake already takes
 * `Idempotency-Key` (or `webhook-id`) from any request whose provider names none.
 */

export const DEFAULT_HMAC_CONFIG: Readonly<HmacConfig> = Object.freeze({
  header: 'X-Signature',
  algorithm: 'sha256',
  encoding: 'hex',
  prefix: '',
  timestampHeader: null,
  toleranceSeconds: 300,
  signedPayload: '{body}',
});

const DIGEST_BYTES = { sha1: 20, sha256: 32, sha512: 64 } as const;
const DIGEST_NAMES = { sha1: 'SHA-1', sha256: 'SHA-256', sha512: 'SHA-512' } as const;
/** RFC 7230's token: what a header name may be made of. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/;
const HEADER_NAME_RULE = 'a header name (letters, digits, "-"…) of at most 100 characters';

/** Undefined when `config` is usable; otherwise a sentence saying what is wrong. */
export function checkHmacConfig(config: HmacConfig): string | undefined {
  if (!HEADER_NAME.test(config.header)) return `The signature header must be ${HEADER_NAME_RULE}.`;
  if (!Object.hasOwn(DIGEST_BYTES, config.algorithm)) return 'The algorithm must be sha1, sha256 or sha512.';
  if (config.encoding !== 'hex' && config.encoding !== 'base64') return 'The encoding must be hex or base64.';
  // Printable ASCII, not starting with a space: HTTP trims the header's value.
  if (!/^(?:[\x21-\x7e][\x20-\x7e]{0,49})?$/.test(config.prefix)) {
    return 'The prefix must be at most 50 printable ASCII characters, not starting with a space.';
  }
  if (config.timestampHeader !== null && !HEADER_NAME.test(config.timestampHeader)) {
    return `The timestamp header must be ${HEADER_NAME_RULE}.`;
  }
  if (!Number.isInteger(config.toleranceSeconds) || config.toleranceSeconds < 1 || config.toleranceSeconds > 86400) {
    return 'The tolerance must be a whole number of seconds from 1 to 86400.';
  }
  if (config.signedPayload.length > 200 || config.signedPayload.split('{body}').length !== 2) {
    return 'The signed payload must contain {body} exactly once, in at most 200 characters.';
  }
  const timestamps = config.signedPayload.split('{timestamp}').length - 1;
  if (config.timestampHeader === null && timestamps > 0) return 'The signed payload may contain {timestamp} only with a timestamp header.';
  // A timestamp that is not signed can be changed at will: its window would protect nothing.
  if (config.timestampHeader !== null && timestamps !== 1) {
    return 'With a timestamp header, the signed payload must contain {timestamp} once.';
  }
  return undefined;
}

function settings(config: SourceConfig): HmacConfig {
  return config.hmac ?? DEFAULT_HMAC_CONFIG;
}

interface Signature {
  digest: Buffer;
  /** The signed payload's text around the body, the timestamp put in as sent. */
  before: string;
  after: string;
}

function sentSignature(headers: IncomingHttpHeaders, config: HmacConfig, now: number): Checked<Signature> {
  const value = headerOf(headers, config.header);
  if (value === undefined) return missing(config.header);
  if (!value.startsWith(config.prefix)) return invalid(`${config.header} header does not start with ${config.prefix}`);
  const digest = decodeDigest(value.slice(config.prefix.length), config.encoding, DIGEST_BYTES[config.algorithm]);
  if (!digest) return invalid(`${config.header} header does not hold a ${config.encoding} ${DIGEST_NAMES[config.algorithm]} signature`);
  let timestamp = '';
  if (config.timestampHeader !== null) {
    timestamp = headerOf(headers, config.timestampHeader) ?? '';
    if (timestamp === '') return missing(config.timestampHeader);
    const seconds = unixSeconds(timestamp);
    if (seconds === undefined) return invalid(`${config.timestampHeader} header is not a Unix time in seconds`);
    const expired = outsideWindow(seconds, now, config.toleranceSeconds);
    if (expired) return { ok: false, refusal: expired };
  }
  const [before = '', after = ''] = config.signedPayload.replaceAll('{timestamp}', timestamp).split('{body}');
  return { ok: true, value: { digest, before, after } };
}

/** The HMAC of the signed payload: the template's text around the body's own bytes, never the body as a string. */
function hmacOf(config: HmacConfig, secret: string, before: string, body: Buffer, after: string): Buffer {
  return createHmac(config.algorithm, secret).update(before).update(body).update(after).digest();
}

export const hmac: Provider = {
  type: 'hmac',
  signatureHeader: (config) => settings(config).header,
  accepts: ['json', 'form'],
  generatesSecret: true,
  newSecret: newRandomSecret,
  checkSecret: checkOwnSecret,

  checkHeaders: (request, config) => refusalOf(sentSignature(request.headers, settings(config), request.now)),

  verify(request, secrets, config) {
    const hmacConfig = settings(config);
    const sent = sentSignature(request.headers, hmacConfig, request.now);
    if (!sent.ok) return sent;
    const { digest, before, after } = sent.value;
    return firstMatch(secrets, (secret) => sameBytes(digest, hmacOf(hmacConfig, secret, before, request.rawBody, after)), [before, request.rawBody, after]);
  },

  describe: (_request, body) => ({ event: genericEvent(body), deliveryId: undefined }),

  sample(secret, config, _publicUrl, now) {
    const hmacConfig = settings(config);
    const body = genericSampleBody(now);
    const timestamp = String(Math.floor(now / 1000));
    const [before = '', after = ''] = hmacConfig.signedPayload.replaceAll('{timestamp}', timestamp).split('{body}');
    const headers: Record<string, string> = { 'Content-Type': 'application/json', 'Idempotency-Key': randomUUID() };
    if (hmacConfig.timestampHeader !== null) headers[hmacConfig.timestampHeader] = timestamp;
    headers[hmacConfig.header] = hmacConfig.prefix + hmacOf(hmacConfig, secret, before, body, after).toString(hmacConfig.encoding);
    return { query: '', headers, body };
  },
};
