import type { Kysely, Migration, MigrationProvider } from 'kysely';
import type { DialectTypes } from '../dialect-types.js';
import * as initial from './0001-initial.js';
import * as logOrderAndClaimAge from './0002-log-order-and-claim-age.js';
import * as management from './0003-management.js';
import * as companyLogIndexes from './0004-company-log-indexes.js';
import * as accounts from './0005-accounts.js';
import * as sources from './0006-sources.js';
import * as destinations from './0007-destinations.js';
import * as deliveriesWaiting from './0008-deliveries-waiting.js';
import * as deliveriesVacuum from './0009-deliveries-vacuum.js';
import * as requestLogInWebhooks from './0010-request-log-in-webhooks.js';
import * as timeIndexesAscending from './0011-time-indexes-ascending.js';
import * as redeliveries from './0012-redeliveries.js';
import * as destinationRateSpacing from './0013-destination-rate-spacing.js';
import * as traceIds from './0014-trace-ids.js';
import * as cliLogins from './0015-cli-logins.js';
import * as destinationRules from './0016-destination-rules.js';
import * as redaction from './0017-redaction.js';
import * as erasures from './0018-erasures.js';
import * as integrationRetention from './0019-integration-retention.js';

export { AUTH_CHANGES_CHANNEL, type DialectTypes } from '../dialect-types.js';

type DialectMigration = { up(db: Kysely<unknown>, types: DialectTypes): Promise<void> };

/**
 * Every migration, in order. Names are their version; never change what a landed migration
 * does on a database it has already run on.
 */
const MIGRATIONS: Record<string, DialectMigration> = {
  '0001-initial': initial,
  '0002-log-order-and-claim-age': logOrderAndClaimAge,
  '0003-management': management,
  '0004-company-log-indexes': companyLogIndexes,
  '0005-accounts': accounts,
  '0006-sources': sources,
  '0007-destinations': destinations,
  '0008-deliveries-waiting': deliveriesWaiting,
  '0009-deliveries-vacuum': deliveriesVacuum,
  '0010-request-log-in-webhooks': requestLogInWebhooks,
  '0011-time-indexes-ascending': timeIndexesAscending,
  '0012-redeliveries': redeliveries,
  '0013-destination-rate-spacing': destinationRateSpacing,
  '0014-trace-ids': traceIds,
  '0015-cli-logins': cliLogins,
  '0016-destination-rules': destinationRules,
  '0017-redaction': redaction,
  '0018-erasures': erasures,
  '0019-integration-retention': integrationRetention,
};

/** Every migration's name, in order: what a new database gets. */
export const MIGRATION_NAMES: readonly string[] = Object.keys(MIGRATIONS);

/** The migrations for Kysely's Migrator, bound to one dialect's types. */
export class IntakeMigrations implements MigrationProvider {
  constructor(private readonly types: DialectTypes) {}

  async getMigrations(): Promise<Record<string, Migration>> {
    const bound: Record<string, Migration> = {};
    for (const [name, migration] of Object.entries(MIGRATIONS)) {
      bound[name] = { up: (db) => migration.up(db, this.types) };
    }
    return bound;
  }
}
