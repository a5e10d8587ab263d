/**
 * A destination's filter, in the shape of Hookdeck's (https://hookdeck.com/docs/filters):
 * JSON over the request's parts, `{ body, headers, query, path }`, each matched by value.
 * A primitive matches by equality, an object field by field, an array input when some
 * element matches ("contains"), a filter array when the input holds every element of it;
 * `$`-keys are operators, and `$or`, `$and`, `$not` also combine whole filters at the top.
 *
 * A filter is a tenant's and a body is a stranger's, so both are bounded: a filter by its
 * size, depth and node count when it is saved, a match by a work budget (see MAX_STEPS).
 * Pure: no clock, no store, no HTTP.
 */

/** A filter as saved: a JSON value over the request's parts. */
export type Filter = Record<string, unknown>;

/** What a filter sees of a webhook. */
export interface FilterInput {
  body: unknown;
  /** Names in lower case. */
  headers: Record<string, string>;
  query: Record<string, string | string[]>;
  path: string;
}

/** A filter that cannot be saved: `path` is where (`body.amount.$gte`; '' for the whole filter). */
export class FilterError extends Error {
  readonly path: string;
  /** What is wrong, without the path. */
  readonly reason: string;

  constructor(path: string, reason: string) {
    super(`${path === '' ? 'filter' : path}: ${reason}`);
    this.name = 'FilterError';
    this.path = path;
    this.reason = reason;
  }
}

const FILTER_LIMITS = { bytes: 64 * 1024, depth: 32, nodes: 1000 } as const;

const PARTS = ['body', 'headers', 'query', 'path'] as const;
const COMBINATORS = ['$or', '$and', '$not'] as const;
const TOP_LEVEL_KEYS = [...PARTS, ...COMBINATORS].join(', ');
const OPERATORS = ['$eq', '$neq', '$in', '$nin', '$gt', '$gte', '$lt', '$lte', '$startsWith', '$endsWith', '$exist', ...COMBINATORS];

/** The filter itself, checked and returned; throws FilterError naming the first bad part. */
export function validateFilter(filter: unknown): Filter {
  const check = new Checker();
  check.topLevel(filter, '', 1);
  // After the walk, so the value is known to be finite, acyclic JSON that stringify can take.
  if (Buffer.byteLength(JSON.stringify(filter), 'utf8') > FILTER_LIMITS.bytes) {
    throw new FilterError('', `is larger than ${FILTER_LIMITS.bytes / 1024} KiB as JSON`);
  }
  return filter as Filter;
}

class Checker {
  private nodes = 0;

  topLevel(value: unknown, path: string, depth: number): void {
    this.node(value, path, depth);
    if (!isPlainObject(value)) throw new FilterError(path, `expects an object whose keys are among ${TOP_LEVEL_KEYS}`);
    for (const [key, part] of ownEntries(value, path)) {
      const at = join(path, key);
      if (key === '$or' || key === '$and') this.list(part, at, depth + 1, 'filters of the same shape', (f, p, d) => this.topLevel(f, p, d));
      else if (key === '$not') this.topLevel(part, at, depth + 1);
      else if ((PARTS as readonly string[]).includes(key)) this.value(part, at, depth + 1);
      else throw new FilterError(at, `is not a part of the request; a filter's keys are among ${TOP_LEVEL_KEYS}`);
    }
  }

  /** A filter value: a primitive, an array of filter values, or an object of fields and operators. */
  private value(value: unknown, path: string, depth: number): void {
    this.node(value, path, depth);
    if (Array.isArray(value)) {
      for (const [index, element] of ownElements(value, path)) this.value(element, `${path}[${index}]`, depth + 1);
    } else if (isPlainObject(value)) {
      for (const [key, operand] of ownEntries(value, path)) {
        if (key.startsWith('$')) this.operator(key, operand, join(path, key), depth + 1);
        else this.value(operand, join(path, key), depth + 1);
      }
    }
  }

  private operator(name: string, operand: unknown, path: string, depth: number): void {
    const reject = (expected: string) => new FilterError(path, `expects ${expected}`);
    switch (name) {
      case '$eq':
      case '$neq':
        return this.literal(operand, path, depth);
      case '$in':
      case '$nin':
        if (typeof operand !== 'string' && !Array.isArray(operand)) throw reject('a list of values or a string');
        return this.literal(operand, path, depth);
      case '$gt':
      case '$gte':
      case '$lt':
      case '$lte':
        if (typeof operand !== 'string' && !isFiniteNumber(operand)) throw reject('a number or a string');
        return this.node(operand, path, depth);
      case '$startsWith':
      case '$endsWith':
        if (typeof operand !== 'string') throw reject('a string');
        return this.node(operand, path, depth);
      case '$exist':
        if (typeof operand !== 'boolean') throw reject('true or false');
        return this.node(operand, path, depth);
      case '$or':
      case '$and':
        return this.list(operand, path, depth, 'filters', (f, p, d) => this.value(f, p, d));
      case '$not':
        return this.value(operand, path, depth);
      default:
        throw new FilterError(path, `is not an operator; the operators are ${OPERATORS.join(', ')}`);
    }
  }

  private list(value: unknown, path: string, depth: number, what: string, each: (element: unknown, path: string, depth: number) => void): void {
    this.node(value, path, depth);
    if (!Array.isArray(value) || value.length === 0) throw new FilterError(path, `expects a non-empty list of ${what}`);
    for (const [index, element] of ownElements(value, path)) each(element, `${path}[${index}]`, depth + 1);
  }

  /** An operand compared as data: its keys are field names, never operators. */
  private literal(value: unknown, path: string, depth: number): void {
    this.node(value, path, depth);
    if (Array.isArray(value)) for (const [index, element] of ownElements(value, path)) this.literal(element, `${path}[${index}]`, depth + 1);
    else if (isPlainObject(value)) for (const [key, element] of ownEntries(value, path)) this.literal(element, join(path, key), depth + 1);
  }

  /** Every node is counted and its depth checked before anything reads into it, so a cycle or a huge array stops here. */
  private node(value: unknown, path: string, depth: number): void {
    if (depth > FILTER_LIMITS.depth) throw new FilterError(path, `is nested deeper than ${FILTER_LIMITS.depth} levels`);
    if (++this.nodes > FILTER_LIMITS.nodes) throw new FilterError(path, `makes the filter longer than ${FILTER_LIMITS.nodes} operators and values`);
    const json = value === null || typeof value === 'string' || typeof value === 'boolean' || isFiniteNumber(value) || Array.isArray(value) || isPlainObject(value);
    if (!json) throw new FilterError(path, 'is not a JSON value');
  }
}

/** Own data properties only, one at a time: a getter could throw, and inherited keys are not the filter's. */
function* ownEntries(object: object, path: string): Generator<[string, unknown]> {
  for (const key of Object.keys(object)) yield [key, ownValue(object, key, join(path, key))];
}

function* ownElements(array: unknown[], path: string): Generator<[number, unknown]> {
  for (let index = 0; index < array.length; index++) yield [index, ownValue(array, String(index), `${path}[${index}]`)];
}

function ownValue(container: object, key: string, path: string): unknown {
  const descriptor = Object.getOwnPropertyDescriptor(container, key);
  if (descriptor === undefined || !('value' in descriptor)) throw new FilterError(path, 'is not a JSON value');
  return descriptor.value;
}

/** `body.amount`, `$or[0]`, `headers["x y"]`: a key that is not a plain word is quoted, so every path reads one way. */
function join(path: string, key: string): string {
  const part = /^[\w$-]+$/.test(key) ? key : `[${JSON.stringify(key)}]`;
  return path === '' || part.startsWith('[') ? `${path}${part}` : `${path}.${part}`;
}

/**
 * Matching costs at most about (filter nodes × input nodes) steps, and a 16 MiB body against
 * a 1,000-node filter would be billions. Filters run on the event loop that also answers
 * webhooks (in the delivery worker), so the budget is small: 250,000 steps, 4 to 25 ms at
 * worst (2,000,000 measured 30 to 200 ms on arrays of five million elements); a filter of a
 * few nodes stays far below it on any body intake accepts. Past it the webhook does not
 * pass: a destination misses a webhook it could not decide on, rather than being sent one
 * its filter might have refused.
 */
const MAX_STEPS = 250_000;

interface Work {
  left: number;
}

class WorkExhausted extends Error {}

function spend(work: Work, steps = 1): void {
  work.left -= steps;
  if (work.left < 0) throw new WorkExhausted('filter work budget spent');
}

/**
 * A native scan (Array#includes, String#includes) costs 2 to 6 ns an element or character
 * and a step 15 to 90 ns (measured): counted as one step per 128, a single scan of the
 * largest body intake accepts (16 MiB, about 60 ms of scanning at worst) stays within the
 * budget, and eight such scans of one body exhaust it.
 */
function spendScan(work: Work, length: number): void {
  spend(work, Math.ceil(length / 128));
}

/** Whether the input passes. Never throws for any JSON input once the filter validated. */
export function matchesFilter(filter: Filter, input: FilterInput): boolean {
  try {
    return matchesTopLevel(filter, input, { left: MAX_STEPS });
  } catch (error) {
    if (error instanceof WorkExhausted) return false;
    throw error;
  }
}

function matchesTopLevel(filter: Filter, input: FilterInput, work: Work): boolean {
  return Object.entries(filter).every(([key, part]) => {
    switch (key) {
      case 'body':
        return matches(part, input.body, false, work);
      case 'headers':
        return matches(part, input.headers, true, work);
      case 'query':
        return matches(part, input.query, false, work);
      case 'path':
        return matches(part, input.path, false, work);
      case '$or':
        return Array.isArray(part) && part.some((f) => isRecord(f) && matchesTopLevel(f, input, work));
      case '$and':
        return Array.isArray(part) && part.every((f) => isRecord(f) && matchesTopLevel(f, input, work));
      case '$not':
        return isRecord(part) && !matchesTopLevel(part, input, work);
      default:
        return false;
    }
  });
}

/**
 * Whether `value` (undefined: the field is missing) matches the filter value. `foldKeys`
 * holds at the headers' own level, where field names are matched in lower case.
 */
function matches(filter: unknown, value: unknown, foldKeys: boolean, work: Work): boolean {
  spend(work);
  if (Array.isArray(filter)) {
    if (!Array.isArray(value)) return false;
    return filter.every((wanted) => value.some((element) => matches(wanted, element, false, work)));
  }
  if (isRecord(filter)) return matchesObject(filter, value, foldKeys, work);
  if (value === filter) return true;
  if (!Array.isArray(value)) return false;
  spendScan(work, value.length);
  return value.includes(filter);
}

function matchesObject(filter: Record<string, unknown>, value: unknown, foldKeys: boolean, work: Work): boolean {
  const fields: Array<[string, unknown]> = [];
  let operators = 0;
  for (const [key, operand] of Object.entries(filter)) {
    if (!key.startsWith('$')) {
      fields.push([key, operand]);
      continue;
    }
    operators++;
    if (!holds(key, operand, value, foldKeys, work)) return false;
  }
  // `{}` asks only that the field be there; operators alone decide for a missing one.
  if (fields.length === 0) return operators > 0 || value !== undefined;
  if (isRecord(value)) return fieldsMatch(fields, value, foldKeys, work);
  // The fields are matched together on one element: `{ id: 1, title: 'a' }` is one item with both.
  return Array.isArray(value) && value.some((element) => (spend(work), isRecord(element) && fieldsMatch(fields, element, false, work)));
}

function fieldsMatch(fields: Array<[string, unknown]>, value: Record<string, unknown>, foldKeys: boolean, work: Work): boolean {
  return fields.every(([key, wanted]) => {
    const name = foldKeys ? key.toLowerCase() : key;
    return matches(wanted, Object.hasOwn(value, name) ? value[name] : undefined, false, work);
  });
}

/**
 * One operator on `value`. A missing field fails every test but `$exist: false` and what
 * `$not` turns around; a value test on an array holds when it holds for the array or for
 * some element, as a plain value's match does.
 */
function holds(operator: string, operand: unknown, value: unknown, foldKeys: boolean, work: Work): boolean {
  switch (operator) {
    case '$exist':
      return typeof operand === 'boolean' && (value !== undefined) === operand;
    case '$not':
      return !matches(operand, value, foldKeys, work);
    case '$or':
      return Array.isArray(operand) && operand.some((f) => matches(f, value, foldKeys, work));
    case '$and':
      return Array.isArray(operand) && operand.every((f) => matches(f, value, foldKeys, work));
  }
  if (value === undefined) return false;
  const some = (test: (v: unknown) => boolean) => test(value) || (Array.isArray(value) && value.some((element) => (spend(work), test(element))));
  const ordered = (test: (order: number) => boolean) =>
    some((v) => {
      const order = compare(v, operand);
      return order !== undefined && test(order);
    });
  switch (operator) {
    case '$eq':
      return some((v) => deepEqual(v, operand, work));
    case '$neq':
      return !some((v) => deepEqual(v, operand, work));
    case '$in':
      return some((v) => isIn(v, operand, work));
    case '$nin':
      return !some((v) => isIn(v, operand, work));
    case '$gt':
      return ordered((order) => order > 0);
    case '$gte':
      return ordered((order) => order >= 0);
    case '$lt':
      return ordered((order) => order < 0);
    case '$lte':
      return ordered((order) => order <= 0);
    case '$startsWith':
      return typeof operand === 'string' && some((v) => typeof v === 'string' && v.startsWith(operand));
    case '$endsWith':
      return typeof operand === 'string' && some((v) => typeof v === 'string' && v.endsWith(operand));
    default:
      return false;
  }
}

/** `$in` with a list: equal to one of it; with a string: a string holding it, as Hookdeck's "contains". */
function isIn(value: unknown, operand: unknown, work: Work): boolean {
  if (typeof operand === 'string') {
    if (typeof value !== 'string') return false;
    spendScan(work, value.length);
    return value.includes(operand);
  }
  return Array.isArray(operand) && operand.some((candidate) => deepEqual(value, candidate, work));
}

/** Numbers by value, strings by code unit (so ISO 8601 times compare in time order); anything else is not ordered. */
function compare(value: unknown, operand: unknown): number | undefined {
  const comparable = (typeof value === 'number' && typeof operand === 'number') || (typeof value === 'string' && typeof operand === 'string');
  if (!comparable) return undefined;
  return value < operand ? -1 : value > operand ? 1 : 0;
}

/** Deep equality of JSON values; its depth is bounded by the operand's, which validation bounds. */
function deepEqual(value: unknown, operand: unknown, work: Work): boolean {
  spend(work);
  if (value === operand) return true;
  if (Array.isArray(operand)) {
    return Array.isArray(value) && value.length === operand.length && operand.every((element, index) => deepEqual(value[index], element, work));
  }
  if (!isRecord(operand) || !isRecord(value)) return false;
  const keys = Object.keys(operand);
  const valueKeys = Object.keys(value).length;
  spend(work, valueKeys);
  if (valueKeys !== keys.length) return false;
  return keys.every((key) => Object.hasOwn(value, key) && deepEqual(value[key], operand[key], work));
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (!isRecord(value)) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

function isFiniteNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}
