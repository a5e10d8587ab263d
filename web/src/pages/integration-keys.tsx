import { useState, type ReactNode } from 'react';
import { api } from '../api/client';
import { useApi, usePagedList } from '../api/use-api';
import { ConfirmDialog, Field, FormDialog } from '../components/dialog';
import { NewKeyDialog } from '../components/new-key-dialog';
import { Badge, EmptyState, Loaded, Time, type Tone, numberFormat } from '../components/ui';
import { ListFooter } from '../components/list-controls';
import {
  type Integration,
  type IntegrationKey,
  type KeyCaller,
} from './integration-shared';

const STATUS_TONES: Record<IntegrationKey['status'], Tone> = {
  active: 'good',
  expiring: 'warn',
  expired: 'neutral',
  revoked: 'bad',
};

/** The choices of a rotation's grace period (0 to 7 days; the API's default is 24 hours). */
const GRACE_PERIODS: { seconds: number; label: string }[] = [
  { seconds: 0, label: 'Stop immediately' },
  { seconds: 3600, label: '1 hour' },
  { seconds: 86400, label: '24 hours' },
  { seconds: 3 * 86400, label: '3 days' },
  { seconds: 7 * 86400, label: '7 days' },
];
const DEFAULT_GRACE = 86400;

const KEY_LIFETIMES: { days: number | null; label: string }[] = [
  { days: null, label: 'Never' },
  { days: 30, label: 'In 30 days' },
  { days: 90, label: 'In 90 days' },
  { days: 365, label: 'In 1 year' },
];

/**
 * Whether the key stopped because the keys were rotated with no grace period: a rotation
 * ends the old keys at the very millisecond it makes the new one. (The list is newest
 * first, so the newer key is always loaded with it.)
 */
function stoppedAtRotation(key: IntegrationKey, keys: readonly IntegrationKey[]): boolean {
  return (
    key.status === 'expired' &&
    key.expires_at !== null &&
    keys.some((other) => other.id !== key.id && other.created_at === key.expires_at && other.created_at > key.created_at)
  );
}

interface ShownKey {
  apiKey: string;
  title: string;
  note: ReactNode;
}

/**
 * The keys of an integration: status, use, rotation (with a grace period), revocation, an
 * added key; and during a grace period, who still sends with the old keys.
 */
export function IntegrationKeys({ integration, manage }: { integration: Integration; manage: boolean }) {
  const path = `/integrations/${integration.id}/keys`;
  const keys = usePagedList<IntegrationKey>(path, {}, [integration.id]);
  const [dialog, setDialog] = useState<'rotate' | 'add' | { revoke: IntegrationKey }>();
  const [shown, setShown] = useState<ShownKey>();

  const done = (key?: ShownKey) => {
    setDialog(undefined);
    if (key) setShown(key);
    keys.reload();
  };

  // Old keys still working because a newer key exists: their callers have to switch.
  const inGrace = (keys.data ?? []).filter(
    (key) =>
      key.status === 'expiring' &&
      key.revoked_at === null &&
      key.expires_at !== null &&
      Date.parse(key.expires_at) > Date.now() &&
      (keys.data ?? []).some((other) => other.created_at > key.created_at && other.status !== 'revoked' && other.status !== 'expired'),
  );

  return (
    <section className="card keys-section" aria-labelledby="keys-heading">
      <header className="section-header">
        <div>
          <h2 id="keys-heading">API keys</h2>
          <p className="muted small">
            Senders put a key in the <code>X-API-Key</code> header. Only a prefix is kept: a key is shown once, when it is made.
          </p>
        </div>
        {manage && (
          <div className="actions">
            <button type="button" className="button" onClick={() => setDialog('add')}>
              Add key
            </button>
            <button type="button" className="button primary" onClick={() => setDialog('rotate')}>
              Rotate keys
            </button>
          </div>
        )}
      </header>

      <Loaded
        state={keys}
        empty={(items) =>
          items.length === 0 ? (
            <EmptyState title="No keys">
              {manage ? 'Add a key so a sender can post to this integration.' : 'An admin or owner can add one.'}
            </EmptyState>
          ) : undefined
        }
      >
        {(items) => (
          <>
            <div className="table-wrap">
              <table className="keys-table">
                <thead>
                  <tr>
                    <th scope="col">Key</th>
                    <th scope="col">Status</th>
                    <th scope="col">Created</th>
                    <th scope="col">Last used</th>
                    <th scope="col">Expires</th>
                    <th scope="col" className="numeric">Requests (24 h)</th>
                    {manage && (
                      <th scope="col">
                        <span className="visually-hidden">Actions</span>
                      </th>
                    )}
                  </tr>
                </thead>
                <tbody>
                  {items.map((key) => {
                    const stopped = stoppedAtRotation(key, items);
                    return (
                      <tr key={key.id} data-key-id={key.id}>
                        <td>
                          <code className="key-prefix">{key.prefix}…</code>
                          {key.name && <div className="muted small">{key.name}</div>}
                        </td>
                        <td>
                          {stopped ? (
                            <Badge tone="neutral">stopped at rotation</Badge>
                          ) : (
                            <Badge tone={STATUS_TONES[key.status]}>{key.status}</Badge>
                          )}
                        </td>
                        <td>
                          <Time iso={key.created_at} />
                        </td>
                        <td>
                          <Time iso={key.last_used_at} fallback="Never" />
                          {key.last_used_ip && <div className="muted small mono">{key.last_used_ip}</div>}
                        </td>
                        <td>
                          {key.revoked_at ? (
                            <span className="muted">
                              Revoked <Time iso={key.revoked_at} />
                            </span>
                          ) : stopped ? (
                            <span className="muted">
                              Stopped <Time iso={key.expires_at} />, when the keys were rotated
                            </span>
                          ) : (
                            <Time iso={key.expires_at} fallback="Never" />
                          )}
                        </td>
                        <td className="numeric">{numberFormat.format(key.requests_24h)}</td>
                        {manage && (
                          <td className="row-actions">
                            {(key.status === 'active' || key.status === 'expiring') && (
                              <button
                                type="button"
                                className="button small"
                                aria-label={`Revoke key ${key.prefix}`}
                                onClick={() => setDialog({ revoke: key })}
                              >
                                Revoke
                              </button>
                            )}
                          </td>
                        )}
                      </tr>
                    );
                  })}
                </tbody>
              </table>
            </div>
            <ListFooter list={keys} />
          </>
        )}
      </Loaded>

      {inGrace.map((key) => (
        <KeyCallers key={key.id} integrationId={integration.id} apiKey={key} />
      ))}

      {dialog === 'rotate' && (
        <RotateDialog
          integration={integration}
          onClose={() => setDialog(undefined)}
          onRotated={(apiKey, grace, previousExpire) =>
            done({
              apiKey,
              title: 'Your new API key',
              note:
                grace === 0 ? (
                  <p>The keys are rotated. The previous keys stopped working now.</p>
                ) : (
                  <p>
                    The keys are rotated. The previous keys keep working until{' '}
                    <strong>{new Date(previousExpire).toLocaleString()}</strong> (<Time iso={previousExpire} />): switch every sender
                    to this key before then. The key list shows who still uses an old one.
                  </p>
                ),
            })
          }
        />
      )}
      {dialog === 'add' && (
        <AddKeyDialog
          integration={integration}
          onClose={() => setDialog(undefined)}
          onAdded={(apiKey) =>
            done({ apiKey, title: 'Your new API key', note: <p>A key is added. The integration’s other keys keep working.</p> })
          }
        />
      )}
      {typeof dialog === 'object' && (
        <ConfirmDialog
          title="Revoke key"
          confirmLabel="Revoke key"
          onClose={() => setDialog(undefined)}
          onConfirm={async () => {
            await api.post(`${path}/${dialog.revoke.id}/revoke`);
            done();
          }}
        >
          <p>
            Key <code>{dialog.revoke.prefix}…</code> stops working at once: every request with it gets <strong>401</strong>. This
            cannot be undone.
          </p>
          {dialog.revoke.last_used_at && (
            <p className="muted">
              It was last used <Time iso={dialog.revoke.last_used_at} />
              {dialog.revoke.last_used_ip ? ` from ${dialog.revoke.last_used_ip}` : ''}.
            </p>
          )}
        </ConfirmDialog>
      )}
      {shown && (
        <NewKeyDialog apiKey={shown.apiKey} webhookUrl={integration.webhook_url} title={shown.title} onClose={() => setShown(undefined)}>
          {shown.note}
        </NewKeyDialog>
      )}
    </section>
  );
}

function RotateDialog({
  integration,
  onClose,
  onRotated,
}: {
  integration: Integration;
  onClose(): void;
  onRotated(apiKey: string, grace: number, previousExpire: string): void;
}) {
  const [grace, setGrace] = useState(DEFAULT_GRACE);
  const submit = async () => {
    const result = await api.post<{ api_key: string; previous_keys_expire_at: string }>(
      `/integrations/${integration.id}/keys/rotate`,
      { grace_seconds: grace },
    );
    onRotated(result.api_key, grace, result.previous_keys_expire_at);
  };
  return (
    <FormDialog title="Rotate keys" submitLabel="Rotate keys" onClose={onClose} onSubmit={submit}>
      <p>
        Rotating issues a new key for <strong>{integration.name}</strong>. Every other working key of the integration stops
        working after the grace period, giving senders time to switch.
      </p>
      <Field label="Old keys keep working for" hint="During the grace period this page lists who still sends with an old key.">
        <select value={grace} onChange={(e) => setGrace(Number(e.target.value))}>
          {GRACE_PERIODS.map((option) => (
            <option key={option.seconds} value={option.seconds}>
              {option.label}
              {option.seconds === DEFAULT_GRACE ? ' (default)' : ''}
            </option>
          ))}
        </select>
      </Field>
      {grace === 0 && <p className="notice">The old keys stop working the moment you rotate: senders using them get 401.</p>}
    </FormDialog>
  );
}

function AddKeyDialog({ integration, onClose, onAdded }: { integration: Integration; onClose(): void; onAdded(apiKey: string): void }) {
  const [name, setName] = useState('');
  const [days, setDays] = useState<number | null>(null);
  const submit = async () => {
    const result = await api.post<{ api_key: string }>(`/integrations/${integration.id}/keys`, {
      ...(name.trim() && { name: name.trim() }),
      ...(days !== null && { expires_at: new Date(Date.now() + days * 86400_000).toISOString() }),
    });
    onAdded(result.api_key);
  };
  return (
    <FormDialog title="Add key" submitLabel="Create key" onClose={onClose} onSubmit={submit}>
      <p>A key beside the integration’s others, for another sender, say. The other keys keep working; to replace them, rotate.</p>
      <Field label="Key name" hint="Optional: who uses it, e.g. “EU billing worker”.">
        <input value={name} onChange={(e) => setName(e.target.value)} maxLength={200} autoFocus />
      </Field>
      <Field label="Expires">
        <select value={days ?? ''} onChange={(e) => setDays(e.target.value === '' ? null : Number(e.target.value))}>
          {KEY_LIFETIMES.map((option) => (
            <option key={option.label} value={option.days ?? ''}>
              {option.label}
            </option>
          ))}
        </select>
      </Field>
    </FormDialog>
  );
}

/** During a grace period: who still sends with an old key, so they can be told to switch. */
function KeyCallers({ integrationId, apiKey }: { integrationId: string; apiKey: IntegrationKey }) {
  const callers = useApi(
    () => api.get<{ data: KeyCaller[] }>(`/integrations/${integrationId}/keys/${apiKey.id}/callers`, { limit: 50 }),
    [integrationId, apiKey.id],
  );
  return (
    <section className="key-callers" aria-label={`Callers of old key ${apiKey.prefix}`}>
      <h3>
        Still using old key <code>{apiKey.prefix}…</code>
      </h3>
      <p className="muted small">
        This key stops working <Time iso={apiKey.expires_at} />. These senders used it in the last 7 days; each has to switch to
        the new key before then.
      </p>
      <Loaded
        state={callers}
        empty={(page) =>
          page.data.length === 0 ? (
            <p className="notice info">No one has used this key in the last 7 days: no sender has to switch.</p>
          ) : undefined
        }
      >
        {(page) => (
          <div className="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">IP</th>
                  <th scope="col">User agent</th>
                  <th scope="col">Last seen</th>
                  <th scope="col" className="numeric">Requests</th>
                </tr>
              </thead>
              <tbody>
                {page.data.map((caller) => (
                  <tr key={`${caller.ip} ${caller.user_agent ?? ''}`}>
                    <td className="mono">{caller.ip}</td>
                    <td className="wrap">{caller.user_agent ?? <span className="muted">none sent</span>}</td>
                    <td>
                      <Time iso={caller.last_seen_at} />
                    </td>
                    <td className="numeric">{numberFormat.format(caller.requests)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Loaded>
    </section>
  );
}
