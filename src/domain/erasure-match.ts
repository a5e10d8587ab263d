import { pathsMatcher } from './redaction.js';
import type { PayloadFormat } from './webhook-body.js';

/**
 * Where a person's value is in a stored webhook, for erasure by data subject (issue 40,
 * src/services/erasures.ts). Case is ignored: `Jane@Example.com` is the same person as
 * `jane@example.com`, and erasing one webhook too many is the side to err on.
 *
 * Without paths, the value is looked for anywhere in the body and in the kept headers' values,
 * as text: as the UTF-8 bytes say, as JSON escapes it (`\/`, `\"`), and as a form encodes it
 * (`jane%40example.com`). A JSON body holding `\u` escapes is also read as JSON, so a value
 * written with escapes is found too. With paths (the redaction's syntax, from the body's
 * root), only the values at those paths count, and a value must equal the one searched.
 *
 * The value's keyed hashes (src/domain/value-hash.ts) are found as the value is: what an
 * integration that redacts by hashing stored in its place.
 */

export const MIN_VALUE_CHARS = 3;
export const MAX_VALUE_CHARS = 1000;

/** Where the value was found: `body`, `header <name>`, or the path of the value. */
export type MatchPlace = string;

export class ValueMatcher {
  private readonly value: string;
  /** The value's texts as a body may hold them, lower case. */
  private readonly needles: string[];
  /** The value and its hashes, lower case: what a value at a path, or a header, may equal or hold. */
  private readonly forms: string[];
  private readonly atPath: ((path: readonly string[]) => boolean) | null;

  constructor(value: string, paths: readonly string[] = [], hashes: readonly string[] = []) {
    this.value = value.toLowerCase();
    this.forms = [this.value, ...hashes.map((hash) => hash.toLowerCase())];
    const escaped = JSON.stringify(this.value).slice(1, -1);
    const formEncoded = encodeURIComponent(this.value).toLowerCase();
    const hashesInForms = hashes.map((hash) => encodeURIComponent(hash).toLowerCase());
    this.needles = [...new Set([this.value, escaped, escaped.replaceAll('/', '\\/'), formEncoded, formEncoded.replaceAll('%20', '+'), ...this.forms, ...hashesInForms])];
    this.atPath = paths.length > 0 ? pathsMatcher(paths) : null;
  }

  /** Where the value is in this webhook, or null when it is nowhere. Never throws: a body that is not what its format says is searched as text. */
  find(raw: Buffer, format: PayloadFormat, headers: Readonly<Record<string, string>>): MatchPlace | null {
    const text = raw.toString('utf8');
    if (this.atPath !== null) return this.findAtPaths(text, format);
    const lower = text.toLowerCase();
    if (this.needles.some((needle) => lower.includes(needle))) return 'body';
    if (format !== 'form' && text.includes('\\u') && this.inJsonStrings(text)) return 'body';
    for (const [name, value] of Object.entries(headers)) {
      const lower = value.toLowerCase();
      if (this.forms.some((form) => lower.includes(form))) return `header ${name.toLowerCase()}`;
    }
    return null;
  }

  private findAtPaths(text: string, format: PayloadFormat): MatchPlace | null {
    const atPath = this.atPath!;
    if (format === 'form') {
      for (const [name, value] of new URLSearchParams(text)) {
        if (atPath([name]) && this.forms.includes(value.toLowerCase())) return name;
      }
      return null;
    }
    const document = parseOrUndefined(text);
    if (document === undefined) return null;
    // Iterative: a deeply nested body cannot exhaust the stack.
    const stack: Array<{ value: unknown; path: string[] }> = [{ value: document, path: [] }];
    while (stack.length > 0) {
      const { value, path } = stack.pop()!;
      if (atPath(path) && this.holds(value)) return path.join('.');
      if (typeof value === 'object' && value !== null) {
        for (const [key, child] of Object.entries(value)) stack.push({ value: child, path: [...path, key] });
      }
    }
    return null;
  }

  /** A scalar equal to the value, or a container with one anywhere inside. */
  private holds(value: unknown): boolean {
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return this.forms.includes(String(value).toLowerCase());
    if (typeof value !== 'object' || value === null) return false;
    return Object.values(value).some((child) => this.holds(child));
  }

  /** Whether a string of the JSON document (a key or a value), once its escapes are read, holds the value. */
  private inJsonStrings(text: string): boolean {
    const document = parseOrUndefined(text);
    if (document === undefined) return false;
    const stack: unknown[] = [document];
    while (stack.length > 0) {
      const value = stack.pop();
      if (typeof value === 'string') {
        if (value.toLowerCase().includes(this.value)) return true;
      } else if (typeof value === 'object' && value !== null) {
        for (const [key, child] of Object.entries(value)) {
          if (key.toLowerCase().includes(this.value)) return true;
          stack.push(child);
        }
      }
    }
    return false;
  }
}

/**
 * The value as people may see it once it is no longer held: its first character and what
 * follows an `@` (the domain says little about the person), the rest as dots.
 */
export function maskValue(value: string): string {
  const at = value.lastIndexOf('@');
  if (at > 0) return `${value[0]}•••${value.slice(at)}`;
  if (value.length <= 4) return '•'.repeat(value.length);
  return `${value.slice(0, 2)}•••${value.slice(-2)}`;
}

function parseOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
