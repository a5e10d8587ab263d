import { listAllWebhooks, mapConcurrent } from './processes.js';

/**
 * Concurrent senders for the process tests (crash cycles, database faults, several nodes),
 * and the check that what they were told is true: every 202 is stored, byte for byte.
 */

/** An integration's address on a node and the key to send with. */
export interface LoadTarget {
  /** Full URL of POST /api/webhooks/<integration_key>. */
  address: string;
  apiKey: string;
}

/** One answer a sender got. */
export interface LoadAnswer {
  /** Which sender loop sent it. */
  loop: number;
  status: number;
  headers: Headers;
  text: string;
  /** The raw body that was sent. */
  body: string;
  /** performance.now() when the request was sent, and when its answer was read. */
  sentAt: number;
  answeredAt: number;
  /** Whether stop() had been called when the answer came. */
  afterStop: boolean;
}

export interface LoadOptions {
  /** Concurrent sender loops (each one keep-alive connection, one request at a time). */
  concurrency: number;
  /** The node each loop sends to (loop i uses targets[i % targets.length]). */
  targets: LoadTarget[];
  /** Sees every answer as it comes, after 202s are recorded in `acked`. */
  onAnswer?(answer: LoadAnswer): void;
}

const UNICODE = ['ünïcødé', '日本語', '🚀✓', 'tab\\tnew\\nline', 'quote \\" backslash \\\\', '\\u00e9 escaped'];

/** A distinct body per request that JSON.parse + JSON.stringify would not reproduce. */
export function bodyFor(loop: number, seq: number): string {
  const spaces = ' '.repeat(seq % 3);
  const text = UNICODE[(loop + seq) % UNICODE.length]!;
  const pad = 'x'.repeat(Math.floor(Math.random() * 1500));
  return (
    `{${spaces}"event" : "crash.test.${loop % 4}",${spaces}"data":{"loop":${loop},"seq":${seq},"amount":${seq}.50,` +
    `"text":"${text}","pad":"${pad}","nested":{"list":[1, 2.0, true, null]}}, "extra":{"kept":1e3}${spaces}}`
  );
}

/**
 * Sender loops that post distinct webhooks until stop() is called, or until their own
 * request fails (a killed node: the loop ends). Every 202's uuid is kept with the body sent.
 */
export class WebhookLoad {
  /** uuid → raw body of every 202. */
  readonly acked = new Map<string, string>();
  /** Requests without an answer (refused connection, cut body), and whether stop() had been called. */
  readonly failures: Array<{ message: string; afterStop: boolean }> = [];
  readonly startedAt = performance.now();
  inFlight = 0;
  stopped = false;
  /** Resolves when every loop has ended. */
  readonly done: Promise<void>;

  constructor(private readonly options: LoadOptions) {
    this.done = Promise.all(Array.from({ length: options.concurrency }, (_, loop) => this.sender(loop))).then(() => {});
  }

  stop(): void {
    this.stopped = true;
  }

  private async sender(loop: number): Promise<void> {
    const target = this.options.targets[loop % this.options.targets.length]!;
    for (let seq = 0; !this.stopped; seq++) {
      const body = bodyFor(loop, seq);
      const sentAt = performance.now();
      this.inFlight++;
      try {
        const response = await fetch(target.address, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': target.apiKey },
          body,
          signal: AbortSignal.timeout(20_000),
        });
        let text: string;
        try {
          text = await response.text();
        } catch {
          // The answer's body was cut (a kill): its uuid is unknown, so it cannot count.
          this.failures.push({ message: `body of a ${response.status} cut`, afterStop: this.stopped });
          break;
        }
        if (response.status === 202) this.acked.set((JSON.parse(text) as { uuid: string }).uuid, body);
        this.options.onAnswer?.({
          loop,
          status: response.status,
          headers: response.headers,
          text,
          body,
          sentAt,
          answeredAt: performance.now(),
          afterStop: this.stopped,
        });
      } catch (error) {
        this.failures.push({ message: String((error as Error).cause ?? error), afterStop: this.stopped });
        break;
      } finally {
        this.inFlight--;
      }
    }
  }
}

export interface StoredCheck {
  /** Acknowledged uuids missing. */
  lost: number;
  /** Acknowledged webhooks whose stored raw body, event or data differ from what was sent. */
  corrupted: number;
  /** Raw bodies compared through GET one. */
  bodiesChecked: number;
  /** Webhooks the integration holds (acknowledged or not). */
  stored: number;
  problems: string[];
}

/**
 * Reads the integration back through a node (the list, then GET one per webhook for its
 * raw body) and compares it with every acknowledged webhook. The list throws on a uuid
 * listed twice. `bodySample` checks only that many raw bodies, picked at random.
 */
export async function checkStored(
  baseUrl: string,
  tenant: { integrationKey: string; apiKey: string },
  acked: ReadonlyMap<string, string>,
  options: { bodySample?: number } = {},
): Promise<StoredCheck> {
  const problems: string[] = [];
  const listed = await listAllWebhooks(baseUrl, tenant.integrationKey, tenant.apiKey);
  const byUuid = new Map(listed.map((item) => [item.uuid, item]));

  let lost = 0;
  let corrupted = 0;
  for (const [uuid, body] of acked) {
    const item = byUuid.get(uuid);
    if (!item) {
      lost++;
      if (lost <= 5) problems.push(`acknowledged ${uuid} is missing`);
      continue;
    }
    const sent = JSON.parse(body) as { event: string; data: unknown };
    if (item.event !== sent.event || JSON.stringify(item.data) !== JSON.stringify(sent.data)) {
      corrupted++;
      if (corrupted <= 5) problems.push(`${uuid}: listed event/data differ from what was sent`);
    }
  }

  const present = [...acked.keys()].filter((uuid) => byUuid.has(uuid));
  const toCheck = options.bodySample === undefined ? present : shuffle(present).slice(0, options.bodySample);
  await mapConcurrent(toCheck, 16, async (uuid) => {
    const response = await fetch(`${baseUrl}/api/webhooks/${tenant.integrationKey}/${uuid}`, {
      headers: { 'x-api-key': tenant.apiKey },
      signal: AbortSignal.timeout(15_000),
    });
    const text = await response.text();
    if (response.status !== 200) {
      corrupted++;
      problems.push(`GET one ${uuid} answered ${response.status}: ${text.slice(0, 200)}`);
      return;
    }
    const one = JSON.parse(text) as { uuid: string; raw_body: string };
    if (one.uuid !== uuid || one.raw_body !== acked.get(uuid)) {
      corrupted++;
      if (corrupted <= 5) problems.push(`${uuid}: stored raw body differs from the bytes sent`);
    }
  });
  return { lost, corrupted, bodiesChecked: toCheck.length, stored: listed.length, problems };
}

function shuffle<T>(items: T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
