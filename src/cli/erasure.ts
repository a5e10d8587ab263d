import type { Command } from 'commander';
import { pino } from 'pino';
import { isId } from '../domain/ids.js';
import { CompanyHashers } from '../domain/value-hash.js';
import { parseOptionalTime } from '../domain/time.js';
import { AppError } from '../errors.js';
import { createLogger } from '../logger.js';
import { ErasureRunner, Erasures, erasureJson, erasureReport } from '../services/erasures.js';
import type { ErasureRecord, ErasureState } from '../store/store.js';
import { CliError } from './cli-error.js';
import { print, withStore, type CommandContext } from './context.js';
import { collect } from './destination.js';

const PAGE = 200;
const FINAL_STATES: ReadonlySet<ErasureState> = new Set(['previewed', 'completed', 'failed', 'expired']);
/** --wait looks again after a quarter of a second, then twice as long each time, up to this. */
const FIRST_LOOK_MS = 250;
const LONGEST_LOOK_MS = 5_000;

/**
 * `intake erasure …`: erasure by data subject (issue 40; docs/personal-data.md), as an
 * operator on the database, like the other commands: the company is named (`--company`)
 * or found from the erasure's id. The requests go through the same Erasures service as the
 * API's; the value is never printed, only the masked `value_hint` the API shows.
 */
export function registerErasureCommands(program: Command): void {
  const erasure = program.command('erasure').description("erase a person's data on request: preview, erase, report");
  withCriteria(
    erasure.command('preview').description('count what erasing a value would change, with a sample of matches; changes nothing until confirmed'),
  ).action((options: CriteriaOptions) => request(options, { dryRun: true }));
  withCriteria(
    erasure.command('create').description('erase a value at once, without a preview: every matching webhook becomes a tombstone (needs --yes)'),
  )
    .option('--yes', 'erase: an erasure cannot be undone')
    .action(async (options: CriteriaOptions & { yes?: boolean }) => {
      // Refused before the database is opened: nothing is created, not even a request.
      if (!options.yes) {
        throw new CliError(
          'An erasure cannot be undone: add --yes to erase at once, or run intake erasure preview first to see what it would erase (it changes nothing).',
        );
      }
      return request(options, { dryRun: false });
    });

  erasure
    .command('confirm')
    .description("erase what a finished preview found: it searches the preview's range again, from the start")
    .requiredOption('--erasure <id>', 'the preview (ers_…)')
    .option('--wait', waitHelp('it has completed or failed'))
    .option('--json', "print one JSON object: the erasure, as the API shows it")
    .action((options: { erasure: string; wait?: boolean; json?: boolean }) =>
      withErasures(async (context) => {
        const companyId = await companyOfErasure(context, options.erasure);
        const confirmed = await context.erasures.confirm(companyId, options.erasure, context.actor);
        printErasure(options.wait ? await untilFinal(context, confirmed) : confirmed, options);
      }),
    );

  erasure
    .command('list')
    .description("a company's erasures and previews, newest first")
    .requiredOption('--company <id>', 'company id (cmp_…)')
    .option('--json', 'print one JSON object: {"data": [...]}')
    .action((options: { company: string; json?: boolean }) =>
      withErasures(async ({ store, erasures }) => {
        if (!(await store.getCompany(options.company))) throw new AppError('not_found', `No company with id ${options.company}.`);
        // Every page: an operator's listing is not a screenful.
        const list: ErasureRecord[] = [];
        for (;;) {
          const page = await erasures.list(options.company, { limit: PAGE, ...(list.length > 0 && { before: list.at(-1)!.id }) });
          list.push(...page);
          if (page.length < PAGE) break;
        }
        if (options.json) return print({ data: list.map(erasureJson) }, options);
        const lines = list.map(
          (e) => `${e.id}  ${e.state.padEnd(9)}  ${e.dryRun ? 'preview' : 'erasure'}  ${e.valueHint}  ${e.counts.webhooks} webhooks  ${new Date(e.createdAt).toISOString()}`,
        );
        process.stdout.write(`${lines.length === 0 ? '(no erasures)' : lines.join('\n')}\n`);
      }),
    );

  erasure
    .command('show')
    .description('one erasure or preview: its state, counts and sample')
    .requiredOption('--erasure <id>', 'erasure id (ers_…)')
    .option('--wait', waitHelp('it is previewed, completed, failed or expired'))
    .option('--json', "print one JSON object: the erasure, as the API shows it")
    .action((options: { erasure: string; wait?: boolean; json?: boolean }) =>
      withErasures(async (context) => {
        const found = await context.erasures.get(await companyOfErasure(context, options.erasure), options.erasure);
        printErasure(options.wait ? await untilFinal(context, found) : found, options);
      }),
    );

  erasure
    .command('report')
    .description('print the plain-text report to hand to the person who asked: what was searched (masked), when, by whom, and what became of it')
    .requiredOption('--erasure <id>', 'erasure id (ers_…)')
    .action((options: { erasure: string }) =>
      withErasures(async (context) => {
        const companyId = await companyOfErasure(context, options.erasure);
        const found = await context.erasures.get(companyId, options.erasure);
        const company = await context.store.getCompany(companyId);
        process.stdout.write(erasureReport(found, company?.name ?? companyId));
      }),
    );
}

/** The flags of preview and create: the API's criteria, one flag each. */
interface CriteriaOptions {
  company: string;
  value: string;
  since?: string;
  until?: string;
  integration: string[];
  path: string[];
  wait?: boolean;
  json?: boolean;
}

function withCriteria(command: Command): Command {
  return command
    .requiredOption('--company <id>', 'company id (cmp_…)')
    .requiredOption('--value <text>', 'the value to search for, case ignored (an email, a customer id); never printed back')
    .option('--since <time>', 'only webhooks received at or after (ISO-8601; default: all that are kept)')
    .option('--until <time>', 'only webhooks received before (ISO-8601; default: now)')
    .option('--integration <id>', 'only this integration (repeat for several; all, deleted ones too, when absent)', collect, [])
    .option('--path <path>', 'only the value at this JSON path, as redaction writes them (repeat; anywhere in the body and headers when absent)', collect, [])
    .option('--wait', waitHelp('it is done'))
    .option('--json', 'print one JSON object: the erasure, as the API shows it');
}

/** A preview or an erasure made from the flags, printed once made (or, with --wait, once done). */
function request(options: CriteriaOptions, { dryRun }: { dryRun: boolean }): Promise<void> {
  return withErasures(async (context) => {
    const input = {
      value: options.value,
      since: parseOptionalTime(options.since, 'since'),
      until: parseOptionalTime(options.until, 'until'),
      integrationIds: options.integration.length === 0 ? undefined : options.integration,
      paths: options.path,
      dryRun,
    };
    const created = await context.erasures.create(options.company, input, context.actor);
    printErasure(options.wait ? await untilFinal(context, created) : created, options);
  });
}

function waitHelp(until: string): string {
  return `wait until ${until}, doing the work here meanwhile if no running intake has taken it`;
}

interface ErasureContext extends CommandContext {
  erasures: Erasures;
  runner: ErasureRunner;
}

/**
 * The operator's context with the erasure service on a runner of this process's own. The
 * runner is never started (it does not poll): only --wait runs it. Its log lines, warnings
 * only (the command prints how the erasure ended), go to stderr with the other diagnostics.
 */
function withErasures<T>(run: (context: ErasureContext) => Promise<T>): Promise<T> {
  return withStore((context) => {
    const log = createLogger('warn', pino.destination({ dest: 2, sync: true }));
    const runner = new ErasureRunner(context.store, context.secrets, new CompanyHashers(context.secrets), log);
    return run({ ...context, runner, erasures: new Erasures(context.store, context.secrets, runner) });
  });
}

/**
 * The erasure once its state is final. Meanwhile this process works as one more node: its
 * runner takes what waits, under the lease a server's runner takes, so it goes whether an
 * intake runs or not; one that runs and took it first finishes it, and this only looks.
 * The runner does every erasure it finds waiting, another company's too: each one is work
 * any node would do next. Stopped midway (Ctrl-C), the lease lapses within a minute and a
 * node goes on from the saved cursor.
 */
async function untilFinal({ runner, erasures }: ErasureContext, erasure: ErasureRecord): Promise<ErasureRecord> {
  let current = erasure;
  for (let pauseMs = FIRST_LOOK_MS; !FINAL_STATES.has(current.state); pauseMs = Math.min(pauseMs * 2, LONGEST_LOOK_MS)) {
    await runner.runOnce();
    current = await erasures.get(current.companyId, current.id);
    if (FINAL_STATES.has(current.state)) break;
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
  return current;
}

/** The company of an erasure named on the command line; not found otherwise. */
async function companyOfErasure({ store }: CommandContext, erasureId: string): Promise<string> {
  // Not echoed unless it is an id: what was pasted here may be the value itself.
  if (!isId('ers', erasureId)) throw new AppError('invalid_request', '--erasure takes an erasure id (ers_…).');
  const companyId = await store.companyOfErasure(erasureId);
  if (companyId === undefined) throw new AppError('not_found', `No erasure with id ${erasureId}.`);
  return companyId;
}

/** An erasure as the API shows it with --json; otherwise one line a fact, the sample, and what to do next. */
function printErasure(erasure: ErasureRecord, options: { json?: boolean }): void {
  const shown = erasureJson(erasure);
  if (options.json) return print(shown, options);
  const sample = shown.sample.map((s) => `  ${s.uuid}  ${s.integration_id}  ${s.event}  ${s.received_at}  in ${s.matched_in}`);
  print(
    {
      id: shown.id,
      state: shown.state,
      kind: shown.dry_run ? 'preview' : 'erasure',
      value_hint: shown.value_hint,
      since: shown.criteria.since,
      until: shown.criteria.until,
      integrations: shown.criteria.integration_ids ?? 'all',
      paths: shown.criteria.paths.length === 0 ? 'anywhere in the body and the headers' : shown.criteria.paths,
      scanned: shown.scanned,
      webhooks: shown.counts.webhooks,
      deliveries: shown.counts.deliveries,
      attempts: shown.counts.attempts,
      request_log: shown.counts.request_log,
      created_at: shown.created_at,
      ...(shown.finished_at !== null && { finished_at: shown.finished_at }),
      ...(shown.expires_at !== null && { expires_at: shown.expires_at }),
      ...(shown.error !== null && { error: shown.error }),
    },
    options,
    [...(sample.length > 0 ? ['sample:', ...sample] : []), nextStep(erasure)].filter((line) => line !== undefined).join('\n'),
  );
}

/** What to do next; nothing after a failure, whose error already says it. */
function nextStep(erasure: ErasureRecord): string | undefined {
  const id = erasure.id;
  switch (erasure.state) {
    case 'counting':
      return `A preview changes nothing. intake erasure show --erasure ${id} --wait waits for its counts.`;
    case 'previewed':
      return `Nothing was changed. To erase these webhooks: intake erasure confirm --erasure ${id} (before ${new Date(erasure.expiresAt!).toISOString()}).`;
    case 'queued':
    case 'running':
      return `A running intake takes it up within half a minute; intake erasure show --erasure ${id} --wait follows it (and does it here if none runs).`;
    case 'completed':
      return `intake erasure report --erasure ${id} prints the report for the person who asked.`;
    case 'failed':
      return undefined;
    case 'expired':
      return 'No one confirmed it in time: its value is dropped. Preview again to erase.';
  }
}
