import { CliError } from '../cli-error.js';
import { configDir, findLogin } from '../credentials.js';
import type { ListenOptions } from './command.js';
import { CursorFile } from './cursor-file.js';
import { Forwarder } from './forwarder.js';
import { IntakeClient, type FeedStart } from './intake-client.js';
import { Listener, type StartAt } from './listener.js';
import { jsonReport, textReport } from './report.js';

/** Runs `intake listen` until Ctrl-C, q, a signal, or a refusal that asking again cannot cure. */
export async function listen(options: ListenOptions): Promise<void> {
  const startAt = startOf(options);
  const { url, key } = await credentialsOf(options);
  const client = new IntakeClient(url, key);
  const report = options.json ? jsonReport(process.stdout, process.stderr) : textReport(process.stdout, process.stderr);
  let company: { id: string; name: string };
  let integrations: Array<{ id: string; name: string }>;
  try {
    company = await client.company();
    integrations = await client.integrations();
  } catch (error) {
    await client.close();
    throw new CliError(`cannot start listening to ${client.origin}: ${(error as Error).message}`);
  }
  const byLabel = (label: string) => {
    const found = integrations.find((i) => i.id === label) ?? integrations.filter((i) => i.name.toLowerCase() === label.toLowerCase());
    if (Array.isArray(found)) {
      if (found.length === 1) return found[0]!.id;
      throw new CliError(found.length === 0 ? `no integration has the id or name "${label}"` : `several integrations are named "${label}": use its id`);
    }
    return found.id;
  };
  const routes = new Map<string, string>();
  let defaultUrl: string | undefined;
  for (const spec of options.forwardTo) {
    const { label, target } = splitForward(spec);
    const local = localUrl(target, options.path);
    if (label === undefined) {
      if (defaultUrl !== undefined) throw new CliError('--forward-to takes one URL for all integrations; name the others INTEGRATION=URL');
      defaultUrl = local;
    } else {
      routes.set(byLabel(label), local);
    }
  }
  const chosen = options.integration.map(byLabel);
  // With only labelled targets, only their integrations are read.
  const integrationIds = chosen.length > 0 ? chosen : defaultUrl === undefined ? [...routes.keys()] : [];
  const names = new Map(integrations.map((i) => [i.id, i.name]));
  const cursorFile = new CursorFile(configDir(), {
    origin: client.origin,
    companyId: company.id,
    routes: Object.fromEntries([...routes, ...(defaultUrl ? [['*', defaultUrl] as const] : [])]),
    integrationIds,
    events: options.event,
  });
  const listener = new Listener({
    client,
    forwarder: new Forwarder({ extraHeaders: options.headers.map(parseHeader), timeoutMs: options.timeout * 1000 }),
    report,
    cursorFile,
    routes,
    defaultUrl,
    integrationNames: names,
    integrationIds,
    events: options.event,
    startAt,
    onFollowing: () => report.say(`listening to ${company.name} (${company.id}) at ${client.origin}: ${describeTargets()}`),
  });
  const describeTargets = () => {
    const targets = [...routes].map(([id, to]) => `${names.get(id)} → ${to}`);
    const rest = routes.size > 0 ? 'the others' : integrationIds.length > 0 ? integrationIds.map((id) => names.get(id)).join(', ') : 'every integration';
    if (defaultUrl) targets.push(`${rest} → ${defaultUrl}`);
    return `${targets.join('; ')}${options.event.length ? `; events ${options.event.join(', ')}` : ''}`;
  };
  const keys = watchKeys(listener, Boolean(options.json));
  report.say(keys ? 'r sends the last webhook again, q or Ctrl-C stops' : 'Ctrl-C stops');
  const onSignal = () => (listener.stopping ? process.exit(130) : listener.stop());
  process.on('SIGINT', onSignal).on('SIGTERM', onSignal);
  try {
    await listener.run();
    report.say(`stopped; the next run resumes here (${cursorFile.path})`);
  } finally {
    keys?.();
    process.off('SIGINT', onSignal).off('SIGTERM', onSignal);
    await listener.close();
  }
}

function startOf(options: ListenOptions): StartAt {
  const chosen = [options.since !== undefined, options.replay !== undefined, options.fromNow === true].filter(Boolean).length;
  if (chosen > 1) throw new CliError('choose one of --since, --replay and --from-now');
  if (options.since !== undefined) return { since: new Date(Date.now() - durationMs(options.since)).toISOString() } satisfies FeedStart;
  if (options.replay !== undefined) return { last: options.replay };
  if (options.fromNow) return { fromNow: true };
  return 'resume';
}

async function credentialsOf(options: ListenOptions): Promise<{ url: string; key: string }> {
  const given = options.url ?? process.env.INTAKE_URL;
  const saved = await findLogin(given).catch(() => undefined);
  const url = given ?? saved?.url;
  if (!url) throw new CliError('which intake? pass --url https://… (or set INTAKE_URL), or run intake login --url … first');
  try {
    new URL(url);
  } catch {
    throw new CliError(`--url is not a URL: ${url}`);
  }
  const key = options.key ?? process.env.INTAKE_MANAGEMENT_KEY ?? saved?.apiKey;
  if (!key) throw new CliError(`no key for ${url}: run intake login --url ${url}, or pass --key (or INTAKE_MANAGEMENT_KEY) with a logs:read management key`);
  return { url, key };
}

/** `stripe=http://…` names the integration; a bare URL is for all. */
function splitForward(spec: string): { label?: string; target: string } {
  if (/^https?:\/\//i.test(spec)) return { target: spec };
  const equals = spec.indexOf('=');
  if (equals <= 0) throw new CliError(`--forward-to takes a URL or INTEGRATION=URL, not "${spec}"`);
  return { label: spec.slice(0, equals), target: spec.slice(equals + 1) };
}

function localUrl(target: string, path: string | undefined): string {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    throw new CliError(`--forward-to is not a URL: ${target}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CliError(`--forward-to takes an http or https URL, not ${url.protocol}`);
  if (path !== undefined) {
    const override = new URL(path.startsWith('/') ? path : `/${path}`, url);
    url.pathname = override.pathname;
    url.search = override.search;
  }
  return url.toString();
}

function parseHeader(header: string): [string, string] {
  const colon = header.indexOf(':');
  const name = header.slice(0, colon).trim();
  if (colon <= 0 || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) throw new CliError(`--headers takes 'Name: value', not "${header}"`);
  return [name, header.slice(colon + 1).trim()];
}

const UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function durationMs(text: string): number {
  const match = /^(\d{1,6})([smhd])$/.exec(text.trim());
  if (!match) throw new CliError(`--since takes a duration such as 30s, 10m, 2h or 1d, not "${text}"`);
  return Number(match[1]) * UNITS[match[2]!]!;
}

/**
 * On a terminal (and not with --json), single keys at the prompt: r sends the last webhook
 * again, q or Ctrl-C stops. Returns what puts the terminal back, or undefined when stdin is
 * not a terminal (piped, in a script): then only signals stop it.
 */
function watchKeys(listener: Listener, json: boolean): (() => void) | undefined {
  const input = process.stdin;
  if (json || !input.isTTY) return undefined;
  input.setRawMode(true);
  input.resume();
  const onKey = (chunk: Buffer) => {
    const key = chunk.toString('utf8');
    if (key === 'r') void listener.resendLast();
    else if (key === 'q' || key === '\u0003') {
      if (listener.stopping) process.exit(130);
      listener.stop();
    }
  };
  input.on('data', onKey);
  return () => {
    input.off('data', onKey);
    input.setRawMode(false);
    input.pause();
  };
}
