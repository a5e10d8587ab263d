import { sql, type Transaction } from 'kysely';
import { chunks } from '../group-rows.js';
import type { Database } from '../schema.js';
import { IDEMPOTENCY_WINDOW_MS, type CommitOutcome, type PendingWebhook } from '../store.js';

/**
 * Each webhook's fate against the idempotency claims, inside its group's transaction.
 *
 * A claim is a row of `idempotency_keys`: (integration, key) → the webhook that holds it,
 * with its body's hash. Two kinds share the table. An idempotency key (an `Idempotency-Key`
 * header, a provider's delivery id): a repeat with the same body is a replay, with another
 * body a conflict. A signature claim (a provider's signed request, PendingWebhook's
 * signatureClaim): a repeat is a replay, whatever delivery id it carries, since many
 * providers do not sign theirs. Signature claims are keyed with the source's secret
 * (src/sources/verifier.ts), so no made-up delivery id can take one's place beforehand.
 */

/** Where signature claims sit among the idempotency keys. */
const SIGNATURE_CLAIM_PREFIX = 'signature:';

interface Holder {
  uuid: string;
  bodySha256: string | null;
  receivedAt: number;
}

/**
 * Decides each webhook's fate: its idempotency key first (as before signatures were
 * claimed), then, for a signed webhook its key let through, its signature. A signed copy
 * is a replay of the first webhook with that signature, and the key it claimed on the way
 * is given back: a claim always names a stored webhook.
 */
export async function resolveIdempotency(trx: Transaction<Database>, webhooks: PendingWebhook[]): Promise<CommitOutcome[]> {
  const byKey = await claim(trx, webhooks, (w) => w.idempotencyKey, (w) => w.bodySha256!);
  const outcomes = webhooks.map((w) => outcomeOf(w, byKey.get(w)));
  // API-key webhooks carry no signature claim: this is all they cost.
  const signed = webhooks.filter((w, i) => w.signatureClaim !== undefined && outcomes[i]!.kind === 'accepted');
  if (signed.length === 0) return outcomes;
  // A signature claim is already a MAC of what was signed: it stands for the body's hash,
  // so a signed webhook without an idempotency key hashes its body no more.
  const bySignature = await claim(trx, signed, (w) => SIGNATURE_CLAIM_PREFIX + w.signatureClaim, (w) => w.signatureClaim!);
  const originals = new Map<string, { uuid: string; receivedAt: number }>();
  for (const w of signed) {
    const holder = bySignature.get(w)!;
    if (holder.uuid !== w.uuid) originals.set(w.uuid, { uuid: holder.uuid, receivedAt: holder.receivedAt });
  }
  if (originals.size === 0) return outcomes;
  await giveBackKeys(trx, signed.filter((w) => originals.has(w.uuid) && w.idempotencyKey !== null));
  return outcomes.map((outcome) => {
    // A copy, and the replays of it in this group, are replays of the original.
    const original = outcome.kind === 'conflict' ? undefined : originals.get(outcome.uuid);
    return original ? { kind: 'replayed', ...original } : outcome;
  });
}

function outcomeOf(w: PendingWebhook, holder: Holder | undefined): CommitOutcome {
  if (holder === undefined || holder.uuid === w.uuid) return { kind: 'accepted', uuid: w.uuid, receivedAt: w.receivedAt };
  if (holder.bodySha256 === w.bodySha256) return { kind: 'replayed', uuid: holder.uuid, receivedAt: holder.receivedAt };
  return { kind: 'conflict' };
}

/**
 * Claims each webhook's key (`keyOf`; null: none) and says who holds it. The first webhook
 * of the group with a key claims it with an upsert that only replaces a claim older than
 * the window: a unique constraint, not memory, so several nodes agree. The others of the
 * group, and a claim another webhook holds, find their holder.
 */
async function claim(
  trx: Transaction<Database>,
  webhooks: PendingWebhook[],
  keyOf: (w: PendingWebhook) => string | null,
  /** What the claim keeps of the body, to tell a replay from a conflict. */
  hashOf: (w: PendingWebhook) => string,
): Promise<Map<PendingWebhook, Holder>> {
  const claimants = new Map<string, { w: PendingWebhook; key: string }>();
  for (const w of webhooks) {
    const key = keyOf(w);
    if (key !== null && !claimants.has(claimId(w.integrationId, key))) claimants.set(claimId(w.integrationId, key), { w, key });
  }
  const holders = new Map<string, Holder>();
  if (claimants.size > 0) {
    const won = new Set<string>();
    // Claimed in key order, so two nodes' groups lock shared keys in the same order and
    // one waits for the other instead of deadlocking.
    const ordered = [...claimants.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, claimant]) => claimant);
    for (const chunk of chunks(ordered)) {
      const rows = await trx
        .insertInto('idempotency_keys')
        .values(
          chunk.map(({ w, key }) => ({
            integration_id: w.integrationId,
            idempotency_key: key,
            company_id: w.companyId,
            webhook_uuid: w.uuid,
            body_sha256: hashOf(w),
            created_at: w.receivedAt,
          })),
        )
        .onConflict((oc) =>
          oc
            .columns(['integration_id', 'idempotency_key'])
            .doUpdateSet((eb) => ({
              company_id: eb.ref('excluded.company_id'),
              webhook_uuid: eb.ref('excluded.webhook_uuid'),
              body_sha256: eb.ref('excluded.body_sha256'),
              created_at: eb.ref('excluded.created_at'),
            }))
            // Only a claim older than the window (counted from this request) is replaced.
            .where(({ eb, ref }) =>
              eb('idempotency_keys.created_at', '<', sql<number>`${ref('excluded.created_at')} - ${IDEMPOTENCY_WINDOW_MS}`),
            ),
        )
        .returning(['integration_id', 'idempotency_key'])
        .execute();
      for (const row of rows) won.add(claimId(row.integration_id, row.idempotency_key));
    }
    for (const [id, { w }] of claimants) {
      if (won.has(id)) holders.set(id, { uuid: w.uuid, bodySha256: hashOf(w), receivedAt: w.receivedAt });
    }
    const lost = [...claimants.entries()].filter(([id]) => !won.has(id)).map(([, claimant]) => claimant);
    for (const chunk of chunks(lost)) {
      const rows = await trx
        .selectFrom('idempotency_keys')
        .select(['integration_id', 'idempotency_key', 'webhook_uuid', 'body_sha256', 'created_at'])
        .where((eb) =>
          eb(
            eb.refTuple('integration_id', 'idempotency_key'),
            'in',
            chunk.map(({ w, key }) => eb.tuple(w.integrationId, key)),
          ),
        )
        .execute();
      for (const row of rows) {
        holders.set(claimId(row.integration_id, row.idempotency_key), {
          uuid: row.webhook_uuid,
          bodySha256: row.body_sha256,
          receivedAt: Number(row.created_at),
        });
      }
    }
  }
  const byWebhook = new Map<PendingWebhook, Holder>();
  for (const w of webhooks) {
    const key = keyOf(w);
    if (key === null) continue;
    const holder = holders.get(claimId(w.integrationId, key));
    if (!holder) throw new Error('idempotency key neither claimed nor found');
    byWebhook.set(w, holder);
  }
  return byWebhook;
}

/** Deletes the key claims these webhooks made in this transaction (they turned out to store nothing). */
async function giveBackKeys(trx: Transaction<Database>, webhooks: PendingWebhook[]): Promise<void> {
  for (const chunk of chunks(webhooks)) {
    await trx
      .deleteFrom('idempotency_keys')
      .where((eb) =>
        eb(
          eb.refTuple('integration_id', 'idempotency_key'),
          'in',
          chunk.map((w) => eb.tuple(w.integrationId, w.idempotencyKey!)),
        ),
      )
      .where(
        'webhook_uuid',
        'in',
        chunk.map((w) => w.uuid),
      )
      .execute();
  }
}

function claimId(integrationId: string, key: string): string {
  return `${integrationId} ${key}`;
}
