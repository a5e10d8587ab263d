import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '../helpers.js';
import { freePort } from './processes.js';
import { probePostgres } from './postgres-server.js';

/**
 * A PostgreSQL server of a test's own (initdb in a temporary folder, its own port), for
 * faults that cannot be made on the shared server: kill -9 of the whole server. Built from
 * the machine's PostgreSQL binaries; PostgreSQL refuses to run as root, so as root it runs
 * as the `postgres` user through runuser.
 */
export class PrivatePostgres {
  private server: ChildProcess | undefined;

  private constructor(
    private readonly bin: string,
    private readonly dataDir: string,
    private readonly root: string,
    readonly port: number,
    private readonly asPostgresUser: boolean,
  ) {}

  /** Why a private server cannot run here, or undefined when it can. */
  static unavailable(): string | undefined {
    if (!postgresBin()) return 'no PostgreSQL server binaries under /usr/lib/postgresql';
    if (userInfo().uid === 0 && spawnSync('runuser', ['-u', 'postgres', '--', 'true']).status !== 0) {
      return 'running as root without a postgres user to run the server as';
    }
    return undefined;
  }

  static async create(): Promise<PrivatePostgres> {
    const bin = postgresBin()!;
    const root = mkdtempSync('/tmp/intake-pg-');
    const asPostgresUser = userInfo().uid === 0;
    const owner = asPostgresUser ? spawnSync('id', ['-u', 'postgres']).stdout.toString().trim() : undefined;
    if (owner) chownSync(root, Number(owner), Number(spawnSync('id', ['-g', 'postgres']).stdout.toString().trim()));
    const instance = new PrivatePostgres(bin, join(root, 'data'), root, await freePort(), asPostgresUser);
    const init = instance.run(join(bin, 'initdb'), ['-D', instance.dataDir, '-A', 'trust', '-U', 'postgres', '--no-sync']);
    const done = await new Promise<number | null>((resolve) => init.once('close', resolve));
    if (done !== 0) throw new Error(`initdb failed with ${done}`);
    await instance.start();
    return instance;
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  /** Starts the server (after a kill: crash recovery replays the WAL) and waits until it answers. */
  async start(): Promise<void> {
    this.server = this.run(join(this.bin, 'postgres'), [
      '-D', this.dataDir, '-p', String(this.port), '-k', this.root, '-c', 'listen_addresses=127.0.0.1',
      '-c', 'fsync=on', '-c', 'synchronous_commit=on',
    ], true);
    await waitFor(async () => ((await probePostgres(this.url)).ok ? true : undefined), 'the private PostgreSQL', 20_000);
  }

  /** SIGKILL to the server and every backend (its own process group): a crash, no shutdown. */
  async kill(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server || server.exitCode !== null || server.signalCode !== null) return;
    const exited = new Promise((resolve) => server.once('exit', resolve));
    process.kill(-server.pid!, 'SIGKILL');
    await exited;
    // Backends of a killed postmaster go with their process group; wait until none is left
    // holding the data directory, or the restart would refuse to start.
    await waitFor(async () => (postgresProcessesOf(server.pid!) === 0 ? true : undefined), 'the backends to exit');
  }

  async destroy(): Promise<void> {
    await this.kill();
    rmSync(this.root, { recursive: true, force: true });
  }

  private run(command: string, args: string[], detached = false): ChildProcess {
    const [file, argv] = this.asPostgresUser ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
    // detached: its own process group, so kill() reaches the backends too.
    return spawn(file, argv, { stdio: 'ignore', detached });
  }
}

function postgresBin(): string | undefined {
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const version = readdirSync(base).sort().at(-1);
  const bin = version && join(base, version, 'bin');
  return bin && existsSync(join(bin, 'postgres')) ? bin : undefined;
}

/** Processes still in the process group `group`. */
function postgresProcessesOf(group: number): number {
  const result = spawnSync('pgrep', ['-g', String(group)]);
  return result.stdout.toString().split('\n').filter(Boolean).length;
}
