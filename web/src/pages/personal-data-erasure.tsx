import { useEffect, useRef, useState } from 'react';
import { Link } from 'react-router';
import { api } from '../api/client';
import type { Erasure } from '../api/types';
import { useApi, useEvery } from '../api/use-api';
import { Field, FormDialog } from '../components/dialog';
import { Badge, ErrorMessage, Loading, Time, numberFormat } from '../components/ui';
import type { Directory } from './audit-names';
import { actorName, awaitingErase, counted, ERASURE_TONES, inProgress, ReportButton } from './personal-data-shared';

/** What the person types to erase: a word, not the value (the panel never has it back). */
const CONFIRM_WORD = 'erase';

/**
 * One preview or erasure, read again every second while it runs: how far it got, then what
 * it found (counts, and a sample of the webhooks with links to the viewer; never a body),
 * with Erase for a preview waiting to be confirmed.
 */
export function ErasureCard({
  id,
  version,
  directory,
  onErase,
  onSettled,
  onClose,
}: {
  id: string;
  /** Changed by the page after a confirmation, to read the erasure again at once. */
  version: number;
  directory: Directory;
  onErase(erasure: Erasure): void;
  onSettled(): void;
  onClose(): void;
}) {
  const loaded = useApi(() => api.get<Erasure>(`/erasures/${encodeURIComponent(id)}`), [id, version]);
  const erasure = loaded.data?.id === id ? loaded.data : undefined;
  const moving = erasure !== undefined && inProgress(erasure);
  useEvery(1000, () => moving && !loaded.loading && loaded.reload());
  // Shown below the form: brought into view when another is shown (on a phone it is a screen further down).
  const section = useRef<HTMLElement>(null);
  useEffect(() => {
    section.current?.scrollIntoView({ block: 'nearest' });
  }, [id]);
  // Once it stops moving (previewed, completed, failed), the list below is read again to show it so.
  const seen = useRef<{ id: string; state: string }>(undefined);
  useEffect(() => {
    if (!erasure) return;
    const before = seen.current;
    seen.current = { id: erasure.id, state: erasure.state };
    if (before?.id === erasure.id && before.state !== erasure.state && !inProgress(erasure)) onSettled();
  }, [erasure?.id, erasure?.state]);

  return (
    <section ref={section} className="card erasure-card" aria-labelledby="erasure-heading" aria-busy={moving}>
      <header className="section-header">
        <div className="erasure-title">
          <h2 id="erasure-heading">
            {erasure?.dry_run === false ? 'Erasure' : 'Preview'}
            {erasure && (
              <>
                {' '}
                of <span className="erasure-hint">{erasure.value_hint}</span>
              </>
            )}
          </h2>
          {erasure && <Badge tone={ERASURE_TONES[erasure.state]}>{erasure.state}</Badge>}
        </div>
        <div className="actions">
          {erasure && awaitingErase(erasure) && erasure.counts.webhooks > 0 && (
            <button type="button" className="button danger" onClick={() => onErase(erasure)}>
              Erase
            </button>
          )}
          {erasure && !erasure.dry_run && erasure.state === 'completed' && <ReportButton erasure={erasure} />}
          <button type="button" className="button small ghost" onClick={onClose}>
            Close
          </button>
        </div>
      </header>
      {loaded.error && <ErrorMessage error={loaded.error} retry={loaded.reload} />}
      {!erasure ? !loaded.error && <Loading label="Loading…" /> : <ErasureBody erasure={erasure} directory={directory} />}
    </section>
  );
}

function ErasureBody({ erasure, directory }: { erasure: Erasure; directory: Directory }) {
  const read = counted(erasure.scanned, 'webhook');
  return (
    <>
      <Criteria erasure={erasure} directory={directory} />
      {erasure.state === 'counting' && <Loading label={`Counting… ${read} read so far.`} />}
      {erasure.state === 'queued' && <Loading label="Waiting to start…" />}
      {erasure.state === 'running' && <Loading label={`Erasing… ${read} read so far.`} />}
      {erasure.state === 'failed' && <ErrorMessage error={new Error(erasure.error ?? 'The erasure stopped on an error.')} />}
      {erasure.state === 'expired' && (
        <p className="notice" role="status">
          This preview was not confirmed in time: its value was dropped. Preview again to erase.
        </p>
      )}
      {(erasure.state === 'previewed' || erasure.state === 'completed' || erasure.state === 'failed') && (
        <>
          <ErasureCounts erasure={erasure} />
          {erasure.state === 'previewed' && <PreviewNote erasure={erasure} />}
          {erasure.state === 'completed' && (
            <p className="notice info" role="status">
              Erased: {counted(erasure.counts.webhooks, 'webhook')} now hold only their id, integration, event, time received and a
              tombstone naming this erasure. Backups taken before it still hold the data until they expire.
            </p>
          )}
          <Sample erasure={erasure} name={(id) => directory.named(id)} />
        </>
      )}
    </>
  );
}

function PreviewNote({ erasure }: { erasure: Erasure }) {
  if (erasure.counts.webhooks === 0) {
    return (
      <p className="muted" role="status">
        No webhook of this range holds the value: there is nothing to erase. Try another spelling, range or path.
      </p>
    );
  }
  return (
    <p className="muted small" role="status">
      Nothing has changed yet. Erase to replace these webhooks by tombstones
      {erasure.expires_at && (
        <>
          {' '}
          (the preview waits until <Time iso={erasure.expires_at} />)
        </>
      )}
      .
    </p>
  );
}

function Criteria({ erasure, directory }: { erasure: Erasure; directory: Directory }) {
  const { criteria } = erasure;
  return (
    <dl className="details erasure-criteria">
      <dt>Received</dt>
      <dd>{rangeWords(criteria.since, criteria.until)}</dd>
      <dt>Integrations</dt>
      <dd>
        {criteria.integration_ids === null
          ? 'Every integration'
          : criteria.integration_ids.map((id) => directory.named(id) ?? id).join(', ')}
      </dd>
      <dt>Where</dt>
      <dd>
        {criteria.paths.length === 0 ? (
          'Anywhere in the body and the headers'
        ) : (
          <>
            At{' '}
            {criteria.paths.map((path, index) => (
              <span key={path}>
                {index > 0 && ', '}
                <code>{path}</code>
              </span>
            ))}
          </>
        )}
      </dd>
      <dt>Requested</dt>
      <dd>
        <Time iso={erasure.created_at} /> by {actorName(erasure.requested_by, directory)}
        {erasure.confirmed_by && (
          <>
            ; erase confirmed <Time iso={erasure.confirmed_at} /> by {actorName(erasure.confirmed_by, directory)}
          </>
        )}
      </dd>
    </dl>
  );
}

const DATE_TIME = new Intl.DateTimeFormat('en', { dateStyle: 'medium', timeStyle: 'medium' });

/** "From 3 Dec 2026, 10:00:00 to …", in the browser's time; an open start is the oldest webhook kept. */
function rangeWords(since: string, until: string): string {
  const start = Date.parse(since) <= 0 ? 'the oldest webhook kept' : DATE_TIME.format(Date.parse(since));
  return `From ${start} to ${DATE_TIME.format(Date.parse(until))}`;
}

function ErasureCounts({ erasure }: { erasure: Erasure }) {
  const { counts } = erasure;
  const preview = erasure.dry_run;
  const tiles = [
    { label: preview ? 'Webhooks matching' : 'Webhooks erased', value: counts.webhooks, hint: 'Replaced by a tombstone: body, data and headers go' },
    { label: 'Deliveries', value: counts.deliveries, hint: 'Their states and times stay; those still to be made are cancelled' },
    { label: 'Delivery responses', value: counts.attempts, hint: "Attempts holding a receiver's response excerpt, which goes" },
    { label: 'Request-log rows', value: counts.request_log, hint: "Their sender's address and user agent go" },
  ];
  return (
    <ul className="usage-stats erasure-counts" aria-label={preview ? 'What the erasure would change' : 'What the erasure changed'}>
      {tiles.map((tile) => (
        <li key={tile.label} title={tile.hint}>
          <span className="stat-label">{tile.label}</span>
          <span className="stat-value">{numberFormat.format(tile.value)}</span>
        </li>
      ))}
    </ul>
  );
}

function Sample({ erasure, name }: { erasure: Erasure; name(id: string): string | undefined }) {
  if (erasure.sample.length === 0) return null;
  const more = erasure.counts.webhooks - erasure.sample.length;
  return (
    <>
      <h3 className="erasure-sample-heading">
        {erasure.dry_run ? 'Some of the webhooks found' : 'Some of the webhooks erased'}
        {more > 0 && <span className="muted small"> (the first {erasure.sample.length}; {numberFormat.format(more)} more)</span>}
      </h3>
      <div className="table-wrap">
        <table className="erasure-sample-table" aria-label="Sample of the webhooks">
          <thead>
            <tr>
              <th scope="col">Event</th>
              <th scope="col">Integration</th>
              <th scope="col">Received</th>
              <th scope="col">Matched in</th>
              <th scope="col">
                <span className="visually-hidden">Webhook</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {erasure.sample.map((item) => (
              <tr key={item.uuid} data-uuid={item.uuid}>
                <td>
                  <code>{item.event}</code>
                </td>
                <td>{name(item.integration_id) ?? <span className="mono small">{item.integration_id}</span>}</td>
                <td>
                  <Time iso={item.received_at} />
                </td>
                <td>
                  <code>{item.matched_in}</code>
                </td>
                <td>
                  <Link to={`/webhooks?${new URLSearchParams({ webhook: item.uuid })}`} aria-label={`Open webhook ${item.uuid}`}>
                    Open
                  </Link>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

/**
 * Erasing asks for a word, typed, as deleting an integration asks for its name: it cannot
 * be undone. The confirmation searches the preview's range again, so it says where that
 * range ends.
 */
export function EraseDialog({ erasure, onClose, onConfirmed }: { erasure: Erasure; onClose(): void; onConfirmed(next: Erasure): void }) {
  const [typed, setTyped] = useState('');
  const submit = async () => {
    if (typed.trim() !== CONFIRM_WORD) throw new Error(`The word does not match. Type ${CONFIRM_WORD} to erase.`);
    onConfirmed(await api.post<Erasure>(`/erasures/${encodeURIComponent(erasure.id)}/confirm`));
  };
  const until = Date.parse(erasure.criteria.until);
  return (
    <FormDialog title="Erase personal data" submitLabel="Erase" danger onClose={onClose} onSubmit={submit}>
      <p>
        Each webhook of the preview’s range holding <strong className="erasure-hint">{erasure.value_hint}</strong> becomes a tombstone:
        its body, data and headers, the sender’s address and user agent, and its deliveries’ response excerpts go; its id,
        integration, event and time stay. Deliveries still to be made are cancelled. <strong>This cannot be undone.</strong>
      </p>
      <p>
        The preview found {counted(erasure.counts.webhooks, 'webhook')}. The range is searched again from the start, so the counts may
        differ from the preview’s.{' '}
        {until > Date.now()
          ? `Webhooks arriving since the preview are searched too, up to ${DATE_TIME.format(until)}.`
          : `The range ends at ${DATE_TIME.format(until)}${until - Date.parse(erasure.created_at) < 1000 ? ', when the preview was made' : ''}: webhooks received after it are not searched (preview again to include them).`}
      </p>
      <Field label={`Type “${CONFIRM_WORD}” to confirm`} hint={CONFIRM_WORD}>
        <input value={typed} onChange={(e) => setTyped(e.target.value)} autoComplete="off" spellCheck={false} autoFocus />
      </Field>
    </FormDialog>
  );
}
