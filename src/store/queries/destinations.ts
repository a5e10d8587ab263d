import type { Kysely, Selectable, Updateable } from 'kysely';
import type { PageCursor } from '../../domain/cursor.js';
import type { DialectTypes } from '../migrations/index.js';
import type { Database, DestinationsTable } from '../schema.js';
import { headersFollowUrl } from '../../domain/destination-headers.js';
import { hasRules, NO_RULES, rulesFromJson, rulesToJson, type DestinationRules } from '../../domain/rules/rules.js';
import type { AuditEvent, Destination, DestinationChanges, DestinationStatus, NewDestination } from '../store.js';
import { insertAudit } from './audit.js';
import { lockCompany } from './members.js';

/** A company's destinations: their settings, sealed secrets and status (the management side). */

/** A destination's row with its current rules' JSON (null when it has none). */
type DestinationRow = Selectable<DestinationsTable> & { rules_json: string | null };

export function destinationOfRow(row: DestinationRow): Destination {
  return {
    id: row.id,
    companyId: row.company_id,
    name: row.name,
    url: row.url,
    integrationIds: row.integration_ids === null ? null : (JSON.parse(row.integration_ids) as string[]),
    eventPatterns: JSON.parse(row.event_patterns) as string[],
    headerNames: JSON.parse(row.header_names) as string[],
    timeoutMs: row.timeout_ms,
    ratePerSecond: row.rate_per_second,
    maxInFlight: row.max_in_flight,
    status: row.status as DestinationStatus,
    disabledReason: row.disabled_reason,
    statusChangedAt: Number(row.status_changed_at),
    failingSince: row.failing_since === null ? null : Number(row.failing_since),
    lastSuccessAt: row.last_success_at === null ? null : Number(row.last_success_at),
    previousSecretExpiresAt: row.previous_secret_expires_at === null ? null : Number(row.previous_secret_expires_at),
    rules: row.rules_json === null ? NO_RULES : rulesFromJson(row.rules_json),
    rulesVersion: row.rules_version,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

/**
 * Creates the destination unless the company has `maxLive` live ones already (undefined
 * then, or when there is no such company). Counted under the company's lock in the
 * insert's transaction: counted before it, 400 parallel creates on PostgreSQL each saw
 * room and made 347.
 */
export async function createDestination(
  db: Kysely<Database>,
  companyId: string,
  destination: NewDestination,
  audit: AuditEvent,
  maxLive: number,
): Promise<Destination | undefined> {
  return db.transaction().execute(async (trx) => {
    if (!(await lockCompany(trx, companyId))) return undefined;
    const live = await trx
      .selectFrom('destinations')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('company_id', '=', companyId)
      .where('deleted_at', 'is', null)
      .executeTakeFirstOrThrow();
    if (Number(live.count) >= maxLive) return undefined;
    await trx
      .insertInto('destinations')
      .values({
        id: destination.id,
        company_id: companyId,
        name: destination.name,
        url: destination.url,
        integration_ids: destination.integrationIds === null ? null : JSON.stringify(destination.integrationIds),
        event_patterns: JSON.stringify(destination.eventPatterns),
        headers_sealed: destination.headersSealed,
        header_names: JSON.stringify(destination.headerNames),
        secret_sealed: destination.secretSealed,
        previous_secret_sealed: null,
        previous_secret_expires_at: null,
        timeout_ms: destination.timeoutMs,
        rate_per_second: destination.ratePerSecond,
        max_in_flight: destination.maxInFlight,
        rules_version: hasRules(destination.rules) ? 1 : 0,
        delay_ms: destination.rules.delayMs,
        disabled_reason: null,
        status_changed_at: destination.createdAt,
        failing_since: null,
        last_success_at: null,
        created_at: destination.createdAt,
        updated_at: destination.createdAt,
        deleted_at: null,
      })
      .execute();
    if (hasRules(destination.rules)) await insertRules(trx, companyId, destination.id, 1, destination.rules, destination.createdAt);
    await insertAudit(trx, companyId, { ...audit, targetId: destination.id });
    return (await findLiveDestination(trx, companyId, destination.id))!;
  });
}

async function insertRules(trx: Kysely<Database>, companyId: string, destinationId: string, version: number, rules: DestinationRules, at: number): Promise<void> {
  await trx
    .insertInto('destination_rules')
    .values({ destination_id: destinationId, version, company_id: companyId, rules: rulesToJson(rules), created_at: at })
    .execute();
}

/** The company's destination with this id, unless it was deleted. */
export async function findLiveDestination(db: Kysely<Database>, companyId: string, destinationId: string): Promise<Destination | undefined> {
  const row = await withRules(liveDestination(db, companyId, destinationId)).executeTakeFirst();
  return row && destinationOfRow(row);
}

function liveDestination(db: Kysely<Database>, companyId: string, destinationId: string) {
  return db
    .selectFrom('destinations')
    .where('destinations.company_id', '=', companyId)
    .where('destinations.id', '=', destinationId)
    .where('destinations.deleted_at', 'is', null);
}

/** Every column of the destinations selected, with their current rules beside them. */
function withRules<Q extends ReturnType<typeof liveDestination>>(query: Q) {
  return query
    .leftJoin('destination_rules as r', (join) => join.onRef('r.destination_id', '=', 'destinations.id').onRef('r.version', '=', 'destinations.rules_version'))
    .selectAll('destinations')
    .select('r.rules as rules_json');
}

/** The company's live destinations, newest first. */
export async function listDestinations(
  db: Kysely<Database>,
  companyId: string,
  query: { limit: number; cursor?: PageCursor },
): Promise<Destination[]> {
  let select = db.selectFrom('destinations').where('destinations.company_id', '=', companyId).where('destinations.deleted_at', 'is', null);
  const cursor = query.cursor;
  if (cursor) {
    select = select.where((eb) =>
      eb.or([
        eb('destinations.created_at', '<', cursor.at),
        eb.and([eb('destinations.created_at', '=', cursor.at), eb('destinations.id', '<', cursor.id)]),
      ]),
    );
  }
  const rows = await withRules(select).orderBy('destinations.created_at', 'desc').orderBy('destinations.id', 'desc').limit(query.limit).execute();
  return rows.map(destinationOfRow);
}

/**
 * Applies the changes to a live destination in one transaction with its audit record. A
 * status change marks it for the pending/held moves (reconcileHeldDeliveries); turning it
 * active again clears its failure streak and the reason it was disabled. A URL of another
 * origin than the stored one drops the headers, unless the same change sets them
 * (headersFollowUrl): judged here, on the row locked, so no concurrent change slips between.
 */
export async function updateDestination(
  db: Kysely<Database>,
  types: DialectTypes,
  companyId: string,
  destinationId: string,
  changes: DestinationChanges,
  at: number,
  audit: AuditEvent,
): Promise<{ before: Destination; after: Destination } | undefined> {
  return db.transaction().execute(async (trx) => {
    const locked = await types.lockForUpdate(liveDestination(trx, companyId, destinationId).select('destinations.id')).executeTakeFirst();
    if (!locked) return undefined;
    const row = (await withRules(liveDestination(trx, companyId, destinationId)).executeTakeFirst())!;
    const before = destinationOfRow(row);
    const set: Updateable<DestinationsTable> = { updated_at: at };
    if (changes.name !== undefined) set.name = changes.name;
    if (changes.url !== undefined) set.url = changes.url;
    if (changes.integrationIds !== undefined) set.integration_ids = changes.integrationIds === null ? null : JSON.stringify(changes.integrationIds);
    if (changes.eventPatterns !== undefined) set.event_patterns = JSON.stringify(changes.eventPatterns);
    if (changes.timeoutMs !== undefined) set.timeout_ms = changes.timeoutMs;
    if (changes.ratePerSecond !== undefined) set.rate_per_second = changes.ratePerSecond;
    if (changes.maxInFlight !== undefined) set.max_in_flight = changes.maxInFlight;
    // The same rules saved again make no new version: the version names what changed.
    if (changes.rules !== undefined && rulesToJson(changes.rules) !== rulesToJson(before.rules)) {
      // Every save is a new version, even one that clears them: a delivery's version then
      // always names the rules it went out under.
      set.rules_version = row.rules_version + 1;
      set.delay_ms = changes.rules.delayMs;
      await insertRules(trx, companyId, destinationId, row.rules_version + 1, changes.rules, at);
    }
    const headers =
      changes.headers ?? (changes.url !== undefined && !headersFollowUrl(row.url, changes.url) ? { sealed: null, names: [] } : undefined);
    if (headers !== undefined) {
      set.headers_sealed = headers.sealed;
      set.header_names = JSON.stringify(headers.names);
    }
    if (changes.secret !== undefined) {
      set.previous_secret_sealed = row.secret_sealed;
      set.previous_secret_expires_at = changes.secret.previousExpiresAt;
      set.secret_sealed = changes.secret.sealed;
    }
    if (changes.status !== undefined && changes.status !== before.status) {
      set.status = changes.status;
      set.status_changed_at = at;
      set.needs_reconcile = 1;
      if (changes.status === 'active') {
        set.disabled_reason = null;
        set.failing_since = null;
      }
    }
    await trx.updateTable('destinations').set(set).where('company_id', '=', companyId).where('id', '=', destinationId).execute();
    const after = (await findLiveDestination(trx, companyId, destinationId))!;
    await insertAudit(trx, companyId, { ...audit, before: audit.before ?? before, after: audit.after ?? after });
    return { before, after };
  });
}

/**
 * Deletes the destination (kept for its history). What it had not delivered yet is
 * cancelled by reconcileHeldDeliveries in batches, not here: a paused destination's backlog
 * can be millions of rows, too many for one transaction; no claim takes them meanwhile.
 */
export async function deleteDestination(
  db: Kysely<Database>,
  companyId: string,
  destinationId: string,
  at: number,
  audit: AuditEvent,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const deleted = await trx
      .updateTable('destinations')
      .set({ deleted_at: at, updated_at: at, needs_reconcile: 1 })
      .where('company_id', '=', companyId)
      .where('id', '=', destinationId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    if (Number(deleted.numUpdatedRows) === 0) return false;
    await insertAudit(trx, companyId, audit);
    return true;
  });
}
