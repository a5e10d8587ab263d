import { expect } from 'vitest';
import type { ParsedBody, SourceConfig } from '../../src/domain/source-types.js';
import type { Provider, Refusal, SampleRequest, SignedRequest, SourceSecret, Verdict } from '../../src/sources/provider.js';

/** Requests as intake hands them to a provider module, and the checks every provider test makes. */

export const ADDRESS = 'https://intake.example.com/in/7f3kQ2';
export const MISMATCH = 'signature does not match the secret';

/** A request as intake builds it: header names lower-cased, the query read from the address. */
export function signedRequest(options: { headers: Record<string, string>; body: Buffer | string; publicUrl?: string; now?: number }): SignedRequest {
  const publicUrl = options.publicUrl ?? ADDRESS;
  const queryAt = publicUrl.indexOf('?');
  return {
    headers: Object.fromEntries(Object.entries(options.headers).map(([name, value]) => [name.toLowerCase(), value])),
    rawBody: Buffer.isBuffer(options.body) ? options.body : Buffer.from(options.body),
    publicUrl,
    query: new URLSearchParams(queryAt === -1 ? '' : publicUrl.slice(queryAt + 1)),
    now: options.now ?? Date.now(),
  };
}

/** A provider's sample as it arrives at `address` (its query appended). */
export function sampleRequest(sample: SampleRequest, now: number, address = ADDRESS): SignedRequest {
  return signedRequest({ headers: sample.headers, body: sample.body, publicUrl: address + sample.query, now });
}

/** The body parsed as its Content-Type says, as intake parses it. */
export function parsedBody(request: SignedRequest): ParsedBody {
  const text = request.rawBody.toString('utf8');
  const type = String(request.headers['content-type'] ?? '');
  if (type.startsWith('application/x-www-form-urlencoded')) return { kind: 'form', fields: [...new URLSearchParams(text)] };
  return { kind: 'json', value: JSON.parse(text) };
}

export function secrets(...values: string[]): SourceSecret[] {
  return values.map((value, index) => ({ id: `sec_${index + 1}`, value }));
}

/** checkHeaders then verify, as intake calls them. */
export async function verdictOf(provider: Provider, request: SignedRequest, live: SourceSecret[], config: SourceConfig = {}): Promise<Verdict> {
  const early = provider.checkHeaders(request, config);
  if (early) return { ok: false, refusal: early };
  return provider.verify(request, live, config, () => parsedBody(request));
}

/** verify alone: it must refuse on its own what checkHeaders refuses. */
export async function verifyOnly(provider: Provider, request: SignedRequest, live: SourceSecret[], config: SourceConfig = {}): Promise<Verdict> {
  return provider.verify(request, live, config, () => parsedBody(request));
}

export function expectAccepted(verdict: Verdict, secretId = 'sec_1'): void {
  expect(verdict).toEqual({ ok: true, secretId, signed: expect.any(Array) });
}

/**
 * A refusal with this code and words; its reason short, and holding none of `hidden` (the
 * secrets and signatures in play).
 */
export function expectRefused(verdict: Verdict | Refusal | undefined, code: Refusal['code'], reason: string | RegExp, hidden: string[] = []): void {
  const refusal = verdict !== undefined && 'code' in verdict ? verdict : verdict?.ok === false ? verdict.refusal : undefined;
  expect(refusal, 'a refusal').toBeDefined();
  expect(refusal!.code).toBe(code);
  if (typeof reason === 'string') expect(refusal!.reason).toBe(reason);
  else expect(refusal!.reason).toMatch(reason);
  expect(refusal!.reason.length).toBeLessThanOrEqual(200);
  for (const text of hidden) expect(refusal!.reason).not.toContain(text);
}

/** The same bytes with one changed. */
export function flipped(body: Buffer | string, at = 10): Buffer {
  const copy = Buffer.from(body);
  copy[at % copy.length]! ^= 0x01;
  return copy;
}

/** `request` with some headers replaced (undefined: removed). */
export function withHeaders(request: SignedRequest, changes: Record<string, string | undefined>): SignedRequest {
  const headers = { ...request.headers };
  for (const [name, value] of Object.entries(changes)) {
    if (value === undefined) delete headers[name.toLowerCase()];
    else headers[name.toLowerCase()] = value;
  }
  return { ...request, headers };
}
