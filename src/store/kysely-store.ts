import { KyselyAccountStore } from './kysely/account-store.js';
import { KyselyAuditStore } from './kysely/audit-store.js';
import { KyselyCliLoginStore } from './kysely/cli-login-store.js';
import { KyselyCompanyStore } from './kysely/company-store.js';
import { KyselyDatabaseStore } from './kysely/database-store.js';
import { KyselyDestinationStore } from './kysely/destination-store.js';
import { KyselyErasureStore } from './kysely/erasure-store.js';
import { KyselyIntegrationStore } from './kysely/integration-store.js';
import { KyselyKeyStore } from './kysely/key-store.js';
import { KyselyStoreBase } from './kysely/store-base.js';
import { KyselyWebhookStore } from './kysely/webhook-store.js';
import type { Store } from './store.js';

/** The parts, one class per aggregate; each method of theirs is put on KyselyStore below. */
const PARTS = [
  KyselyDatabaseStore,
  KyselyKeyStore,
  KyselyIntegrationStore,
  KyselyWebhookStore,
  KyselyCompanyStore,
  KyselyAccountStore,
  KyselyAuditStore,
  KyselyDestinationStore,
  KyselyCliLoginStore,
  KyselyErasureStore,
] as const;

/** Every member of every part at once (the intersection of their types): what KyselyStore is, checked against Store. */
type PartMembers = UnionToIntersection<InstanceType<(typeof PARTS)[number]>>;
type UnionToIntersection<U> = (U extends unknown ? (part: U) => void : never) extends (all: infer All) => void ? All : never;

/**
 * The store on any SQL database Kysely speaks. Each dialect's module opens the connection
 * and passes what differs (column types); the queries are the same on every dialect.
 *
 * Its methods are written in one class per aggregate (./kysely/, beside the interface's one
 * file per aggregate and queries/' SQL) and put together on this one class, so that a
 * dialect's subclass (PostgresStore, ThreadedSqliteStore) overrides any of them as it would a
 * method written here.
 */
export class KyselyStore extends KyselyStoreBase implements Store {}
export interface KyselyStore extends PartMembers {}

for (const part of PARTS) {
  for (const [name, method] of Object.entries(Object.getOwnPropertyDescriptors(part.prototype))) {
    if (name === 'constructor') continue;
    // Two parts with a method of one name: one of them would never run.
    if (Object.hasOwn(KyselyStore.prototype, name)) throw new Error(`KyselyStore: two of its parts define ${name}`);
    Object.defineProperty(KyselyStore.prototype, name, method);
  }
}
