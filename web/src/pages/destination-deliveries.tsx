import { useEffect, useRef, useState } from 'react';
import { usePagedList } from '../api/use-api';
import { Field } from '../components/dialog';
import { ListFooter, onActivate, param, useQueryState } from '../components/list-controls';
import { EmptyState, ErrorMessage, Loading, Time, numberFormat } from '../components/ui';
import { useBulkActions } from './delivery-bulk';
import { DeliveryDetailDialog } from './delivery-detail';
import { DELIVERY_STATES, DeliveryStateBadge, Outcome, type Delivery, type DeliveryState, type Destination } from './destination-shared';

const PAGE_SIZE = 50;
/** The most a selection may name (the API's delivery_ids). */
const MAX_PICKED = 100;

/** What a person can send again by hand: settled ones, and failing ones waiting for their next retry. */
function pickable(delivery: Delivery): boolean {
  if (delivery.state === 'pending') return delivery.attempts > 0;
  return delivery.state === 'failed' || delivery.state === 'succeeded' || delivery.state === 'held';
}
/** While a delivery on the first page is about to change, the list is read again this often. */
const REFRESH_MS = 4000;

/**
 * A destination's deliveries, newest first, filtered by state (in the URL, with the open
 * delivery), each opening its attempts; sending again the ones ticked, retrying the failing
 * ones or replaying the failed ones in bulk, and sending webhooks stored before the
 * destination existed.
 */
export function DestinationDeliveries({
  destination,
  manage,
  version,
  onChanged,
}: {
  destination: Destination;
  manage: boolean;
  version: number;
  onChanged(): void;
}) {
  const [params, update] = useQueryState();
  const state = param(params, 'state') as DeliveryState | undefined;
  const selected = param(params, 'delivery');
  const [refresh, setRefresh] = useState(0);
  const list = usePagedList<Delivery>(
    '/deliveries',
    { destination_id: destination.id, state, limit: PAGE_SIZE },
    [destination.id, state, refresh, version],
  );

  // Pending deliveries change on their own, and so do held ones once the destination is
  // active again; only the first page is read again, so pages loaded below it are not lost.
  const rows = list.data ?? [];
  const moving = (d: Delivery) => d.state === 'pending' || (d.state === 'held' && destination.status === 'active');
  const watching = rows.length <= PAGE_SIZE && rows.some(moving);
  const { reload } = list;
  useEffect(() => {
    if (!watching || list.loading) return;
    const timer = setTimeout(() => document.visibilityState === 'visible' && reload(), REFRESH_MS);
    return () => clearTimeout(timer);
  }, [watching, list.loading, rows, reload]);

  const opener = useRef<HTMLElement | null>(null);
  const open = (id: string) => {
    opener.current = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    update({ delivery: id }, true);
  };
  const close = () => {
    update({ delivery: undefined });
    const back = opener.current;
    setTimeout(() => back?.isConnected && back.focus(), 0);
  };
  const changed = () => {
    setRefresh((n) => n + 1);
    onChanged();
  };
  // Deliveries ticked in the list, for "Retry selected now"; only those still shown count.
  const [picked, setPicked] = useState<Set<string>>(() => new Set());
  const bulk = useBulkActions(destination, () => {
    setPicked(new Set());
    changed();
  });
  const shownPicked = rows.filter((d) => picked.has(d.id) && pickable(d)).map((d) => d.id);
  const pickableRows = rows.filter(pickable).slice(0, MAX_PICKED);
  const allPicked = pickableRows.length > 0 && pickableRows.every((d) => picked.has(d.id));
  const toggle = (id: string, on: boolean) =>
    setPicked((previous) => {
      const next = new Set(previous);
      if (on && next.size < MAX_PICKED) next.add(id);
      else next.delete(id);
      return next;
    });

  return (
    <section className="card destination-deliveries" aria-labelledby="deliveries-heading">
      <header className="section-header">
        <div>
          <h2 id="deliveries-heading">Deliveries</h2>
          <p className="muted small">One per webhook sent here, newest first. Open one to see its attempts.</p>
        </div>
        <div className="actions">
          {manage && (
            <>
              {shownPicked.length > 0 && (
                <button type="button" className="button primary" onClick={() => bulk.open('selected', shownPicked)}>
                  Retry {numberFormat.format(shownPicked.length)} selected now
                </button>
              )}
              <button type="button" className="button" onClick={() => bulk.open('retry')}>
                Retry failing now
              </button>
              <button type="button" className="button" onClick={() => bulk.open('replay')}>
                Replay failed deliveries
              </button>
              <button type="button" className="button" onClick={() => bulk.open('send')}>
                Send stored webhooks
              </button>
            </>
          )}
          <button type="button" className="button" onClick={() => setRefresh((n) => n + 1)} disabled={list.loading}>
            Refresh
          </button>
        </div>
      </header>
      <div className="toolbar">
        <Field label="State">
          <select value={state ?? ''} onChange={(e) => update({ state: e.target.value || undefined, delivery: undefined })}>
            <option value="">All states</option>
            {DELIVERY_STATES.map((s) => (
              <option key={s.state} value={s.state}>
                {s.label}
              </option>
            ))}
          </select>
        </Field>
      </div>
      {bulk.notice}

      {list.error && !list.data ? (
        <ErrorMessage error={list.error} retry={list.reload} />
      ) : !list.data ? (
        <Loading label="Loading deliveries…" />
      ) : rows.length === 0 ? (
        <EmptyState title={state ? `No ${state} deliveries` : 'No deliveries yet'}>
          {state
            ? 'Choose another state to see the others.'
            : 'Each accepted webhook this destination matches gets a delivery here.' +
              (manage ? ' Webhooks stored before it was created can be sent with “Send stored webhooks”.' : '')}
        </EmptyState>
      ) : (
        <>
          {list.error && <ErrorMessage error={list.error} retry={list.reload} />}
          <div className="table-wrap">
            <table className="deliveries-table">
              <thead>
                <tr>
                  {manage && (
                    <th scope="col" className="pick-cell">
                      <input
                        type="checkbox"
                        aria-label="Select every delivery that can be sent again"
                        checked={allPicked}
                        disabled={pickableRows.length === 0}
                        onChange={(e) => setPicked(e.target.checked ? new Set(pickableRows.map((d) => d.id)) : new Set())}
                      />
                    </th>
                  )}
                  <th scope="col">Event</th>
                  <th scope="col">State</th>
                  <th scope="col">Last attempt</th>
                  <th scope="col" className="numeric">
                    Attempts
                  </th>
                  <th scope="col">Next attempt</th>
                  <th scope="col">Created</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((delivery) => (
                  <tr
                    key={delivery.id}
                    className={delivery.id === selected ? 'clickable selected' : 'clickable'}
                    tabIndex={0}
                    data-delivery-id={delivery.id}
                    onClick={() => open(delivery.id)}
                    onKeyDown={onActivate(() => open(delivery.id))}
                  >
                    {manage && (
                      <td className="pick-cell" onClick={(e) => e.stopPropagation()} onKeyDown={(e) => e.stopPropagation()}>
                        {pickable(delivery) && (
                          <input
                            type="checkbox"
                            aria-label={`Select ${delivery.event} (${delivery.id})`}
                            checked={picked.has(delivery.id)}
                            onChange={(e) => toggle(delivery.id, e.target.checked)}
                          />
                        )}
                      </td>
                    )}
                    <td className="wrap">
                      <span className="event-name">{delivery.event}</span>
                      <div className="muted small mono">{delivery.webhook_uuid}</div>
                    </td>
                    <td className="state-cell">
                      <DeliveryStateBadge state={delivery.state} />
                    </td>
                    <td className="last-attempt-cell">
                      {delivery.last_attempt_at ? (
                        <>
                          <Outcome status={delivery.last_status} error={delivery.last_error} />{' '}
                          <span className="muted small">
                            <Time iso={delivery.last_attempt_at} />
                          </span>
                        </>
                      ) : (
                        <span className="muted">{delivery.state === 'filtered' || delivery.state === 'deduplicated' ? 'Not sent' : 'None yet'}</span>
                      )}
                    </td>
                    <td className="numeric">
                      {numberFormat.format(delivery.attempts)}
                      {delivery.series > 0 && <div className="muted small">replay {delivery.series}</div>}
                    </td>
                    <td>
                      <Time iso={delivery.state === 'pending' ? delivery.next_attempt_at : null} />
                    </td>
                    <td>
                      <Time iso={delivery.created_at} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <ListFooter list={list} />
        </>
      )}

      {selected && <DeliveryDetailDialog deliveryId={selected} manage={manage} onClose={close} onReplayed={changed} />}
      {bulk.dialog}
    </section>
  );
}
