import { Fragment, useMemo, useState } from 'react';
import { usePagedList } from '../api/use-api';
import { Badge, EmptyState, Loaded, PageHeader, Time, type Tone } from '../components/ui';
import { AuditChange } from './company-audit-change';
import { ListFooter, onActivate, param, useQueryState } from '../components/list-controls';
import { AUDIT_FILTERS, AuditFilters, type AuditFilterValues } from './audit-filters';
import { changeSummary, recordedNames, targetName, useDirectory, type Directory } from './audit-names';
import type { AuditRecord } from './company-shared';
import './company.css';

/**
 * Every change made to the company (through the panel, the API or the command line):
 * who, from where, what, and the state before and after. Newest first, filtered in the
 * URL so a view can be shared.
 */
export function AuditLogPage() {
  const [params, update] = useQueryState();
  const filters = useMemo(
    () => Object.fromEntries(AUDIT_FILTERS.map((name) => [name, param(params, name)])) as AuditFilterValues,
    [params],
  );
  const filterKey = JSON.stringify(filters);
  const list = usePagedList<AuditRecord>('/audit-log', filters, [filterKey]);
  const directory = useDirectory();
  const [expanded, setExpanded] = useState<ReadonlySet<string>>(new Set());
  const filtered = AUDIT_FILTERS.some((name) => filters[name] !== undefined);
  const clear = () => update(Object.fromEntries(AUDIT_FILTERS.map((name) => [name, undefined])));
  // Names the loaded records hold, for records of the same target that hold none.
  const recorded = useMemo(() => recordedNames(list.data ?? []), [list.data]);

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
      <AuditFilters filters={filters} directory={directory} apply={(changes) => update(changes)} clear={filtered ? clear : undefined} />
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
                            <Actor record={record} directory={directory} />
                          </td>
                          <td>
                            <ActionBadge record={record} />
                          </td>
                          <td className="wrap">
                            <Target record={record} directory={directory} recorded={recorded} />
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

function actionTone(action: string): Tone {
  const verb = action.slice(action.lastIndexOf('.') + 1);
  if (['create', 'add', 'enable', 'resume'].includes(verb)) return 'good';
  if (['delete', 'remove', 'revoke', 'disable'].includes(verb)) return 'bad';
  if (['rotate', 'secret_rotate', 'role_change', 'pause'].includes(verb)) return 'warn';
  return 'info';
}

/** The action as recorded (what the filter takes), and what an update changed, in words. */
function ActionBadge({ record }: { record: AuditRecord }) {
  const summary = changeSummary(record);
  return (
    <>
      <span className="audit-action">
        <Badge tone={actionTone(record.action)}>{record.action}</Badge>
      </span>
      {summary && <div className="muted small audit-summary">{summary}</div>}
    </>
  );
}

const ACTOR_TYPES: Record<AuditRecord['actor']['type'], string> = {
  user: 'user',
  key: 'management key',
  cli: 'command line',
  system: 'intake',
};

function Actor({ record, directory }: { record: AuditRecord; directory: Directory }) {
  const { type, id, ip } = record.actor;
  const label =
    type === 'system'
      ? 'on its own'
      : id === null
        ? undefined
        : type === 'user'
          ? directory.user(id)
          : type === 'key'
            ? directory.key(id)
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

/** The target by the name it had then (and has now, when another), the id beside it. */
function Target({ record, directory, recorded }: { record: AuditRecord; directory: Directory; recorded: ReadonlyMap<string, string> }) {
  const { name, renamedFrom, now } = targetName(record, directory, recorded);
  return (
    <div className="audit-target">
      <span className="muted small">{record.target.type}</span> {name && <span className="audit-target-name">{name} </span>}
      {renamedFrom && <span className="muted small">(renamed from {renamedFrom}) </span>}
      {now && <span className="muted small audit-now-named">now named {now} </span>}
      <span className="mono small muted">{record.target.id || '—'}</span>
    </div>
  );
}

function AuditDetail({ record, apply }: { record: AuditRecord; apply(changes: Partial<AuditFilterValues>): void }) {
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
