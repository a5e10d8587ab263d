import { afterAll, expect, test } from 'vitest';
import { DeliveryRules } from '../../src/destinations/delivery-rules.js';
import { TransformPool } from '../../src/destinations/transform/pool.js';
import { validRules } from '../../src/domain/rules/rules.js';
import type { ClaimedDelivery, Store, WebhookBody } from '../../src/store/store.js';

/**
 * One company's transformations cannot take every sandbox worker: with a company whose code
 * loops on every delivery (each run stopped at its CPU limit), another company's delivery is
 * transformed on the other worker at once, not after the first company's backlog. The real
 * pool (two workers, dist/'s worker: `npm run build` first, as `npm test` does).
 */

const pool = new TransformPool({ workers: 2 });
afterAll(() => pool.close());

function delivery(companyId: string, n: number): ClaimedDelivery {
  return {
    id: `dlv_${companyId}_${n}`,
    companyId,
    destinationId: `dst_${companyId}`,
    leaseToken: 'lease',
    series: 0,
    attempt: 1,
    webhookUuid: `00000000-0000-4000-8000-00000000000${n}`,
    integrationId: 'int_1',
    event: 'order.created',
    destination: { url: 'https://example.invalid/hook', timeoutMs: 15_000, secretSealed: '', previousSecretSealed: null, headersSealed: null, rulesVersion: 1 },
    seriesStartedAt: 0,
    webhookReceivedAt: 0,
    sendAt: 0,
  };
}

const webhook: WebhookBody = { rawBody: Buffer.from('{"event":"order.created","data":{"id":1}}'), headersJson: '{}', contentType: 'application/json', hops: 0, payloadFormat: 'envelope' };

test("a company whose transformation loops holds one worker; another company's is made meanwhile", async () => {
  // The rules' store is not read by shape().
  const rules = new DeliveryRules(undefined as unknown as Store, () => pool);
  const looping = validRules({ transformation: { code: 'function transform() { for (;;) {} }' } });
  const quick = validRules({ transformation: { code: 'function transform(r) { r.headers["x-ok"] = "1"; return r; }' } });
  const finished: string[] = [];
  const hostile = [1, 2, 3, 4].map((n) => rules.shape(delivery('cmp_a', n), webhook, looping).then((shaped) => finished.push(`a${n}:${shaped.kind}`)));
  const other = rules.shape(delivery('cmp_b', 1), webhook, quick).then((shaped) => finished.push(`b1:${shaped.kind}`));
  await Promise.all([...hostile, other]);
  // Each of cmp_a's takes its CPU limit (50 ms); cmp_b's about a millisecond, on the free worker.
  expect(finished.indexOf('b1:request')).toBeLessThan(finished.indexOf('a2:error'));
  expect(finished.filter((f) => f.startsWith('a'))).toEqual(['a1:error', 'a2:error', 'a3:error', 'a4:error']);
});
