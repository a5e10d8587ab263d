import { useState } from 'react';
import { api } from '../api/client';
import { useApi } from '../api/use-api';
import { Field, FormDialog } from '../components/dialog';
import { fromLocalInput, toLocalInput } from '../components/list-controls';
import { ErrorMessage, numberFormat } from '../components/ui';
import type { Destination } from './destination-shared';

/**
 * A destination's bulk actions: retrying now the deliveries that are failing and waiting for
 * their next attempt, replaying its failed deliveries (the dead letter: they gave up), and
 * sending it webhooks stored before it existed. The two replays say beforehand how many they
 * will take (a dry run); each answers how many it took and whether more matched than one
 * call takes, in which case the notice offers the next batch.
 */

/** A bulk action's request, kept to ask for the next batch when more matched than one call takes. */
type BulkRequest = { kind: 'replay' | 'retry' | 'send' | 'selected'; body: Record<string, unknown> };
/** What a bulk action answered, said above the list until the next one. */
type BulkAnswer = { replayed?: number; created?: number; skipped?: number; more: boolean; next_since?: string };

/**
 * The two bulk actions' dialogs and the notice of the last one's answer; `onDone` runs
 * after each call (the deliveries and stats change).
 */
export function useBulkActions(destination: Destination, onDone: () => void) {
  const [dialog, setDialog] = useState<BulkRequest['kind']>();
  // The deliveries picked in the list, for 'selected'.
  const [picked, setPicked] = useState<string[]>([]);
  const [result, setResult] = useState<{ request: BulkRequest; answer: BulkAnswer }>();
  const run = async (request: BulkRequest) => {
    const path = request.kind === 'send' ? `/destinations/${destination.id}/send` : '/deliveries/replay';
    const answer = await api.post<BulkAnswer>(path, request.body);
    setDialog(undefined);
    setResult({ request, answer });
    onDone();
  };
  const close = () => setDialog(undefined);
  return {
    open: (kind: BulkRequest['kind'], ids: string[] = []) => {
      setPicked(ids);
      setDialog(kind);
    },
    notice: result && (
      <BulkNotice kind={result.request.kind} answer={result.answer} again={() => run(nextBatch(result.request, result.answer))} />
    ),
    dialog:
      dialog === 'replay' ? (
        <ReplayFailedDialog destination={destination} onClose={close} run={(body) => run({ kind: 'replay', body })} />
      ) : dialog === 'retry' ? (
        <RetryNowDialog destination={destination} onClose={close} run={(body) => run({ kind: 'retry', body })} />
      ) : dialog === 'send' ? (
        <SendStoredDialog destination={destination} onClose={close} run={(body) => run({ kind: 'send', body })} />
      ) : dialog === 'selected' ? (
        <RetrySelectedDialog destination={destination} ids={picked} onClose={close} run={(body) => run({ kind: 'selected', body })} />
      ) : null,
  };
}

/** What each bulk action's dialog is given: `run` makes the call (and closes the dialog once it answers). */
type BulkDialogProps = { destination: Destination; onClose(): void; run(body: Record<string, unknown>): Promise<void> };

/** The same request again; a send goes on from where the last call stopped reading. */
function nextBatch(request: BulkRequest, answer: BulkAnswer): BulkRequest {
  return answer.next_since ? { ...request, body: { ...request.body, since: answer.next_since } } : request;
}

function BulkNotice({ kind, answer, again }: { kind: BulkRequest['kind']; answer: BulkAnswer; again(): Promise<void> }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error>();
  const plural = (n: number | undefined, one: string, many: string) => `${numberFormat.format(n ?? 0)} ${n === 1 ? one : many}`;
  const next = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await again();
    } catch (e) {
      setError(e as Error);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <div className="notice info destination-bulk" role="status">
        <span>
          {kind === 'replay'
            ? `Replayed ${plural(answer.replayed, 'failed delivery', 'failed deliveries')}: each starts a new series of attempts.`
            : kind === 'retry'
              ? `Retried ${plural(answer.replayed, 'failing delivery', 'failing deliveries')} now: each starts a new series of attempts.`
              : kind === 'selected'
                ? `Sent ${plural(answer.replayed, 'selected delivery', 'selected deliveries')} again now: each starts a new series of attempts.`
                : `Created ${plural(answer.created, 'delivery', 'deliveries')} for stored webhooks` +
              (answer.skipped ? `; ${plural(answer.skipped, 'webhook', 'webhooks')} already had one.` : '.')}
          {answer.more && ' More matched than one call takes.'}
        </span>
        {answer.more && (
          <button type="button" className="button small" onClick={() => void next()} disabled={busy}>
            {kind === 'send' ? 'Send the next batch' : kind === 'retry' ? 'Retry the next batch' : 'Replay the next batch'}
          </button>
        )}
      </div>
      {error && <ErrorMessage error={error} />}
    </>
  );
}

/** Optional from/to inputs (datetime-local, sent as UTC). */
function RangeFields({ since, until, onChange }: { since: string; until: string; onChange(since: string, until: string): void }) {
  return (
    <div className="grid-2">
      <Field label="From">
        <input type="datetime-local" value={since} onChange={(e) => onChange(e.target.value, until)} />
      </Field>
      <Field label="To">
        <input type="datetime-local" value={until} onChange={(e) => onChange(since, e.target.value)} />
      </Field>
    </div>
  );
}

/** What a replay with `body` would take now, read by a dry run as the dialog opens: "3 deliveries", "10,000 or more". */
function WouldTake({ body, noun }: { body: Record<string, unknown>; noun: [string, string] }) {
  const preview = useApi(
    () => api.post<{ would_replay: number; more: boolean }>('/deliveries/replay', { ...body, dry_run: true }),
    [JSON.stringify(body)],
  );
  if (preview.error) return <span className="muted">(the count could not be read: {preview.error.message})</span>;
  if (!preview.data) return <span className="muted">Counting…</span>;
  const { would_replay: count, more } = preview.data;
  return (
    <strong className="bulk-count">
      {numberFormat.format(count)}
      {more ? ' or more' : ''} {count === 1 && !more ? noun[0] : noun[1]}
    </strong>
  );
}

/**
 * Deliveries that failed and wait for their next retry ("pending" with attempts), sent again
 * now as a new series, instead of at the next step of their schedule.
 */
function RetryNowDialog({
  destination,
  onClose,
  run,
}: BulkDialogProps) {
  const body = { destination_id: destination.id, state: 'pending' };
  return (
    <FormDialog title="Retry failing deliveries now" submitLabel="Retry now" onClose={onClose} onSubmit={() => run(body)}>
      <p>
        This retries <WouldTake body={body} noun={['delivery', 'deliveries']} /> of <strong>{destination.name}</strong> now: those that
        failed and are waiting for their next attempt. Each starts a new series of attempts
        {destination.status === 'active' ? ' at once' : ' once the destination is resumed'}; an attempt under way finishes first.
      </p>
      <p className="muted small">Deliveries that gave up after their last retry are failed: replay those with Replay failed deliveries.</p>
    </FormDialog>
  );
}

/**
 * Deliveries picked in the list, one by one: each failing one retried now, each that gave up
 * (or succeeded, or was held) replayed; the rest (never attempted, in flight, cancelled) left.
 */
function RetrySelectedDialog({ destination, ids, onClose, run }: BulkDialogProps & { ids: string[] }) {
  const body = { destination_id: destination.id, delivery_ids: ids };
  return (
    <FormDialog title="Retry selected deliveries now" submitLabel="Retry selected now" onClose={onClose} onSubmit={() => run(body)}>
      <p>
        Of the {numberFormat.format(ids.length)} selected, this sends <WouldTake body={body} noun={['delivery', 'deliveries']} /> of{' '}
        <strong>{destination.name}</strong> again as a new series of attempts
        {destination.status === 'active' ? ', at once' : ', once the destination is resumed'}: the failing ones instead of at their
        next retry, and those that gave up.
      </p>
      <p className="muted small">
        Left out: those not attempted yet or with an attempt under way, and those sent again in the last minute.
      </p>
    </FormDialog>
  );
}

function ReplayFailedDialog({
  destination,
  onClose,
  run,
}: BulkDialogProps) {
  const [range, setRange] = useState({ since: '', until: '' });
  const body = { destination_id: destination.id, state: 'failed', since: fromLocalInput(range.since), until: fromLocalInput(range.until) };
  const submit = () => run(body);
  return (
    <FormDialog title="Replay failed deliveries" submitLabel="Replay failed deliveries" onClose={onClose} onSubmit={submit}>
      <p>
        Every failed delivery of <strong>{destination.name}</strong> (created in the range, if you give one) starts a new series of
        attempts, at once{destination.status === 'active' ? '' : ' once the destination is resumed'}. Their earlier attempts stay
        in their log.
      </p>
      <RangeFields since={range.since} until={range.until} onChange={(since, until) => setRange({ since, until })} />
      <p className="muted small">Leave both empty to replay every failed delivery.</p>
      <p>
        It will replay <WouldTake body={body} noun={['failed delivery', 'failed deliveries']} />.
      </p>
    </FormDialog>
  );
}

function SendStoredDialog({
  destination,
  onClose,
  run,
}: BulkDialogProps) {
  const createdAt = Date.parse(destination.created_at);
  // The inputs hold whole minutes: the end is the minute after the creation, so nothing
  // received in its last seconds is left out (what came after already has a delivery).
  const [range, setRange] = useState({
    since: toLocalInput(new Date(createdAt - 86_400_000).toISOString()),
    until: toLocalInput(new Date(createdAt + 60_000).toISOString()),
  });
  const [event, setEvent] = useState('');
  const submit = async () => {
    const since = fromLocalInput(range.since);
    if (!since) throw new Error('Give the time the range starts from.');
    await run({ since, until: fromLocalInput(range.until), event: event.trim() || undefined });
  };
  return (
    <FormDialog title="Send stored webhooks" submitLabel="Send webhooks" onClose={onClose} onSubmit={submit}>
      <p>
        Sends <strong>{destination.name}</strong> the webhooks stored in this range that it matches and has not had yet, such as
        those received before it was created ({new Date(destination.created_at).toLocaleString()}).
      </p>
      <RangeFields since={range.since} until={range.until} onChange={(since, until) => setRange({ since, until })} />
      <Field label="Event" hint="Optional: only this event name.">
        <input value={event} onChange={(e) => setEvent(e.target.value)} placeholder="order.created" maxLength={200} spellCheck={false} />
      </Field>
    </FormDialog>
  );
}
