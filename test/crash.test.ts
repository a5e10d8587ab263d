import { afterAll, afterEach, beforeAll, expect, test } from 'vitest';
import { copyOfTemplate, crashCycle, type TenantTemplate } from './support/crash.js';
import { cleanupAll, killAll } from './support/processes.js';
import { sqliteTenantTemplate } from './support/tenant-template.js';

/**
 * Durability under kill -9 on SQLite (contract, "Sending a webhook": "an acknowledged
 * webhook survives kill -9"): load the real server with concurrent webhooks, SIGKILL it at a
 * random moment, restart it on the same SQLite file and check that every 202 it gave is
 * there, byte for byte. The harness is support/crash.ts; test/postgres/crash.test.ts runs it
 * on PostgreSQL.
 */

const CYCLES = 3;
const totals = { acknowledged: 0, lost: 0, corrupted: 0 };
let template: TenantTemplate;

beforeAll(async () => {
  template = await sqliteTenantTemplate();
});
afterEach(() => killAll());
afterAll(async () => {
  console.log(`crash totals over ${CYCLES} cycles: acknowledged ${totals.acknowledged}, lost ${totals.lost}, corrupted ${totals.corrupted}`);
  await cleanupAll();
});

for (let cycle = 1; cycle <= CYCLES; cycle++) {
  test(`crash cycle ${cycle}: every webhook acknowledged before kill -9 is stored, byte for byte`, async () => {
    const result = await crashCycle({ target: copyOfTemplate(template) });
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
