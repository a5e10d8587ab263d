import pg from 'pg';
import type { Logger } from 'pino';

const RECONNECT_DELAY_MS = 500;

/**
 * One connection per node that LISTENs for key and integration changes and calls the
 * subscribers when one arrives. A notification can be lost when the connection drops, so
 * every (re)connect also calls them: the caller forgets what it cached and reloads. The
 * key cache's poll of auth_changes stays on as the safety net either way.
 */
export class AuthChangeListener {
  private readonly subscribers = new Set<() => void>();
  private client: pg.Client | undefined;
  private retry: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly connection: pg.ClientConfig,
    private readonly channel: string,
    private readonly log: Logger | undefined,
  ) {}

  subscribe(listener: () => void): () => void {
    this.subscribers.add(listener);
    if (!this.client && !this.retry) void this.connect();
    return () => {
      this.subscribers.delete(listener);
    };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client(this.connection);
    this.client = client;
    client.on('notification', () => this.notify());
    client.on('error', (error) => this.lost(client, error));
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${this.channel}`);
      this.notify();
    } catch (error) {
      this.lost(client, error);
    }
  }

  private lost(client: pg.Client, error?: unknown): void {
    if (this.client !== client || this.stopped) return;
    this.client = undefined;
    this.log?.warn({ err: error }, 'lost the auth change notification channel; reconnecting');
    client.end().catch(() => {});
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.connect();
    }, RECONNECT_DELAY_MS);
    this.retry.unref();
  }

  private notify(): void {
    for (const subscriber of this.subscribers) subscriber();
  }
}
