import { useState, type ReactNode } from 'react';
import { api } from '../api/client';
import { Field, FormDialog } from '../components/dialog';
import { RedactionPreview } from './integration-redaction-preview';
import type { Integration, Redaction } from './integration-shared';

/**
 * An integration's redaction (src/domain/redaction.ts, docs/personal-data.md): the body's
 * paths and the headers whose values are replaced before each webhook is stored, by
 * "[redacted]" or a keyed hash, and changing them with a preview on a stored webhook.
 */
export function IntegrationRedaction({
  integration,
  manage,
  onChanged,
}: {
  integration: Integration;
  manage: boolean;
  onChanged(next: Integration): void;
}) {
  const [editing, setEditing] = useState(false);
  const redaction = integration.redaction;
  return (
    <section className="card redaction-section" aria-labelledby="redaction-heading">
      <header className="section-header">
        <div>
          <h2 id="redaction-heading">Personal data</h2>
          <p className="muted small">
            Values replaced by <code>[redacted]</code> or by a keyed hash before each webhook is stored, after its signature is
            checked. The rest of the body is stored as it came; destinations get the redacted body.
          </p>
        </div>
        {manage && (
          <div className="actions">
            <button type="button" className="button" onClick={() => setEditing(true)}>
              Edit redaction
            </button>
          </div>
        )}
      </header>
      {redaction === null ? (
        <p className="muted">Nothing is redacted: webhooks are stored as they came.</p>
      ) : (
        <dl className="details">
          <dt>Body paths</dt>
          <dd>{redaction.paths.length === 0 ? <span className="muted">None</span> : <CodeList items={redaction.paths} />}</dd>
          <dt>Headers</dt>
          <dd>{redaction.headers.length === 0 ? <span className="muted">None</span> : <CodeList items={redaction.headers} />}</dd>
          <dt>Each value becomes</dt>
          <dd>{redaction.mode === 'hash' ? 'Its keyed hash (hmac-sha256:…)' : <code>[redacted]</code>}</dd>
        </dl>
      )}
      {editing && (
        <EditRedactionDialog
          integration={integration}
          onClose={() => setEditing(false)}
          onSaved={(next) => {
            setEditing(false);
            onChanged(next);
          }}
        />
      )}
    </section>
  );
}

function CodeList({ items }: { items: string[] }) {
  return (
    <ul className="redaction-list">
      {items.map((item) => (
        <li key={item}>
          <code>{item}</code>
        </li>
      ))}
    </ul>
  );
}

/** One entry a line; blank lines are left out. */
function lines(text: string): string[] {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
}

const MODES: { mode: Redaction['mode']; label: ReactNode; explanation: string }[] = [
  { mode: 'redact', label: <code>[redacted]</code>, explanation: 'The value is gone; webhooks about one customer no longer look alike.' },
  {
    mode: 'hash',
    label: 'Its keyed hash',
    explanation: 'hmac-sha256:… with a key of the company’s own: equal values stay equal, and an erasure still finds them.',
  },
];

function EditRedactionDialog({
  integration,
  onClose,
  onSaved,
}: {
  integration: Integration;
  onClose(): void;
  onSaved(next: Integration): void;
}) {
  const [paths, setPaths] = useState((integration.redaction?.paths ?? []).join('\n'));
  const [headers, setHeaders] = useState((integration.redaction?.headers ?? []).join('\n'));
  const [mode, setMode] = useState<Redaction['mode']>(integration.redaction?.mode ?? 'redact');
  const asked: Redaction = { paths: lines(paths), headers: lines(headers), mode };
  const submit = async () => {
    const redaction = asked.paths.length === 0 && asked.headers.length === 0 ? null : asked;
    onSaved(await api.patch<Integration>(`/integrations/${integration.id}`, { redaction }));
  };
  return (
    <FormDialog title="Edit redaction" submitLabel="Save redaction" wide onClose={onClose} onSubmit={submit}>
      <p>
        What you list is replaced in webhooks stored from now on; those stored before stay as they are. Leave both empty to redact
        nothing.
      </p>
      <Field
        label="Body paths, one a line"
        hint={
          <>
            From the body’s root: <code>data.customer.email</code>; <code>*</code> for any one key (<code>data.card.*</code>);{' '}
            <code>$..</code> at the start for any depth (<code>$..phone</code>). At most 20.
          </>
        }
      >
        <textarea value={paths} onChange={(e) => setPaths(e.target.value)} rows={4} spellCheck={false} className="mono" autoFocus />
      </Field>
      <Field label="Headers, one a line" hint="Header names, in any case. At most 20.">
        <textarea value={headers} onChange={(e) => setHeaders(e.target.value)} rows={2} spellCheck={false} className="mono" />
      </Field>
      <fieldset className="redaction-fieldset">
        <legend className="field-label">Each value becomes</legend>
        {MODES.map((choice) => (
          <label key={choice.mode} className="checkbox redaction-mode">
            <input type="radio" name="redaction-mode" checked={mode === choice.mode} onChange={() => setMode(choice.mode)} />
            <span>
              {choice.label} <span className="muted small">— {choice.explanation}</span>
            </span>
          </label>
        ))}
      </fieldset>
      <RedactionPreview integrationId={integration.id} redaction={asked} />
    </FormDialog>
  );
}
