import type { Kysely, Selectable } from 'kysely';
import type { DialectTypes } from '../migrations/index.js';
import type { Database, ErasuresTable } from '../schema.js';
import type {
  Actor,
  AuditEvent,
  ErasureConfirmation,
  ErasureCounts,
  ErasureCriteria,
  ErasureEnd,
  ErasureRecord,
  ErasureScanPage,
  ErasureScanQuery,
  ErasureStep,
  ErasureTarget,
  ErasureWork,
  NewErasure,
} from '../store.js';
import { insertAudit } from './audit.js';
import { headColumns, headOfRow, readBodies, WHOLE, withinBudget } from './webhooks.js';

/**
 * Erasure by data subject (issue 40): the requests, the scan of a company's webhooks, and
 * the steps that replace what matched by a tombstone. What a tombstone keeps and drops is
 * docs/personal-data.md's "Erasure".
 */

/** Requests waiting for a node: a preview counting, an erasure queued, one whose node stopped renewing its lease. */
const RUNNABLE_STATES = ['counting', 'queued', 'running'];

export async function createErasure(db: Kysely<Database>, erasure: NewErasure, audit: AuditEvent): Promise<ErasureRecord> {
  return db.transaction().execute(async (trx) => {
    await trx
      .insertInto('erasures')
      .values({
        id: erasure.id,
        company_id: erasure.companyId,
        state: erasure.dryRun ? 'counting' : 'queued',
        dry_run: erasure.dryRun ? 1 : 0,
        value_sealed: erasure.valueSealed,
        value_hint: erasure.valueHint,
        criteria: JSON.stringify(erasure.criteria),
        requested_by_type: erasure.requestedBy.type,
        requested_by_id: erasure.requestedBy.id,
        confirmed_by_type: erasure.dryRun ? null : erasure.requestedBy.type,
        confirmed_by_id: erasure.dryRun ? null : erasure.requestedBy.id,
        created_at: erasure.createdAt,
        confirmed_at: erasure.dryRun ? null : erasure.createdAt,
        started_at: null,
        finished_at: null,
        expires_at: erasure.expiresAt,
        cursor_received_at: null,
        cursor_uuid: null,
        error: null,
        lease_token: null,
      })
      .execute();
    await insertAudit(trx, erasure.companyId, audit);
    return (await getErasure(trx, erasure.companyId, erasure.id))!;
  });
}

export async function getErasure(db: Kysely<Database>, companyId: string, id: string): Promise<ErasureRecord | undefined> {
  const row = await db.selectFrom('erasures').selectAll().where('company_id', '=', companyId).where('id', '=', id).executeTakeFirst();
  return row && recordOfRow(row);
}

export async function listErasures(db: Kysely<Database>, companyId: string, query: { limit: number; before?: string }): Promise<ErasureRecord[]> {
  let select = db.selectFrom('erasures').selectAll().where('company_id', '=', companyId);
  // Ids are time-ordered (ers_ + a time-ordered id), so the id alone pages.
  if (query.before !== undefined) select = select.where('id', '<', query.before);
  const rows = await select.orderBy('id', 'desc').limit(query.limit).execute();
  return rows.map(recordOfRow);
}

export async function confirmErasure(
  db: Kysely<Database>,
  companyId: string,
  id: string,
  { by, at, until, audit }: ErasureConfirmation,
): Promise<ErasureRecord | 'not_found' | 'not_previewed'> {
  return db.transaction().execute(async (trx) => {
    const row = await trx.selectFrom('erasures').select(['state', 'expires_at', 'criteria']).where('company_id', '=', companyId).where('id', '=', id).executeTakeFirst();
    if (!row) return 'not_found';
    if (row.state !== 'previewed' || (row.expires_at !== null && row.expires_at <= at)) return 'not_previewed';
    const criteria = JSON.parse(row.criteria) as ErasureCriteria;
    await trx
      .updateTable('erasures')
      .set({
        state: 'queued',
        dry_run: 0,
        criteria: JSON.stringify(criteria.untilConfirmed && until !== null ? { ...criteria, until } : criteria),
        confirmed_by_type: by.type,
        confirmed_by_id: by.id,
        confirmed_at: at,
        expires_at: null,
        cursor_received_at: null,
        cursor_uuid: null,
        scanned: 0,
        webhooks: 0,
        deliveries: 0,
        attempts: 0,
        request_log: 0,
        sample: '[]',
        started_at: null,
        finished_at: null,
        lease_token: null,
        lease_expires_at: 0,
      })
      .where('company_id', '=', companyId)
      .where('id', '=', id)
      .where('state', '=', 'previewed')
      .execute();
    await insertAudit(trx, companyId, audit);
    return (await getErasure(trx, companyId, id))!;
  });
}

export async function takeErasure(db: Kysely<Database>, at: number, token: string, leaseMs: number): Promise<ErasureWork | undefined> {
  // Previews no one confirmed: their value goes now, whether or not a node has work.
  await db
    .updateTable('erasures')
    .set({ state: 'expired', value_sealed: null, lease_token: null })
    .where('state', '=', 'previewed')
    .where('expires_at', '<=', at)
    .execute();
  return db.transaction().execute(async (trx) => {
    const waiting = await trx
      .selectFrom('erasures')
      .selectAll()
      .where('state', 'in', RUNNABLE_STATES)
      .where('lease_expires_at', '<=', at)
      .orderBy('created_at')
      .limit(20)
      .execute();
    for (const row of waiting) {
      // One at a time per company: another of its erasures under a live lease goes first.
      const busy = await trx
        .selectFrom('erasures')
        .select('id')
        .where('company_id', '=', row.company_id)
        .where('state', 'in', RUNNABLE_STATES)
        .where('lease_expires_at', '>', at)
        .executeTakeFirst();
      if (busy) continue;
      const taken = await trx
        .updateTable('erasures')
        .set({
          lease_token: token,
          lease_expires_at: at + leaseMs,
          state: row.state === 'queued' ? 'running' : row.state,
          started_at: row.started_at ?? at,
        })
        .where('id', '=', row.id)
        .where('lease_expires_at', '<=', at)
        .executeTakeFirst();
      if (Number(taken.numUpdatedRows) !== 1 || row.value_sealed === null) continue;
      const record = recordOfRow(row);
      return {
        id: row.id,
        companyId: row.company_id,
        dryRun: row.dry_run === 1,
        valueSealed: row.value_sealed,
        criteria: record.criteria,
        cursor: row.cursor_received_at === null || row.cursor_uuid === null ? null : { receivedAt: Number(row.cursor_received_at), uuid: row.cursor_uuid },
        counts: record.counts,
        sample: record.sample,
        erasedBy: record.confirmedBy ?? record.requestedBy,
      };
    }
    return undefined;
  });
}

export async function scanErasure(db: Kysely<Database>, types: DialectTypes, companyId: string, query: ErasureScanQuery): Promise<ErasureScanPage> {
  let select = db
    .selectFrom('webhooks')
    .select(headColumns(types))
    .where('company_id', '=', companyId)
    .where('received_at', '>=', query.since)
    .where('received_at', '<', query.until)
    .where('erasure_id', 'is', null);
  if (query.integrationIds !== null) select = select.where('integration_id', 'in', query.integrationIds.length > 0 ? query.integrationIds : ['']);
  const cursor = query.cursor;
  if (cursor) {
    select = select
      .where('received_at', '>=', cursor.receivedAt)
      .where((eb) => eb.or([eb('received_at', '>', cursor.receivedAt), eb.and([eb('received_at', '=', cursor.receivedAt), eb('uuid', '>', cursor.uuid)])]));
  }
  const heads = (await select.orderBy('received_at').orderBy('uuid').limit(query.rows).execute()).map(headOfRow);
  const kept = withinBudget(heads, query.bytes);
  const last = kept.at(-1);
  if (last === undefined) return { webhooks: [], last: null, more: false };
  // The cursor moves past every head kept, those purged since the heads were read too.
  return {
    webhooks: await readBodies(db, companyId, kept, WHOLE),
    last: { receivedAt: last.receivedAt, uuid: last.uuid },
    more: kept.length < heads.length || heads.length === query.rows,
  };
}

export async function countErasureLinks(db: Kysely<Database>, companyId: string, targets: readonly ErasureTarget[]): Promise<ErasureCounts> {
  if (targets.length === 0) return { webhooks: 0, deliveries: 0, attempts: 0, requestLog: 0 };
  const uuids = targets.map((target) => target.uuid);
  const deliveries = await db
    .selectFrom('deliveries')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('company_id', '=', companyId)
    .where('webhook_uuid', 'in', uuids)
    .executeTakeFirstOrThrow();
  const attempts = await db
    .selectFrom('delivery_attempts')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('company_id', '=', companyId)
    .where('delivery_id', 'in', (eb) => eb.selectFrom('deliveries').select('id').where('company_id', '=', companyId).where('webhook_uuid', 'in', uuids))
    .where('response_excerpt', 'is not', null)
    .executeTakeFirstOrThrow();
  const requestLog = await db
    .selectFrom('request_log')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('company_id', '=', companyId)
    .where('webhook_uuid', 'in', uuids)
    .executeTakeFirstOrThrow();
  // Every stored webhook holds its own 202's record (migration 0010): one row of the log each.
  return { webhooks: targets.length, deliveries: Number(deliveries.n), attempts: Number(attempts.n), requestLog: targets.length + Number(requestLog.n) };
}

/**
 * One step, in a worker's transaction (committed without waiting for the disk: SQLite's
 * synchronous=NORMAL, PostgreSQL's synchronous_commit=off), so that a step does not add a
 * flush to intake's commit thread. A crash can lose the last steps, never half of one: the
 * erasure then goes on from the cursor saved before them, and erases those webhooks again.
 * Its end (finishErasure) waits for the disk, and with it every step before it.
 */
export async function erasureStep(db: Kysely<Database>, types: DialectTypes, companyId: string, step: ErasureStep): Promise<boolean> {
  return types.workerTransaction(db, async (trx) => {
    // The lease first, renewed by an update that PostgreSQL holds locked to the end: another
    // node that takes the erasure over waits for this step, and then finds the lease moved on.
    const leased = await trx
      .updateTable('erasures')
      .set({ lease_expires_at: step.at + step.leaseMs })
      .where('company_id', '=', companyId)
      .where('id', '=', step.id)
      .where('lease_token', '=', step.token)
      .executeTakeFirst();
    if (Number(leased.numUpdatedRows) !== 1) return false;
    const counts = step.dryRun ? (step.counted ?? zero) : await tombstone(trx, companyId, step);
    await trx
      .updateTable('erasures')
      .set((eb) => ({
        cursor_received_at: step.cursor.receivedAt,
        cursor_uuid: step.cursor.uuid,
        scanned: eb('scanned', '+', step.scanned),
        webhooks: eb('webhooks', '+', counts.webhooks),
        deliveries: eb('deliveries', '+', counts.deliveries),
        attempts: eb('attempts', '+', counts.attempts),
        request_log: eb('request_log', '+', counts.requestLog),
        sample: JSON.stringify(step.sample),
      }))
      .where('id', '=', step.id)
      .execute();
    return true;
  });
}

const zero: ErasureCounts = { webhooks: 0, deliveries: 0, attempts: 0, requestLog: 0 };

/**
 * The targets replaced by the tombstone: body, headers and the sender's address and user
 * agent (its 202's record) in the webhook's row; the request-log rows naming it lose the
 * sender's address and user agent; its attempts lose the receiver's response excerpt; its
 * deliveries keep their states and times, but one still to be made is cancelled (it would
 * carry the tombstone, or nothing).
 */
async function tombstone(trx: Kysely<Database>, companyId: string, step: ErasureStep): Promise<ErasureCounts> {
  if (step.targets.length === 0) return zero;
  const uuids = step.targets.map((target) => target.uuid);
  const times = step.targets.map((target) => target.receivedAt);
  const webhooks = await trx
    .updateTable('webhooks')
    .set({ raw_body: step.tombstone, payload_format: 'json', headers: '{}', source_ip: '', user_agent: null, erasure_id: step.id })
    .where('company_id', '=', companyId)
    // The time bounds let PostgreSQL read only the partitions that hold them.
    .where('received_at', '>=', Math.min(...times))
    .where('received_at', '<=', Math.max(...times))
    .where('uuid', 'in', uuids)
    .where('erasure_id', 'is', null)
    .executeTakeFirst();
  const deliveryIds = trx.selectFrom('deliveries').select('id').where('company_id', '=', companyId).where('webhook_uuid', 'in', uuids);
  const attempts = await trx
    .updateTable('delivery_attempts')
    .set({ response_excerpt: null })
    .where('company_id', '=', companyId)
    .where('delivery_id', 'in', deliveryIds)
    .where('response_excerpt', 'is not', null)
    .executeTakeFirst();
  await trx
    .updateTable('deliveries')
    .set({ state: 'cancelled', next_attempt_at: null, lease_token: null, last_error: `Its webhook was erased (${step.id}).`, updated_at: step.at })
    .where('company_id', '=', companyId)
    .where('webhook_uuid', 'in', uuids)
    .where('state', 'in', ['pending', 'held'])
    .execute();
  const deliveries = await trx
    .selectFrom('deliveries')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('company_id', '=', companyId)
    .where('webhook_uuid', 'in', uuids)
    .executeTakeFirstOrThrow();
  const requestLog = await trx
    .updateTable('request_log')
    .set({ ip: '', user_agent: null })
    .where('company_id', '=', companyId)
    .where('webhook_uuid', 'in', uuids)
    .executeTakeFirst();
  const erased = Number(webhooks.numUpdatedRows);
  return {
    webhooks: erased,
    deliveries: Number(deliveries.n),
    attempts: Number(attempts.numUpdatedRows),
    requestLog: erased + Number(requestLog.numUpdatedRows),
  };
}

export async function finishErasure(db: Kysely<Database>, companyId: string, id: string, token: string, end: ErasureEnd): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const preview = end.state === 'previewed';
    const done = await trx
      .updateTable('erasures')
      .set({
        state: end.state,
        finished_at: end.at,
        error: end.error ?? null,
        lease_token: null,
        lease_expires_at: 0,
        ...(preview ? { expires_at: end.expiresAt ?? null } : { value_sealed: null }),
      })
      .where('company_id', '=', companyId)
      .where('id', '=', id)
      .where('lease_token', '=', token)
      .executeTakeFirst();
    if (Number(done.numUpdatedRows) !== 1) return false;
    await insertAudit(trx, companyId, end.audit);
    return true;
  });
}

function recordOfRow(row: Selectable<ErasuresTable>): ErasureRecord {
  return {
    id: row.id,
    companyId: row.company_id,
    state: row.state as ErasureRecord['state'],
    dryRun: row.dry_run === 1,
    valueHint: row.value_hint,
    criteria: JSON.parse(row.criteria) as ErasureRecord['criteria'],
    requestedBy: { type: row.requested_by_type as Actor['type'], id: row.requested_by_id },
    confirmedBy: row.confirmed_by_type === null ? null : { type: row.confirmed_by_type as Actor['type'], id: row.confirmed_by_id },
    createdAt: Number(row.created_at),
    confirmedAt: numberOrNull(row.confirmed_at),
    startedAt: numberOrNull(row.started_at),
    finishedAt: numberOrNull(row.finished_at),
    expiresAt: numberOrNull(row.expires_at),
    scanned: Number(row.scanned),
    counts: { webhooks: Number(row.webhooks), deliveries: Number(row.deliveries), attempts: Number(row.attempts), requestLog: Number(row.request_log) },
    sample: JSON.parse(row.sample) as ErasureRecord['sample'],
    error: row.error,
  };
}

function numberOrNull(value: number | null): number | null {
  return value === null ? null : Number(value);
}
