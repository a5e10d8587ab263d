import type { Kysely } from 'kysely';
import type { ProviderType, SourceConfig } from '../../domain/source-types.js';
import type { Database } from '../schema.js';
import type { NewSourceSecret, RouteSource, SealedValue, SourceSecretChange, SourceSecretInfo } from '../store.js';

/** A source's signing secrets: several live at once only while one is being rotated. */

export async function insertSecret(db: Kysely<Database>, companyId: string, integrationId: string, secret: NewSourceSecret): Promise<void> {
  await db
    .insertInto('source_secrets')
    .values({
      id: secret.id,
      company_id: companyId,
      integration_id: integrationId,
      sealed: secret.sealed,
      created_at: secret.createdAt,
      expires_at: null,
    })
    .execute();
}

/** Adds `change.add` (if any) and ends every other live secret of the integration by `change.othersExpireAt`. */
export async function rotateSecret(db: Kysely<Database>, companyId: string, integrationId: string, change: SourceSecretChange): Promise<void> {
  await db
    .updateTable('source_secrets')
    .set({ expires_at: change.othersExpireAt })
    .where('company_id', '=', companyId)
    .where('integration_id', '=', integrationId)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', change.othersExpireAt)]))
    .execute();
  if (change.add) await insertSecret(db, companyId, integrationId, change.add);
}

export async function endSecret(
  db: Kysely<Database>,
  companyId: string,
  integrationId: string,
  secretId: string,
  at: number,
): Promise<boolean> {
  const result = await db
    .updateTable('source_secrets')
    .set({ expires_at: at })
    .where('company_id', '=', companyId)
    .where('integration_id', '=', integrationId)
    .where('id', '=', secretId)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', at)]))
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

export async function listLiveSecrets(
  db: Kysely<Database>,
  companyId: string,
  integrationId: string,
  now: number,
): Promise<SourceSecretInfo[]> {
  const rows = await db
    .selectFrom('source_secrets')
    .select(['id', 'created_at', 'expires_at'])
    .where('company_id', '=', companyId)
    .where('integration_id', '=', integrationId)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map((row) => ({
    id: row.id,
    createdAt: Number(row.created_at),
    expiresAt: row.expires_at === null ? null : Number(row.expires_at),
  }));
}

/**
 * Which of these provider integrations of the company have no secret live at `now`: those
 * waiting for the secret their provider shows later (one query for a page of them).
 */
export async function awaitingSecret(
  db: Kysely<Database>,
  companyId: string,
  integrationIds: readonly string[],
  now: number,
): Promise<Set<string>> {
  if (integrationIds.length === 0) return new Set();
  const rows = await db
    .selectFrom('integrations')
    .select('id')
    .where('company_id', '=', companyId)
    .where('id', 'in', integrationIds)
    .where('source_type', '!=', 'api_key')
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('source_secrets')
            .select('source_secrets.id')
            .whereRef('source_secrets.integration_id', '=', 'integrations.id')
            .where((inner) => inner.or([inner('source_secrets.expires_at', 'is', null), inner('source_secrets.expires_at', '>', now)])),
        ),
      ),
    )
    .execute();
  return new Set(rows.map((row) => row.id));
}

/** The provider source of an integration row, with the secrets live at `now`, still sealed. */
export async function routeSource(
  db: Kysely<Database>,
  row: { id: string; source_type: string; source_config: string },
  now: number,
): Promise<RouteSource> {
  const secrets = await db
    .selectFrom('source_secrets')
    .select(['id', 'sealed', 'expires_at'])
    .where('integration_id', '=', row.id)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
    // Newest first: during a rotation, senders move to the new secret.
    .orderBy('created_at', 'desc')
    .execute();
  return {
    type: row.source_type as ProviderType,
    config: JSON.parse(row.source_config) as SourceConfig,
    secrets: secrets.map((s) => ({ id: s.id, sealed: s.sealed, expiresAt: s.expires_at === null ? null : Number(s.expires_at) })),
  };
}

export async function listSealedValues(db: Kysely<Database>): Promise<SealedValue[]> {
  const users = await db
    .selectFrom('users')
    .select(['id', 'totp_secret', 'totp_pending_secret'])
    .where((eb) => eb.or([eb('totp_secret', 'is not', null), eb('totp_pending_secret', 'is not', null)]))
    .execute();
  const secrets = await db.selectFrom('source_secrets').select(['id', 'sealed']).execute();
  const destinations = await db.selectFrom('destinations').select(['id', 'secret_sealed', 'previous_secret_sealed', 'headers_sealed']).execute();
  const values: SealedValue[] = [];
  for (const user of users) {
    if (user.totp_secret !== null) values.push({ kind: 'totp_secret', id: user.id, sealed: user.totp_secret });
    if (user.totp_pending_secret !== null) values.push({ kind: 'totp_pending_secret', id: user.id, sealed: user.totp_pending_secret });
  }
  for (const secret of secrets) values.push({ kind: 'source_secret', id: secret.id, sealed: secret.sealed });
  for (const destination of destinations) {
    for (const kind of DESTINATION_SEALED) {
      const sealed = destination[kind];
      if (sealed !== null) values.push({ kind, id: destination.id, sealed });
    }
  }
  return values;
}

/** A destination's sealed columns: its signing secret, the previous one during a rotation, its headers. */
const DESTINATION_SEALED = ['secret_sealed', 'previous_secret_sealed', 'headers_sealed'] as const;

/** Each value replaced only where it is still what was read: a concurrent change wins. */
export async function replaceSealedValues(db: Kysely<Database>, values: Array<SealedValue & { resealed: string }>): Promise<number> {
  let replaced = 0;
  for (const value of values) {
    const kind = value.kind;
    const result =
      kind === 'source_secret'
        ? await db
            .updateTable('source_secrets')
            .set({ sealed: value.resealed })
            .where('id', '=', value.id)
            .where('sealed', '=', value.sealed)
            .executeTakeFirst()
        : kind === 'totp_secret' || kind === 'totp_pending_secret'
          ? await db
              .updateTable('users')
              .set({ [kind]: value.resealed })
              .where('id', '=', value.id)
              .where(kind, '=', value.sealed)
              .executeTakeFirst()
          : await db
              .updateTable('destinations')
              .set({ [kind]: value.resealed })
              .where('id', '=', value.id)
              .where(kind, '=', value.sealed)
              .executeTakeFirst();
    if (result.numUpdatedRows > 0n) replaced++;
  }
  return replaced;
}
