import type { Logger } from 'pino';
import type { KeyUsage, Store } from '../store/store.js';

const FLUSH_INTERVAL_MS = 1000;

/**
 * Keys' "last used" time and IP, written behind: the hot path only updates a map, and one
 * small transaction a second writes the newest use of each key.
 */
export class LastUsedTracker {
  private pending = new Map<string, KeyUsage>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.flush(), FLUSH_INTERVAL_MS);
    this.timer.unref();
  }

  record(usage: KeyUsage): void {
    this.pending.set(usage.keyId, usage);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const usages = [...this.pending.values()];
    this.pending.clear();
    try {
      await this.store.recordKeyUsage(usages);
    } catch (error) {
      this.log.warn({ err: error }, 'could not record key usage; will retry with the next use');
    }
  }
}
