import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { presentRules } from '../domain/rules/rules.js';
import type { PageCursor } from '../domain/cursor.js';
import { parseOptionalTime } from '../domain/time.js';
import { AppError } from '../errors.js';
import { DEFAULT_RATE_PER_SECOND } from '../services/destinations.js';
import type { Destination, DeliveryState } from '../store/store.js';
import { iso, print, withStore, type CommandContext } from './context.js';
import { parseWhole } from './integration.js';

const PAGE = 200;

/**
 * `intake destination …`: where a company's webhooks are delivered. The commands that name
 * a destination find its company from it, as the integration commands do.
 */
export function registerDestinationCommands(program: Command): void {
  const destination = program.command('destination').description('destinations (URLs that receive the webhooks)');
  const create = destination
    .command('create')
    .description('create a destination and its signing secret')
    .requiredOption('--company <id>', 'company id (cmp_…)')
    .requiredOption('--name <name>', 'destination name')
    .requiredOption('--url <url>', 'where to send: https://… (http://… too outside production)')
    .option('--integration <id>', 'only this integration (repeat for several; all when absent)', collect, [])
    .option('--event <pattern>', 'only events matching this pattern, * for any run of characters (repeat; * when absent)', collect, [])
    .option('--header <"Name: value">', 'an extra header to send, its value kept sealed (repeat)', collect, [])
    .option('--timeout-ms <ms>', 'per attempt, 1000 to 60000 (default 15000)', parseWhole)
    .option('--rate <per-second>', `requests a second at most, or "none" for no limit (default ${DEFAULT_RATE_PER_SECOND})`, parseRate)
    .option('--max-in-flight <n>', 'requests at once at most (default 100)', parseWhole);
  withRuleOptions(create)
    .option('--json', 'print one JSON object')
    .action(
      (
        options: {
          company: string;
          name: string;
          url: string;
          integration: string[];
          event: string[];
          header: string[];
          timeoutMs?: number;
          rate?: number | 'none';
          maxInFlight?: number;
          json?: boolean;
        } & RuleOptions,
      ) =>
        withStore(async ({ destinations }) => {
          const created = await destinations.create(options.company, {
            name: options.name,
            url: options.url,
            integrationIds: options.integration.length === 0 ? null : options.integration,
            eventPatterns: options.event.length === 0 ? undefined : options.event,
            headers: parseHeaders(options.header),
            timeoutMs: options.timeoutMs,
            ratePerSecond: options.rate === 'none' ? null : options.rate,
            maxInFlight: options.maxInFlight,
            rules: rulesOfOptions(options) ?? undefined,
          });
          print(
            { ...shown(created.destination), signing_secret: created.signingSecret },
            options,
            'The signing secret is shown only this once: give it to the receiver now.',
          );
        }),
    );

  withRuleOptions(
    destination
      .command('rules')
      .description("replace a destination's rules (filter, transformation, deduplication, delay, retry) with those given; --clear removes them")
      .requiredOption('--destination <id>', 'destination id (dst_…)')
      .option('--clear', 'no rules at all'),
  )
    .option('--json', 'print one JSON object')
    .action((options: { destination: string; clear?: boolean; json?: boolean } & RuleOptions) =>
      withStore(async (context) => {
        const companyId = await companyOfDestination(context, options.destination);
        const rules = options.clear ? null : rulesOfOptions(options);
        if (rules === null && !options.clear) {
          throw new AppError('invalid_request', 'Give the rules (--filter, --transform, --dedupe, --delay, --retry), or --clear to remove them.');
        }
        const changed = await context.destinations.update(companyId, options.destination, { rules });
        print({ id: changed.id, rules: presentRules(changed.rules, changed.rulesVersion) }, options);
      }),
    );

  destination
    .command('list')
    .description("a company's destinations, newest first")
    .requiredOption('--company <id>', 'company id (cmp_…)')
    .option('--json', 'print one JSON object: {"data": [...]}')
    .action((options: { company: string; json?: boolean }) =>
      withStore(async ({ store }) => {
        if (!(await store.getCompany(options.company))) throw new AppError('not_found', `No company with id ${options.company}.`);
        // Every page: an operator's listing is not a screenful.
        const list: Destination[] = [];
        let cursor: PageCursor | undefined;
        for (;;) {
          const page = await store.listDestinations(options.company, { limit: PAGE, cursor });
          list.push(...page);
          if (page.length < PAGE) break;
          cursor = { at: page.at(-1)!.createdAt, id: page.at(-1)!.id };
        }
        if (options.json) return print({ data: list.map(shown) }, options);
        const lines = list.map((d) => `${d.id}  ${d.status.padEnd(8)}  ${d.name}  ${d.url}`);
        process.stdout.write(`${lines.length === 0 ? '(no destinations)' : lines.join('\n')}\n`);
      }),
    );

  for (const [name, description] of [
    ['pause', 'hold its deliveries until resumed'],
    ['resume', 'send again (also re-enables one intake disabled)'],
  ] as const) {
    destination
      .command(name)
      .description(description)
      .requiredOption('--destination <id>', 'destination id (dst_…)')
      .option('--json', 'print one JSON object')
      .action((options: { destination: string; json?: boolean }) =>
        withStore(async (context) => {
          const companyId = await companyOfDestination(context, options.destination);
          const changed = await context.destinations.setPaused(companyId, options.destination, name === 'pause');
          print({ id: changed.id, status: changed.status }, options);
        }),
      );
  }

  destination
    .command('delete')
    .description('delete it: nothing more is sent, its pending and held deliveries are cancelled')
    .requiredOption('--destination <id>', 'destination id (dst_…)')
    .option('--json', 'print one JSON object')
    .action((options: { destination: string; json?: boolean }) =>
      withStore(async (context) => {
        await context.destinations.remove(await companyOfDestination(context, options.destination), options.destination);
        print({ id: options.destination, deleted: true }, options);
      }),
    );

  destination
    .command('replay')
    .description('a new attempt series for its deliveries that match, but pending ones and those replayed in the last minute (at most 10000 a call; "more" says run it again)')
    .requiredOption('--destination <id>', 'destination id (dst_…)')
    .option('--state <state>', 'only deliveries in this state: held, succeeded, failed; pending: retry now those failing and waiting for their next attempt')
    .option('--event <event>', 'only this event, exactly')
    .option('--since <time>', 'made at or after (ISO-8601)')
    .option('--until <time>', 'made before (ISO-8601)')
    .option('--delivery <ids...>', 'instead of a range: these deliveries (dlv_…, 1 to 100), each retried now if failing or replayed if settled')
    .option('--json', 'print one JSON object')
    .action(
      (options: { destination: string; state?: string; event?: string; since?: string; until?: string; delivery?: string[]; json?: boolean }) =>
        withStore(async (context) => {
          const companyId = await companyOfDestination(context, options.destination);
          const outcome = await context.redeliveries.replay(companyId, {
            destinationId: options.destination,
            state: options.state as DeliveryState | undefined,
            event: options.event,
            since: parseOptionalTime(options.since, 'since'),
            until: parseOptionalTime(options.until, 'until'),
            deliveryIds: options.delivery,
          }, context.actor);
          print({ replayed: outcome.count, more: outcome.more, ...(outcome.nextSince !== undefined && { next_since: iso(outcome.nextSince) }) }, options);
        }),
    );
}

/** The company of a live destination named on the command line; not found otherwise. */
async function companyOfDestination({ store }: CommandContext, destinationId: string): Promise<string> {
  const companyId = await store.companyOfDestination(destinationId);
  if (companyId === undefined) throw new AppError('not_found', `No destination with id ${destinationId}.`);
  return companyId;
}

/** What the CLI prints of a destination (the API's fields; never a secret). */
function shown(destination: Destination) {
  return {
    id: destination.id,
    name: destination.name,
    url: destination.url,
    status: destination.status,
    integration_ids: destination.integrationIds,
    event_patterns: destination.eventPatterns,
    header_names: destination.headerNames,
    timeout_ms: destination.timeoutMs,
    rate_per_second: destination.ratePerSecond,
    max_in_flight: destination.maxInFlight,
    rules: presentRules(destination.rules, destination.rulesVersion),
    created_at: iso(destination.createdAt),
  };
}

/** The rules' flags, as create and rules take them. */
interface RuleOptions {
  filter?: string;
  transform?: string;
  dedupe: string[];
  dedupeWindow?: number;
  delay?: number;
  retry?: string;
}

function withRuleOptions(command: Command): Command {
  return command
    .option('--filter <file>', 'a JSON filter over body, headers, query and path (docs/destinations.md, "Rules")')
    .option('--transform <file>', 'a JavaScript file defining transform(request, context)')
    .option('--dedupe <field>', 'deduplicate on this field, such as body.id or headers.x-request-id; "body" for the whole body (repeat)', collect, [])
    .option('--dedupe-window <seconds>', 'how long a repeat counts as one, 1 to 3600 (default 300)', parseWhole)
    .option('--delay <seconds>', 'hold each delivery this long after its webhook arrived, up to 86400', parseWhole)
    .option('--retry <strategy:attempts:interval[:max-age]>', 'its own retry schedule, seconds: linear:2:60 is two attempts a minute apart; exponential:10:30:86400');
}

/**
 * The rules the flags give, in the API's shape (the service checks them, naming the part);
 * null when no flag is given.
 */
function rulesOfOptions(options: RuleOptions): Record<string, unknown> | null {
  const rules: Record<string, unknown> = {};
  if (options.filter !== undefined) rules.filter = parseJsonFile(options.filter, '--filter');
  if (options.transform !== undefined) rules.transformation = { code: readText(options.transform, '--transform') };
  if (options.dedupe.length > 0) {
    const whole = options.dedupe.includes('body');
    rules.deduplicate = { fields: whole ? null : options.dedupe, window_seconds: options.dedupeWindow ?? 300 };
  } else if (options.dedupeWindow !== undefined) {
    throw new AppError('invalid_request', '--dedupe-window needs --dedupe: the fields that make two webhooks the same.', { field: 'rules.deduplicate' });
  }
  if (options.delay !== undefined) rules.delay_seconds = options.delay;
  if (options.retry !== undefined) rules.retry = parseRetry(options.retry);
  return Object.keys(rules).length === 0 ? null : rules;
}

function parseRetry(text: string): Record<string, unknown> {
  const [strategy, attempts, interval, maxAge, ...rest] = text.split(':');
  if (attempts === undefined || interval === undefined || rest.length > 0) {
    throw new AppError('invalid_request', `--retry is strategy:attempts:interval[:max-age] (seconds), such as linear:2:60, not "${text}".`, { field: 'rules.retry' });
  }
  return {
    strategy,
    attempts: Number(attempts),
    interval_seconds: Number(interval),
    max_age_seconds: maxAge === undefined ? null : Number(maxAge),
  };
}

function readText(path: string, flag: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new AppError('invalid_request', `${flag}: ${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'}).`, { field: flag });
  }
}

function parseJsonFile(path: string, flag: string): unknown {
  const text = readText(path, flag);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new AppError('invalid_request', `${flag}: ${path} is not JSON.`, { field: flag });
  }
}

/**
 * `--rate`: a whole number, or `none` for no limit (the service's default applies when it is
 * absent). Kept as `none` here: commander takes a parser's null for a flag given without a value.
 */
function parseRate(text: string): number | 'none' {
  return text === 'none' ? 'none' : parseWhole(text);
}

/** A repeatable flag's values, in the order given. */
export function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** `--header 'Name: value'`, as curl takes it; the service checks names and values. */
function parseHeaders(lines: string[]): Record<string, string> {
  const entries = lines.map((line): [string, string] => {
    const colon = line.indexOf(':');
    if (colon <= 0) throw new AppError('invalid_request', `--header must be "Name: value", not "${line}".`, { field: 'headers' });
    return [line.slice(0, colon).trim(), line.slice(colon + 1).trimStart()];
  });
  const names = entries.map(([name]) => name.toLowerCase());
  const twice = names.find((name, i) => names.indexOf(name) !== i);
  if (twice !== undefined) throw new AppError('invalid_request', `--header ${twice} is given twice.`, { field: 'headers' });
  return Object.fromEntries(entries);
}
