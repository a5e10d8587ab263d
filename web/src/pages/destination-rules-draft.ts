import type { DestinationRules } from './destination-shared';

/**
 * A destination's rules as the editor holds them (JSON and code as text, numbers as typed),
 * and as PATCH /destinations/{id} and the try route take them. The API checks every part and
 * names the bad one; the editor checks only what it must to build the request (the filter
 * is JSON), so the words for the rest are the API's.
 */

export interface RulesDraft {
  filter: string;
  transformation: string;
  deduplicate: boolean;
  /** As typed: paths separated by commas or spaces; empty compares the whole body. */
  dedupeFields: string;
  dedupeWindow: string;
  delay: string;
  retry: boolean;
  retryStrategy: 'exponential' | 'linear';
  retryAttempts: string;
  retryInterval: string;
  /** Empty: no bound. */
  retryMaxAge: string;
}

/**
 * The rules without their version, as sent; null removes every rule. A number left empty
 * is left out (undefined), for the API to say what it needs there.
 */
export type RulesBody = {
  filter: Record<string, unknown> | null;
  transformation: { code: string } | null;
  deduplicate: { fields: string[] | null; window_seconds: number | undefined } | null;
  delay_seconds: number | undefined;
  retry: {
    strategy: 'exponential' | 'linear';
    attempts: number | undefined;
    interval_seconds: number | undefined;
    max_age_seconds: number | null | undefined;
  } | null;
} | null;

/** The parts of the editor a problem is shown beside. */
export type RulePart = 'filter' | 'transformation' | 'deduplicate' | 'delay' | 'retry';

/** Each part in words, for "the … has a problem". */
export const PART_NAMES: Record<RulePart, string> = {
  filter: 'filter',
  transformation: 'transformation',
  deduplicate: 'deduplication',
  delay: 'delay',
  retry: 'retry schedule',
};

/** A problem with one part, in words: the editor's own, or the API's 400 (`field` names the part). */
export class RuleProblem extends Error {
  constructor(
    readonly part: RulePart | undefined,
    message: string,
  ) {
    super(message);
  }
}

/** The part an API error's `field` (`rules.filter`, `rules.retry.attempts`…) is about. */
export function partOfField(field: string | undefined): RulePart | undefined {
  if (!field) return undefined;
  const parts: [string, RulePart][] = [
    ['rules.filter', 'filter'],
    ['rules.transformation', 'transformation'],
    ['rules.deduplicate', 'deduplicate'],
    ['rules.delay_seconds', 'delay'],
    ['rules.retry', 'retry'],
  ];
  return parts.find(([prefix]) => field === prefix || field.startsWith(`${prefix}.`))?.[1];
}

/** The part a field of the draft belongs to. */
export function partOfDraftKey(key: keyof RulesDraft): RulePart {
  if (key === 'filter' || key === 'transformation' || key === 'delay') return key;
  return key.startsWith('dedupe') || key === 'deduplicate' ? 'deduplicate' : 'retry';
}

/** When a part is turned on, it starts from these (the API's usual values). */
const DEFAULT_WINDOW_SECONDS = 300;
const DEFAULT_RETRY = { strategy: 'exponential', attempts: 8, interval_seconds: 60 } as const;

export function draftOfRules(rules: DestinationRules): RulesDraft {
  return {
    filter: rules.filter === null ? '' : JSON.stringify(rules.filter, null, 2),
    transformation: rules.transformation?.code ?? '',
    deduplicate: rules.deduplicate !== null,
    dedupeFields: rules.deduplicate?.fields?.join(', ') ?? '',
    dedupeWindow: String(rules.deduplicate?.window_seconds ?? DEFAULT_WINDOW_SECONDS),
    delay: rules.delay_seconds === 0 ? '' : String(rules.delay_seconds),
    retry: rules.retry !== null,
    retryStrategy: rules.retry?.strategy ?? DEFAULT_RETRY.strategy,
    retryAttempts: String(rules.retry?.attempts ?? DEFAULT_RETRY.attempts),
    retryInterval: String(rules.retry?.interval_seconds ?? DEFAULT_RETRY.interval_seconds),
    retryMaxAge: rules.retry?.max_age_seconds == null ? '' : String(rules.retry.max_age_seconds),
  };
}

function number(text: string): number | undefined {
  return text.trim() === '' ? undefined : Number(text);
}

/** The rules as the API takes them; throws a RuleProblem when the filter is not JSON. */
export function parseRulesDraft(draft: RulesDraft): RulesBody {
  let filter: Record<string, unknown> | null = null;
  if (draft.filter.trim() !== '') {
    try {
      filter = JSON.parse(draft.filter) as Record<string, unknown>;
    } catch (error) {
      throw new RuleProblem('filter', `The filter is not valid JSON: ${(error as Error).message}`);
    }
  }
  const fields = draft.dedupeFields.split(/[\s,]+/).filter((f) => f !== '');
  const rules: NonNullable<RulesBody> = {
    filter,
    transformation: draft.transformation.trim() === '' ? null : { code: draft.transformation },
    deduplicate: draft.deduplicate ? { fields: fields.length === 0 ? null : fields, window_seconds: number(draft.dedupeWindow) } : null,
    delay_seconds: draft.delay.trim() === '' ? 0 : number(draft.delay),
    retry: draft.retry
      ? {
          strategy: draft.retryStrategy,
          attempts: number(draft.retryAttempts),
          interval_seconds: number(draft.retryInterval),
          max_age_seconds: draft.retryMaxAge.trim() === '' ? null : number(draft.retryMaxAge),
        }
      : null,
  };
  const none = !rules.filter && !rules.transformation && !rules.deduplicate && rules.delay_seconds === 0 && !rules.retry;
  return none ? null : rules;
}

/** 300 → "5 min", 7200 → "2 h", 90 → "90 s". */
export function formatSeconds(seconds: number): string {
  const units: [string, number][] = [
    ['d', 86400],
    ['h', 3600],
    ['min', 60],
  ];
  for (const [unit, size] of units) if (seconds >= size && seconds % size === 0) return `${seconds / size} ${unit}`;
  return `${seconds} s`;
}

export interface Example {
  label: string;
  text: string;
}

/** Filters for common providers, one click away in the editor (docs/destinations.md has more). */
export const FILTER_EXAMPLES: Example[] = [
  {
    label: 'Stripe: live mode only',
    text: JSON.stringify({ body: { livemode: true } }, null, 2),
  },
  {
    label: 'GitHub: pushes to main',
    text: JSON.stringify({ headers: { 'x-github-event': 'push' }, body: { ref: 'refs/heads/main' } }, null, 2),
  },
];

export const TRANSFORMATION_EXAMPLES: Example[] = [
  {
    label: 'Shopify: reshape an order',
    text: `// Shopify order → what the billing service takes
function transform(request, context) {
  const order = request.body;
  request.body = {
    order_id: String(order.id),
    total_cents: Math.round(Number(order.total_price) * 100),
    currency: order.currency,
    event: context.event,
  };
  request.headers['x-billing-source'] = 'shopify';
  request.path = '/orders'; // appended to the destination's URL path
  return request; // return nothing to drop the delivery
}
`,
  },
];

export const TRANSFORMATION_PLACEHOLDER = `function transform(request, context) {
  // request: {body, headers, path, query}; return nothing to drop it
  return request;
}`;
