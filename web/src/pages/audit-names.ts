import { useMemo } from 'react';
import { api, type Page } from '../api/client';
import { useApi } from '../api/use-api';
import { useSession } from '../session';
import { useIntegrations } from '../components/log-shared';
import type { AuditRecord, ManagementKey, Member } from './company-shared';

/**
 * The audit log in people's words: who an actor or a target is (an email, a name, a key's
 * prefix) rather than its id, the name a thing had when the change was made, and the ids
 * the filters want, found from those words.
 */

/** Something a filter can name: found by `text`, which is unique among its list. */
export interface Choice {
  id: string;
  text: string;
  kind: string;
}

export interface Directory {
  user(id: string): string | undefined;
  key(id: string): string | undefined;
  /** The current name of an integration, a destination or the company. */
  named(id: string): string | undefined;
  /** Who can make a change: members by email, management keys by name and prefix. */
  actors: Choice[];
  /** What a change can be made to: integrations and destinations by name, members, keys, the company. */
  targets: Choice[];
}

/**
 * Members (every role reads them), integrations and destinations, and for owners the
 * management keys (only owners may list them): what the company has now.
 */
export function useDirectory(): Directory {
  const { can, session, company } = useSession();
  const members = useApi(async () => (await api.get<Page<Member>>('/members', { limit: 200 })).data, []);
  const owner = can('members:manage');
  const keys = useApi(
    async () => (owner ? (await api.get<Page<ManagementKey>>('/management-keys', { limit: 200 })).data : []),
    [owner],
  );
  const integrations = useIntegrations();
  const destinations = useApi(async () => (await api.get<Page<{ id: string; name: string }>>('/destinations', { limit: 200 })).data, []);
  return useMemo(() => {
    const people: Choice[] = (members.data ?? []).map((m) => ({ id: m.user_id, text: m.email, kind: 'member' }));
    const managementKeys: Choice[] = (keys.data ?? []).map((k) => ({
      id: k.id,
      text: keyText(k.name, k.prefix),
      kind: 'management key',
    }));
    const things: Choice[] = [
      ...(integrations.data ?? []).map((i) => ({ id: i.id, text: i.name, kind: 'integration' })),
      ...(destinations.data ?? []).map((d) => ({ id: d.id, text: d.name, kind: 'destination' })),
    ];
    const names = new Map<string, string>([
      ...session.companies.map((c): [string, string] => [c.id, c.name]),
      ...things.map((t): [string, string] => [t.id, t.text]),
    ]);
    const emails = new Map(people.map((p) => [p.id, p.text]));
    const keyNames = new Map(managementKeys.map((k) => [k.id, k.text]));
    const companyChoice: Choice[] = company ? [{ id: company.id, text: company.name, kind: 'company' }] : [];
    return {
      user: (id) => emails.get(id),
      key: (id) => keyNames.get(id),
      named: (id) => names.get(id),
      actors: unique([...people, ...managementKeys]),
      targets: unique([...things, ...people, ...managementKeys, ...companyChoice]),
    };
  }, [members.data, keys.data, integrations.data, destinations.data, session.companies, company]);
}

/** A management key as people know it: its name and prefix, or its prefix alone. */
function keyText(name: string | null | undefined, prefix: string): string {
  return name ? `${name} (${prefix}…)` : `${prefix}…`;
}

/** Two things of one text (an integration and a destination both "Shop") are told apart by their id. */
function unique(choices: Choice[]): Choice[] {
  const counts = new Map<string, number>();
  for (const choice of choices) counts.set(choice.text.toLowerCase(), (counts.get(choice.text.toLowerCase()) ?? 0) + 1);
  return choices.map((choice) => (counts.get(choice.text.toLowerCase())! > 1 ? { ...choice, text: `${choice.text} (${choice.id})` } : choice));
}

const AN_ID = /^[a-z]{3}_[A-Za-z0-9]{22}$/;

/**
 * The id a filter's text names: a choice's text (any case), a part of exactly one, or an
 * id as is (a removed member's, an integration key's). An Error says why none.
 */
export function resolveChoice(text: string, choices: readonly Choice[], what: string): string | undefined {
  const typed = text.trim();
  if (typed === '') return undefined;
  const lower = typed.toLowerCase();
  const exact = choices.find((c) => c.text.toLowerCase() === lower || c.id === typed);
  if (exact) return exact.id;
  if (AN_ID.test(typed)) return typed;
  const partial = choices.filter((c) => c.text.toLowerCase().includes(lower));
  if (partial.length === 1) return partial[0]!.id;
  if (partial.length === 0) throw new Error(`No ${what} matches “${typed}”. Pick one from the list, or paste an id.`);
  const shown = partial.slice(0, 3).map((c) => c.text).join(', ');
  throw new Error(`“${typed}” matches ${partial.length}: ${shown}${partial.length > 3 ? ', …' : ''}. Pick one from the list.`);
}

/** The choice's text for an id from the URL, else the id itself. */
export function textOf(id: string | undefined, choices: readonly Choice[]): string {
  if (id === undefined) return '';
  return choices.find((c) => c.id === id)?.text ?? id;
}

// ---------------------------------------------------------------------------------------
// The target as it was named then

/** The name of a named target (integration, destination, company) as a record has it. */
const NAMED_TYPES = new Set(['integration', 'destination', 'company']);

interface TargetName {
  /** The name at the time of the change, or the best one known. */
  name?: string;
  /** A rename: the name before it. */
  renamedFrom?: string;
  /** The name now, when it is another. */
  now?: string;
}

/** Names the records themselves hold, newest first: for records that hold none (a key rotation of a deleted integration). */
export function recordedNames(records: readonly AuditRecord[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const record of records) {
    const { before, after } = recordedName(record);
    const name = after ?? before;
    const key = `${record.target.type} ${record.target.id}`;
    if (name && NAMED_TYPES.has(record.target.type) && !names.has(key)) names.set(key, name);
  }
  return names;
}

/** How the target reads in the log: the name it had when the change was made, and the name it has now if another. */
export function targetName(record: AuditRecord, directory: Directory, recorded: ReadonlyMap<string, string>): TargetName {
  const { type, id } = record.target;
  const state = stateOf(record);
  switch (type) {
    case 'user':
      return { name: directory.user(id) ?? text(state.email) };
    case 'key': {
      const name = text(state.name);
      const prefix = text(state.prefix);
      return { name: directory.key(id) ?? (prefix ? keyText(name, prefix) : name) };
    }
    default: {
      if (!NAMED_TYPES.has(type)) return {};
      const { before, after } = recordedName(record);
      const then = after ?? before;
      const current = directory.named(id);
      if (!then) return { name: current ?? recorded.get(`${type} ${id}`) };
      return {
        name: then,
        renamedFrom: before !== undefined && after !== undefined && before !== after ? before : undefined,
        now: current !== undefined && current !== then ? current : undefined,
      };
    }
  }
}

function recordedName(record: AuditRecord): { before?: string; after?: string } {
  return { before: text(objectOf(record.before).name), after: text(objectOf(record.after).name) };
}

// ---------------------------------------------------------------------------------------
// What an update changed

const FIELD_WORDS: Record<string, string> = {
  bodyLimitBytes: 'body limit',
  rateLimitPerMinute: 'rate limit',
  retentionDays: 'retention',
  requireTwoFactor: 'two-factor requirement',
  eventPatterns: 'event patterns',
  integrationIds: 'integrations',
  url: 'URL',
};
/** Kept by the store on every change: not a change of its own. */
const BOOKKEEPING = new Set(['updatedAt', 'statusChangedAt']);

/** The changes of a person's own account (by them, of them; two-factor off also by an operator), in words. */
export const ACCOUNT_ACTION_WORDS: Readonly<Record<string, string>> = {
  'account.two_factor_enable': 'two-factor sign-in turned on (with new recovery codes)',
  'account.two_factor_disable': 'two-factor sign-in turned off',
  'account.recovery_codes_renew': 'new recovery codes made (the old ones stopped working)',
  'account.password_change': 'password changed (other sessions ended)',
  'account.password_reset': 'password reset with an emailed or printed link (every session ended)',
};

/**
 * A change in words. An account's change by its action; an update from its before and
 * after: "disabled", "enabled", "changed name, rate limit". Enabling and disabling read as
 * such even when recorded as an update (by an older version, or together with other changes).
 */
export function changeSummary(record: AuditRecord): string | undefined {
  if (Object.hasOwn(ACCOUNT_ACTION_WORDS, record.action)) return ACCOUNT_ACTION_WORDS[record.action];
  if (!record.action.endsWith('.update')) return undefined;
  const before = objectOf(record.before);
  const after = objectOf(record.after);
  const parts: string[] = [];
  const changed: string[] = [];
  for (const field of Object.keys(after)) {
    if (BOOKKEEPING.has(field) || !Object.hasOwn(before, field) || JSON.stringify(before[field]) === JSON.stringify(after[field])) continue;
    if (field === 'enabled' && typeof after.enabled === 'boolean') parts.push(after.enabled ? 'enabled' : 'disabled');
    else changed.push(FIELD_WORDS[field] ?? words(field));
  }
  if (changed.length > 0) parts.push(`changed ${changed.join(', ')}`);
  return parts.length > 0 ? parts.join('; ') : undefined;
}

/** retentionDays → "retention days"; max_in_flight → "max in flight". */
function words(field: string): string {
  return field
    .replace(/_/g, ' ')
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .toLowerCase();
}

function stateOf(record: AuditRecord): Record<string, unknown> {
  return isObject(record.after) ? record.after : objectOf(record.before);
}

function objectOf(value: unknown): Record<string, unknown> {
  return isObject(value) ? value : {};
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
