import { sleep, type ServerProcess } from './processes.js';

/**
 * A consumer of GET /api/v1/webhooks/feed as the docs tell one to be: it long-polls with
 * its stored cursor, keeps the cursor only after a page is taken, and carries on against
 * whichever node answers, through a node's death and restart. Records every uuid it was
 * given, in order, and how many times.
 */
export class FeedConsumer {
  readonly seen: string[] = [];
  readonly counts = new Map<string, number>();
  /** Pages it could not read (a node down): retried with the same cursor. */
  failures = 0;
  private cursor: string | undefined;
  private stopping = false;
  private expected = 0;
  /** The read in flight: a long poll, which stop() cuts short rather than wait out. */
  private poll = new AbortController();
  private readonly done: Promise<void>;

  constructor(
    /** The nodes to read from, in turn; a function, so a restarted node can be swapped in. */
    private readonly nodes: () => ServerProcess[],
    private readonly managementKey: string,
  ) {
    this.done = this.run();
  }

  /**
   * Reads until it has seen `expected` webhooks and a page comes back empty, then resolves.
   * Not at the first empty page: on PostgreSQL the feed shows only what committed before
   * the oldest transaction still running in its database, and another transaction there
   * can hold that back for a while after the load stops. After `withinMs` it stops at the
   * next empty page whatever it has seen, for the test to say what is missing.
   */
  async stop(expected: number, withinMs = 20_000): Promise<void> {
    this.expected = expected;
    setTimeout(() => (this.expected = 0), withinMs).unref();
    this.stopping = true;
    // A waiting read would hold the stop for up to its 2 s; its page is not taken, so
    // cutting it loses nothing (the next read starts from the same cursor, without waiting).
    this.poll.abort();
    await this.done;
  }

  private async run(): Promise<void> {
    for (let turn = 0; ; turn++) {
      const nodes = this.nodes().filter((node) => node.running);
      const node = nodes[turn % Math.max(1, nodes.length)];
      if (!node) {
        await sleep(50);
        continue;
      }
      const query = new URLSearchParams({ limit: '100', wait: this.stopping && this.counts.size >= this.expected ? '0' : '2' });
      if (this.cursor !== undefined) query.set('after', this.cursor);
      let page: { data: Array<{ uuid: string }>; next_cursor: string };
      this.poll = new AbortController();
      const cut = this.poll.signal;
      try {
        const response = await fetch(`${node.baseUrl}/api/v1/webhooks/feed?${query}`, {
          headers: { 'x-api-key': this.managementKey },
          signal: AbortSignal.any([cut, AbortSignal.timeout(10_000)]),
        });
        if (response.status !== 200) throw new Error(`feed answered ${response.status}: ${await response.text()}`);
        page = (await response.json()) as typeof page;
      } catch {
        if (cut.aborted) continue;
        this.failures++;
        await sleep(50);
        continue;
      }
      for (const item of page.data) {
        this.seen.push(item.uuid);
        this.counts.set(item.uuid, (this.counts.get(item.uuid) ?? 0) + 1);
      }
      this.cursor = page.next_cursor;
      if (this.stopping && page.data.length === 0 && this.counts.size >= this.expected) return;
    }
  }
}
