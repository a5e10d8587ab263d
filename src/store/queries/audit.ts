import type { Kysely } from 'kysely';
import { newSequencedId } from '../../domain/ids.js';
import type { Database } from '../schema.js';
import type { AuditEvent, AuditQuery, AuditRecord } from '../store.js';

/** Records one change; called inside the transaction that makes it, so both or neither land. */
export async function insertAudit(db: Kysely<Database>, companyId: string, event: AuditEvent | undefined): Promise<void> {
  if (!event) return;
  await db
    .insertInto('audit_log')
    .values({
      id: newSequencedId('aud', event.at),
      company_id: companyId,
      at: event.at,
      actor_type: event.actor.type,
      actor_id: event.actor.id,
      actor_ip: event.actor.ip,
      action: event.action,
      target_type: event.targetType,
      target_id: event.targetId,
      before: event.before === undefined ? null : JSON.stringify(event.before),
      after: event.after === undefined ? null : JSON.stringify(event.after),
    })
    .execute();
}

/**
 * Records a change of a person's own account (their password, their two-factor sign-in) in
 * the audit log of every company they belong to; inside the change's transaction.
 */
export async function insertAuditOfUser(db: Kysely<Database>, userId: string, event: AuditEvent | undefined): Promise<void> {
  if (!event) return;
  const memberships = await db.selectFrom('memberships').select('company_id').where('user_id', '=', userId).execute();
  for (const { company_id } of memberships) await insertAudit(db, company_id, event);
}

/** The company's audit log, newest first. */
export async function listAuditLog(db: Kysely<Database>, companyId: string, query: AuditQuery): Promise<AuditRecord[]> {
  let select = db.selectFrom('audit_log').selectAll().where('company_id', '=', companyId);
  if (query.action !== undefined) select = select.where('action', '=', query.action);
  if (query.actorId !== undefined) select = select.where('actor_id', '=', query.actorId);
  if (query.targetId !== undefined) select = select.where('target_id', '=', query.targetId);
  if (query.since !== undefined) select = select.where('at', '>=', query.since);
  if (query.until !== undefined) select = select.where('at', '<', query.until);
  const cursor = query.cursor;
  if (cursor) {
    select = select
      .where('at', '<=', cursor.at)
      .where((eb) => eb.or([eb('at', '<', cursor.at), eb.and([eb('at', '=', cursor.at), eb('id', '<', cursor.id)])]));
  }
  const rows = await select.orderBy('at', 'desc').orderBy('id', 'desc').limit(query.limit).execute();
  return rows.map((row) => ({
    id: row.id,
    companyId: row.company_id,
    at: Number(row.at),
    actor: { type: row.actor_type as AuditRecord['actor']['type'], id: row.actor_id, ip: row.actor_ip },
    action: row.action,
    targetType: row.target_type,
    targetId: row.target_id,
    ...(row.before === null ? {} : { before: JSON.parse(row.before) as unknown }),
    ...(row.after === null ? {} : { after: JSON.parse(row.after) as unknown }),
  }));
}
