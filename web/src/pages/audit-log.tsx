import { Fragment, useEffect, useMemo, useState, type FormEvent } from 'react';
import { api, type Page } from '../api/client';
import { useApi, usePagedList } from '../api/use-api';
import { Field } from '../components/dialog';
import { Badge, EmptyState, Loaded, PageHeader, Time, type Tone } from '../components/ui';
import { useSession } from '../session';
import { AuditChange } from './company-audit-change';
import { ListFooter, fromLocalInput, onActivate, param, toLocalInput, useQueryState } from '../components/list-controls';
import {
  AUDIT_ACTIONS,
  type AuditRecord,
  type ManagementKey,
  type Member,
} from './company-shared';
import './company.css';

const FILTERS = ['action', 'actor_id', 'target_id', 'since', 'until'] as const;
type FilterName = (typeof FILTERS)[number];
type Filters = Record<FilterName, string | undefined>;

/** Names for the ids in the records: members' emails, management keys, integrations. */
interface Names {
  user(id: string): string | undefined;
  key(id: string): string | undefined;
  integration(id: string): string | undefined;
  company(id: string): string | undefined;
}

/**
 * Every change made to the company (through the panel, the API or the command line):
 * who, from where, what, and the state before and after. Newest first, filtered in the
 * URL so a view can be shared.
 */
export function AuditLogPage() {
  const [params, update] = useQueryState();
  const filters = useMemo(
    () => Object.fromEntries(FILTERS.map((name) => [name, param(params, name)])) as Filters,
    [params],
  );
  const filterKey = JSON.stringify(filters);
  const list = usePagedList<AuditRecord>('/audit-log', filters, [filterKey]);
  const names = useNames();
  const [expanded, setExpanded] = useState<ReadonlySet<string>>(new Set());
  const filtered = FILTERS.some((name) => filters[name] !== undefined);
  const clear = () => update(Object.fromEntries(FILTERS.map((name) => [name, undefined])));

  const toggle = (id: string) =>
    setExpanded((previous) => {
      const next = new Set(previous);
      if (next.has(id)) next.delete(id);
      else next.add(id);
      return next;
    });

  return (
    <>
      <PageHeader
        title="Audit log"
        description="Every change to this company, from the panel, the API or the command line: who made it, from where, and what changed."
        actions={
          <button type="button" className="button" onClick={list.reload} disabled={list.loading}>
            Refresh
          </button>
        }
      />
      <AuditFilters filters={filters} apply={(changes) => update(changes)} clear={filtered ? clear : undefined} />
      <Loaded
        state={list}
        empty={(items) =>
          items.length === 0 ? (
            filtered ? (
              <EmptyState
                title="No changes match these filters"
                action={
                  <button type="button" className="button" onClick={clear}>
                    Clear filters
                  </button>
                }
              >
                Widen the time range or clear a filter.
              </EmptyState>
            ) : (
              <EmptyState title="No changes recorded yet">
                Creating an integration, a key or a member, or changing the company settings, is recorded here.
              </EmptyState>
            )
          ) : undefined
        }
      >
        {(items) => (
          <>
            <div className="table-wrap">
              <table className="audit-table">
                <thead>
                  <tr>
                    <th scope="col">
                      <span className="visually-hidden">Details</span>
                    </th>
                    <th scope="col">Time</th>
                    <th scope="col">Actor</th>
                    <th scope="col">Action</th>
                    <th scope="col">Target</th>
                  </tr>
                </thead>
                <tbody>
                  {items.map((record) => {
                    const open = expanded.has(record.id);
                    return (
                      <Fragment key={record.id}>
                        <tr
                          className={open ? 'clickable selected audit-row' : 'clickable audit-row'}
                          tabIndex={0}
                          aria-expanded={open}
                          data-audit-id={record.id}
                          onClick={() => toggle(record.id)}
                          onKeyDown={onActivate(() => toggle(record.id))}
                        >
                          <td className="audit-chevron" aria-hidden="true">
                            {open ? '▾' : '▸'}
                          </td>
                          <td>
                            <Time iso={record.at} />
                          </td>
                          <td>
                            <Actor record={record} names={names} />
                          </td>
                          <td>
                            <ActionBadge action={record.action} />
                          </td>
                          <td className="wrap">
                            <Target record={record} names={names} />
                          </td>
                        </tr>
                        {open && (
                          <tr className="audit-detail-row">
                            <td colSpan={5}>
                              <AuditDetail record={record} apply={(changes) => update(changes)} />
                            </td>
                          </tr>
                        )}
                      </Fragment>
                    );
                  })}
                </tbody>
              </table>
            </div>
            <ListFooter list={list} moreLabel="Load older changes" />
          </>
        )}
      </Loaded>
    </>
  );
}

function useNames(): Names {
  const { can, session } = useSession();
  const members = useApi(async () => (await api.get<Page<Member>>('/members', { limit: 200 })).data, []);
  const owner = can('members:manage');
  const keys = useApi(
    async () => (owner ? (await api.get<Page<ManagementKey>>('/management-keys', { limit: 200 })).data : []),
    [owner],
  );
  const integrations = useApi(async () => (await api.get<Page<{ id: string; name: string }>>('/integrations', { limit: 200 })).data, []);
  return useMemo(() => {
    const emails = new Map((members.data ?? []).map((m) => [m.user_id, m.email]));
    const keyNames = new Map((keys.data ?? []).map((k) => [k.id, k.name ? `${k.name} (${k.prefix}…)` : `${k.prefix}…`]));
    const companies = new Map(session.companies.map((c) => [c.id, c.name]));
    const integrationNames = new Map((integrations.data ?? []).map((i) => [i.id, i.name]));
    return {
      user: (id) => emails.get(id),
      key: (id) => keyNames.get(id),
      integration: (id) => integrationNames.get(id),
      company: (id) => companies.get(id),
    };
  }, [members.data, keys.data, integrations.data, session.companies]);
}

function AuditFilters({
  filters,
  apply,
  clear,
}: {
  filters: Filters;
  apply(changes: Partial<Filters>): void;
  clear: (() => void) | undefined;
}) {
  const [draft, setDraft] = useState(() => draftOf(filters));
  // The URL changed (a filter from a record, Clear, back/forward): show it.
  useEffect(() => setDraft(draftOf(filters)), [JSON.stringify(filters)]);
  const set = (name: keyof typeof draft) => (event: { target: { value: string } }) =>
    setDraft((previous) => ({ ...previous, [name]: event.target.value }));

  const submit = (event: FormEvent) => {
    event.preventDefault();
    apply({
      action: draft.action.trim() || undefined,
      actor_id: draft.actor_id.trim() || undefined,
      target_id: draft.target_id.trim() || undefined,
      since: fromLocalInput(draft.since),
      until: fromLocalInput(draft.until),
    });
  };

  return (
    <form className="toolbar audit-filters" onSubmit={submit} aria-label="Filters">
      <Field label="Action">
        <input type="text" list="audit-actions" placeholder="Any action" value={draft.action} onChange={set('action')} />
      </Field>
      <datalist id="audit-actions">
        {AUDIT_ACTIONS.map((action) => (
          <option key={action} value={action} />
        ))}
      </datalist>
      <Field label="Actor id">
        <input type="text" placeholder="usr_… or key_…" value={draft.actor_id} onChange={set('actor_id')} />
      </Field>
      <Field label="Target id">
        <input type="text" placeholder="int_…, key_…, usr_…, cmp_…" value={draft.target_id} onChange={set('target_id')} />
      </Field>
      <Field label="From">
        <input type="datetime-local" value={draft.since} onChange={set('since')} />
      </Field>
      <Field label="To">
        <input type="datetime-local" value={draft.until} onChange={set('until')} />
      </Field>
      <div className="audit-filter-actions">
        <button type="submit" className="button primary">
          Apply filters
        </button>
        {clear && (
          <button type="button" className="button" onClick={clear}>
            Clear
          </button>
        )}
      </div>
    </form>
  );
}

function draftOf(filters: Filters) {
  return {
    action: filters.action ?? '',
    actor_id: filters.actor_id ?? '',
    target_id: filters.target_id ?? '',
    since: toLocalInput(filters.since),
    until: toLocalInput(filters.until),
  };
}

function actionTone(action: string): Tone {
  const verb = action.slice(action.lastIndexOf('.') + 1);
  if (['create', 'add', 'enable', 'resume'].includes(verb)) return 'good';
  if (['delete', 'remove', 'revoke', 'disable'].includes(verb)) return 'bad';
  if (['rotate', 'secret_rotate', 'role_change', 'pause'].includes(verb)) return 'warn';
  return 'info';
}

function ActionBadge({ action }: { action: string }) {
  return (
    <span className="audit-action">
      <Badge tone={actionTone(action)}>{action}</Badge>
    </span>
  );
}

const ACTOR_TYPES: Record<AuditRecord['actor']['type'], string> = {
  user: 'user',
  key: 'management key',
  cli: 'command line',
  system: 'intake',
};

function Actor({ record, names }: { record: AuditRecord; names: Names }) {
  const { type, id, ip } = record.actor;
  const label =
    type === 'system'
      ? 'on its own'
      : id === null
        ? undefined
        : type === 'user'
          ? names.user(id)
          : type === 'key'
            ? names.key(id)
            : `operator ${id}`;
  return (
    <div className="audit-actor">
      <span className="muted small">{ACTOR_TYPES[type] ?? type}</span>{' '}
      {label ? (
        <span title={id ?? undefined}>{label}</span>
      ) : (
        <span className="mono small">{id ?? 'unknown'}</span>
      )}
      {ip && <div className="muted small mono">{ip}</div>}
    </div>
  );
}

/** A word for the target: the member's email, the integration's or destination's name, the key's prefix. */
function targetLabel(record: AuditRecord, names: Names): string | undefined {
  const { type, id } = record.target;
  const state = (isObject(record.after) ? record.after : isObject(record.before) ? record.before : {}) as Record<string, unknown>;
  const text = (value: unknown) => (typeof value === 'string' && value !== '' ? value : undefined);
  switch (type) {
    case 'user':
      return names.user(id) ?? text(state.email);
    case 'integration':
      return names.integration(id) ?? text(state.name);
    case 'key': {
      const name = text(state.name);
      const prefix = text(state.prefix);
      return names.key(id) ?? (prefix ? (name ? `${name} (${prefix}…)` : `${prefix}…`) : name);
    }
    case 'company':
      return names.company(id) ?? text(state.name);
    case 'destination':
      return text(state.name);
    default:
      return undefined;
  }
}

function Target({ record, names }: { record: AuditRecord; names: Names }) {
  const label = targetLabel(record, names);
  return (
    <div className="audit-target">
      <span className="muted small">{record.target.type}</span> {label && <span>{label} </span>}
      <span className="mono small muted">{record.target.id || '—'}</span>
    </div>
  );
}

function AuditDetail({ record, apply }: { record: AuditRecord; apply(changes: Partial<Filters>): void }) {
  const actorId = record.actor.id;
  return (
    <div className="audit-detail">
      <div className="audit-detail-facts">
        <span>
          <span className="muted">Exact time:</span> <span className="mono">{new Date(record.at).toISOString()}</span>
        </span>
        <span>
          <span className="muted">Record:</span> <span className="mono">{record.id}</span>
        </span>
        <span className="actions">
          {actorId && record.actor.type !== 'cli' && (
            <button type="button" className="button small" onClick={() => apply({ actor_id: actorId })}>
              More by this actor
            </button>
          )}
          {record.target.id && (
            <button type="button" className="button small" onClick={() => apply({ target_id: record.target.id })}>
              More on this target
            </button>
          )}
        </span>
      </div>
      <AuditChange before={record.before} after={record.after} />
    </div>
  );
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
