import type { ReactNode } from 'react';
import { Dialog } from './dialog';
import { CopyField } from './ui';

/** The body of a test webhook (contract, "Sending a webhook"). */
const TEST_BODY = '{"event":"test.ping","data":{"hello":"world"}}';

/** A ready command that sends one test webhook with this key. */
export function curlLine(webhookUrl: string, apiKey: string): string {
  return `curl -X POST '${webhookUrl}' -H 'Content-Type: application/json' -H 'X-API-Key: ${apiKey}' -d '${TEST_BODY}'`;
}

/**
 * A key just created (with an integration, by a rotation, or added): shown this once, with
 * where to send and a command to try it. The API never shows the key again.
 */
export function NewKeyDialog({
  apiKey,
  webhookUrl,
  title = 'Your new API key',
  children,
  onClose,
}: {
  apiKey: string;
  /** The integration's address as the API gives it (…/api/webhooks/<integration_key>). */
  webhookUrl: string;
  title?: string;
  /** What happened, above the key (e.g. until when the previous keys work). */
  children?: ReactNode;
  onClose(): void;
}) {
  const singular = webhookUrl.replace('/api/webhooks/', '/api/webhook/');
  return (
    <Dialog title={title} onClose={onClose} wide>
      <div className="new-key">
        {children}
        <p className="notice new-key-warning" role="alert">
          <strong>This key will not be shown again. Copy it now.</strong> Store it where the sender keeps its secrets;
          if it is lost, rotate the keys to get a new one.
        </p>
        <CopyField label="API key" value={apiKey} />
        <h3>Where to send</h3>
        <p className="muted small">
          POST a JSON object with an <code>event</code> (and optionally <code>data</code>) and the key in the{' '}
          <code>X-API-Key</code> header. Both addresses work.
        </p>
        <CopyField label="Webhook address" value={webhookUrl} />
        <CopyField label="Alternative address" value={singular} />
        <h3>Try it</h3>
        <CopyField label="curl" value={curlLine(webhookUrl, apiKey)} />
        <p className="muted small">A 202 answer means the webhook is stored; it shows in the webhook log at once.</p>
        <div className="dialog-actions">
          <button type="button" className="button primary" onClick={onClose}>
            I have copied the key
          </button>
        </div>
      </div>
    </Dialog>
  );
}
