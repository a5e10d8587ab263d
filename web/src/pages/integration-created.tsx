import { useState } from 'react';
import { Dialog } from '../components/dialog';
import { curlLine, NewKeyDialog } from '../components/new-key-dialog';
import { ShownSecret } from '../components/new-secret-dialog';
import { CopyField } from '../components/ui';
import { ShownAddress, sourceAddress, TestResult, useSourceTest } from './integration-source';
import type { CreatedIntegration } from './integration-shared';
import { sourceLabel } from './source-fields';
import { SourceGuide } from './source-guides';
import { PasteFirstSecret } from './source-secrets';

/**
 * What a new integration shows once: for an API-key integration its key and how to send; for
 * a provider source the provider's own order first (the address, the provider's page, the
 * signing secret shown or pasted, a signed test), the API key after it.
 */
export function CreatedIntegrationDialog({ created, onClose }: { created: CreatedIntegration; onClose(): void }) {
  const { integration } = created;
  if (integration.source.type === 'api_key') {
    return (
      <NewKeyDialog apiKey={created.api_key} webhookUrl={integration.webhook_url} title="Your new API key" onClose={onClose}>
        <p>
          <strong>{integration.name}</strong> is ready{integration.enabled ? '' : ' (disabled until you enable it)'}. Here is its first
          API key.
        </p>
      </NewKeyDialog>
    );
  }
  return <CreatedSourceDialog created={created} onClose={onClose} />;
}

function CreatedSourceDialog({ created, onClose }: { created: CreatedIntegration; onClose(): void }) {
  const { integration } = created;
  const label = sourceLabel(integration.source.type);
  // A provider that issues its own secret shows it only once the endpoint exists: until it is pasted, the source waits.
  const [waiting, setWaiting] = useState(created.awaiting_secret === true);
  const test = useSourceTest(integration.id);
  const secretStep =
    created.source_secret !== undefined ? (
      <li>
        <h3>Its signing secret</h3>
        <ShownSecret secret={created.source_secret} use={`paste it where ${label} asks for the webhook secret`} />
      </li>
    ) : null;
  return (
    <Dialog title={`Connect ${label}`} onClose={onClose} wide>
      <div className="new-key created-source">
        <p>
          <strong>{integration.name}</strong> is ready{integration.enabled ? '' : ' (disabled until you enable it)'}. Connect {label} in
          this order:
        </p>
        <ol className="setup-steps">
          <li>
            <h3>Give {label} this address</h3>
            <CopyField label="Webhook address" value={sourceAddress(integration)} />
            {integration.source.type === 'query_token' && <p className="muted small">With the signing secret as the token at its end.</p>}
          </li>
          {secretStep}
          <li>
            <h3>On {label}’s side</h3>
            <SourceGuide source={integration.source} address={<ShownAddress integration={integration} />} />
            {!created.awaiting_secret && created.source_secret === undefined && (
              <p className="muted small">The signing secret you pasted verifies {label}’s webhooks from now on.</p>
            )}
          </li>
          {created.awaiting_secret && (
            <li>
              <h3>Paste the signing secret {label} shows</h3>
              {waiting ? (
                <>
                  <p className="notice" role="status">
                    Until it is pasted, {label}’s signed webhooks get 401 saying the source waits for its secret.
                  </p>
                  <PasteFirstSecret integration={integration} onAdded={() => setWaiting(false)} />
                </>
              ) : (
                <p className="notice good" role="status">
                  Saved: {label}’s signed webhooks get in now.
                </p>
              )}
            </li>
          )}
          <li>
            <h3>Send a test</h3>
            <p className="muted small">
              intake signs a sample {label} event with the secret, as {label} would, and sends it to the address. It is stored marked as a
              test and sent to no destination.
            </p>
            <button type="button" className="button" onClick={test.send} disabled={test.busy || waiting}>
              {test.busy ? 'Sending…' : 'Send a test'}
            </button>
            {waiting && <p className="muted small">Paste the secret first: the test is signed with it.</p>}
            {test.outcome && <TestResult integrationId={integration.id} outcome={test.outcome} />}
          </li>
        </ol>

        <section className="created-api-key" aria-labelledby="created-api-key-heading">
          <h3 id="created-api-key-heading">API key</h3>
          <p className="muted small">
            A second way in, for requests you send yourself: the key in the <code>X-API-Key</code> header.
          </p>
          <p className="notice new-key-warning" role="alert">
            <strong>This key will not be shown again.</strong> Copy it now if you will send with it; otherwise add a key later.
          </p>
          <CopyField label="API key" value={created.api_key} />
          <CopyField label="curl" value={curlLine(integration.webhook_url, created.api_key)} />
        </section>
        <div className="dialog-actions">
          <button type="button" className="button primary" onClick={onClose}>
            Done
          </button>
        </div>
      </div>
    </Dialog>
  );
}
