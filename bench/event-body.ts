import { createRequire } from 'node:module';

/** The request body every load phase sends, and where it came from. */
export interface EventBody {
  /** As intake's API key takes it: `{"event": …, "data": …}`. */
  bytes: Buffer;
  /** The same event as its provider sends it (the `data` alone), for a provider source. */
  providerBytes: Buffer;
  event: string;
  source: string;
}

const MIN_BYTES = 1024;
const MAX_BYTES = 8192;

interface WebhookDefinition {
  name: string;
  examples: unknown[];
}

/**
 * A GitHub `push` webhook from Octokit's collected examples (a real payload, about 7 KB),
 * wrapped as intake expects. If that package is missing, a generated 2 KB event instead,
 * so the benchmark still runs.
 */
export function loadEventBody(): EventBody {
  try {
    const require = createRequire(import.meta.url);
    const definitions = require('@octokit/webhooks-examples') as WebhookDefinition[];
    const push = definitions.find((definition) => definition.name === 'push');
    for (const example of push?.examples ?? []) {
      const bytes = Buffer.from(JSON.stringify({ event: 'push', data: example }));
      if (bytes.length >= MIN_BYTES && bytes.length <= MAX_BYTES) {
        return { bytes, providerBytes: Buffer.from(JSON.stringify(example)), event: 'push', source: '@octokit/webhooks-examples' };
      }
    }
  } catch {
    // Not installed: fall through to the generated event.
  }
  const data = generatedEvent();
  return { bytes: Buffer.from(JSON.stringify({ event: 'invoice.paid', data })), providerBytes: Buffer.from(JSON.stringify(data)), event: 'invoice.paid', source: 'generated' };
}

function generatedEvent(): Record<string, unknown> {
  const lines = Array.from({ length: 12 }, (_, i) => ({
    id: `li_${i}`,
    description: `Seat licence, month ${i + 1}`,
    amount: 1200 + i,
    currency: 'eur',
    period: { start: 1_700_000_000 + i * 2_592_000, end: 1_700_000_000 + (i + 1) * 2_592_000 },
  }));
  const data = { id: 'in_1', customer: 'cus_1', amount_paid: 14_466, paid: true, lines };
  return data;
}

/**
 * A 180-byte event (an order, with a few fields), the size the side-by-side figures
 * used: the request's own work then outweighs its bytes.
 */
export function smallEventBody(): EventBody {
  const data = { id: 'ord_8c1f2b', amount: 4999, currency: 'eur', customer: 'cus_4Fh2k9', items: [{ sku: 'sku_1', quantity: 2 }], note: 'leave at the front door.' };
  return {
    bytes: Buffer.from(JSON.stringify({ event: 'order.created', data })),
    providerBytes: Buffer.from(JSON.stringify(data)),
    event: 'order.created',
    source: 'generated (small)',
  };
}
