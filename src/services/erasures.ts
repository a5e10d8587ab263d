import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { MAX_VALUE_CHARS, maskValue, MIN_VALUE_CHARS, ValueMatcher } from '../domain/erasure-match.js';
import { isId, newTimeOrderedId } from '../domain/ids.js';
import { MAX_REDACTION_PATHS, pathProblem } from '../domain/redaction.js';
import type { SecretBox } from '../domain/secret-box.js';
import type { CompanyHashers } from '../domain/value-hash.js';
import { AppError } from '../errors.js';
import type { Actor, AuditEvent, ErasureCounts, ErasureCriteria, ErasureRecord, ErasureSample, ErasureWork, Store } from '../store/store.js';

/**
 * Erasure by data subject (issue 40; docs/personal-data.md): "delete everything you hold
 * about this person". A request names a value (an email, a customer id) and where to look;
 * a preview counts what it would change, with a sample, and changes nothing until someone
 * confirms it; an erasure replaces each matching webhook by a tombstone.
 *
 * Both run in the background (ErasureRunner), within the bounds every bulk operation has
 * (issue 33): one per company at a time across nodes (a lease), one per node at a time, the
 * scan read on the read side a page at a time, and what it changes written in a short
 * transaction per page, so every other company's group commits go between two steps.
 *
 * The value itself is held only sealed (INTAKE_SECRETS_KEY), and only while it is needed:
 * an erasure drops it when it ends, a preview when it is confirmed or expires. The audit log,
 * the API and the report show it masked.
 */

/** Erasures a company may have waiting or running at once. */
export const MAX_OPEN_ERASURES = 5;
/** A preview no one confirms is dropped, with its value, after this long. */
export const PREVIEW_TTL_MS = 24 * 60 * 60 * 1000;
/** Integrations one request may name. */
const MAX_INTEGRATIONS = 100;
const SAMPLE_SIZE = 10;
/** The longest rest between two pages of an erasure. */
const MAX_REST_MS = 1_000;
/** How often an erasure saves where its scan has reached when its pages find nothing. */
const PROGRESS_EVERY_MS = 1_000;

export interface ErasureInput {
  value?: unknown;
  since?: number;
  until?: number;
  integrationIds?: string[];
  paths?: string[];
  dryRun?: boolean;
}

export class Erasures {
  constructor(
    private readonly store: Store,
    private readonly secrets: SecretBox,
    private readonly runner: { wake(): void },
    private readonly now: () => number = Date.now,
  ) {}

  async create(companyId: string, input: ErasureInput, actor: Actor): Promise<ErasureRecord> {
    const value = checkValue(input.value);
    const at = this.now();
    const criteria = await this.criteriaOf(companyId, input, at);
    const open = await this.store.listErasures(companyId, { limit: 50 });
    if (open.filter((erasure) => erasure.state === 'counting' || erasure.state === 'queued' || erasure.state === 'running').length >= MAX_OPEN_ERASURES) {
      throw new AppError('rate_limited', `A company may have ${MAX_OPEN_ERASURES} erasures or previews under way at once; wait for one to finish.`, {
        retryAfterSeconds: 10,
      });
    }
    const dryRun = input.dryRun === true;
    const id = newTimeOrderedId('ers', at);
    const valueHint = maskValue(value);
    const erasure = await this.store.createErasure(
      {
        id,
        companyId,
        dryRun,
        valueSealed: this.secrets.seal(value),
        valueHint,
        criteria,
        requestedBy: actor,
        createdAt: at,
        expiresAt: dryRun ? at + PREVIEW_TTL_MS : null,
      },
      audit(actor, dryRun ? 'erasure.preview' : 'erasure.create', id, at, { value: valueHint, ...criteriaJson(criteria) }),
    );
    this.runner.wake();
    return erasure;
  }

  /** A preview made into an erasure: it searches its range again, from the start. */
  async confirm(companyId: string, id: string, actor: Actor): Promise<ErasureRecord> {
    if (!isId('ers', id)) throw notFound(id);
    const at = this.now();
    // A range without an end of its own runs to now: what arrived since the preview is erased too.
    const confirmed = await this.store.confirmErasure(companyId, id, { by: actor, at, until: at + 1, audit: audit(actor, 'erasure.confirm', id, at) });
    if (confirmed === 'not_found') throw notFound(id);
    if (confirmed === 'not_previewed') {
      throw new AppError('conflict', 'Only a preview that has finished counting, and has not expired or been confirmed, can be confirmed.');
    }
    this.runner.wake();
    return confirmed;
  }

  async get(companyId: string, id: string): Promise<ErasureRecord> {
    const erasure = isId('ers', id) ? await this.store.getErasure(companyId, id) : undefined;
    if (!erasure) throw notFound(id);
    return erasure;
  }

  list(companyId: string, query: { limit: number; before?: string }): Promise<ErasureRecord[]> {
    return this.store.listErasures(companyId, query);
  }

  private async criteriaOf(companyId: string, input: ErasureInput, at: number): Promise<ErasureCriteria> {
    const since = input.since ?? 0;
    const until = input.until ?? at + 1;
    const untilConfirmed = input.until === undefined ? ({ untilConfirmed: true } as const) : {};
    if (since >= until) throw new AppError('invalid_request', 'since must be before until.', { field: 'since' });
    const paths = input.paths ?? [];
    if (paths.length > MAX_REDACTION_PATHS) throw new AppError('invalid_request', `At most ${MAX_REDACTION_PATHS} paths.`, { field: 'paths' });
    for (const path of paths) {
      const problem = pathProblem(path);
      if (problem) throw new AppError('invalid_request', problem, { field: 'paths' });
    }
    let integrationIds: string[] | null = null;
    if (input.integrationIds !== undefined) {
      integrationIds = [...new Set(input.integrationIds)];
      if (integrationIds.length === 0 || integrationIds.length > MAX_INTEGRATIONS) {
        throw new AppError('invalid_request', `integration_ids names 1 to ${MAX_INTEGRATIONS} integrations; leave it out for all of them.`, { field: 'integration_ids' });
      }
      for (const integrationId of integrationIds) {
        // A deleted integration's webhooks stay until retention: a request without integration_ids searches them too.
        const found = isId('int', integrationId) && (await this.store.getIntegration(companyId, integrationId));
        if (!found) throw new AppError('not_found', `No integration with id ${integrationId}.`);
      }
    }
    return { since, until, ...untilConfirmed, integrationIds, paths: [...new Set(paths)] };
  }
}

export interface ErasureRunnerOptions {
  now?: () => number;
  /** Webhooks a page of the scan reads at most. */
  pageRows?: number;
  /** Bodies a page reads at most (one body more at most). */
  pageBytes?: number;
  /** How often the runner looks for work when nothing woke it. */
  pollMs?: number;
  /** How long it rests after each page, as a multiple of the time the page took (default 3; 0: not at all). */
  restRatio?: number;
  leaseMs?: number;
}

/**
 * The work of erasures and previews, one at a time on a node. Every node runs one: a lease
 * in the erasure's row says which node works on it, and a node that stops renewing it
 * (it died) leaves it to another, which goes on from the erasure's saved cursor.
 */
export class ErasureRunner {
  private readonly now: () => number;
  private readonly pageRows: number;
  private readonly pageBytes: number;
  private readonly pollMs: number;
  private readonly leaseMs: number;
  private readonly restRatio: number;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /** Started: it polls, and wake() runs it at once. */
  private started = false;
  /** Stopping: a run under way ends after its step (its lease ends by itself; another run goes on from its cursor). */
  private stopping = false;
  private wakeAgain = false;
  /** This node's runs since start, by how they ended (in /metrics). */
  readonly runs = { completed: 0, previewed: 0, failed: 0, lost: 0 };

  constructor(
    private readonly store: Store,
    private readonly secrets: SecretBox,
    /** The value's keyed hashes are searched for too: what integrations that redact by hashing stored. */
    private readonly hashers: CompanyHashers,
    private readonly log: Logger,
    options: ErasureRunnerOptions = {},
  ) {
    this.now = options.now ?? Date.now;
    // 500 rows or 4 MiB of bodies: one page's matching is a few ms on the event loop.
    this.pageRows = options.pageRows ?? 500;
    this.pageBytes = options.pageBytes ?? 4 * 1024 * 1024;
    this.pollMs = options.pollMs ?? 30_000;
    this.leaseMs = options.leaseMs ?? 60_000;
    this.restRatio = options.restRatio ?? 3;
  }

  start(): void {
    this.started = true;
    this.schedule(1_000);
  }

  async stop(): Promise<void> {
    this.started = false;
    this.stopping = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** Work was just asked for: look now rather than at the next poll. */
  wake(): void {
    if (!this.started) return;
    if (this.running) this.wakeAgain = true;
    else this.schedule(0);
  }

  /** Runs every erasure waiting, one after the other; resolves when none is left (errors are logged). */
  async runOnce(): Promise<void> {
    // Stopping: no new erasure is taken (one taken would hold its lease for nothing until it lapses).
    while (!this.stopping) {
      const token = randomUUID();
      let work: ErasureWork | undefined;
      try {
        work = await this.store.takeErasure(this.now(), token, this.leaseMs);
      } catch (error) {
        this.log.warn({ err: error }, 'erasure: could not look for work; trying again later');
        return;
      }
      if (!work) return;
      await this.run(work, token);
    }
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.running = this.runOnce().finally(() => {
        this.running = undefined;
        if (!this.started) return;
        const again = this.wakeAgain;
        this.wakeAgain = false;
        this.schedule(again ? 0 : this.pollMs);
      });
    }, delayMs);
    this.timer.unref();
  }

  private async run(work: ErasureWork, token: string): Promise<void> {
    const started = this.now();
    try {
      const value = this.secrets.open(work.valueSealed);
      const hashes = this.hashers.all(work.companyId).map((hasher) => hasher.hash(value));
      const matcher = new ValueMatcher(value, work.criteria.paths, hashes);
      const tombstone = Buffer.from(
        JSON.stringify({ erased: { erasure_id: work.id, erased_at: new Date(started).toISOString(), erased_by: `${work.erasedBy.type} ${work.erasedBy.id ?? ''}`.trim() } }),
      );
      const sample = [...work.sample];
      let cursor = work.cursor;
      // Progress is saved with each page that found something, and otherwise once a second:
      // a page of 500 webhooks that holds none is a read, and no write beside intake's commits.
      let unsaved = 0;
      let savedAt = performance.now();
      for (;;) {
        if (this.stopping) return;
        const pageStarted = performance.now();
        const page = await this.store.scanErasure(work.companyId, { ...work.criteria, cursor, rows: this.pageRows, bytes: this.pageBytes });
        const targets: Array<{ uuid: string; receivedAt: number }> = [];
        for (const webhook of page.webhooks) {
          const place = matcher.find(webhook.rawBody, webhook.payloadFormat, webhook.headers);
          if (place === null) continue;
          targets.push({ uuid: webhook.uuid, receivedAt: webhook.receivedAt });
          if (sample.length < SAMPLE_SIZE) {
            sample.push({ uuid: webhook.uuid, integrationId: webhook.integrationId, event: webhook.event, receivedAt: webhook.receivedAt, matchedIn: place });
          }
        }
        unsaved += page.webhooks.length;
        cursor = page.last ?? cursor;
        const ends = page.last === null || !page.more;
        if (cursor !== null && (targets.length > 0 || ends || performance.now() - savedAt >= PROGRESS_EVERY_MS)) {
          const counted: ErasureCounts | undefined = work.dryRun ? await this.store.countErasureLinks(work.companyId, targets) : undefined;
          const kept = await this.store.erasureStep(work.companyId, {
            id: work.id,
            token,
            at: this.now(),
            leaseMs: this.leaseMs,
            dryRun: work.dryRun,
            targets,
            tombstone,
            cursor,
            scanned: unsaved,
            ...(counted && { counted }),
            sample,
          });
          if (!kept) {
            this.runs.lost++;
            this.log.warn({ erasure: work.id }, 'erasure: lease lost to another node; it goes on there');
            return;
          }
          unsaved = 0;
          savedAt = performance.now();
        }
        if (ends) break;
        // Rest three times as long as the page took: an erasure then keeps a quarter of the
        // threads it uses (the read thread, the event loop), and the other companies' requests
        // the rest. On this 2-core machine, erasures of 100,000 webhooks one after the other
        // raised another company's p99 from 6.5 to 25.5 ms without rest, to 9.3 ms (against
        // 6.2 alone) with it, at 17 s an erasure rather than 4 (npm run bench:bulk, 2026-12-04).
        if (this.restRatio > 0) await sleep(Math.min(performance.now() - pageStarted, MAX_REST_MS) * this.restRatio);
        else await new Promise((resolve) => setImmediate(resolve));
      }
      if (!work.dryRun) await this.checkpoint(work.id);
      await this.finish(work, token, started, work.dryRun ? 'previewed' : 'completed');
    } catch (error) {
      this.log.error({ err: error, erasure: work.id }, 'erasure failed');
      await this.finish(work, token, started, 'failed', error instanceof Error ? error.message : String(error)).catch(() => undefined);
    }
  }

  /** The WAL truncated, tried a few times: a long read can hold it for a moment. */
  private async checkpoint(id: string): Promise<void> {
    for (let attempt = 1; attempt <= 20; attempt++) {
      if (await this.store.checkpointAfterErasure()) return;
      await sleep(250);
    }
    this.log.warn({ erasure: id }, 'erasure: the WAL could not be truncated (a reader held it); its next checkpoint overwrites it');
  }

  private async finish(work: ErasureWork, token: string, started: number, state: 'previewed' | 'completed' | 'failed', error?: string): Promise<void> {
    const at = this.now();
    const system: Actor = { type: 'system', id: null, ip: null };
    const record = await this.store.getErasure(work.companyId, work.id);
    const counts = record?.counts;
    const ended = await this.store.finishErasure(work.companyId, work.id, token, {
      at,
      state,
      ...(error !== undefined && { error: 'The erasure stopped on an error; it was logged. What it had erased stays erased: create it again to go on.' }),
      ...(state === 'previewed' && { expiresAt: at + PREVIEW_TTL_MS }),
      ...(state !== 'previewed' && { audit: audit(system, state === 'completed' ? 'erasure.complete' : 'erasure.fail', work.id, at, counts && { ...countsJson(counts) }) }),
    });
    if (!ended) return;
    this.runs[state]++;
    this.log.info({ erasure: work.id, state, counts, durationMs: at - started, ...(error && { error }) }, 'erasure ended');
  }
}

/** An erasure as the API shows it. */
export function erasureJson(erasure: ErasureRecord) {
  return {
    id: erasure.id,
    state: erasure.state,
    dry_run: erasure.dryRun,
    value_hint: erasure.valueHint,
    criteria: criteriaJson(erasure.criteria),
    requested_by: erasure.requestedBy,
    confirmed_by: erasure.confirmedBy,
    created_at: iso(erasure.createdAt),
    confirmed_at: isoOrNull(erasure.confirmedAt),
    started_at: isoOrNull(erasure.startedAt),
    finished_at: isoOrNull(erasure.finishedAt),
    expires_at: isoOrNull(erasure.expiresAt),
    scanned: erasure.scanned,
    counts: countsJson(erasure.counts),
    sample: erasure.sample.map(sampleJson),
    error: erasure.error,
  };
}

/**
 * What a company can hand to the person who asked: what was searched (the value masked),
 * when, by whom, what was found and what became of it. Plain text, one fact a line.
 */
export function erasureReport(erasure: ErasureRecord, companyName: string): string {
  const criteria = erasure.criteria;
  const lines = [
    `Erasure report ${erasure.id}`,
    `Company: ${companyName}`,
    `Value searched for: ${erasure.valueHint} (masked; intake keeps no copy of it once the erasure ends)`,
    `Webhooks received from ${iso(criteria.since)} to ${iso(criteria.until)}`,
    `Integrations: ${criteria.integrationIds === null ? 'all' : criteria.integrationIds.join(', ')}`,
    `Where: ${criteria.paths.length === 0 ? 'anywhere in the body and the headers' : `at ${criteria.paths.join(', ')}`}`,
    `Requested: ${iso(erasure.createdAt)} by ${erasure.requestedBy.type} ${erasure.requestedBy.id ?? ''}`.trimEnd(),
    `State: ${erasure.state}${erasure.finishedAt !== null ? ` at ${iso(erasure.finishedAt)}` : ''}`,
    `Webhooks read: ${erasure.scanned}`,
    `Webhooks ${erasure.dryRun ? 'matching' : 'erased'}: ${erasure.counts.webhooks}`,
    `Their deliveries: ${erasure.counts.deliveries} (states and times kept; those still to be made cancelled)`,
    `Delivery responses ${erasure.dryRun ? 'holding an excerpt' : 'whose excerpt was removed'}: ${erasure.counts.attempts}`,
    `Request-log rows ${erasure.dryRun ? 'naming them' : 'whose sender address and user agent were removed'}: ${erasure.counts.requestLog}`,
  ];
  if (!erasure.dryRun && erasure.state === 'completed') {
    lines.push(
      'Each erased webhook keeps only its id, integration, event, time received, and a tombstone naming this erasure.',
      'Backups taken before the erasure still hold the data until they expire (docs/personal-data.md, "What backups keep").',
    );
  }
  return `${lines.join('\n')}\n`;
}

function criteriaJson(criteria: ErasureCriteria) {
  return {
    since: iso(criteria.since),
    until: iso(criteria.until),
    integration_ids: criteria.integrationIds,
    paths: criteria.paths,
  };
}

function countsJson(counts: ErasureCounts) {
  return { webhooks: counts.webhooks, deliveries: counts.deliveries, attempts: counts.attempts, request_log: counts.requestLog };
}

function sampleJson(sample: ErasureSample) {
  return { uuid: sample.uuid, integration_id: sample.integrationId, event: sample.event, received_at: iso(sample.receivedAt), matched_in: sample.matchedIn };
}

function checkValue(value: unknown): string {
  if (typeof value !== 'string' || value.trim().length < MIN_VALUE_CHARS || value.length > MAX_VALUE_CHARS) {
    throw new AppError('invalid_request', `value is the text to search for, ${MIN_VALUE_CHARS} to ${MAX_VALUE_CHARS} characters.`, { field: 'value' });
  }
  return value.trim();
}

function audit(actor: Actor, action: string, targetId: string, at: number, after?: object): AuditEvent {
  return { actor, action, targetType: 'erasure', targetId, at, ...(after && { after }) };
}

function notFound(id: string): AppError {
  return new AppError('not_found', `No erasure with id ${id}.`);
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function isoOrNull(ms: number | null): string | null {
  return ms === null ? null : iso(ms);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
