import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { LoadTarget } from './closed-loop.js';
import { ensureDebianPackage } from './processes.js';

/*
 * The closed loop's load generator: wrk (C, one thread), in a process of its own. A Node
 * generator in the bench's process took most of a core of this 2-core machine from the
 * servers it measured; wrk needs far less for the same load.
 */

/** Where Debian's package puts it. */
const WRK = '/usr/bin/wrk';
const SCRIPT = fileURLToPath(new URL('../bench/wrk/post.lua', import.meta.url));
/** For a target whose requests must all differ (LoadTarget.signed). */
const SCRIPT_EACH = fileURLToPath(new URL('../bench/wrk/post-each.lua', import.meta.url));

/** One wrk run, as bench/wrk/post.lua reports it. Latencies in ms, to 0.01 ms (wrk keeps µs). */
export interface WrkResult {
  seconds: number;
  /** Answers of any status. */
  answered: number;
  /** Answers of status 400 and above: wrk's own count (post.lua says why). */
  non2xx: number;
  /** Connections that failed or broke, and requests unanswered after the timeout. */
  errors: number;
  latencyMs: { p50: number; p99: number; p99_9: number; max: number };
  /** For a signed target: requests sent again because the run outlasted its distinct ones (replays, not webhooks stored). */
  repeated?: number;
}

/** What post.lua's done() prints. */
interface WrkReport {
  durationUs: number;
  requests: number;
  non2xx: number;
  errors: { connect: number; read: number; write: number; timeout: number };
  latencyUs: { p50: number; p99: number; p99_9: number; max: number };
}

/** Runs wrk against targets, with each body in a file of the run's work dir (wrk reads it in Lua). */
export class Wrk {
  private readonly bodyFiles = new Map<Buffer, string>();

  private constructor(
    private readonly workDir: string,
    private readonly timeoutSeconds: number,
  ) {}

  /**
   * Installs wrk when it is missing (Debian's package, as CI installs Chromium), so a fresh
   * machine runs the bench as it is. `timeoutSeconds`: a request unanswered this long
   * counts as an error and is left out of the latencies.
   */
  static async prepare(workDir: string, timeoutSeconds: number): Promise<Wrk> {
    await ensureDebianPackage(WRK, 'wrk', 'the closed loop');
    return new Wrk(workDir, timeoutSeconds);
  }

  /** `connections` held open for `seconds`, each sending its next request when answered. */
  async run(target: LoadTarget, connections: number, seconds: number): Promise<WrkResult> {
    const headers = Object.entries(target.headers).flatMap(([name, value]) => ['-H', `${name}: ${value}`]);
    const signed = target.signed;
    if (signed) signed.requests.write(`${this.workDir}/wrk-signed`, signed.perRun);
    const args = [
      ...['-t1', `-c${connections}`, `-d${seconds}s`, `--timeout`, `${this.timeoutSeconds}s`, '-s', signed ? SCRIPT_EACH : SCRIPT],
      ...headers,
      target.url,
      ...(signed ? ['--', `${this.workDir}/wrk-signed`, signed.requests.header] : ['--', this.bodyFile(target.body)]),
    ];
    const { stdout } = await promisify(execFile)(WRK, args);
    const line = stdout.split('\n').find((candidate) => candidate.startsWith('{'));
    if (line === undefined) throw new Error(`wrk printed no JSON line:\n${stdout}`);
    const report = JSON.parse(line) as WrkReport;
    const ms = (us: number) => Math.round(us / 10) / 100;
    if (signed && report.requests > signed.perRun) {
      process.stderr.write(`wrk: ${target.name} sent ${report.requests - signed.perRun} requests twice (over its ${signed.perRun} distinct ones): replays, not webhooks stored\n`);
    }
    return {
      seconds: report.durationUs / 1e6,
      answered: report.requests,
      non2xx: report.non2xx,
      errors: report.errors.connect + report.errors.read + report.errors.write + report.errors.timeout,
      latencyMs: {
        p50: ms(report.latencyUs.p50),
        p99: ms(report.latencyUs.p99),
        p99_9: ms(report.latencyUs.p99_9),
        max: ms(report.latencyUs.max),
      },
      ...(signed && { repeated: Math.max(0, report.requests - signed.perRun) }),
    };
  }

  private bodyFile(body: Buffer): string {
    let path = this.bodyFiles.get(body);
    if (path === undefined) {
      path = `${this.workDir}/wrk-body-${this.bodyFiles.size}`;
      writeFileSync(path, body);
      this.bodyFiles.set(body, path);
    }
    return path;
  }
}
