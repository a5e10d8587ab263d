import { spawnSync } from 'node:child_process';
import { closeSync, copyFileSync, mkdirSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, expect, test } from 'vitest';
import { faultCycle, type FaultCycleResult, type TenantTemplate } from './support/crash.js';
import { cleanupAll, killAll, makeTempDir, type ServerProcess } from './support/processes.js';
import { expectNothingLost, expectReadinessFollowedTheFault } from './support/fault-expectations.js';
import { sqliteTenantTemplate } from './support/tenant-template.js';

/**
 * The disk fails under a running SQLite node (contract, "Sending a webhook": a 202 only
 * after the webhook is committed). Real faults, not mocks: the server's file size limit
 * lowered under it (every write past 4 KiB fails with EFBIG, which SQLite reports as an I/O
 * error), and its database on a small filesystem filled to the last byte (ENOSPC,
 * SQLITE_FULL). While the disk is full intake must answer 503 with Retry-After and a JSON
 * body, never 202 for a webhook that was not stored, and /readyz must answer 503; when the
 * fault ends the node must get ready again with no traffic and accept webhooks, without a
 * restart. Every 202 is then read back byte for byte, the file passes integrity_check, and
 * the node's log names the disk error.
 */

const PRLIMIT = spawnSync('prlimit', ['--version']).status === 0;
const MOUNT = canMountTmpfs();
let template: TenantTemplate;

beforeAll(async () => {
  template = await sqliteTenantTemplate();
});
afterEach(() => killAll());
afterAll(async () => {
  for (const mount of mounts.splice(0)) spawnSync('umount', ['-l', mount]);
  await cleanupAll();
});

test.skipIf(!PRLIMIT)('file size limit: 503 with Retry-After while writes fail, /readyz 503, ready again by itself', async () => {
  const dbPath = copyTemplateTo(makeTempDir('intake-fsize-'));
  const result = await faultCycle({
    target: { databaseUrl: `sqlite:${dbPath}`, tenant: template.tenant },
    injectFault: async (server) => {
      prlimit(server, '4096');
      return 1;
    },
    endFault: async (server) => prlimit(server, 'unlimited'),
  });
  report('file size limit', result);
  expectDiskFault(result);
  expectIntactFile(dbPath, result.acked);
}, 60_000);

test.skipIf(MOUNT !== undefined)('full filesystem: 503 with Retry-After while writes fail, /readyz 503, ready again by itself', async () => {
  const mount = makeTempDir('intake-tmpfs-');
  mountTmpfs(mount, '48m');
  const dbPath = copyTemplateTo(join(mount, 'db'));
  const filler = join(mount, 'filler');
  const result = await faultCycle({
    target: { databaseUrl: `sqlite:${dbPath}`, tenant: template.tenant },
    // Again at every round: SQLite may find room in pages it already holds for a while.
    injectFault: async () => fill(filler),
    endFault: async () => rmSync(filler, { force: true }),
  });
  report('full filesystem', result);
  expectDiskFault(result);
  expectIntactFile(dbPath, result.acked);
}, 60_000);

if (!PRLIMIT) console.log('Disk-full test (file size limit) SKIPPED: no prlimit (util-linux) on this machine.');
if (MOUNT) console.log(`Disk-full test (full filesystem) SKIPPED: ${MOUNT}`);

function expectDiskFault(result: FaultCycleResult): void {
  expectNothingLost(result);
  expectReadinessFollowedTheFault(result);
  // The log names the disk error (not the failed ROLLBACK of a transaction SQLite had ended).
  expect(commitErrorCodes(result).length).toBeGreaterThan(0);
  expect(commitErrorCodes(result).filter((code) => !/^SQLITE_(FULL|IOERR)/.test(code))).toEqual([]);
}

/** The file the node leaves is sound and holds every acknowledged webhook's exact bytes. */
function expectIntactFile(dbPath: string, acked: ReadonlyMap<string, string>): void {
  const db = new Database(dbPath, { readonly: true });
  try {
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    const read = db.prepare('select raw_body from webhooks where uuid = ?').pluck();
    const differing = [...acked].filter(([uuid, body]) => (read.get(uuid) as Buffer | undefined)?.toString('utf8') !== body);
    expect(differing.map(([uuid]) => uuid)).toEqual([]);
  } finally {
    db.close();
  }
}

/** The codes of the errors the node logged for its failed commits. */
function commitErrorCodes(result: FaultCycleResult): string[] {
  const codes = new Set<string>();
  for (const line of result.serverLog.split('\n')) {
    if (!line.startsWith('{')) continue;
    const entry = JSON.parse(line) as { msg?: string; err?: { code?: string } };
    if (entry.msg === 'group commit failed') codes.add(entry.err?.code ?? 'none');
  }
  return [...codes].sort();
}

function report(name: string, result: FaultCycleResult): void {
  console.log(`disk fault (${name}): commit errors logged ${commitErrorCodes(result).join(', ')}`);
  console.log(
    `disk fault (${name}): acknowledged ${result.acknowledged}, lost ${result.lost}, corrupted ${result.corrupted}, ` +
      `refused with 503 ${result.refused}, accepted during the fault ${result.acceptedDuringFault}, /readyz during the fault ${JSON.stringify(result.readyzDuringFault)}, ` +
      `ready ${result.recoveryMs} ms after the fault ended (/readyz ${JSON.stringify(result.readyzStatuses)})`,
  );
}

function copyTemplateTo(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const dbPath = join(dir, 'intake.db');
  copyFileSync(template.dbPath, dbPath);
  return dbPath;
}

/** Sets the soft file size limit of the running server (bytes; `unlimited` ends the fault). */
function prlimit(server: ServerProcess, soft: string): void {
  const result = spawnSync('prlimit', ['--pid', String(server.child.pid), `--fsize=${soft}:`]);
  if (result.status !== 0) throw new Error(`prlimit failed: ${result.stderr.toString()}`);
}

const mounts: string[] = [];

function mountTmpfs(dir: string, size: string): void {
  const result = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir]);
  if (result.status !== 0) throw new Error(`mount failed: ${result.stderr.toString()}`);
  mounts.push(dir);
}

/** Why a small tmpfs cannot be mounted here (not root, no CAP_SYS_ADMIN), or undefined. */
function canMountTmpfs(): string | undefined {
  const probe = makeTempDir('intake-mount-probe-');
  const result = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', probe]);
  if (result.status !== 0) return `cannot mount a tmpfs (${result.stderr.toString().trim() || result.error?.message})`;
  spawnSync('umount', [probe]);
  return undefined;
}

/** Writes to `path` until the filesystem has no byte left; returns 1 (one file). */
function fill(path: string): number {
  const fd = openSync(path, 'a');
  try {
    for (const size of [1024 * 1024, 4096, 1]) {
      const chunk = Buffer.alloc(size, 0x78);
      try {
        for (;;) writeSync(fd, chunk);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
      }
    }
  } finally {
    closeSync(fd);
  }
  return 1;
}
