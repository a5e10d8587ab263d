import { useState } from 'react';
import { Link } from 'react-router';
import { api } from '../api/client';
import { useApi } from '../api/use-api';
import { FormDialog } from '../components/dialog';
import { NewSecretDialog } from '../components/new-secret-dialog';
import { Badge, CopyButton, ErrorMessage } from '../components/ui';
import type { Integration } from './integration-shared';
import { parseSourceDraft, SourceFields, sourceDraftOf, sourceLabel, useSourceTypes, type SourceSecret } from './source-fields';
import { SourceGuide } from './source-guides';
import { SourceSecrets } from './source-secrets';

/** What POST …/source-test answers: what the integration's address answered the signed sample. */
interface TestOutcome {
  status: number;
  answer: unknown;
}

/** The address to give the provider: for query_token, without the token its end takes. */
export function sourceAddress(integration: Integration): string {
  const { source } = integration;
  return source.type === 'query_token' ? `${integration.webhook_url}?${source.config.parameter ?? 'token'}=` : integration.webhook_url;
}

/** The address as shown: a query_token's with a placeholder for the token. */
export function ShownAddress({ integration }: { integration: Integration }) {
  return (
    <code>
      {sourceAddress(integration)}
      {integration.source.type === 'query_token' && <var>your token</var>}
    </code>
  );
}

/**
 * An integration's source: its type, the address to give the provider and how to set the
 * provider up, its signing secrets (or the place to paste the first one while the source
 * waits for it), a signed test, and changing it.
 */
export function IntegrationSource({
  integration,
  manage,
  onChanged,
}: {
  integration: Integration;
  manage: boolean;
  onChanged(next: Integration): void;
}) {
  const { source } = integration;
  const label = sourceLabel(source.type);
  const [changing, setChanging] = useState(false);
  const [shownSecret, setShownSecret] = useState<string>();
  const secretsPath = `/integrations/${integration.id}/source-secrets`;
  // Read again after a change of source, which may replace the secrets.
  const secrets = useApi(
    () => (source.type === 'api_key' ? Promise.resolve({ data: [] }) : api.get<{ data: SourceSecret[] }>(secretsPath)),
    [secretsPath, source.type],
  );
  const waiting = source.type !== 'api_key' && secrets.data?.data.length === 0;
  const test = useSourceTest(integration.id);
  const address = sourceAddress(integration);

  return (
    <section className="card source-section" aria-labelledby="source-heading">
      <header className="section-header">
        <div>
          <h2 id="source-heading">Source</h2>
          <p className="muted small">
            {source.type === 'api_key'
              ? 'Requests get in with an API key only. Choose a provider to let its signed webhooks in as they are sent.'
              : `${label} webhooks get in with their signature; the API key keeps working too.`}
          </p>
        </div>
        {manage && (
          <div className="actions">
            {source.type !== 'api_key' && (
              <button type="button" className="button" onClick={test.send} disabled={test.busy || waiting}>
                {test.busy ? 'Sending…' : 'Send a test'}
              </button>
            )}
            <button type="button" className="button" onClick={() => setChanging(true)}>
              Change source
            </button>
          </div>
        )}
      </header>
      <dl className="details">
        <dt>Type</dt>
        <dd>
          {label} {waiting && <Badge tone="warn">waiting for the secret</Badge>}
        </dd>
        <dt>Signature header</dt>
        <dd>{source.signature_header ? <code>{source.signature_header}</code> : <span className="muted">None (X-API-Key)</span>}</dd>
        {source.type !== 'api_key' && (
          <>
            <dt>Address to give {label}</dt>
            <dd className="source-address">
              <ShownAddress integration={integration} />
              <CopyButton text={address} label="Copy address" />
            </dd>
          </>
        )}
      </dl>
      {test.outcome && <TestResult integrationId={integration.id} outcome={test.outcome} />}
      {test.error && <ErrorMessage error={test.error} />}

      {source.type !== 'api_key' && (
        <>
          <h3 className="source-guide-heading">Set up {label}</h3>
          <SourceGuide source={source} address={<ShownAddress integration={integration} />} />
          <SourceSecrets integration={integration} manage={manage} secrets={secrets} />
        </>
      )}

      {changing && (
        <ChangeSourceDialog
          integration={integration}
          onClose={() => setChanging(false)}
          onChanged={(next, secret) => {
            setChanging(false);
            setShownSecret(secret);
            secrets.reload();
            onChanged(next);
          }}
        />
      )}
      {shownSecret && (
        <NewSecretDialog secret={shownSecret} onClose={() => setShownSecret(undefined)}>
          <p>The source is changed. Give the sender this secret: it is the only one that verifies now.</p>
        </NewSecretDialog>
      )}
    </section>
  );
}

/** Sends the provider's sample event, signed, to the address; `outcome` is what the address answered. */
export function useSourceTest(integrationId: string) {
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<TestOutcome>();
  const [error, setError] = useState<Error>();
  const send = async () => {
    setBusy(true);
    setError(undefined);
    setOutcome(undefined);
    try {
      setOutcome(await api.post<TestOutcome>(`/integrations/${integrationId}/source-test`));
    } catch (e) {
      setError(e as Error);
    } finally {
      setBusy(false);
    }
  };
  return { busy, outcome, error, send: () => void send() };
}

export function TestResult({ integrationId, outcome }: { integrationId: string; outcome: TestOutcome }) {
  const answer = (typeof outcome.answer === 'object' && outcome.answer !== null ? outcome.answer : {}) as Record<string, unknown>;
  const uuid = typeof answer.uuid === 'string' ? answer.uuid : undefined;
  if (outcome.status >= 200 && outcome.status < 300) {
    return (
      <p className="notice good" role="status">
        Accepted
        {uuid ? (
          <>
            : webhook <Link to={`/webhooks?${new URLSearchParams({ integration_id: integrationId, webhook: uuid })}`}>{uuid}</Link>. It is
            stored marked as a test and sent to no destination.
          </>
        ) : (
          ` (${outcome.status})`
        )}
      </p>
    );
  }
  const message =
    typeof answer.message === 'string' ? answer.message : typeof answer.error === 'string' ? answer.error : JSON.stringify(outcome.answer);
  return (
    <p className="notice" role="status">
      Refused ({outcome.status}): {message}
    </p>
  );
}

function ChangeSourceDialog({
  integration,
  onClose,
  onChanged,
}: {
  integration: Integration;
  onClose(): void;
  onChanged(next: Integration, secret: string | undefined): void;
}) {
  const current = integration.source.type;
  const [draft, setDraft] = useState(() => sourceDraftOf(integration.source));
  const types = useSourceTypes();
  const sameType = draft.type === current;
  const submit = async () => {
    const result = await api.put<{ integration: Integration; source_secret?: string }>(
      `/integrations/${integration.id}/source`,
      parseSourceDraft(draft),
    );
    onChanged(result.integration, result.source_secret);
  };
  return (
    <FormDialog title="Change source" submitLabel="Change source" onClose={onClose} onSubmit={submit}>
      <SourceFields
        draft={draft}
        onChange={setDraft}
        types={types}
        emptySecretMeans={sameType && current !== 'api_key' ? 'Leave empty to keep the current secrets' : undefined}
      />
      {!sameType && current !== 'api_key' && (
        <p className="notice" role="alert">
          A new type replaces the signing secrets at once: requests signed as {sourceLabel(current)} signs them get 401 from the
          moment you change it. The API key keeps working.
        </p>
      )}
      {sameType && current !== 'api_key' && draft.secret.trim() !== '' && (
        <p className="notice" role="alert">
          The secret entered replaces the current ones at once, without an overlap. To give the sender time, rotate instead.
        </p>
      )}
    </FormDialog>
  );
}
