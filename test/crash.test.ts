import { copyFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect, test } from 'vitest';
import {
  cleanupAll,
  killAll,
  listAllWebhooks,
  makeTempDir,
  mapConcurrent,
  runCliJson,
  startServer,
  type ServerProcess,
} from './support/processes.js';

/**
 * Durability under kill -9 (contract, "Sending a webhook": "an acknowledged webhook
 * survives kill -9"): load the real server with concurrent webhooks, SIGKILL it at a random
 * moment, restart it on the same SQLite file and check that every 202 it gave is there,
 * byte for byte.
 */

export interface CrashCycleOptions {
  /** Concurrent sender loops (each one keep-alive connection, one request at a time). */
  concurrency?: number;
  /** The kill comes only after this many 202s... */
  minAcks?: number;
  /** ...and then after a random delay of up to this many milliseconds. */
  maxKillDelayMs?: number;
  /** Check the raw body of every acknowledged webhook with GET one (else a sample). */
  checkAllBodies?: boolean;
  /** Sample size when not checking all bodies. */
  bodySample?: number;
  /**
   * A tenant made beforehand (see makeTenantTemplate): its closed database is copied to a
   * fresh file for this cycle, which saves two CLI runs. Without it the cycle makes its own
   * tenant with the CLI on a fresh database.
   */
  template?: TenantTemplate;
}

export interface TenantTemplate {
  dbPath: string;
  integrationKey: string;
  apiKey: string;
}

/** A closed SQLite database holding one company and one integration, made with the CLI. */
export async function makeTenantTemplate(): Promise<TenantTemplate> {
  const dbPath = join(makeTempDir('intake-crash-template-'), 'template.db');
  const env = { INTAKE_DATABASE_URL: `sqlite:${dbPath}` };
  const company = (await runCliJson(['company', 'create', '--name', 'Crash test'], env)).json as { id: string };
  const integration = (await runCliJson(['integration', 'create', '--company', company.id, '--name', 'crash'], env)).json as {
    integration_key: string;
    api_key: string;
  };
  return { dbPath, integrationKey: integration.integration_key, apiKey: integration.api_key };
}

function copyDatabase(from: string, to: string): void {
  copyFileSync(from, to);
  for (const suffix of ['-wal', '-shm']) if (existsSync(from + suffix)) copyFileSync(from + suffix, to + suffix);
}

export interface CrashCycleResult {
  acknowledged: number;
  /** Acknowledged uuids missing after the restart. */
  lost: number;
  /** Acknowledged webhooks whose stored raw body, event or data differ from what was sent. */
  corrupted: number;
  /** Raw bodies compared through GET one. */
  bodiesChecked: number;
  /** Webhooks the integration holds after the restart (acknowledged or not). */
  stored: number;
  /** Answers other than 202, by status, before the kill. */
  otherStatuses: Record<string, number>;
  /** Request failures (no answer) before the kill: none are expected. */
  errorsBeforeKill: string[];
  /** Requests still in flight when SIGKILL was sent. */
  inFlightAtKill: number;
  /** Milliseconds of load before the kill. */
  loadMs: number;
  /** Milliseconds from the kill to the restarted server answering /healthz. */
  restartMs: number;
  /** How the restarted server ended on SIGTERM. */
  restartExit: { code: number | null; signal: string | null };
  problems: string[];
}

const UNICODE = ['ünïcødé', '日本語', '🚀✓', 'tab\\tnew\\nline', 'quote \\" backslash \\\\', '\\u00e9 escaped'];

/** A distinct body per request that JSON.parse + JSON.stringify would not reproduce. */
function bodyFor(loop: number, seq: number): string {
  const spaces = ' '.repeat(seq % 3);
  const text = UNICODE[(loop + seq) % UNICODE.length]!;
  const pad = 'x'.repeat(Math.floor(Math.random() * 1500));
  return (
    `{${spaces}"event" : "crash.test.${loop % 4}",${spaces}"data":{"loop":${loop},"seq":${seq},"amount":${seq}.50,` +
    `"text":"${text}","pad":"${pad}","nested":{"list":[1, 2.0, true, null]}}, "extra":{"kept":1e3}${spaces}}`
  );
}

/**
 * One crash cycle: a fresh database (a copy of `template`, or a new one with a tenant made
 * with the CLI), concurrent senders, SIGKILL at a random moment after `minAcks` 202s, restart, verify. Never leaves a
 * process running. Exported for a longer harness.
 */
export async function crashCycle(options: CrashCycleOptions = {}): Promise<CrashCycleResult> {
  const concurrency = options.concurrency ?? 32;
  const minAcks = options.minAcks ?? 200;
  const maxKillDelayMs = options.maxKillDelayMs ?? 1_000;
  const dbPath = join(makeTempDir('intake-crash-'), 'intake.db');
  if (options.template) copyDatabase(options.template.dbPath, dbPath);
  const problems: string[] = [];

  let server: ServerProcess | undefined;
  let restarted: ServerProcess | undefined;
  try {
    server = await startServer({ dbPath, env: { LOG_LEVEL: 'warn' } });
    let integration: { integration_key: string; api_key: string };
    if (options.template) {
      integration = { integration_key: options.template.integrationKey, api_key: options.template.apiKey };
    } else {
      const company = (await runCliJson(['company', 'create', '--name', 'Crash test'], server.cliEnv)).json as { id: string };
      integration = (await runCliJson(['integration', 'create', '--company', company.id, '--name', 'crash'], server.cliEnv))
        .json as { integration_key: string; api_key: string };
    }
    const address = server.url(`/api/webhooks/${integration.integration_key}`);

    const acked = new Map<string, string>();
    const otherStatuses: Record<string, number> = {};
    const errorsBeforeKill: string[] = [];
    let killRequested = false;
    let killScheduled = false;
    let inFlight = 0;
    let inFlightAtKill = 0;
    const victim = server;
    const loadStartedAt = performance.now();
    let loadMs = 0;
    let resolveKilled!: () => void;
    const killed = new Promise<void>((done) => (resolveKilled = done));

    const scheduleKill = () => {
      if (killScheduled) return;
      killScheduled = true;
      setTimeout(() => {
        killRequested = true;
        inFlightAtKill = inFlight;
        loadMs = performance.now() - loadStartedAt;
        victim.child.kill('SIGKILL');
        resolveKilled();
      }, Math.random() * maxKillDelayMs);
    };

    const sender = async (loop: number) => {
      for (let seq = 0; !killRequested; seq++) {
        const body = bodyFor(loop, seq);
        inFlight++;
        try {
          const response = await fetch(address, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-api-key': integration.api_key },
            body,
            signal: AbortSignal.timeout(20_000),
          });
          let text: string;
          try {
            text = await response.text();
          } catch {
            // The answer's body was cut by the kill: its uuid is unknown, so it cannot count.
            if (!killRequested) errorsBeforeKill.push(`body of a ${response.status} cut before the kill`);
            break;
          }
          if (response.status === 202) {
            const { uuid } = JSON.parse(text) as { uuid: string };
            acked.set(uuid, body);
            if (acked.size >= minAcks) scheduleKill();
          } else if (!killRequested) {
            otherStatuses[response.status] = (otherStatuses[response.status] ?? 0) + 1;
          }
        } catch (error) {
          if (!killRequested) errorsBeforeKill.push(String((error as Error).cause ?? error));
          break;
        } finally {
          inFlight--;
        }
      }
    };

    const senders = Promise.all(Array.from({ length: concurrency }, (_, loop) => sender(loop)));
    // If the server died by itself or the senders stopped, nobody would ever schedule the kill.
    await Promise.race([killed, senders.then(() => scheduleKill())]);
    await killed;
    await senders;
    await victim.kill();
    if (victim.exitInfo?.signal !== 'SIGKILL') problems.push(`the server was not killed by SIGKILL: ${victim.describe()}`);

    const restartStartedAt = performance.now();
    restarted = await startServer({ dbPath, env: { LOG_LEVEL: 'warn' } });
    const restartMs = Math.round(performance.now() - restartStartedAt);
    const listed = await listAllWebhooks(restarted.baseUrl, integration.integration_key, integration.api_key);
    const byUuid = new Map(listed.map((item) => [item.uuid, item]));

    let lost = 0;
    let corrupted = 0;
    for (const [uuid, body] of acked) {
      const item = byUuid.get(uuid);
      if (!item) {
        lost++;
        if (lost <= 5) problems.push(`acknowledged ${uuid} is missing after the restart`);
        continue;
      }
      const sent = JSON.parse(body) as { event: string; data: unknown };
      if (item.event !== sent.event || JSON.stringify(item.data) !== JSON.stringify(sent.data)) {
        corrupted++;
        if (corrupted <= 5) problems.push(`${uuid}: listed event/data differ from what was sent`);
      }
    }

    const present = [...acked.keys()].filter((uuid) => byUuid.has(uuid));
    const toCheck =
      options.checkAllBodies === false ? shuffle(present).slice(0, options.bodySample ?? 300) : present;
    const base = restarted.baseUrl;
    await mapConcurrent(toCheck, 16, async (uuid) => {
      const response = await fetch(`${base}/api/webhooks/${integration.integration_key}/${uuid}`, {
        headers: { 'x-api-key': integration.api_key },
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

    const restartExit = await restarted.stop();
    return {
      acknowledged: acked.size,
      lost,
      corrupted,
      bodiesChecked: toCheck.length,
      stored: listed.length,
      otherStatuses,
      errorsBeforeKill,
      inFlightAtKill,
      loadMs: Math.round(loadMs),
      restartMs,
      restartExit,
      problems,
    };
  } finally {
    await server?.kill();
    await restarted?.kill();
  }
}

function shuffle<T>(items: T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

const CYCLES = 3;
const totals = { acknowledged: 0, lost: 0, corrupted: 0 };
let template: TenantTemplate;

beforeAll(async () => {
  template = await makeTenantTemplate();
});
afterEach(() => killAll());
afterAll(async () => {
  console.log(`crash totals over ${CYCLES} cycles: acknowledged ${totals.acknowledged}, lost ${totals.lost}, corrupted ${totals.corrupted}`);
  await cleanupAll();
});

for (let cycle = 1; cycle <= CYCLES; cycle++) {
  test(`crash cycle ${cycle}: every webhook acknowledged before kill -9 is stored, byte for byte`, async () => {
    const result = await crashCycle({ template });
    totals.acknowledged += result.acknowledged;
    totals.lost += result.lost;
    totals.corrupted += result.corrupted;
    console.log(
      `crash cycle ${cycle}: acknowledged ${result.acknowledged}, lost ${result.lost}, corrupted ${result.corrupted}, ` +
        `stored ${result.stored}, bodies checked ${result.bodiesChecked}, in flight at kill ${result.inFlightAtKill}, ` +
        `load ${result.loadMs} ms, restart ${result.restartMs} ms, other statuses ${JSON.stringify(result.otherStatuses)}`,
    );

    expect(result.problems).toEqual([]);
    expect(result.errorsBeforeKill).toEqual([]);
    expect(result.acknowledged).toBeGreaterThanOrEqual(200);
    expect(result.lost).toBe(0);
    expect(result.corrupted).toBe(0);
    expect(result.bodiesChecked).toBe(result.acknowledged);
    expect(result.stored).toBeGreaterThanOrEqual(result.acknowledged);
    // 503 (write queue full) is the only refusal the contract allows under load here.
    expect(Object.keys(result.otherStatuses).filter((status) => status !== '503')).toEqual([]);
    expect(result.restartExit).toEqual({ code: 0, signal: null });
  }, 40_000);
}
