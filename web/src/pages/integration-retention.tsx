import { useState } from 'react';
import { api } from '../api/client';
import { useApi } from '../api/use-api';
import { Field, FormDialog } from '../components/dialog';
import type { Company } from './company-shared';
import type { Integration } from './integration-shared';

/**
 * How long an integration's webhooks are kept (docs/personal-data.md): its own retention,
 * shorter than the company's, or the company's; and changing it. The company's retention
 * is read here because it decides what "as the company does" means, and it wins when it
 * became shorter than the integration's.
 */
export function IntegrationRetention({
  integration,
  manage,
  onChanged,
}: {
  integration: Integration;
  manage: boolean;
  onChanged(next: Integration): void;
}) {
  const company = useApi(() => api.get<Company>('/company'), []);
  const [editing, setEditing] = useState(false);
  const companyDays = company.data?.retention_days;
  return (
    <section className="card retention-section" aria-labelledby="retention-heading">
      <header className="section-header">
        <div>
          <h2 id="retention-heading">Retention</h2>
          <p className="muted small">
            Webhooks older than this are deleted with their request-log rows, deliveries and attempts, at the next retention run
            (every few minutes).
          </p>
        </div>
        {manage && companyDays !== undefined && (
          <div className="actions">
            <button type="button" className="button" onClick={() => setEditing(true)}>
              Edit retention
            </button>
          </div>
        )}
      </header>
      <p className="integration-retention">{retentionText(integration.retention_days, companyDays)}</p>
      {editing && companyDays !== undefined && (
        <EditRetentionDialog
          integration={integration}
          companyDays={companyDays}
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

function days(count: number): string {
  return `${count} ${count === 1 ? 'day' : 'days'}`;
}

/** What the integration keeps, in words; the company's retention still loading leaves its figure out. */
function retentionText(own: number | null, companyDays: number | undefined): string {
  if (own === null) {
    return companyDays === undefined ? 'Keeps webhooks as the company does' : `Keeps webhooks as the company does: ${days(companyDays)}`;
  }
  if (companyDays !== undefined && companyDays < own) {
    return `Keeps webhooks ${days(companyDays)}, the company’s retention, which is now shorter than the ${days(own)} set here`;
  }
  return `Keeps webhooks ${days(own)}`;
}

function EditRetentionDialog({
  integration,
  companyDays,
  onClose,
  onSaved,
}: {
  integration: Integration;
  companyDays: number;
  onClose(): void;
  onSaved(next: Integration): void;
}) {
  const [text, setText] = useState(integration.retention_days === null ? '' : String(integration.retention_days));
  const submit = async () => {
    const trimmed = text.trim();
    if (trimmed !== '' && !/^\d+$/.test(trimmed)) throw new Error('The retention must be a whole number of days, or empty.');
    // Empty follows the company; a number too large goes as typed, and the API says the bound.
    const retention_days = trimmed === '' ? null : Number(trimmed);
    onSaved(await api.patch<Integration>(`/integrations/${integration.id}`, { retention_days }));
  };
  return (
    <FormDialog title="Edit retention" submitLabel="Save retention" onClose={onClose} onSubmit={submit}>
      <p>A shorter retention deletes the older webhooks at the next retention run, for good.</p>
      <Field
        label="Days to keep webhooks"
        hint={`From 1 to ${days(companyDays)}, the company’s retention. Empty: as the company does, whatever it becomes.`}
      >
        <input type="text" inputMode="numeric" value={text} onChange={(e) => setText(e.target.value)} autoFocus />
      </Field>
    </FormDialog>
  );
}
