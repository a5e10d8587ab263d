import { userInfo } from 'node:os';
import { loadConfig, type Config } from '../config.js';
import { AddressGuard } from '../destinations/address-guard.js';
import type { SecretBox } from '../domain/secret-box.js';
import { openSecretBox } from '../secrets.js';
import { TransformPool } from '../destinations/transform/pool.js';
import { DestinationManagement } from '../services/destinations.js';
import { Management } from '../services/management.js';
import { Redeliveries } from '../services/redeliveries.js';
import { openStore } from '../store/open-store.js';
import type { Actor, Store } from '../store/store.js';

export interface CommandContext {
  config: Config;
  store: Store;
  management: Management;
  destinations: DestinationManagement;
  redeliveries: Redeliveries;
  /** Who the audit log says made a change: the operating-system account that ran the command. */
  actor: Actor;
  secrets: SecretBox;
}

/** Opens the configured database (migrating it, so a fresh one works), runs, closes. */
export async function withStore<T>(
  run: (context: CommandContext) => Promise<T>,
  options: { migrate: boolean } = { migrate: true },
): Promise<T> {
  const config = loadConfig();
  const store = openStore(config.databaseUrl, { poolSize: 2 });
  try {
    if (options.migrate) await store.migrate();
    const secrets = openSecretBox(config);
    // The audit log names the operating-system account that ran the command.
    const actor = { type: 'cli' as const, id: userInfo().username, ip: null };
    return await run({ config, store, actor, secrets, ...operatorServices(store, config, secrets, actor) });
  } finally {
    await store.close();
  }
}

/**
 * The services an operator's command works through, on `store` as `config` sets them up:
 * also what tests use to set up tenants in their own process (test/support/operator.ts).
 */
export function operatorServices(
  store: Store,
  config: Config,
  secrets: SecretBox,
  actor: Actor,
): Pick<CommandContext, 'management' | 'destinations' | 'redeliveries'> {
  const management = new Management(
    store,
    { environment: config.environment, baseUrl: config.baseUrl, defaultBodyLimit: config.defaultBodyLimit, secrets, passwordHashCost: config.passwordHashCost },
    actor,
  );
  const addressGuard = new AddressGuard(config.destinationAllow);
  const destinations = new DestinationManagement(store, { environment: config.environment, secrets, addressGuard, baseUrl: config.baseUrl, checkTransformation }, actor);
  const redeliveries = new Redeliveries(store, { perHour: config.redeliveryBudgetPerHour });
  return { management, destinations, redeliveries };
}

/** A transformation compiled in a sandbox of its own, as the server's would (one command, one check). */
async function checkTransformation(code: string): Promise<string | null> {
  const pool = new TransformPool({ workers: 1 });
  try {
    return await pool.check(code);
  } finally {
    await pool.close();
  }
}

/**
 * Prints a command's result: with --json exactly one JSON object on stdout, otherwise one
 * `name: value` line per field.
 */
export function print(result: Record<string, unknown>, options: { json?: boolean }, note?: string): void {
  if (options.json) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return;
  }
  const lines = Object.entries(result).map(([name, value]) => `${name}: ${Array.isArray(value) ? value.join(', ') || '(none)' : String(value)}`);
  if (note) lines.push(note);
  process.stdout.write(`${lines.join('\n')}\n`);
}

export const SHOWN_ONCE = 'The API key is shown only this once: store it now.';

/** An ISO-8601 time, or null. */
export function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}
