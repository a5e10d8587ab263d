import { useState } from 'react';
import { useNavigate } from 'react-router';
import { api } from '../api/client';
import { useApi, useEvery, usePagedList } from '../api/use-api';
import { FormDialog } from '../components/dialog';
import { ListFooter, onActivate } from '../components/list-controls';
import { useIntegrations } from '../components/log-shared';
import { EmptyState, Loaded, PageHeader, Time, numberFormat } from '../components/ui';
import { useSession } from '../session';
import { parseDraft } from './destination-draft';
import { DestinationFields, useDestinationDraft } from './destination-fields';
import { DestinationSecretDialog } from './destination-secret';
import {
  DestinationStatusBadge,
  disabledSummary,
  formatRate,
  type CreatedDestination,
  type Destination,
  type DestinationStats,
} from './destination-shared';
import './destinations.css';

const DAY_MS = 86_400_000;

/** The company's destinations: where each sends, its state, how well it delivers; creating one. */
export function DestinationsPage() {
  const { can } = useSession();
  const navigate = useNavigate();
  const manage = can('integrations:manage');
  const list = usePagedList<Destination>('/destinations', {}, []);
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<CreatedDestination>();
  // Bumped now and then: each row's success rate and backlog change as deliveries go out.
  const [live, setLive] = useState(0);
  useEvery(statsPeriod(list.data?.length ?? 0), () => setLive((n) => n + 1));

  const createButton = (label: string) =>
    manage && (
      <button type="button" className="button primary" onClick={() => setCreating(true)}>
        {label}
      </button>
    );

  return (
    <>
      <PageHeader
        title="Destinations"
        description="Your own systems that receive every accepted webhook, signed, with retries until they answer 2xx."
        actions={list.data && list.data.length > 0 ? createButton('Create destination') : undefined}
      />
      <Loaded
        state={list}
        empty={(items) =>
          items.length === 0 ? (
            <EmptyState title="No destinations yet" action={createButton('Create your first destination')}>
              {manage
                ? 'A destination is a URL of yours: intake POSTs each accepted webhook to it, signed, and retries until it answers.'
                : 'An admin or owner of this company can create one; it will show here.'}
            </EmptyState>
          ) : undefined
        }
      >
        {(items) => (
          <>
            <div className="table-wrap">
              <table className="destinations-table">
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">URL</th>
                    <th scope="col">Status</th>
                    {can('logs:read') && (
                      <>
                        <th scope="col">Success, 24 h</th>
                        <th scope="col">Backlog</th>
                      </>
                    )}
                    <th scope="col">Created</th>
                  </tr>
                </thead>
                <tbody>
                  {items.map((destination) => (
                    <DestinationRow
                      key={destination.id}
                      destination={destination}
                      withStats={can('logs:read')}
                      live={live}
                      open={() => navigate(`/destinations/${destination.id}`)}
                    />
                  ))}
                </tbody>
              </table>
            </div>
            <ListFooter list={list} />
          </>
        )}
      </Loaded>
      {creating && (
        <CreateDestinationDialog
          onClose={() => setCreating(false)}
          onCreated={(result) => {
            setCreating(false);
            setCreated(result);
            list.reload();
          }}
        />
      )}
      {created && (
        <DestinationSecretDialog secret={created.signing_secret} onClose={() => navigate(`/destinations/${created.destination.id}`)}>
          <p>
            <strong>{created.destination.name}</strong> is ready: every accepted webhook it matches from now on is sent to{' '}
            <code>{created.destination.url}</code>, signed with this secret. Webhooks stored before now can be sent from its page.
          </p>
        </DestinationSecretDialog>
      )}
    </>
  );
}

function DestinationRow({
  destination,
  withStats,
  live,
  open,
}: {
  destination: Destination;
  withStats: boolean;
  live: number;
  open(): void;
}) {
  return (
    <tr className="clickable" tabIndex={0} onClick={open} onKeyDown={onActivate(open)} data-destination-id={destination.id}>
      <td className="wrap destination-name-cell">
        <strong>{destination.name}</strong>
        <div className="muted small mono">{destination.id}</div>
      </td>
      <td className="wrap destination-url-cell mono small">{destination.url}</td>
      <td className="wrap destination-status-cell">
        <DestinationStatusBadge status={destination.status} />
        {destination.status === 'disabled' && (
          <div className="muted small" title={destination.disabled_reason ?? undefined}>
            {disabledSummary(destination)}
          </div>
        )}
      </td>
      {withStats && <RowStats destination={destination} live={live} />}
      <td>
        <Time iso={destination.created_at} />
      </td>
    </tr>
  );
}

/**
 * How often the list reads its rows' figures again: every 10 s, and never more than one
 * stats read a second for the whole list (each row reads its own), so a tab left open on
 * 50 destinations reads them every 50 s rather than 5 times a second.
 */
function statsPeriod(rows: number): number {
  return Math.max(10_000, rows * 1000);
}

/** The success rate of the last 24 hours and the backlog now, one request per row, read again as `live` changes. */
function RowStats({ destination, live }: { destination: Destination; live: number }) {
  const stats = useApi(
    () => api.get<DestinationStats>(`/destinations/${destination.id}/stats`, { since: new Date(Date.now() - DAY_MS).toISOString() }),
    [destination.id, live],
  );
  if (stats.error) {
    return (
      <td colSpan={2} className="muted small" title={stats.error.message}>
        Not available
      </td>
    );
  }
  if (!stats.data) {
    return (
      <td colSpan={2} className="muted">
        …
      </td>
    );
  }
  const { attempts, success_rate, backlog } = stats.data;
  const waiting = backlog.pending + backlog.held;
  return (
    <>
      <td>
        {attempts === 0 ? (
          <span className="muted">No attempts</span>
        ) : (
          <span title={`${numberFormat.format(attempts)} attempts in the last 24 hours`}>
            {formatRate(success_rate)} <span className="muted small">of {numberFormat.format(attempts)}</span>
          </span>
        )}
      </td>
      <td>
        {waiting === 0 ? (
          <span className="muted">None</span>
        ) : (
          <span className="counts">
            {backlog.pending > 0 && <span>{numberFormat.format(backlog.pending)} pending</span>}
            {backlog.held > 0 && <span className="count-held">{numberFormat.format(backlog.held)} held</span>}
          </span>
        )}
      </td>
    </>
  );
}

function CreateDestinationDialog({ onClose, onCreated }: { onClose(): void; onCreated(result: CreatedDestination): void }) {
  const [draft, setDraft] = useDestinationDraft();
  const integrations = useIntegrations();
  const submit = async () => {
    const { headers, ...body } = parseDraft(draft);
    const withHeaders = headers && Object.keys(headers).length > 0 ? { ...body, headers } : body;
    onCreated(await api.post<CreatedDestination>('/destinations', withHeaders));
  };
  return (
    <FormDialog title="Create destination" submitLabel="Create destination" onClose={onClose} onSubmit={submit}>
      <DestinationFields draft={draft} onChange={setDraft} integrations={integrations} />
      <p className="muted small">Its signing secret is shown once, right after it is created.</p>
    </FormDialog>
  );
}
