import type { Command } from 'commander';
import { CliError } from '../cli-error.js';

/** `intake listen`'s options, as commander parses them. */
export interface ListenOptions {
  forwardTo: string[];
  url?: string;
  key?: string;
  integration: string[];
  event: string[];
  headers: string[];
  path?: string;
  since?: string;
  replay?: number;
  fromNow?: boolean;
  timeout: number;
  json?: boolean;
}

const collect = (value: string, previous: string[]) => [...previous, value];

export function registerListenCommand(program: Command): void {
  program
    .command('listen')
    .description("forward a company's webhooks from a running intake to a local URL, exactly as the sender sent them")
    .requiredOption('--forward-to <url>', 'local URL; or INTEGRATION=URL (an id or name) for one integration (repeat for several)', collect, [])
    .option('--url <url>', 'the intake to follow (default: INTAKE_URL, or the one intake login saved)')
    .option('--key <key>', 'a management key with logs:read (default: INTAKE_MANAGEMENT_KEY, or the one intake login saved)')
    .option('--integration <id>', 'only this integration (an id or name; repeat for several)', collect, [])
    .option('--event <pattern>', 'only events matching this pattern, * for any run of characters (repeat for several)', collect, [])
    .option('--headers <header>', "add a header to each forwarded request, 'Name: value' (repeat for several)", collect, [])
    .option('--path <path>', "send to this path of the --forward-to URL(s) instead of theirs, for this run")
    .option('--since <duration>', 'first forward the webhooks of this long ago (30s, 10m, 2h, 1d), then follow')
    .option('--replay <n>', 'first forward the last N webhooks again (1 to 1000), then follow', whole(1, 1000))
    .option('--from-now', 'skip what arrived while listen was not running')
    .option('--timeout <seconds>', 'how long the local URL may take to answer', whole(1, 600), 30)
    .option('--json', 'one JSON object a line per webhook on stdout; diagnostics on stderr')
    // Loaded only here: the other commands start without the HTTP client's modules.
    .action(async (options: ListenOptions) => (await import('./run.js')).listen(options));
}

function whole(min: number, max: number) {
  return (text: string): number => {
    const value = Number(text);
    if (!Number.isInteger(value) || value < min || value > max) throw new CliError(`expected a whole number from ${min} to ${max}, not "${text}"`);
    return value;
  };
}

