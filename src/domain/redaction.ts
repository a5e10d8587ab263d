/**
 * Redaction before storing (issue 40): the values an integration names are replaced by
 * REDACTED before the webhook is stored, in the body and in the kept headers. The body
 * stays the bytes it came as everywhere else: only each named value's own text is replaced
 * (a JSON value by the JSON string "[redacted]", a form field's value by `%5Bredacted%5D`),
 * so what is stored is the body as received, less those values.
 *
 * A path names values of the body from its root, as the sender sent it:
 * - `data.customer.email`: keys one under the other; a segment that is a number names that
 *   index of an array too (`data.items.0.sku`);
 * - `*` is any one key or index (`data.card.*`: every field of the card);
 * - `$..phone`, `$..address.line1`: the rest of the path at any depth.
 * The whole value at a path goes, whatever it holds (an object, an array, a number).
 * In a form body, a path of one segment (or `$..name`) names a field.
 *
 * In `hash` mode a value is replaced by its keyed hash instead (src/domain/value-hash.ts):
 * a JSON string by the hash of its text, any other JSON value by the hash of its JSON text,
 * a form field's value by the hash of its decoded text. Equal values give equal hashes, so
 * they stay comparable and an erasure still finds them.
 */
import type { ValueHasher } from './value-hash.js';

export const REDACTED = '[redacted]';
const REDACTED_JSON = JSON.stringify(REDACTED);
const REDACTED_FORM = encodeURIComponent(REDACTED);

/** What an integration redacts, as stored and as the API shows it. */
export interface Redaction {
  paths: string[];
  /** Header names, lower case. */
  headers: string[];
  /** `redact`: each value becomes "[redacted]"; `hash`: its keyed hash. Absent in what was stored before hashing existed: `redact`. */
  mode?: RedactionMode;
}

export type RedactionMode = 'redact' | 'hash';

export const MAX_REDACTION_PATHS = 20;
export const MAX_REDACTION_HEADERS = 20;
const MAX_PATH_CHARS = 200;
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,100}$/;

interface Pattern {
  /** `$..`: the segments may start at any depth. */
  anywhere: boolean;
  segments: string[];
}

/** The redaction as given, checked: the problem in words for the API, or the redaction. */
export function checkRedaction(input: { paths?: unknown; headers?: unknown; mode?: unknown }): Redaction | string {
  const paths = input.paths ?? [];
  const headers = input.headers ?? [];
  const mode = input.mode ?? 'redact';
  if (mode !== 'redact' && mode !== 'hash') return 'mode is redact (each value becomes "[redacted]") or hash (its keyed hash).';
  if (!Array.isArray(paths) || !paths.every((p) => typeof p === 'string')) return 'paths must be a list of strings.';
  if (!Array.isArray(headers) || !headers.every((h) => typeof h === 'string')) return 'headers must be a list of strings.';
  if (paths.length > MAX_REDACTION_PATHS) return `At most ${MAX_REDACTION_PATHS} paths.`;
  if (headers.length > MAX_REDACTION_HEADERS) return `At most ${MAX_REDACTION_HEADERS} header names.`;
  for (const path of paths) {
    const problem = pathProblem(path);
    if (problem) return problem;
  }
  const badHeader = headers.find((name) => !HEADER_NAME.test(name));
  if (badHeader !== undefined) return `${JSON.stringify(badHeader.slice(0, 100))} is not a header name.`;
  return { paths: [...new Set(paths)], headers: [...new Set(headers.map((name) => name.toLowerCase()))], mode };
}

/** What is wrong with a path, in words; null when it can be read (erasure's paths are read the same way). */
export function pathProblem(path: string): string | null {
  if (path.length === 0 || path.length > MAX_PATH_CHARS) return `A path is 1 to ${MAX_PATH_CHARS} characters.`;
  const pattern = patternOf(path);
  if (pattern.segments.length === 0 || pattern.segments.some((segment) => segment === '' || segment.includes('$'))) {
    return `${JSON.stringify(path)} is not a path: keys separated by dots (data.customer.email), * for any one key, $.. at its start for any depth.`;
  }
  return null;
}

/** Whether a value's path (its keys from the body's root) is named by one of `paths` (each checked with pathProblem). */
export function pathsMatcher(paths: readonly string[]): (path: readonly string[]) => boolean {
  const patterns = paths.map(patternOf);
  return (path) => patterns.some((pattern) => matchesPattern(pattern, path));
}

function patternOf(path: string): Pattern {
  const anywhere = path.startsWith('$..');
  return { anywhere, segments: (anywhere ? path.slice(3) : path).split('.') };
}

/** A compiled redaction: applied to each webhook of its integration before it is stored. */
export class Redactor {
  private readonly patterns: Pattern[];
  private readonly headers: ReadonlySet<string>;
  /**
   * Keys that must appear, quoted, in a body for any path to match; null when a path ends
   * in `*` or a number. A body without any of them is stored as it is, unscanned.
   */
  private readonly lastKeys: string[] | null;
  private readonly lastKeySet: ReadonlySet<string> | null;
  private readonly lastKeyLengths: ReadonlySet<number> | null;

  /** Set in hash mode: what a value is replaced by. */
  private readonly hasher: ValueHasher | null;

  constructor(redaction: Redaction, hasher?: ValueHasher) {
    if (redaction.mode === 'hash' && hasher === undefined) throw new Error('a hashing redaction needs its company’s hasher');
    this.hasher = redaction.mode === 'hash' ? hasher! : null;
    this.patterns = redaction.paths.map(patternOf);
    this.headers = new Set(redaction.headers);
    const last = this.patterns.map((pattern) => pattern.segments[pattern.segments.length - 1]!);
    // `*` is any key, and a number may be an array's index, which is not written in the body.
    this.lastKeys = last.some((key) => key === '*' || /^\d+$/.test(key)) ? null : last;
    this.lastKeySet = this.lastKeys && new Set(this.lastKeys);
    this.lastKeyLengths = this.lastKeys && new Set(this.lastKeys.map((key) => key.length));
  }

  /** The headers as kept, with the named ones' values replaced. */
  headersOf(headers: Record<string, string>): Record<string, string> {
    if (this.headers.size === 0) return headers;
    let redacted: Record<string, string> | undefined;
    for (const name of Object.keys(headers)) {
      if (this.headers.has(name.toLowerCase())) (redacted ??= { ...headers })[name] = this.hasher ? this.hasher.hash(headers[name]!) : REDACTED;
    }
    return redacted ?? headers;
  }

  /** The body with the named values replaced: the same Buffer when nothing matched. An envelope is JSON. */
  body(raw: Buffer, format: 'envelope' | 'json' | 'form'): Buffer {
    return this.redactedBody(raw, format).body;
  }

  /**
   * As body(), with how many values the paths named (outermost only): what a preview tells.
   * A value that was "[redacted]" already counts, though its text stays the same.
   */
  redactedBody(raw: Buffer, format: 'envelope' | 'json' | 'form'): { body: Buffer; values: number } {
    if (this.patterns.length === 0 || raw.length === 0) return { body: raw, values: 0 };
    const text = raw.toString('utf8');
    const form = format === 'form';
    if (this.lastKeys !== null && !mayName(text, form, this.lastKeys)) return { body: raw, values: 0 };
    const redacted = form ? this.form(text) : this.json(text);
    return { body: redacted.text === text ? raw : Buffer.from(redacted.text, 'utf8'), values: redacted.values };
  }

  private matches(path: readonly string[]): boolean {
    // Most values' last key is none of the paths' last keys: told at once, without a pattern.
    if (this.lastKeySet !== null) {
      const last = path[path.length - 1]!;
      // Its length first: a number compared, where the set would hash a string just sliced.
      if (!this.lastKeyLengths!.has(last.length) || !this.lastKeySet.has(last)) return false;
    }
    for (const pattern of this.patterns) if (matchesPattern(pattern, path)) return true;
    return false;
  }

  /** Whether a value below `path` may match: a container that none can reach is skipped whole, unread. */
  private mayMatchBelow(path: readonly string[]): boolean {
    return this.patterns.some((pattern) => pattern.anywhere || (pattern.segments.length > path.length && prefixMatches(pattern.segments, path)));
  }

  /** Each matching value's text replaced; the text as it is when it is not JSON (nothing is lost, nothing thrown). */
  private json(text: string): { text: string; values: number } {
    const spans = matchingSpans(
      text,
      (path) => this.matches(path),
      (path) => this.mayMatchBelow(path),
    );
    if (spans === null || spans.length === 0) return { text, values: 0 };
    let out = '';
    let at = 0;
    for (const [start, end] of spans) {
      out += text.slice(at, start) + this.jsonReplacement(text.slice(start, end));
      at = end;
    }
    return { text: out + text.slice(at), values: spans.length };
  }

  /** What a matching JSON value's text becomes: "[redacted]", or the hash of the string it holds (of its JSON text when it is no string). */
  private jsonReplacement(span: string): string {
    if (this.hasher === null) return REDACTED_JSON;
    let value = span;
    if (span.startsWith('"')) {
      try {
        value = JSON.parse(span) as string;
      } catch {
        // Not a string the scanner could close: its text is hashed as it stands.
      }
    }
    return JSON.stringify(this.hasher.hash(value));
  }

  private form(text: string): { text: string; values: number } {
    let values = 0;
    const redacted = text
      .split('&')
      .map((pair) => {
        const equals = pair.indexOf('=');
        const rawName = equals === -1 ? pair : pair.slice(0, equals);
        // Decoded as URLSearchParams decodes it (a stray % kept as it is), which is how it is read back.
        const name = new URLSearchParams(`${rawName}=`).keys().next().value ?? '';
        if (!this.matches([name])) return pair;
        values++;
        if (this.hasher === null) return `${rawName}=${REDACTED_FORM}`;
        const value = new URLSearchParams(`v=${equals === -1 ? '' : pair.slice(equals + 1)}`).get('v') ?? '';
        return `${rawName}=${encodeURIComponent(this.hasher.hash(value))}`;
      })
      .join('&');
    return { text: redacted, values };
  }
}

/**
 * False only when no key of `keys` can be in the body: a key written with escapes (JSON's
 * `\u0065`, a form's `%65`) may spell any of them, so such a body is always scanned.
 */
function mayName(text: string, form: boolean, keys: readonly string[]): boolean {
  if (!form) return text.includes('\\') || keys.some((key) => text.includes(`"${key}"`));
  return text.includes('%') || text.includes('+') || keys.some((key) => text.includes(key));
}

function prefixMatches(segments: readonly string[], path: readonly string[]): boolean {
  for (let i = 0; i < path.length; i++) if (segments[i] !== '*' && segments[i] !== path[i]) return false;
  return true;
}

function matchesPattern(pattern: Pattern, path: readonly string[]): boolean {
  const { segments } = pattern;
  if (pattern.anywhere ? path.length < segments.length : path.length !== segments.length) return false;
  const offset = path.length - segments.length;
  for (let i = 0; i < segments.length; i++) {
    if (segments[i] !== '*' && segments[i] !== path[offset + i]) return false;
  }
  return true;
}

/**
 * The [start, end) of each value of the JSON text whose path matches, in order, outermost
 * only; null when the text is not JSON. Iterative, so a deeply nested body cannot exhaust
 * the stack.
 */
function matchingSpans(
  text: string,
  matches: (path: readonly string[]) => boolean,
  mayMatchBelow: (path: readonly string[]) => boolean = () => true,
): Array<[number, number]> | null {
  const spans: Array<[number, number]> = [];
  // The keys down to the value being read, and each open container's kind and next index.
  const path: string[] = [];
  const containers: Array<{ array: boolean; index: number }> = [];
  let i = skipSpace(text, 0);
  // A value is expected at i: the root's, then after each key and each array comma.
  let expectValue = true;
  while (true) {
    if (expectValue) {
      const matched = containers.length > 0 && matches(path);
      if (matched || ((text[i] === '{' || text[i] === '[') && !mayMatchBelow(path))) {
        // Replaced whole, or holding nothing any path can reach: read past it in one step.
        const end = skipValue(text, i);
        if (end === -1) return null;
        if (matched) spans.push([i, end]);
        i = skipSpace(text, end);
      } else if (text[i] === '{' || text[i] === '[') {
        const array = text[i] === '[';
        i = skipSpace(text, i + 1);
        if (text[i] === (array ? ']' : '}')) {
          i = skipSpace(text, i + 1);
        } else {
          containers.push({ array, index: 0 });
          if (array) {
            path.push('0');
            continue;
          }
          const key = readKey(text, i);
          if (key === null) return null;
          path.push(key);
          i = afterKey;
          continue;
        }
      } else {
        const end = skipValue(text, i);
        if (end === -1) return null;
        i = skipSpace(text, end);
      }
      expectValue = false;
    }
    // After a value: a comma and the next member, or the container's end.
    const open = containers[containers.length - 1];
    if (open === undefined) return i === text.length ? spans : null;
    if (text[i] === ',') {
      i = skipSpace(text, i + 1);
      path.pop();
      if (open.array) {
        path.push(String(++open.index));
      } else {
        const key = readKey(text, i);
        if (key === null) return null;
        path.push(key);
        i = afterKey;
      }
      expectValue = true;
    } else if (text[i] === (open.array ? ']' : '}')) {
      containers.pop();
      path.pop();
      i = skipSpace(text, i + 1);
    } else {
      return null;
    }
  }
}

/**
 * Where the value of the key readKey read last starts (past its colon): a variable rather
 * than an object returned, since a body has a key for every few bytes and each object would
 * be garbage at once.
 */
let afterKey = 0;

/** A member's key at i, or null; its value starts at afterKey. */
function readKey(text: string, i: number): string | null {
  if (text[i] !== '"') return null;
  const end = skipString(text, i);
  if (end === -1) return null;
  let name = text.slice(i + 1, end - 1);
  if (name.includes('\\')) {
    try {
      name = JSON.parse(text.slice(i, end)) as string;
    } catch {
      return null;
    }
  }
  const colon = skipSpace(text, end);
  if (text[colon] !== ':') return null;
  afterKey = skipSpace(text, colon + 1);
  return name;
}

/** The end of the value starting at i (a whole object or array, counted), or -1. */
function skipValue(text: string, i: number): number {
  const first = text[i];
  if (first === '"') return skipString(text, i);
  if (first !== '{' && first !== '[') {
    let end = i;
    while (end < text.length && !',]} \t\n\r'.includes(text[end]!)) end++;
    return end === i ? -1 : end;
  }
  // From one bracket or quote to the next: what lies between them cannot open or close anything.
  let depth = 0;
  STRUCTURE.lastIndex = i;
  for (let found = STRUCTURE.exec(text); found !== null; found = STRUCTURE.exec(text)) {
    const at = found.index;
    const c = text[at];
    if (c === '"') {
      const end = skipString(text, at);
      if (end === -1) return -1;
      STRUCTURE.lastIndex = end;
    } else if (c === '{' || c === '[') {
      depth++;
    } else {
      depth--;
      if (depth === 0) return at + 1;
    }
  }
  return -1;
}

const STRUCTURE = /[{}[\]"]/g;

/** The end of the string starting at i (past its closing quote), or -1. */
function skipString(text: string, i: number): number {
  let at = i + 1;
  while (true) {
    const quote = text.indexOf('"', at);
    if (quote === -1) return -1;
    // Escaped when an odd number of backslashes stands right before it.
    let backslashes = 0;
    while (text[quote - 1 - backslashes] === '\\') backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    at = quote + 1;
  }
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && (text[i] === ' ' || text[i] === '\n' || text[i] === '\r' || text[i] === '\t')) i++;
  return i;
}

const compiled = new WeakMap<Redaction, Redactor>();

/**
 * The redactor of an integration's redaction, made once per redaction object (a cached route
 * keeps its own; an integration belongs to one company, so its hasher never changes).
 * `hasherOf` gives the integration's company's hasher, asked only in hash mode.
 */
export function redactorOf(redaction: Redaction | null, hasherOf: () => ValueHasher): Redactor | null {
  if (redaction === null) return null;
  let redactor = compiled.get(redaction);
  if (redactor === undefined) compiled.set(redaction, (redactor = new Redactor(redaction, redaction.mode === 'hash' ? hasherOf() : undefined)));
  return redactor;
}
