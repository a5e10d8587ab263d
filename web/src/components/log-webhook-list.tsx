import { useEffect, useState, type FormEvent } from 'react';
import { Field } from './dialog';
import type { LiveStatus } from './live-tail';
import { TimeRangeFilter, onActivate, param } from './list-controls';
import { IntegrationSelect, type Integrations, type WebhookSummary } from './log-shared';
import { Badge, Time } from './ui';
import '../pages/logs.css';

/** The parts of the webhook log: the live tail's state, the filters, and the table. */

const PREVIEW_LENGTH = 140;
const CLEARED = { event: undefined, q: undefined, range: undefined, since: undefined, until: undefined };

export function LiveIndicator({ status, restart }: { status: LiveStatus; restart(): void }) {
  return (
    <span className="live-status" role="status" aria-live="polite">
      {status === 'live' && (
        <Badge tone="good">
          <span className="live-dot" aria-hidden="true" />
          Live
        </Badge>
      )}
      {status === 'connecting' && <Badge tone="neutral">Connecting…</Badge>}
      {status === 'reconnecting' && <Badge tone="warn">Reconnecting…</Badge>}
      {status === 'stopped' && (
        <>
          <Badge tone="bad">Live tail stopped</Badge>
          <button type="button" className="button small" onClick={restart}>
            Retry
          </button>
        </>
      )}
    </span>
  );
}

export function WebhookFilters({
  params,
  update,
  integrations,
  events,
  narrowed,
  liveBlockedBySearch,
}: {
  params: URLSearchParams;
  update(changes: Record<string, string | undefined>): void;
  integrations: Integrations;
  events: string[];
  narrowed: boolean;
  liveBlockedBySearch: boolean;
}) {
  const event = param(params, 'event') ?? '';
  const q = param(params, 'q') ?? '';
  const [eventDraft, setEventDraft] = useState(event);
  const [qDraft, setQDraft] = useState(q);
  useEffect(() => setEventDraft(event), [event]);
  useEffect(() => setQDraft(q), [q]);
  const dirty = eventDraft.trim() !== event || qDraft !== q;

  const apply = (submit: FormEvent) => {
    submit.preventDefault();
    update({ event: eventDraft.trim() || undefined, q: qDraft || undefined });
  };
  return (
    <form className="toolbar log-filters" onSubmit={apply} role="search" aria-label="Filter webhooks">
      <IntegrationSelect
        integrations={integrations}
        value={param(params, 'integration_id')}
        onChange={(id) => update({ integration_id: id })}
      />
      <Field label="Event">
        <input
          type="text"
          value={eventDraft}
          list="webhook-events"
          placeholder="order.created"
          maxLength={200}
          onChange={(e) => setEventDraft(e.target.value)}
        />
      </Field>
      <datalist id="webhook-events">
        {events.map((name) => (
          <option key={name} value={name} />
        ))}
      </datalist>
      <Field label="Search payloads">
        <input
          type="search"
          value={qDraft}
          placeholder="Text in the raw body"
          maxLength={200}
          onChange={(e) => setQDraft(e.target.value)}
        />
      </Field>
      <TimeRangeFilter params={params} update={update} />
      <button type="submit" className={dirty ? 'button primary' : 'button'}>
        Apply
      </button>
      {narrowed && (
        <button type="button" className="button ghost" onClick={() => update(CLEARED)}>
          Clear filters
        </button>
      )}
      {liveBlockedBySearch && <p className="notice info log-note">Live tail is paused while a search or a fixed end time is set.</p>}
    </form>
  );
}

function preview(data: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(data);
  } catch {
    text = '';
  }
  return text.length > PREVIEW_LENGTH ? `${text.slice(0, PREVIEW_LENGTH)}…` : text;
}

export function WebhookTable({
  rows,
  fresh,
  selected,
  showIntegration,
  nameOf,
  open,
}: {
  rows: WebhookSummary[];
  fresh: Set<string>;
  selected: string | undefined;
  showIntegration: boolean;
  nameOf(id: string): string | undefined;
  open(uuid: string): void;
}) {
  return (
    <div className="table-wrap">
      <table className="log-table webhook-table">
        <thead>
          <tr>
            <th scope="col">Event</th>
            <th scope="col">Data</th>
            {showIntegration && <th scope="col">Integration</th>}
            <th scope="col">Received</th>
            <th scope="col">UUID</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => {
            const data = preview(row.data);
            const classes = ['clickable', fresh.has(row.uuid) && 'new', row.uuid === selected && 'selected'].filter(Boolean).join(' ');
            return (
              <tr
                key={row.uuid}
                className={classes}
                tabIndex={0}
                data-uuid={row.uuid}
                onClick={() => open(row.uuid)}
                onKeyDown={onActivate(() => open(row.uuid))}
              >
                <td>
                  <code className="event-name">{row.event}</code>
                </td>
                <td className="payload-preview">{data === '{}' ? <span className="muted">no data</span> : <code>{data}</code>}</td>
                {showIntegration && <td>{nameOf(row.integration_id) ?? <span className="mono small">{row.integration_id}</span>}</td>}
                <td>
                  <Time iso={row.received_at} />
                </td>
                <td className="mono small muted" title={row.uuid}>
                  …{row.uuid.slice(-8)}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
