import { useMemo, useState } from 'react';
import { api } from '../api/client';
import { JsonView } from '../components/json-view';
import { HeadersTable } from '../components/webhook-viewer';
import { ErrorMessage, Time } from '../components/ui';
import type { Redaction } from './integration-shared';

/**
 * The Edit redaction dialog's preview: the integration's newest stored webhook as the
 * redaction being edited, unsaved, would store it (POST /integrations/{id}/redaction/preview,
 * src/api/redaction-preview.ts), which stores and changes nothing.
 */

/** POST /integrations/{id}/redaction/preview. */
interface PreviewAnswer {
  webhook_uuid: string;
  received_at: string;
  raw_body: string;
  headers: Record<string, string>;
  replaced: { body_values: number; headers: string[] };
  /** Whether the body or headers differ from the webhook as stored. */
  changed: boolean;
}

export function RedactionPreview({ integrationId, redaction }: { integrationId: string; redaction: Redaction }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error>();
  const [answer, setAnswer] = useState<{ result: PreviewAnswer; asked: string }>();
  // Whether the dialog changed since the answer shown (the redaction is the dialog's, read at each render).
  const asked = JSON.stringify(redaction);
  const run = async () => {
    setBusy(true);
    setError(undefined);
    try {
      const result = await api.post<PreviewAnswer>(`/integrations/${integrationId}/redaction/preview`, { redaction });
      setAnswer({ result, asked });
    } catch (failure) {
      setError(failure as Error);
      setAnswer(undefined);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section className="redaction-preview" aria-labelledby="redaction-preview-heading">
      <h3 id="redaction-preview-heading">Preview</h3>
      <p className="muted small">
        The latest webhook as this redaction, unsaved, would store it. Nothing is saved. That webhook was stored with the current
        redaction: what it replaced stays replaced here, whatever you list.
      </p>
      <div className="actions">
        <button type="button" className="button" onClick={() => void run()} disabled={busy}>
          {busy ? 'Previewing…' : 'Preview on the latest webhook'}
        </button>
      </div>
      {error && <ErrorMessage error={error} />}
      {answer && <PreviewResult answer={answer.result} stale={answer.asked !== asked} />}
    </section>
  );
}

function PreviewResult({ answer, stale }: { answer: PreviewAnswer; stale: boolean }) {
  const parsed = useMemo<{ ok: true; value: unknown } | { ok: false }>(() => {
    try {
      return { ok: true, value: JSON.parse(answer.raw_body) as unknown };
    } catch {
      return { ok: false };
    }
  }, [answer.raw_body]);
  const headers = useMemo(() => Object.entries(answer.headers).sort(([a], [b]) => a.localeCompare(b)), [answer.headers]);
  const { body_values: values, headers: named } = answer.replaced;
  return (
    <div className="redaction-preview-result">
      {stale && <p className="notice">The redaction changed since this preview: preview again to see it.</p>}
      <p className="small">
        Webhook <code>{answer.webhook_uuid}</code>, received <Time iso={answer.received_at} />: {summary(values, named.length, answer.changed)}
      </p>
      <h4>Body</h4>
      {parsed.ok ? (
        <JsonView value={parsed.value} label="Body as it would be stored" />
      ) : (
        <pre className="raw-body-text" tabIndex={0} aria-label="Body as it would be stored">
          {answer.raw_body}
        </pre>
      )}
      <h4>Headers</h4>
      <HeadersTable headers={headers} label="Headers as they would be stored" />
    </div>
  );
}

/** What the redaction replaces in this webhook, in words. */
function summary(values: number, headers: number, changed: boolean): string {
  if (values === 0 && headers === 0) return 'nothing this redaction names is in it.';
  const parts = [
    ...(values === 0 ? [] : [`${values} ${values === 1 ? 'value' : 'values'} of the body`]),
    ...(headers === 0 ? [] : [`${headers} ${headers === 1 ? 'header' : 'headers'}`]),
  ];
  return `${parts.join(' and ')} replaced${changed ? '.' : ', all stored so already.'}`;
}
