import { useEffect, useState } from 'react';
import { Link } from 'react-router';
import { api } from '../api/client';
import { useApi } from '../api/use-api';
import { Dialog } from '../components/dialog';
import { useIntegrations } from '../components/log-shared';
import { ErrorMessage, Loading, Time, numberFormat } from '../components/ui';
import { DeliveryStateBadge, Outcome, formatMs, type Attempt, type Delivery, type DeliveryDetail } from './destination-shared';

/** While the delivery is pending, it is read again this often: its next attempt is coming. */
const REFRESH_MS = 2000;

/**
 * One delivery in a wide dialog: its facts, every attempt (time, status or error in words,
 * duration, the answer's first bytes, the next attempt), and Replay.
 */
export function DeliveryDetailDialog({
  deliveryId,
  manage,
  onClose,
  onReplayed,
}: {
  deliveryId: string;
  manage: boolean;
  onClose(): void;
  onReplayed(): void;
}) {
  const detail = useApi(() => api.get<DeliveryDetail>(`/deliveries/${encodeURIComponent(deliveryId)}`), [deliveryId]);
  const delivery = detail.data?.delivery.id === deliveryId ? detail.data.delivery : undefined;
  const { reload, loading } = detail;
  useEffect(() => {
    if (delivery?.state !== 'pending' || loading) return;
    const timer = setTimeout(reload, REFRESH_MS);
    return () => clearTimeout(timer);
  }, [delivery, loading, reload]);

  return (
    <Dialog title="Delivery details" onClose={onClose} wide>
      {detail.error && !delivery ? (
        <ErrorMessage error={detail.error} retry={detail.reload} />
      ) : !delivery || !detail.data ? (
        <Loading label="Loading the delivery…" />
      ) : (
        <>
          {detail.error && <ErrorMessage error={detail.error} retry={detail.reload} />}
          <DeliveryFacts
            delivery={delivery}
            manage={manage}
            onReplayed={() => {
              detail.reload();
              onReplayed();
            }}
          />
          <Attempts attempts={detail.data.attempts} delivery={delivery} />
        </>
      )}
    </Dialog>
  );
}

function DeliveryFacts({ delivery, manage, onReplayed }: { delivery: Delivery; manage: boolean; onReplayed(): void }) {
  const integrations = useIntegrations();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error>();
  // A replay of a pending one sends it now rather than at its next retry; a cancelled one has no destination left.
  const replayable = delivery.state !== 'cancelled';
  const replay = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await api.post(`/deliveries/${delivery.id}/replay`);
      onReplayed();
    } catch (e) {
      setError(e as Error);
    } finally {
      setBusy(false);
    }
  };
  const webhookLink = `/webhooks?${new URLSearchParams({ integration_id: delivery.integration_id, webhook: delivery.webhook_uuid })}`;
  return (
    <div className="delivery-facts">
      <dl className="details">
        <dt>State</dt>
        <dd>
          <DeliveryStateBadge state={delivery.state} />
        </dd>
        <dt>Event</dt>
        <dd className="event-name">{delivery.event}</dd>
        <dt>Webhook</dt>
        <dd>
          <Link to={webhookLink} className="mono">
            {delivery.webhook_uuid}
          </Link>
        </dd>
        <dt>Integration</dt>
        <dd>{integrations.nameOf(delivery.integration_id) ?? <span className="mono">{delivery.integration_id}</span>}</dd>
        {delivery.skipped_by && (
          <>
            <dt>Skipped by</dt>
            <dd>{delivery.skipped_by === 'filter' ? "The destination's filter refused it" : 'Its transformation returned nothing'}</dd>
          </>
        )}
        {delivery.duplicate_of && (
          <>
            <dt>Repeats</dt>
            <dd>
              <Link to={`/destinations/${encodeURIComponent(delivery.destination_id)}?${new URLSearchParams({ delivery: delivery.duplicate_of })}`} className="mono">
                {delivery.duplicate_of}
              </Link>
            </dd>
          </>
        )}
        {delivery.rules_version !== null && (
          <>
            <dt>Rules version</dt>
            <dd>{delivery.rules_version === 0 ? 'No rules' : numberFormat.format(delivery.rules_version)}</dd>
          </>
        )}
        <dt>Series</dt>
        <dd>{delivery.series === 0 ? 'The original' : `Replay ${numberFormat.format(delivery.series)}`}</dd>
        <dt>Attempts</dt>
        <dd>{numberFormat.format(delivery.attempts)} in this series</dd>
        {delivery.state === 'pending' && (
          <>
            <dt>Next attempt</dt>
            <dd>
              <DueTime iso={delivery.next_attempt_at} />
            </dd>
          </>
        )}
        <dt>Delivery ID</dt>
        <dd className="mono">{delivery.id}</dd>
        <dt>Created</dt>
        <dd>
          <Time iso={delivery.created_at} />
        </dd>
      </dl>
      {manage && replayable && (
        <div className="delivery-replay">
          <button type="button" className="button primary" onClick={() => void replay()} disabled={busy}>
            {busy ? 'Replaying…' : 'Replay'}
          </button>
          <span className="muted small">
            {delivery.state === 'pending'
              ? 'Sends it now, as a new series of attempts, rather than at its next retry.'
              : 'Sends it again, as a new series of attempts.'}
          </span>
        </div>
      )}
      {error && <ErrorMessage error={error} />}
    </div>
  );
}

function Attempts({ attempts, delivery }: { attempts: Attempt[]; delivery: Delivery }) {
  if (attempts.length === 0) {
    return (
      <p className="muted" role="status">
        {NO_ATTEMPT[delivery.state] ?? 'No attempt yet: the first is on its way.'}
      </p>
    );
  }
  return (
    <section aria-labelledby="attempts-heading">
      <h3 id="attempts-heading">Attempts</h3>
      <div className="table-wrap">
        <table className="attempts-table">
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">Time</th>
              <th scope="col">Outcome</th>
              <th scope="col" className="numeric">
                Duration
              </th>
              <th scope="col">Next attempt</th>
              <th scope="col">Response</th>
            </tr>
          </thead>
          <tbody>
            {attempts.map((attempt) => (
              <tr key={attempt.id} data-attempt-id={attempt.id}>
                <td>
                  {attempt.number}
                  {attempt.series > 0 && <div className="muted small">replay {attempt.series}</div>}
                </td>
                <td>
                  <span title={new Date(attempt.attempted_at).toUTCString()}>{new Date(attempt.attempted_at).toLocaleString()}</span>
                </td>
                <td>
                  <Outcome status={attempt.status} error={attempt.error} />
                </td>
                <td className="numeric">{formatMs(attempt.duration_ms)}</td>
                <td>
                  <NextAttempt attempt={attempt} attempts={attempts} delivery={delivery} />
                </td>
                <td className="wrap attempt-response">
                  {attempt.response_excerpt ? (
                    <details>
                      <summary className="mono small">{preview(attempt.response_excerpt)}</summary>
                      <pre>{attempt.response_excerpt}</pre>
                    </details>
                  ) : (
                    <span className="muted">—</span>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

/** Why a delivery has no attempt, by its state. */
const NO_ATTEMPT: Partial<Record<Delivery['state'], string>> = {
  held: 'No attempt yet: the destination is paused or disabled.',
  cancelled: 'No attempt was made: the destination was deleted first.',
  filtered: "No attempt was made: the destination's rules did not send it.",
  deduplicated: 'No attempt was made: it repeats an earlier delivery, which was sent instead.',
};

/** A time a retry is due: "in 5 minutes", or "Due now" once it has passed (the attempt is on its way). */
function DueTime({ iso }: { iso: string | null }) {
  if (!iso || Date.parse(iso) <= Date.now()) return <span>Due now</span>;
  return <Time iso={iso} />;
}

/**
 * What became of the retry an attempt scheduled: made (a later attempt of its series),
 * replaced (a replay began a new series after it), still to come, or none. Only the newest
 * attempt of a pending delivery has a retry still to come.
 */
function NextAttempt({ attempt, attempts, delivery }: { attempt: Attempt; attempts: Attempt[]; delivery: Delivery }) {
  if (!attempt.next_attempt_at) return <span className="muted">None</span>;
  if (attempts.some((other) => other.series === attempt.series && other.number > attempt.number)) return <span className="muted">Made</span>;
  const replays = attempts.filter((other) => other.series > attempt.series).map((other) => other.series);
  if (delivery.series > attempt.series) replays.push(delivery.series);
  if (replays.length > 0) return <span className="muted">Replaced by replay {numberFormat.format(Math.min(...replays))}</span>;
  if (delivery.state !== 'pending') return <span className="muted">None</span>;
  return <DueTime iso={attempt.next_attempt_at} />;
}

function preview(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > 60 ? `${line.slice(0, 60)}…` : line || '(blank)';
}
