import { lazy, Suspense, useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api } from '../api/client';
import { useApi, useEvery } from '../api/use-api';
import { ConfirmDialog, Field, FormDialog } from '../components/dialog';
import { useIntegrations, type Integrations } from '../components/log-shared';
import { ErrorMessage, Loading, PageHeader } from '../components/ui';
import { useSession } from '../session';
import { DestinationDeliveries } from './destination-deliveries';
import { changesOf, parseDraft } from './destination-draft';
import { DestinationFields, useDestinationDraft } from './destination-fields';
import { DestinationSecretDialog } from './destination-secret';
import { DestinationSettings, StatusNotice } from './destination-settings';
import { DestinationStatusBadge, type Destination } from './destination-shared';
import { DestinationStatsCard } from './destination-stats';
import './destinations.css';
import './integrations.css';

type Dialogs = 'edit' | 'rotate' | 'delete' | undefined;

/** How long the previous secret keeps signing after a rotation (the API's default is 24 hours). */
const OVERLAPS: { seconds: number; label: string }[] = [
  { seconds: 0, label: 'No overlap: it stops now' },
  { seconds: 3600, label: '1 hour' },
  { seconds: 86400, label: '24 hours (default)' },
  { seconds: 7 * 86400, label: '7 days' },
];
const DEFAULT_OVERLAP = 86400;
/** How often the destination and its health are read again while the page is open. */
/** The rules' editor and its highlighting load with the page that shows them, not with the panel. */
const DestinationRulesSection = lazy(() => import('./destination-rules').then((module) => ({ default: module.DestinationRulesSection })));

const LIVE_MS = 5000;

/**
 * One destination: its settings (edit, pause, resume, rotate its secret, delete), why it
 * is disabled when it is, its rules, how well it delivers, and its deliveries.
 */
export function DestinationPage() {
  const { destinationId = '' } = useParams();
  const { can } = useSession();
  const manage = can('integrations:manage');
  const navigate = useNavigate();
  const loaded = useApi(() => api.get<Destination>(`/destinations/${encodeURIComponent(destinationId)}`), [destinationId]);
  const integrations = useIntegrations();
  // The latest answer of a change, shown at once (the reload confirms it).
  const [changed, setChanged] = useState<Destination>();
  const [dialog, setDialog] = useState<Dialogs>();
  const [secret, setSecret] = useState<{ value: string; previousStop: string | null; overlap: number }>();
  const [toggleError, setToggleError] = useState<Error>();
  const [toggling, setToggling] = useState(false);
  // Bumped by whatever changes what the stats and deliveries show (resume, replay, send).
  const [version, setVersion] = useState(0);
  // Bumped every LIVE_MS: the last success, the status and the health figures change on
  // their own as deliveries go out (the deliveries list watches its own pending rows).
  const [live, setLive] = useState(0);
  useEvery(LIVE_MS, () => {
    loaded.reload();
    setLive((n) => n + 1);
  });

  const destination =
    changed?.id === destinationId && loaded.data && changed.updated_at >= loaded.data.updated_at ? changed : loaded.data;

  if (!destination) {
    return (
      <>
        <p className="breadcrumb">
          <Link to="/destinations">← Destinations</Link>
        </p>
        {loaded.error ? (
          <ErrorMessage error={loaded.error} retry={loaded.error.status === 404 ? undefined : loaded.reload} />
        ) : (
          <Loading />
        )}
      </>
    );
  }

  const updated = (next: Destination) => {
    setChanged(next);
    setDialog(undefined);
    setVersion((v) => v + 1);
    loaded.reload();
  };

  const toggle = async (action: 'pause' | 'resume') => {
    setToggling(true);
    setToggleError(undefined);
    try {
      updated(await api.post<Destination>(`/destinations/${destination.id}/${action}`));
    } catch (error) {
      setToggleError(error as Error);
    } finally {
      setToggling(false);
    }
  };
  const resumeButton = (
    <button type="button" className="button" onClick={() => void toggle('resume')} disabled={toggling}>
      {toggling ? 'Resuming…' : 'Resume'}
    </button>
  );

  return (
    <>
      <p className="breadcrumb">
        <Link to="/destinations">← Destinations</Link>
      </p>
      <PageHeader
        title={destination.name}
        description={
          <>
            <DestinationStatusBadge status={destination.status} /> <span className="mono small">{destination.url}</span>
          </>
        }
        actions={
          manage && (
            <>
              <button type="button" className="button" onClick={() => setDialog('edit')}>
                Edit
              </button>
              {destination.status === 'active' ? (
                <button type="button" className="button" onClick={() => void toggle('pause')} disabled={toggling}>
                  {toggling ? 'Pausing…' : 'Pause'}
                </button>
              ) : (
                resumeButton
              )}
              <button type="button" className="button" onClick={() => setDialog('rotate')}>
                Rotate secret
              </button>
              <button type="button" className="button danger-outline" onClick={() => setDialog('delete')}>
                Delete
              </button>
            </>
          )
        }
      />
      {loaded.error && <ErrorMessage error={loaded.error} retry={loaded.reload} />}
      {toggleError && <ErrorMessage error={toggleError} />}
      <StatusNotice destination={destination} manage={manage} resumeButton={resumeButton} />

      <DestinationSettings destination={destination} integrations={integrations} />
      <Suspense fallback={null}>
        <DestinationRulesSection destination={destination} integrations={integrations} canEdit={manage && can('logs:read')} onSaved={updated} />
      </Suspense>

      {can('logs:read') && (
        <>
          <DestinationStatsCard destination={destination} version={version + live} />
          <DestinationDeliveries destination={destination} manage={manage} version={version} onChanged={() => setVersion((v) => v + 1)} />
        </>
      )}

      {dialog === 'edit' && (
        <EditDialog destination={destination} integrations={integrations} onClose={() => setDialog(undefined)} onSaved={updated} />
      )}
      {dialog === 'rotate' && (
        <RotateDialog
          destination={destination}
          onClose={() => setDialog(undefined)}
          onRotated={(value, previousStop, overlap) => {
            setSecret({ value, previousStop, overlap });
            setDialog(undefined);
            loaded.reload();
          }}
        />
      )}
      {dialog === 'delete' && (
        <ConfirmDialog
          title="Delete destination"
          confirmLabel="Delete destination"
          onClose={() => setDialog(undefined)}
          onConfirm={async () => {
            await api.delete(`/destinations/${destination.id}`);
            navigate('/destinations');
          }}
        >
          <p>
            This deletes <strong>{destination.name}</strong>: nothing more is sent to <code>{destination.url}</code>. Its pending and
            held deliveries are cancelled. <strong>This cannot be undone.</strong>
          </p>
        </ConfirmDialog>
      )}
      {secret && (
        <DestinationSecretDialog secret={secret.value} onClose={() => setSecret(undefined)}>
          <p>
            {secret.overlap === 0 || !secret.previousStop ? (
              'The secret is rotated: from now on every request is signed with this one only.'
            ) : (
              <>
                The secret is rotated. Until <strong>{new Date(secret.previousStop).toLocaleString()}</strong> each request carries two
                signatures, one per secret: give the receiver this one before then.
              </>
            )}
          </p>
        </DestinationSecretDialog>
      )}
    </>
  );
}

function EditDialog({
  destination,
  integrations,
  onClose,
  onSaved,
}: {
  destination: Destination;
  integrations: Integrations;
  onClose(): void;
  onSaved(next: Destination): void;
}) {
  const [draft, setDraft] = useDestinationDraft(destination);
  const submit = async () => {
    const changes = changesOf(destination, parseDraft(draft));
    if (Object.keys(changes).length === 0) return onClose();
    onSaved(await api.patch<Destination>(`/destinations/${destination.id}`, changes));
  };
  return (
    <FormDialog title="Edit destination" submitLabel="Save changes" onClose={onClose} onSubmit={submit}>
      <DestinationFields draft={draft} onChange={setDraft} integrations={integrations} headerNames={destination.header_names} />
    </FormDialog>
  );
}

function RotateDialog({
  destination,
  onClose,
  onRotated,
}: {
  destination: Destination;
  onClose(): void;
  onRotated(secret: string, previousStop: string | null, overlap: number): void;
}) {
  const [overlap, setOverlap] = useState(DEFAULT_OVERLAP);
  const submit = async () => {
    const result = await api.post<{ signing_secret: string; previous_secret_expires_at: string | null }>(
      `/destinations/${destination.id}/secret/rotate`,
      { previous_expires_in_seconds: overlap },
    );
    onRotated(result.signing_secret, result.previous_secret_expires_at, overlap);
  };
  return (
    <FormDialog title="Rotate signing secret" submitLabel="Rotate secret" onClose={onClose} onSubmit={submit}>
      <p>
        A new signing secret for <strong>{destination.name}</strong>. During the overlap each request is signed with both, so the
        receiver can move over without refusing a webhook.
      </p>
      <Field label="The previous secret keeps signing for">
        <select value={overlap} onChange={(e) => setOverlap(Number(e.target.value))}>
          {OVERLAPS.map((option) => (
            <option key={option.seconds} value={option.seconds}>
              {option.label}
            </option>
          ))}
        </select>
      </Field>
      {overlap === 0 && (
        <p className="notice">The previous secret stops the moment you rotate: a receiver still checking with it refuses every request.</p>
      )}
    </FormDialog>
  );
}
