import { useState, type FormEvent } from 'react';
import { api } from '../api/client';
import type { Loaded as LoadedState } from '../api/use-api';
import { ConfirmDialog, Field, FormDialog } from '../components/dialog';
import { NewSecretDialog } from '../components/new-secret-dialog';
import { Badge, ErrorMessage, Loaded, Time } from '../components/ui';
import type { Integration } from './integration-shared';
import { generatesSecret, SOURCE_TYPES, sourceLabel, useSourceTypes, type SourceSecret } from './source-fields';

/** How long the previous secrets keep verifying after a rotation (the API's default is 24 hours). */
const OVERLAPS: { seconds: number; label: string }[] = [
  { seconds: 0, label: 'No overlap: they stop now' },
  { seconds: 3600, label: '1 hour' },
  { seconds: 86400, label: '24 hours (default)' },
  { seconds: 7 * 86400, label: '7 days' },
];
const DEFAULT_OVERLAP = 86400;

interface Rotated {
  id: string;
  created_at: string;
  source_secret?: string;
  previous_secrets_expire_at: string;
}

/** GET …/source-secrets, as the Source section loads it for this list and for whether the source waits for its secret. */
export type SecretsState = LoadedState<{ data: SourceSecret[] }>;

/**
 * A source's live signing secrets (never their values): rotating to a new one with an
 * overlap, and stopping an old one before its overlap ends. With none (a provider that shows
 * its secret only once the endpoint exists), the place to paste it.
 */
export function SourceSecrets({ integration, manage, secrets }: { integration: Integration; manage: boolean; secrets: SecretsState }) {
  const path = `/integrations/${integration.id}/source-secrets`;
  const waiting = secrets.data?.data.length === 0;
  const [dialog, setDialog] = useState<'rotate' | { stop: SourceSecret }>();
  const [rotated, setRotated] = useState<{ secret?: string; previousStop: string; overlap: number }>();

  const done = () => {
    setDialog(undefined);
    secrets.reload();
  };

  return (
    <section className="source-secrets" aria-labelledby="source-secrets-heading">
      <header className="section-header">
        <div>
          <h3 id="source-secrets-heading">Signing secrets</h3>
          <p className="muted small">Only while a secret is rotated are several live; the newest signs the tests.</p>
        </div>
        {manage && !waiting && (
          <button type="button" className="button" onClick={() => setDialog('rotate')}>
            Rotate secret
          </button>
        )}
      </header>
      {rotated && !rotated.secret && (
        <p className="notice info" role="status">
          The new secret is live.{' '}
          {rotated.overlap === 0 ? 'The previous ones stopped now.' : <>The previous ones stop <Time iso={rotated.previousStop} />.</>}
        </p>
      )}
      <Loaded
        state={secrets}
        empty={(page) =>
          page.data.length === 0 ? (
            <div className="awaiting-secret">
              <p className="notice" role="status">
                <strong>Waiting for the signing secret.</strong> {sourceLabel(integration.source.type)}’s signed webhooks get 401 until it
                is pasted here; the API key works meanwhile.
              </p>
              {manage ? (
                <PasteFirstSecret integration={integration} onAdded={secrets.reload} />
              ) : (
                <p className="muted small">An admin or owner of this company can paste it.</p>
              )}
            </div>
          ) : undefined
        }
      >
        {(page) => (
          <div className="table-wrap">
            <table className="source-secrets-table">
              <thead>
                <tr>
                  <th scope="col">Secret</th>
                  <th scope="col">Created</th>
                  <th scope="col">Expires</th>
                  {manage && (
                    <th scope="col">
                      <span className="visually-hidden">Actions</span>
                    </th>
                  )}
                </tr>
              </thead>
              <tbody>
                {page.data.map((secret) => (
                  <tr key={secret.id} data-secret-id={secret.id}>
                    <td className="mono">{secret.id}</td>
                    <td>
                      <Time iso={secret.created_at} />
                    </td>
                    <td>
                      {secret.expires_at ? (
                        <span>
                          <Badge tone="warn">Stops at {new Date(secret.expires_at).toLocaleString()}</Badge> <Time iso={secret.expires_at} />
                        </span>
                      ) : (
                        <span className="muted">When rotated</span>
                      )}
                    </td>
                    {manage && (
                      <td className="row-actions">
                        {secret.expires_at && page.data.length > 1 && (
                          <button
                            type="button"
                            className="button small"
                            aria-label={`Stop secret ${secret.id} now`}
                            onClick={() => setDialog({ stop: secret })}
                          >
                            Stop now
                          </button>
                        )}
                      </td>
                    )}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Loaded>

      {dialog === 'rotate' && (
        <RotateSecretDialog
          integration={integration}
          onClose={() => setDialog(undefined)}
          onRotated={(result, overlap) => {
            setRotated({ secret: result.source_secret, previousStop: result.previous_secrets_expire_at, overlap });
            done();
          }}
        />
      )}
      {typeof dialog === 'object' && (
        <ConfirmDialog
          title="Stop signing secret"
          confirmLabel="Stop now"
          onClose={() => setDialog(undefined)}
          onConfirm={async () => {
            await api.delete(`${path}/${dialog.stop.id}`);
            done();
          }}
        >
          <p>
            Secret <code>{dialog.stop.id}</code> stops verifying at once: a request signed with it gets <strong>401</strong>. Do it
            once the sender signs with the new secret.
          </p>
        </ConfirmDialog>
      )}
      {rotated?.secret && (
        <NewSecretDialog secret={rotated.secret} onClose={() => setRotated({ ...rotated, secret: undefined })}>
          <p>
            {rotated.overlap === 0 ? (
              'The secret is rotated. The previous secrets stopped now.'
            ) : (
              <>
                The secret is rotated. The previous secrets keep verifying until{' '}
                <strong>{new Date(rotated.previousStop).toLocaleString()}</strong>: give the sender this one before then.
              </>
            )}
          </p>
        </NewSecretDialog>
      )}
    </section>
  );
}

/**
 * The first signing secret of a source that waits for it: pasted, it verifies at once (there
 * is no previous one to overlap with).
 */
export function PasteFirstSecret({ integration, onAdded }: { integration: Integration; onAdded(): void }) {
  const hint = SOURCE_TYPES.find((s) => s.type === integration.source.type)?.secret;
  const [secret, setSecret] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error>();
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await api.post(`/integrations/${integration.id}/source-secrets`, { secret: secret.trim(), previous_expires_in_seconds: 0 });
      setSecret('');
      onAdded();
    } catch (e) {
      setError(e as Error);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="paste-secret" onSubmit={(event) => void submit(event)}>
      <Field label={`${sourceLabel(integration.source.type)} signing secret`} hint={hint?.hint}>
        <input
          type="password"
          value={secret}
          onChange={(e) => setSecret(e.target.value)}
          required
          placeholder={hint?.placeholder}
          autoComplete="off"
          spellCheck={false}
          maxLength={1000}
        />
      </Field>
      <button type="submit" className="button primary" disabled={busy || secret.trim() === ''}>
        {busy ? 'Saving…' : 'Save secret'}
      </button>
      {error && <ErrorMessage error={error} />}
    </form>
  );
}

function RotateSecretDialog({
  integration,
  onClose,
  onRotated,
}: {
  integration: Integration;
  onClose(): void;
  onRotated(result: Rotated, overlap: number): void;
}) {
  const types = useSourceTypes();
  const pasted = !generatesSecret(types, integration.source.type);
  const hint = SOURCE_TYPES.find((s) => s.type === integration.source.type)?.secret;
  const [secret, setSecret] = useState('');
  const [overlap, setOverlap] = useState(DEFAULT_OVERLAP);
  const submit = async () => {
    const result = await api.post<Rotated>(`/integrations/${integration.id}/source-secrets`, {
      ...(secret.trim() && { secret: secret.trim() }),
      previous_expires_in_seconds: overlap,
    });
    onRotated(result, overlap);
  };
  return (
    <FormDialog title="Rotate signing secret" submitLabel="Rotate secret" onClose={onClose} onSubmit={submit}>
      <p>
        A new signing secret for <strong>{integration.name}</strong>. The previous ones keep verifying for the overlap, so the
        sender can move over without a refused webhook.
      </p>
      <Field
        label="New signing secret"
        hint={pasted ? (hint?.hint ?? 'The new secret the provider shows you.') : 'Leave empty to generate one, shown once.'}
      >
        <input
          type="password"
          value={secret}
          onChange={(e) => setSecret(e.target.value)}
          required={pasted}
          placeholder={hint?.placeholder ?? 'Leave empty to generate one'}
          autoComplete="off"
          spellCheck={false}
          maxLength={1000}
          autoFocus
        />
      </Field>
      <Field label="Previous secrets keep verifying for">
        <select value={overlap} onChange={(e) => setOverlap(Number(e.target.value))}>
          {OVERLAPS.map((option) => (
            <option key={option.seconds} value={option.seconds}>
              {option.label}
            </option>
          ))}
        </select>
      </Field>
      {overlap === 0 && <p className="notice">The previous secrets stop the moment you rotate: requests signed with them get 401.</p>}
    </FormDialog>
  );
}
