import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { readJson, writePrivate } from '../credentials.js';

/**
 * Where `intake listen` resumes: the feed cursor past the last webhook it forwarded, in a
 * file per company and target (the intake, the local URLs and the filters), so two
 * listeners with different targets each keep their own place, and changing a filter
 * starts a new one instead of skipping what the old filter left out.
 */
export interface ListenTarget {
  origin: string;
  companyId: string;
  /** Local URL by integration id, '*' for the rest. */
  routes: Record<string, string>;
  integrationIds: readonly string[];
  events: readonly string[];
}

interface CursorState {
  version: 1;
  target: ListenTarget;
  cursor: string;
  savedAt: string;
}

export class CursorFile {
  readonly path: string;
  readonly #dir: string;
  readonly #name: string;
  #writing: Promise<void> | undefined;
  #pending: string | undefined;
  #saved: string | undefined;

  constructor(
    configDir: string,
    readonly target: ListenTarget,
  ) {
    const digest = createHash('sha256').update(JSON.stringify(canonical(target))).digest('hex').slice(0, 16);
    this.#dir = join(configDir, 'listen');
    this.#name = `${target.companyId}-${digest}.json`;
    this.path = join(this.#dir, this.#name);
  }

  /** The saved cursor and when it was saved, or undefined on a first run. */
  async load(): Promise<{ cursor: string; savedAt: Date } | undefined> {
    const state = await readJson<CursorState>(this.path);
    if (state?.version !== 1 || typeof state.cursor !== 'string') return undefined;
    this.#saved = state.cursor;
    return { cursor: state.cursor, savedAt: new Date(state.savedAt) };
  }

  /**
   * Records the cursor. One write at a time, coalesced: a burst of webhooks writes the file
   * a few times, not once each, and `flush` waits until the newest cursor is on disk.
   */
  save(cursor: string): void {
    this.#pending = cursor;
    this.#writing ??= this.#writeLoop().finally(() => (this.#writing = undefined));
  }

  async flush(): Promise<void> {
    while (this.#writing) await this.#writing;
  }

  async #writeLoop(): Promise<void> {
    while (this.#pending !== undefined && this.#pending !== this.#saved) {
      const cursor = this.#pending;
      this.#pending = undefined;
      const state: CursorState = { version: 1, target: this.target, cursor, savedAt: new Date().toISOString() };
      await writePrivate(this.#dir, this.#name, `${JSON.stringify(state)}\n`);
      this.#saved = cursor;
    }
    this.#pending = undefined;
  }
}

function canonical(target: ListenTarget): unknown {
  return {
    origin: target.origin,
    companyId: target.companyId,
    routes: Object.entries(target.routes).sort(([a], [b]) => a.localeCompare(b)),
    integrationIds: [...target.integrationIds].sort(),
    events: [...target.events].sort(),
  };
}
