import { useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api } from '../api/client';
import { ConfirmDialog, Field, FormDialog } from '../components/dialog';
import { Badge, CopyField, ErrorMessage, Loading, PageHeader, Time, numberFormat, formatBytes } from '../components/ui';
import { useSession } from '../session';
import { IntegrationKeys } from './integration-keys';
import { IntegrationRedaction } from './integration-redaction';
import { IntegrationRetention } from './integration-retention';
import { IntegrationSource } from './integration-source';
import {
  IntegrationFields,
  MissingIntegration,
  parseDraft,
  singularWebhookUrl,
  useDraft,
  useIntegrationOf,
  type Integration,
} from './integration-shared';
import './integrations.css';

type Dialogs = 'edit' | 'disable' | 'delete' | undefined;

/** One integration: its address, settings, source and keys; editing, disabling and deleting it. */
export function IntegrationPage() {
  const { integrationId = '' } = useParams();
  const { can } = useSession();
  const manage = can('integrations:manage');
  const navigate = useNavigate();
  const loaded = useIntegrationOf(integrationId);
  // The latest answer of a change, shown at once (the reload confirms it).
  const [changed, setChanged] = useState<Integration>();
  const [dialog, setDialog] = useState<Dialogs>();
  const [toggleError, setToggleError] = useState<Error>();
  const [toggling, setToggling] = useState(false);

  const current = loaded.data?.id === integrationId ? loaded.data : undefined;
  const integration = changed?.id === integrationId && current && changed.updated_at >= current.updated_at ? changed : current;

  if (loaded.data === null && !loaded.loading) return <MissingIntegration />;
  if (!integration) {
    return (
      <>
        <p className="breadcrumb">
          <Link to="/integrations">← Integrations</Link>
        </p>
        {loaded.error ? <ErrorMessage error={loaded.error} retry={loaded.reload} /> : <Loading />}
      </>
    );
  }

  const updated = (next: Integration) => {
    setChanged(next);
    setDialog(undefined);
    loaded.reload();
  };

  const enable = async () => {
    setToggling(true);
    setToggleError(undefined);
    try {
      updated(await api.patch<Integration>(`/integrations/${integration.id}`, { enabled: true }));
    } catch (error) {
      setToggleError(error as Error);
    } finally {
      setToggling(false);
    }
  };

  const query = `?integration_id=${encodeURIComponent(integration.id)}`;
  return (
    <>
      <p className="breadcrumb">
        <Link to="/integrations">← Integrations</Link>
      </p>
      <PageHeader
        title={integration.name}
        description={
          <>
            {integration.enabled ? <Badge tone="good">enabled</Badge> : <Badge tone="neutral">disabled</Badge>}{' '}
            {integration.description || <span className="muted">No description</span>}
          </>
        }
        actions={
          <>
            <Link className="button" to={`/webhooks${query}`}>
              View webhooks
            </Link>
            <Link className="button" to={`/requests${query}`}>
              Requests
            </Link>
            {manage && (
              <>
                <button type="button" className="button" onClick={() => setDialog('edit')}>
                  Edit
                </button>
                {integration.enabled ? (
                  <button type="button" className="button" onClick={() => setDialog('disable')}>
                    Disable
                  </button>
                ) : (
                  <button type="button" className="button" onClick={() => void enable()} disabled={toggling}>
                    {toggling ? 'Enabling…' : 'Enable'}
                  </button>
                )}
                <button type="button" className="button danger-outline" onClick={() => setDialog('delete')}>
                  Delete
                </button>
              </>
            )}
          </>
        }
      />
      {loaded.error && <ErrorMessage error={loaded.error} retry={loaded.reload} />}
      {toggleError && <ErrorMessage error={toggleError} />}
      {!integration.enabled && (
        <p className="notice" role="status">
          This integration is disabled: its address answers 403 to every webhook. Its log stays readable.
          {manage && ' Enable it to receive webhooks again.'}
        </p>
      )}

      <div className="grid-2">
        <section className="card" aria-labelledby="address-heading">
          <h2 id="address-heading">Webhook address</h2>
          <p className="muted small">
            POST JSON with the key in the <code>X-API-Key</code> header
            {integration.source.type !== 'api_key' && ', or as the source below signs it'}. Both shapes work.
          </p>
          <CopyField label="Webhook address" value={integration.webhook_url} />
          <CopyField label="Alternative address" value={singularWebhookUrl(integration.webhook_url)} />
        </section>
        <section className="card" aria-labelledby="settings-heading">
          <h2 id="settings-heading">Settings</h2>
          <dl className="details">
            <dt>Integration ID</dt>
            <dd className="mono">{integration.id}</dd>
            <dt>Integration key</dt>
            <dd className="mono">{integration.integration_key}</dd>
            <dt>Body limit</dt>
            <dd>
              {formatBytes(integration.body_limit_bytes)}
              {integration.body_limit_bytes >= 1024 && (
                <span className="muted small"> ({numberFormat.format(integration.body_limit_bytes)} bytes)</span>
              )}
            </dd>
            <dt>Rate limit</dt>
            <dd>
              {integration.rate_limit_per_minute === null
                ? 'No limit'
                : `${numberFormat.format(integration.rate_limit_per_minute)} requests per minute`}
            </dd>
            <dt>Created</dt>
            <dd>
              <Time iso={integration.created_at} />
            </dd>
            <dt>Updated</dt>
            <dd>
              <Time iso={integration.updated_at} />
            </dd>
          </dl>
        </section>
      </div>

      <IntegrationSource integration={integration} manage={manage} onChanged={updated} />

      <IntegrationRedaction integration={integration} manage={manage} onChanged={updated} />

      <IntegrationRetention integration={integration} manage={manage} onChanged={updated} />

      <IntegrationKeys integration={integration} manage={manage} />

      {dialog === 'edit' && <EditDialog integration={integration} onClose={() => setDialog(undefined)} onSaved={updated} />}
      {dialog === 'disable' && (
        <ConfirmDialog
          title="Disable integration"
          confirmLabel="Disable"
          onClose={() => setDialog(undefined)}
          onConfirm={async () => updated(await api.patch<Integration>(`/integrations/${integration.id}`, { enabled: false }))}
        >
          <p>
            While <strong>{integration.name}</strong> is disabled, its address answers <strong>403</strong> to every webhook,
            whatever the key. Senders see the refusal; nothing is stored. Its keys and log stay, and you can enable it again at
            any time.
          </p>
        </ConfirmDialog>
      )}
      {dialog === 'delete' && (
        <DeleteDialog integration={integration} onClose={() => setDialog(undefined)} onDeleted={() => navigate('/integrations')} />
      )}
    </>
  );
}

function EditDialog({ integration, onClose, onSaved }: { integration: Integration; onClose(): void; onSaved(next: Integration): void }) {
  const [draft, setDraft] = useDraft(integration);
  const submit = async () => {
    const fields = parseDraft(draft);
    // Only what changed: PATCH changes only the fields sent.
    const changes: Record<string, unknown> = {};
    if (fields.name !== integration.name) changes.name = fields.name;
    if (fields.description !== integration.description) changes.description = fields.description;
    if (fields.enabled !== integration.enabled) changes.enabled = fields.enabled;
    if (fields.body_limit_bytes !== integration.body_limit_bytes) changes.body_limit_bytes = fields.body_limit_bytes;
    if (fields.rate_limit_per_minute !== integration.rate_limit_per_minute) changes.rate_limit_per_minute = fields.rate_limit_per_minute;
    if (Object.keys(changes).length === 0) return onClose();
    onSaved(await api.patch<Integration>(`/integrations/${integration.id}`, changes));
  };
  return (
    <FormDialog title="Edit integration" submitLabel="Save changes" onClose={onClose} onSubmit={submit}>
      <IntegrationFields draft={draft} onChange={setDraft} />
    </FormDialog>
  );
}

/** Deleting asks for the name, typed: it cannot be undone. */
function DeleteDialog({ integration, onClose, onDeleted }: { integration: Integration; onClose(): void; onDeleted(): void }) {
  const [typed, setTyped] = useState('');
  const submit = async () => {
    if (typed.trim() !== integration.name.trim()) throw new Error('The name does not match. Type it exactly to delete.');
    await api.delete(`/integrations/${integration.id}`);
    onDeleted();
  };
  return (
    <FormDialog title="Delete integration" submitLabel="Delete integration" danger onClose={onClose} onSubmit={submit}>
      <p>
        This deletes <strong>{integration.name}</strong>. Its webhook address and every one of its keys stop working at once
        (senders get 401). Its stored webhooks leave with retention. <strong>This cannot be undone.</strong>
      </p>
      <Field label="Type the integration’s name to confirm" hint={integration.name}>
        <input value={typed} onChange={(e) => setTyped(e.target.value)} autoComplete="off" autoFocus />
      </Field>
    </FormDialog>
  );
}
