import type { Kysely, Selectable } from 'kysely';
import type { Scope } from '../../domain/api-key.js';
import type { PageCursor } from '../../domain/cursor.js';
import type { ApiKeysTable, Database } from '../schema.js';
import type { KeyCaller, KeyDetails } from '../store.js';
import { unionOfHalves } from './logs.js';

/**
 * Keys as the management API sees them. A key belongs to an integration (integrationId) or
 * is one of the company's management keys (integrationId null); every query asks for one
 * of the two, so a management key is never found as an integration's key or the reverse.
 */

export function keyOfRow(row: Selectable<ApiKeysTable>): KeyDetails {
  return {
    id: row.id,
    companyId: row.company_id,
    integrationId: row.integration_id,
    name: row.name,
    scopes: row.scopes.split(' ').filter(Boolean) as Scope[],
    prefix: row.prefix,
    createdAt: Number(row.created_at),
    expiresAt: nullableNumber(row.expires_at),
    revokedAt: nullableNumber(row.revoked_at),
    lastUsedAt: nullableNumber(row.last_used_at),
    lastUsedIp: row.last_used_ip,
  };
}

/** The company's keys of one integration (a live one) or its management keys. */
function keysOf(db: Kysely<Database>, companyId: string, integrationId: string | null) {
  const select = db.selectFrom('api_keys').selectAll().where('company_id', '=', companyId);
  if (integrationId === null) return select.where('integration_id', 'is', null);
  return select
    .where('integration_id', '=', integrationId)
    .where((eb) =>
      eb.exists(
        eb
          .selectFrom('integrations')
          .select('integrations.id')
          .where('integrations.company_id', '=', companyId)
          .where('integrations.id', '=', integrationId)
          .where('integrations.deleted_at', 'is', null),
      ),
    );
}

/** Newest first; the cursor is the last key's created_at and id. */
export async function listKeys(
  db: Kysely<Database>,
  companyId: string,
  integrationId: string | null,
  query: { limit: number; cursor?: PageCursor },
): Promise<KeyDetails[]> {
  let select = keysOf(db, companyId, integrationId);
  const cursor = query.cursor;
  if (cursor) {
    select = select.where((eb) =>
      eb.or([eb('created_at', '<', cursor.at), eb.and([eb('created_at', '=', cursor.at), eb('id', '<', cursor.id)])]),
    );
  }
  const rows = await select.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(query.limit).execute();
  return rows.map(keyOfRow);
}

export async function getKey(
  db: Kysely<Database>,
  companyId: string,
  integrationId: string | null,
  keyId: string,
): Promise<KeyDetails | undefined> {
  const row = await keysOf(db, companyId, integrationId).where('id', '=', keyId).executeTakeFirst();
  return row && keyOfRow(row);
}

/**
 * Marks the key revoked; undefined when the company has no such key there, false when it
 * was revoked already (nothing changed), true when it is revoked now.
 */
export async function revokeKey(
  trx: Kysely<Database>,
  companyId: string,
  integrationId: string | null,
  keyId: string,
  at: number,
): Promise<boolean | undefined> {
  if (!(await getKey(trx, companyId, integrationId, keyId))) return undefined;
  // Decided by the update itself, so of two revocations at once only one reports a change.
  const result = await trx
    .updateTable('api_keys')
    .set({ revoked_at: at })
    .where('company_id', '=', companyId)
    .where('id', '=', keyId)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/**
 * Request-log rows of each key at the integration's address since `since`, by key id
 * (keys without any are absent), from both halves of the log (logs.ts).
 */
export async function countKeyRequests(
  db: Kysely<Database>,
  companyId: string,
  integrationId: string,
  keyIds: string[],
  since: number,
): Promise<Map<string, number>> {
  if (keyIds.length === 0) return new Map();
  const counted = unionOfHalves(db, companyId, 'counts', (half) =>
    half
      .select((eb) => ['key_id', eb.fn.countAll<number>().as('requests')])
      .where('integration_id', '=', integrationId)
      .where('received_at', '>=', since)
      .where('key_id', 'in', keyIds)
      .groupBy('key_id'),
  );
  const rows = await db
    .selectFrom(counted.as('half'))
    .select((eb) => ['key_id', eb.fn.sum<number>('requests').as('requests')])
    .groupBy('key_id')
    .execute();
  return new Map(rows.map((row) => [row.key_id!, Number(row.requests)]));
}

/** Distinct senders (IP and user agent) of the key at the integration's address since `since`, most recent first. */
export async function listKeyCallers(
  db: Kysely<Database>,
  companyId: string,
  integrationId: string,
  keyId: string,
  query: { since: number; limit: number },
): Promise<KeyCaller[]> {
  const grouped = unionOfHalves(db, companyId, 'records', (half) =>
    half
      .select((eb) => ['ip', 'user_agent', eb.fn.max('received_at').as('last_seen_at'), eb.fn.countAll<number>().as('requests')])
      .where('integration_id', '=', integrationId)
      .where('received_at', '>=', query.since)
      .where('key_id', '=', keyId)
      .groupBy(['ip', 'user_agent']),
  );
  // Records, not counts: a webhook stored before migration 0010 has its user agent in
  // request_log. A sender seen in both halves (refused once, accepted since) is one caller.
  const rows = await db
    .selectFrom(grouped.as('half'))
    .select((eb) => ['ip', 'user_agent', eb.fn.max('last_seen_at').as('last_seen_at'), eb.fn.sum<number>('requests').as('requests')])
    .groupBy(['ip', 'user_agent'])
    .orderBy('last_seen_at', 'desc')
    .orderBy('ip')
    .orderBy('user_agent')
    .limit(query.limit)
    .execute();
  return rows.map((row) => ({
    ip: row.ip,
    userAgent: row.user_agent,
    lastSeenAt: Number(row.last_seen_at),
    requests: Number(row.requests),
  }));
}

function nullableNumber(value: number | null): number | null {
  return value === null ? null : Number(value);
}
