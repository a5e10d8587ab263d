import { afterAll, expect, test } from 'vitest';
import { faultCycle } from '../support/crash.js';
import { PrivatePostgres } from '../support/private-postgres.js';
import { cleanupAll } from '../support/processes.js';
import { expectNothingLost } from '../support/fault-expectations.js';

/**
 * The database itself killed (contract, "Sending a webhook": a 202 only after a committed
 * PostgreSQL transaction). A server of the test's own, under a node's load, gets SIGKILL
 * with all its backends, and is started again, recovering from its WAL. Every 202 must be
 * stored with its bytes; in between the node answers 503 and comes back by itself.
 *
 * What this does not prove: the kill leaves the operating system's page cache intact, so
 * it shows commit-before-acknowledge and WAL recovery, not the disk's flush (fsync=on is
 * set, and the power-loss case rests on it).
 */
const cannot = PrivatePostgres.unavailable();
let postgres: PrivatePostgres | undefined;

afterAll(async () => {
  await cleanupAll();
  await postgres?.destroy();
});

test.skipIf(cannot !== undefined)(
  'PostgreSQL killed with SIGKILL mid-load and restarted: nothing acknowledged is lost, the node recovers by itself',
  async () => {
    postgres = await PrivatePostgres.create();
    const server = postgres;
    let downMs = 0;
    const result = await faultCycle({
      target: { databaseUrl: server.url },
      concurrency: 16,
      maxFaultRounds: 1,
      // A restart includes crash recovery; the node's pool and LISTEN connection reconnect.
      recoveryBoundMs: 20_000,
      injectFault: async () => {
        const killedAt = performance.now();
        await server.kill();
        await server.start();
        downMs = Math.round(performance.now() - killedAt);
        return 1;
      },
    });
    console.log(
      `PostgreSQL kill -9: down ${downMs} ms; acknowledged ${result.acknowledged}, lost ${result.lost}, ` +
        `corrupted ${result.corrupted}, refused with 503 ${result.refused}, node ready again ${result.recoveryMs} ms after the restart, ` +
        `/readyz while recovering ${JSON.stringify(result.readyzStatuses)}`,
    );
    expectNothingLost(result);
  },
  90_000,
);

if (cannot) console.log(`PostgreSQL kill -9 test SKIPPED: ${cannot}`);
