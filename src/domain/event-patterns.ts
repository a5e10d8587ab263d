import { AppError } from '../errors.js';
import { UNSTORABLE_TEXT } from './text.js';

/**
 * A destination's event patterns (`order.*`, `*.failed`, `*`): which webhooks it receives,
 * by event name. `*` matches any run of characters, dots included; everything else is
 * literal and case-sensitive. The patterns are a tenant's choice, so matching never builds
 * a regular expression from them (a pattern like `*a*a*a*…b` makes a backtracking engine
 * take exponential time): see `matchesPattern`.
 */

const MAX_PATTERNS = 50;
const MAX_PATTERN_LENGTH = 200;
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const FIELD = 'event_patterns';

/** The patterns of a request body, checked; throws `invalid_request` naming `event_patterns`. */
export function validEventPatterns(patterns: unknown): string[] {
  if (!Array.isArray(patterns) || patterns.length === 0) {
    throw invalid('event_patterns must be a non-empty list of patterns such as ["order.*"]; ["*"] receives every event.');
  }
  if (patterns.length > MAX_PATTERNS) throw invalid(`event_patterns holds at most ${MAX_PATTERNS} patterns.`);
  return patterns.map((pattern: unknown, index) => {
    if (typeof pattern !== 'string' || pattern.length === 0 || pattern.length > MAX_PATTERN_LENGTH) {
      throw invalid(`event_patterns[${index}] must be text of 1 to ${MAX_PATTERN_LENGTH} characters.`);
    }
    if (CONTROL.test(pattern) || UNSTORABLE_TEXT.test(pattern)) {
      throw invalid(`event_patterns[${index}] holds a control character or text that cannot be stored.`);
    }
    return pattern;
  });
}

/** Whether `event` matches any of the patterns. */
export function matchesEvent(patterns: readonly string[], event: string): boolean {
  return patterns.some((pattern) => matchesPattern(pattern, event));
}

/**
 * Glob matching with `*` alone, without backtracking: the literal pieces between stars
 * must appear in order, the first at the start and the last at the end. Taking each middle
 * piece at its leftmost place is always right (a later place only leaves less room for
 * the rest), so each piece is searched once, from where the previous one ended. The work is
 * bounded by the event's length times the pattern's, both short, whatever the pattern.
 */
function matchesPattern(pattern: string, event: string): boolean {
  const pieces = piecesOf(pattern);
  const first = pieces[0]!;
  if (pieces.length === 1) return pattern === event;
  const last = pieces[pieces.length - 1]!;
  if (first.length + last.length > event.length || !event.startsWith(first) || !event.endsWith(last)) return false;
  let from = first.length;
  const end = event.length - last.length;
  for (let i = 1; i < pieces.length - 1; i++) {
    const piece = pieces[i]!;
    if (piece === '') continue;
    const at = event.indexOf(piece, from);
    if (at === -1 || at + piece.length > end) return false;
    from = at + piece.length;
  }
  return true;
}

/**
 * Each pattern split once: the outbox matches every webhook of a company against every
 * pattern of its destinations inside the commit, so the split is not paid per webhook.
 * Bounded like every cache here: emptied when full.
 */
const PIECES = new Map<string, readonly string[]>();
const MAX_CACHED_PATTERNS = 10_000;

function piecesOf(pattern: string): readonly string[] {
  let pieces = PIECES.get(pattern);
  if (pieces === undefined) {
    pieces = pattern.split('*');
    if (PIECES.size >= MAX_CACHED_PATTERNS) PIECES.clear();
    PIECES.set(pattern, pieces);
  }
  return pieces;
}

function invalid(message: string): AppError {
  return new AppError('invalid_request', message, { field: FIELD });
}
