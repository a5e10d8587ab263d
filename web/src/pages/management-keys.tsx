import { useState } from 'react';
import { api } from '../api/client';
import { usePagedList } from '../api/use-api';
import { ConfirmDialog, Dialog, Field, FormDialog } from '../components/dialog';
import { Badge, CopyField, EmptyState, Loaded, PageHeader, Time } from '../components/ui';
import { ListFooter } from '../components/list-controls';
import { useSession } from '../session';
import {
  KEY_STATUS_TONES,
  MANAGEMENT_SCOPES,
  type CreatedManagementKey,
  type ManagementKey,
  type ManagementScope,
} from './company-shared';
import './company.css';

/**
 * The company's keys for /api/v1: for scripts and CI, never for members or settings.
 * Owners only (the API refuses everyone else, and the navigation hides the page).
 */
export function ManagementKeysPage() {
  const { can } = useSession();
  if (!can('members:manage')) {
    return (
      <>
        <PageHeader title="Management keys" />
        <EmptyState title="Only owners manage these keys">
          Management keys give scripts access to the whole company, so only an owner of the company can see, create or revoke them.
        </EmptyState>
      </>
    );
  }
  return <ManagementKeys />;
}

function ManagementKeys() {
  const list = usePagedList<ManagementKey>('/management-keys', {}, []);
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<CreatedManagementKey>();
  const [revoking, setRevoking] = useState<ManagementKey>();

  const createButton = (label: string) => (
    <button type="button" className="button primary" onClick={() => setCreating(true)}>
      {label}
    </button>
  );

  return (
    <>
      <PageHeader
        title="Management keys"
        description={
          <>
            Keys for scripts and CI that call <code>/api/v1</code> for this company, sent in the <code>X-API-Key</code> header.
          </>
        }
        actions={list.data && list.data.length > 0 ? createButton('Create key') : undefined}
      />
      <Loaded
        state={list}
        empty={(items) =>
          items.length === 0 ? (
            <EmptyState title="No management keys yet" action={createButton('Create a management key')}>
              <p className="company-empty-text">
                A management key lets a script or a CI job call <code>/api/v1</code> for this company without signing in: for
                example to create integrations and rotate their keys, or to collect the webhook log and the audit log. It can
                never add members, create other management keys or change the company settings.
              </p>
            </EmptyState>
          ) : undefined
        }
      >
        {(items) => (
          <>
            <div className="table-wrap">
              <table className="management-keys-table">
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Key</th>
                    <th scope="col">Scopes</th>
                    <th scope="col">Created</th>
                    <th scope="col">Last used</th>
                    <th scope="col">Status</th>
                    <th scope="col">
                      <span className="visually-hidden">Actions</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {items.map((key) => (
                    <tr key={key.id} data-key-id={key.id}>
                      <td className="wrap">{key.name ? key.name : <span className="muted">Unnamed</span>}</td>
                      <td>
                        <code className="key-prefix" title={key.id}>
                          {key.prefix}…
                        </code>
                      </td>
                      <td>
                        <span className="company-scopes">
                          {key.scopes.map((scope) => (
                            <Badge key={scope} tone="info">
                              {scope}
                            </Badge>
                          ))}
                        </span>
                      </td>
                      <td>
                        <Time iso={key.created_at} />
                      </td>
                      <td>
                        <Time iso={key.last_used_at} fallback="Never" />
                        {key.last_used_ip && <div className="muted small mono">{key.last_used_ip}</div>}
                      </td>
                      <td>
                        <Badge tone={KEY_STATUS_TONES[key.status]}>{key.status}</Badge>
                        {key.revoked_at && (
                          <div className="muted small">
                            <Time iso={key.revoked_at} />
                          </div>
                        )}
                      </td>
                      <td className="company-row-actions">
                        {(key.status === 'active' || key.status === 'expiring') && (
                          <button
                            type="button"
                            className="button small"
                            aria-label={`Revoke key ${key.prefix}`}
                            onClick={() => setRevoking(key)}
                          >
                            Revoke
                          </button>
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            <ListFooter list={list} />
          </>
        )}
      </Loaded>

      {creating && (
        <CreateKeyDialog
          onClose={() => setCreating(false)}
          onCreated={(result) => {
            setCreating(false);
            setCreated(result);
            list.reload();
          }}
        />
      )}
      {created && <NewManagementKeyDialog created={created} onClose={() => setCreated(undefined)} />}
      {revoking && (
        <ConfirmDialog
          title="Revoke management key"
          confirmLabel="Revoke key"
          onClose={() => setRevoking(undefined)}
          onConfirm={async () => {
            await api.post(`/management-keys/${encodeURIComponent(revoking.id)}/revoke`);
            setRevoking(undefined);
            list.reload();
          }}
        >
          <p>
            Revoke <code>{revoking.prefix}…</code>
            {revoking.name && <> ({revoking.name})</>}? Every script using it gets 401 from now on. This cannot be undone.
          </p>
        </ConfirmDialog>
      )}
    </>
  );
}

function CreateKeyDialog({ onClose, onCreated }: { onClose(): void; onCreated(created: CreatedManagementKey): void }) {
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<ManagementScope[]>(['integrations:manage']);
  const toggle = (scope: ManagementScope, on: boolean) =>
    setScopes((previous) => (on ? [...previous.filter((s) => s !== scope), scope] : previous.filter((s) => s !== scope)));
  return (
    <FormDialog
      title="Create management key"
      submitLabel="Create key"
      onClose={onClose}
      onSubmit={async () => {
        if (scopes.length === 0) throw new Error('Choose at least one scope.');
        onCreated(await api.post<CreatedManagementKey>('/management-keys', { name: name.trim(), scopes }));
      }}
    >
      <Field label="Name" hint="What uses the key, e.g. “CI deploy” or “SIEM export”.">
        <input type="text" maxLength={200} autoComplete="off" value={name} onChange={(event) => setName(event.target.value)} />
      </Field>
      <fieldset className="company-fieldset">
        <legend className="field-label">Scopes</legend>
        {MANAGEMENT_SCOPES.map(({ scope, description }) => (
          <label key={scope} className="checkbox company-scope-choice">
            <input type="checkbox" checked={scopes.includes(scope)} onChange={(event) => toggle(scope, event.target.checked)} />
            <span>
              <code>{scope}</code> <span className="muted small">— {description}</span>
            </span>
          </label>
        ))}
        <p className="muted small">The key works for the whole company. It can never manage members or settings.</p>
      </fieldset>
    </FormDialog>
  );
}

function NewManagementKeyDialog({ created, onClose }: { created: CreatedManagementKey; onClose(): void }) {
  const example = `curl -H 'X-API-Key: ${created.api_key}' ${window.location.origin}/api/v1/integrations`;
  return (
    <Dialog title="Your new management key" onClose={onClose} wide>
      <div className="new-key company-new-key">
        <p>
          {created.key.name ? <strong>{created.key.name}</strong> : 'The key'} is ready, with the scopes{' '}
          {created.key.scopes.map((scope, index) => (
            <span key={scope}>
              {index > 0 && ' and '}
              <code>{scope}</code>
            </span>
          ))}
          .
        </p>
        <p className="notice new-key-warning" role="alert">
          <strong>This key will not be shown again. Copy it now.</strong> Keep it where your scripts keep their secrets; if it is
          lost, revoke it and create another.
        </p>
        <CopyField label="API key" value={created.api_key} />
        <h3>Try it</h3>
        <p className="muted small">
          Send the key in the <code>X-API-Key</code> header with every call to <code>/api/v1</code>:
        </p>
        <CopyField label="Example" value={example} />
        <div className="dialog-actions">
          <button type="button" className="button primary" onClick={onClose}>
            I have copied the key
          </button>
        </div>
      </div>
    </Dialog>
  );
}
