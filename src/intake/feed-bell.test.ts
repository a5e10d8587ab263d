import { describe, expect, test } from 'vitest';
import type { CommitOutcome, PendingWebhook } from '../store/store.js';
import { FeedBell } from './feed-bell.js';

/** What ringCommitted reads of a commit: each webhook's company and whether it was accepted. */
function commit(...webhooks: Array<[companyId: string, kind: CommitOutcome['kind']]>): [PendingWebhook[], CommitOutcome[]] {
  return [
    webhooks.map(([companyId]) => ({ companyId }) as PendingWebhook),
    webhooks.map(([, kind]) => (kind === 'conflict' ? { kind } : { kind, uuid: 'u', receivedAt: 0 })),
  ];
}

const NEVER = new AbortController().signal;

describe('FeedBell', () => {
  test("a commit wakes every listener of the companies it accepted webhooks of, and no one else's", async () => {
    const bell = new FeedBell();
    const [a1, a2, b, c] = [bell.listen('cmp_a'), bell.listen('cmp_a'), bell.listen('cmp_b'), bell.listen('cmp_c')];
    const woken = Promise.all([a1.wait(60_000, NEVER), a2.wait(60_000, NEVER)]);
    bell.ringCommitted(...commit(['cmp_a', 'accepted'], ['cmp_b', 'replayed'], ['cmp_c', 'conflict'], ['cmp_a', 'accepted']));
    await woken;
    expect([a1.take(), a2.take(), b.take(), c.take()]).toEqual([true, true, false, false]);
    for (const listener of [a1, a2, b, c]) listener.close();
  });

  test('rings coalesce: many between two reads are one, and one during a read ends the next wait at once', async () => {
    const bell = new FeedBell();
    const listener = bell.listen('cmp_a');
    for (let i = 0; i < 100; i++) bell.ringCommitted(...commit(['cmp_a', 'accepted']));
    expect(listener.take()).toBe(true);
    expect(listener.take()).toBe(false);
    bell.ringCommitted(...commit(['cmp_a', 'accepted']));
    await listener.wait(60_000, NEVER);
    expect(listener.take()).toBe(true);
    listener.close();
  });

  test('a wait ends at its time or when its signal aborts, unrung', async () => {
    const bell = new FeedBell();
    const listener = bell.listen('cmp_a');
    await listener.wait(1, NEVER);
    const abort = new AbortController();
    const waiting = listener.wait(60_000, abort.signal);
    abort.abort();
    await waiting;
    expect(listener.take()).toBe(false);
    listener.close();
  });

  test('a closed listener hears nothing; the others of its company still do', () => {
    const bell = new FeedBell();
    const first = bell.listen('cmp_a');
    const second = bell.listen('cmp_a');
    first.close();
    bell.ringCommitted(...commit(['cmp_a', 'accepted']));
    expect([first.take(), second.take()]).toEqual([false, true]);
    second.close();
    const later = bell.listen('cmp_a');
    bell.ringCommitted(...commit(['cmp_a', 'accepted']));
    expect(later.take()).toBe(true);
    later.close();
  });
});
