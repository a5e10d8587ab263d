import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { ParsedBody } from '../../domain/source-types.js';
import type { Refusal, SignedContent, SourceSecret, Verdict } from '../provider.js';

/**
 * What the provider modules share: reading headers, comparing in constant time, the replay
 * window and its words, and the refusals every provider gives in the same words.
 */

/** A header read and checked, or the refusal saying what is wrong with it; a failure is also a Verdict. */
export type Checked<T> = { ok: true; value: T } | { ok: false; refusal: Refusal };

/** A header's value by name (any case); a repeated header is joined as Node joins the others, and '' counts as missing. */
export function headerOf(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name.toLowerCase()];
  const text = Array.isArray(value) ? value.join(', ') : value;
  return text === '' ? undefined : text;
}

/** An invalid_signature refusal, as a failed check (and so a Verdict). */
export function invalid(reason: string): { ok: false; refusal: Refusal } {
  return { ok: false, refusal: { code: 'invalid_signature', reason } };
}

/** The refusal of a request without the header that carries its proof. */
export function missing(header: string): { ok: false; refusal: Refusal } {
  return invalid(`${header} header is missing`);
}

/** The refusal of a failed check, for checkHeaders: undefined when the request may go on. */
export function refusalOf(checked: Checked<unknown>): Refusal | undefined {
  return checked.ok ? undefined : checked.refusal;
}

/** Equal digests; their length is the algorithm's, public, so only the content is kept from the timing. */
export function sameBytes(sent: Buffer, expected: Buffer): boolean {
  return sent.length === expected.length && timingSafeEqual(sent, expected);
}

/** Equal strings of any length (tokens, passwords): compared as SHA-256 digests, so the secret's length does not show either. */
export function sameSecret(sent: string, secret: string): boolean {
  return timingSafeEqual(createHash('sha256').update(sent).digest(), createHash('sha256').update(secret).digest());
}

/** The first live secret `matches` accepts (with what its proof covers), or the refusal naming how many were tried. */
export function firstMatch(
  secrets: readonly SourceSecret[],
  matches: (secret: string) => boolean,
  signed: SignedContent,
  what = 'signature',
): Verdict {
  for (const secret of secrets) {
    if (matches(secret.value)) return { ok: true, secretId: secret.id, signed };
  }
  const which = secrets.length === 1 ? 'the secret' : `any of the ${secrets.length} secrets`;
  return invalid(`${what} does not match ${which}`);
}

const DIGITS = { hex: /^(?:[0-9a-f]{2})+$/i, base64: /^[A-Za-z0-9+/_-]+={0,2}$/ };

/**
 * A digest as sent, decoded strictly: Buffer.from alone skips what it cannot read, which
 * would let any text around a valid signature through. Base64 may be URL-safe.
 */
export function decodeDigest(text: string, encoding: 'hex' | 'base64', bytes: number): Buffer | undefined {
  if (!DIGITS[encoding].test(text)) return undefined;
  const digest = Buffer.from(text, encoding);
  return digest.length === bytes ? digest : undefined;
}

/** A Unix time in seconds as a header carries it; undefined when it is anything else. */
export function unixSeconds(text: string): number | undefined {
  return /^\d{1,12}$/.test(text) ? Number(text) : undefined;
}

/** signature_expired when `timestamp` (seconds) is further than `toleranceSeconds` from `now` (milliseconds), either way. */
export function outsideWindow(timestamp: number, now: number, toleranceSeconds: number): Refusal | undefined {
  const age = Math.floor(now / 1000) - timestamp;
  if (age > toleranceSeconds) return { code: 'signature_expired', reason: `timestamp ${duration(age)} old` };
  if (-age > toleranceSeconds) return { code: 'signature_expired', reason: `timestamp ${duration(-age)} in the future` };
  return undefined;
}

function duration(seconds: number): string {
  if (seconds < 120) return `${seconds} seconds`;
  if (seconds < 2 * 3600) return `${Math.floor(seconds / 60)} minutes`;
  if (seconds < 2 * 86400) return `${Math.floor(seconds / 3600)} hours`;
  return `${Math.floor(seconds / 86400)} days`;
}

/** A new secret for a sender that takes ours: 32 random bytes, URL- and header-safe. */
export function newRandomSecret(): string {
  return randomBytes(32).toString('base64url');
}

/** newSecret of a provider that issues its own secrets: settings never call it (generatesSecret is false). */
export function issuedByProvider(provider: string): () => never {
  return () => {
    throw new Error(`${provider} issues its own signing secrets: they are pasted, never generated`);
  };
}

/**
 * The check of a secret the sender takes from us but a person may paste (moving an
 * existing webhook over): long enough to resist guessing, and nothing a form would trim.
 */
export function checkOwnSecret(secret: string): string | undefined {
  if (secret.length < 16) return 'The secret must be at least 16 characters.';
  if (!/^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(secret)) {
    return 'The secret must be printable ASCII, without spaces at either end.';
  }
  return undefined;
}

/** A JSON object's field when it is a non-empty string (an event name is never empty). */
export function stringField(value: unknown, name: string): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const field = (value as Record<string, unknown>)[name];
  return typeof field === 'string' && field !== '' ? field : undefined;
}

/** A JSON object's field, whatever it holds. */
export function field(value: unknown, name: string): unknown {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>)[name] : undefined;
}

/** A form's first field of that name, when not empty. */
export function formField(fields: ReadonlyArray<[string, string]>, name: string): string | undefined {
  const value = fields.find(([key]) => key === name)?.[1];
  return value === '' ? undefined : value;
}

/** The generic types' event: the body's top-level `event`, `type` or `event_type`, the names senders use most. */
export function genericEvent(body: ParsedBody): string | undefined {
  for (const name of ['event', 'type', 'event_type']) {
    const event = body.kind === 'json' ? stringField(body.value, name) : formField(body.fields, name);
    if (event !== undefined) return event;
  }
  return undefined;
}

/** A generic sample event, the same for every type without a provider of its own. */
export function genericSampleBody(now: number): Buffer {
  const data = { message: 'A test event sent from the intake panel.', sent_at: new Date(now).toISOString() };
  return Buffer.from(JSON.stringify({ event: 'test.ping', data }));
}
