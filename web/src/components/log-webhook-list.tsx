import { useEffect, useState, type FormEvent } from 'react';
import { Field } from './dialog';
import type { LiveStatus } from './live-tail';
import { TimeRangeFilter, onActivate, param } from './list-controls';
import { IntegrationSelect, type Integrations, type WebhookSummary } from './log-shared';
import { Badge, CopyButton, ErrorMessage, Time } from './ui';
import '../pages/logs.css';

/** The parts of the webhook log: the live tail's state, the filters, and the table. */

const PREVIEW_LENGTH = 140;
const CLEARED = { event: undefined, q: undefined, range: undefined, since: undefined, until: undefined };
/** A webhook's uuid as a sender gets it in the 202 (any case). */
const WEBHOOK_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

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
  findWebhook,
}: {
  params: URLSearchParams;
  update(changes: Record<string, string | undefined>): void;
  integrations: Integrations;
  events: string[];
  narrowed: boolean;
  liveBlockedBySearch: boolean;
  /** Opens the webhook with this uuid, with the other filters' `changes`; false when the company has none. */
  findWebhook(uuid: string, changes: Record<string, string | undefined>): Promise<boolean>;
}) {
  const event = param(params, 'event') ?? '';
  const q = param(params, 'q') ?? '';
  const [eventDraft, setEventDraft] = useState(event);
  const [qDraft, setQDraft] = useState(q);
  const [uuidNote, setUuidNote] = useState<{ uuid: string } | { error: Error }>();
  useEffect(() => setEventDraft(event), [event]);
  useEffect(() => setQDraft(q), [q]);
  // The note on a uuid searched for as text lasts while that search does.
  useEffect(() => setUuidNote((note) => (note && 'uuid' in note && note.uuid === q.trim() ? note : undefined)), [q]);
  const dirty = eventDraft.trim() !== event || qDraft !== q;

  const apply = async (submit: FormEvent) => {
    submit.preventDefault();
    setUuidNote(undefined);
    const changes = { event: eventDraft.trim() || undefined, q: qDraft || undefined };
    const uuid = qDraft.trim();
    // The uuid a sender got in its 202 opens that webhook; one that is no webhook's may be
    // in payloads (an order's uuid, say), so it is searched for as text.
    if (WEBHOOK_UUID.test(uuid)) {
      try {
        if (await findWebhook(uuid.toLowerCase(), { ...changes, q: q || undefined })) {
          setQDraft(q);
          return;
        }
        setUuidNote({ uuid });
      } catch (error) {
        setUuidNote({ error: error as Error });
        return;
      }
    }
    update(changes);
  };
  return (
    <form className="toolbar log-filters" onSubmit={(submit) => void apply(submit)} role="search" aria-label="Filter webhooks">
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
          placeholder="Any event"
          maxLength={200}
          onChange={(e) => setEventDraft(e.target.value)}
        />
      </Field>
      <datalist id="webhook-events">
        {events.map((name) => (
          <option key={name} value={name} />
        ))}
      </datalist>
      <Field label="Search payloads or UUID">
        <input
          type="search"
          value={qDraft}
          placeholder="Text in the body, or a webhook’s uuid"
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
      {uuidNote &&
        ('uuid' in uuidNote ? (
          <p className="notice info log-note" role="status">
            No webhook has the uuid <code>{uuidNote.uuid}</code>: these are the webhooks whose body contains it.
          </p>
        ) : (
          <ErrorMessage error={uuidNote.error} />
        ))}
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
                <td className="webhook-uuid">
                  <span className="mono small muted" title={row.uuid}>
                    …{row.uuid.slice(-8)}
                  </span>{' '}
                  {/* Copying is not opening the row. */}
                  <span onClick={(e) => e.stopPropagation()}>
                    <CopyButton text={row.uuid} name="Copy UUID" />
                  </span>
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
