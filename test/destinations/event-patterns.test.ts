import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { matchesEvent, validEventPatterns } from '../../src/domain/event-patterns.js';
import { AppError } from '../../src/errors.js';

/** Wildcard matching by dynamic programming: slow (event × pattern) but plainly right. */
function reference(pattern: string, event: string): boolean {
  // row[j]: whether the pattern's first i characters match the event's first j.
  let row = Array.from({ length: event.length + 1 }, (_, j) => j === 0);
  for (const char of pattern) {
    const next = new Array<boolean>(event.length + 1).fill(false);
    next[0] = char === '*' && row[0]!;
    for (let j = 1; j <= event.length; j++) {
      next[j] = char === '*' ? row[j]! || next[j - 1]! : row[j - 1]! && event[j - 1] === char;
    }
    row = next;
  }
  return row[event.length]!;
}

function refusal(patterns: unknown): AppError {
  try {
    validEventPatterns(patterns);
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return error as AppError;
  }
  throw new Error(`${JSON.stringify(patterns)} was accepted`);
}

describe('matchesEvent', () => {
  test.each([
    ['*', '', true],
    ['*', 'order.created', true],
    ['order.*', 'order.created', true],
    ['order.*', 'order.line.added', true],
    ['order.*', 'order.', true],
    ['order.*', 'order', false],
    ['order.*', 'orders.created', false],
    ['order.*', 'Order.created', false],
    ['*.failed', 'payment.failed', true],
    ['*.failed', 'a.b.failed', true],
    ['*.failed', 'failed', false],
    ['*.failed', 'payment.failed.again', false],
    ['order.created', 'order.created', true],
    ['order.created', 'order.created2', false],
    ['order.created', 'ORDER.CREATED', false],
    ['a*b*c', 'abc', true],
    ['a*b*c', 'a.x.b.y.c', true],
    ['a*b*c', 'acb', false],
    ['a**b', 'ab', true],
    ['*ab*ab*', 'abab', true],
    ['*ab*ab*', 'aba', false],
    ['ab*ba', 'aba', false],
    // Nothing but * is special: not the dot, not a regular expression's characters.
    ['a.b', 'axb', false],
    ['(a|b)+', '(a|b)+', true],
    ['(a|b)+', 'a', false],
    ['a?c', 'abc', false],
    ['[ab]', 'a', false],
  ])('%j against %j: %s', (pattern, event, expected) => {
    expect(matchesEvent([pattern], event)).toBe(expected);
    expect(reference(pattern, event)).toBe(expected);
  });

  test('a list matches when any of its patterns does', () => {
    expect(matchesEvent(['order.*', 'invoice.paid'], 'invoice.paid')).toBe(true);
    expect(matchesEvent(['order.*', 'invoice.paid'], 'invoice.sent')).toBe(false);
    expect(matchesEvent([], 'order.created')).toBe(false);
  });

  test('agrees with the reference on any pattern and event over a small alphabet', () => {
    const text = (chars: string[], maxLength: number) => fc.string({ unit: fc.constantFrom(...chars), maxLength });
    fc.assert(
      fc.property(text(['a', 'b', '.', '*'], 40), text(['a', 'b', '.'], 60), (pattern, event) => {
        expect(matchesEvent([pattern], event)).toBe(reference(pattern, event));
      }),
      { numRuns: 2000 },
    );
  });

  test('hostile patterns (many stars, long events) give the right answer', () => {
    // Against a backtracking matcher these take exponential time; here each piece is searched once.
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 99 }),
        fc.integer({ min: 1, max: 5000 }),
        fc.constantFrom('', 'b', '.b', 'ab'),
        (stars, length, tail) => {
          const pattern = `${'*a'.repeat(stars)}*b`.slice(0, 200);
          const event = 'a'.repeat(length) + tail;
          expect(matchesEvent([pattern], event)).toBe(reference(pattern, event));
        },
      ),
      { numRuns: 50 },
    );
    const worst = `${'*a'.repeat(99)}*b`;
    expect(matchesEvent([worst], 'a'.repeat(100_000))).toBe(false);
    expect(matchesEvent([worst], `${'a'.repeat(100_000)}b`)).toBe(true);
    expect(matchesEvent([worst], `${'a'.repeat(98)}b`)).toBe(false);
  });
});

describe('validEventPatterns', () => {
  test('returns the patterns as given', () => {
    expect(validEventPatterns(['*'])).toEqual(['*']);
    expect(validEventPatterns(['order.*', 'invoice.paid'])).toEqual(['order.*', 'invoice.paid']);
    expect(validEventPatterns(Array.from({ length: 50 }, (_, i) => `event.${i}`))).toHaveLength(50);
    expect(validEventPatterns(['x'.repeat(200), 'commande.créée', '注文.*'])).toHaveLength(3);
  });

  test.each([
    ['not a list', 'order.*'],
    ['null', null],
    ['an empty list', []],
    ['51 patterns', Array.from({ length: 51 }, (_, i) => `event.${i}`)],
    ['an empty pattern', ['order.*', '']],
    ['a pattern of 201 characters', ['x'.repeat(201)]],
    ['a number', [42]],
    ['a line feed', ['order.\n*']],
    ['a tab', ['order\t*']],
    ['a NUL', ['order\u0000']],
    ['DEL', ['order\u007f']],
    ['a C1 control', ['order\u0085']],
    ['a lone surrogate', ['order.\ud800']],
  ])('refuses %s, naming event_patterns', (_what, patterns) => {
    const error = refusal(patterns);
    expect(error.code).toBe('invalid_request');
    expect(error.details.field).toBe('event_patterns');
    expect(error.message).toMatch(/event_patterns/);
  });
});
