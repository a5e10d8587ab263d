import { useState, type FormEvent } from 'react';
import { api, type ApiError } from '../api/client';
import type { Erasure } from '../api/types';
import { usePagedList } from '../api/use-api';
import { Field } from '../components/dialog';
import { fromLocalInput, param, useQueryState } from '../components/list-controls';
import { useIntegrations, type Integrations } from '../components/log-shared';
import { EmptyState, ErrorMessage, PageHeader } from '../components/ui';
import { useSession } from '../session';
import { useDirectory } from './audit-names';
import { EraseDialog, ErasureCard } from './personal-data-erasure';
import { ErasureHistory } from './personal-data-history';
import './logs.css';
import './personal-data.css';

/**
 * Erasure by data subject (docs/personal-data.md): find the webhooks holding a person's
 * value, preview what erasing them would change, erase them with a typed confirmation, and
 * hand the person the report. Owners only (`data:erase`; the API refuses everyone else, and
 * the navigation hides the page). The erasure shown is kept in the URL (`?erasure=`).
 */
export function PersonalDataPage() {
  const { can } = useSession();
  if (!can('data:erase')) {
    return (
      <>
        <PageHeader title="Personal data" />
        <EmptyState title="Only owners erase personal data">
          An erasure cannot be undone, and its preview says which webhooks hold a person’s data, so only an owner of the company can
          search, preview or erase here.
        </EmptyState>
      </>
    );
  }
  return <PersonalData />;
}

function PersonalData() {
  const [params, update] = useQueryState();
  const shown = param(params, 'erasure');
  const integrations = useIntegrations();
  const directory = useDirectory();
  const list = usePagedList<Erasure>('/erasures', {}, []);
  const [erasing, setErasing] = useState<Erasure>();
  // Read again after a confirmation: the same erasure, now queued.
  const [version, setVersion] = useState(0);
  const show = (erasure: Erasure) => update({ erasure: erasure.id }, true);

  return (
    <>
      <PageHeader
        title="Personal data"
        description="Find the webhooks holding a person’s email, customer id or phone number, see what erasing them would change, and erase them. Each erased webhook keeps only its id, integration, event and time."
      />
      <SearchForm
        integrations={integrations}
        onPreview={(erasure) => {
          show(erasure);
          list.reload();
        }}
      />
      {shown && (
        <ErasureCard
          id={shown}
          version={version}
          directory={directory}
          onErase={setErasing}
          onSettled={list.reload}
          onClose={() => update({ erasure: undefined })}
        />
      )}
      <ErasureHistory list={list} directory={directory} onShow={show} onErase={setErasing} />
      {erasing && (
        <EraseDialog
          erasure={erasing}
          onClose={() => setErasing(undefined)}
          onConfirmed={(erasure) => {
            setErasing(undefined);
            show(erasure);
            setVersion((n) => n + 1);
            list.reload();
          }}
        />
      )}
    </>
  );
}

/** One entry a line; blank lines are left out. */
function lines(text: string): string[] {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
}

/** The search: the value, and optionally a time range, integrations and JSON paths. "Preview" makes a dry run. */
function SearchForm({ integrations, onPreview }: { integrations: Integrations; onPreview(erasure: Erasure): void }) {
  const [value, setValue] = useState('');
  const [since, setSince] = useState('');
  const [until, setUntil] = useState('');
  const [allIntegrations, setAllIntegrations] = useState(true);
  const [integrationIds, setIntegrationIds] = useState<string[]>([]);
  const [paths, setPaths] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | Error>();
  const field = error && 'field' in error ? error.field : undefined;

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setError(undefined);
    if (!allIntegrations && integrationIds.length === 0) {
      setError(new Error('Pick at least one integration, or search every integration.'));
      return;
    }
    const asked = lines(paths);
    setBusy(true);
    try {
      const body = {
        value,
        since: fromLocalInput(since),
        until: fromLocalInput(until),
        integration_ids: allIntegrations ? undefined : integrationIds,
        paths: asked.length > 0 ? asked : undefined,
        dry_run: true,
      };
      onPreview(await api.post<Erasure>('/erasures', body));
    } catch (e) {
      setError(e as ApiError);
    } finally {
      setBusy(false);
    }
  };

  const toggle = (id: string, on: boolean) => setIntegrationIds((picked) => (on ? [...picked, id] : picked.filter((p) => p !== id)));
  const list = integrations.data ?? [];
  return (
    <form className="card form erasure-form" onSubmit={submit} aria-label="Search for a person’s data">
      <Field label="Value to search for" hint="An email, a customer id or a phone number, as the webhooks hold it; case is ignored. At least 3 characters.">
        <input
          type="text"
          value={value}
          onChange={(e) => setValue(e.target.value)}
          required
          minLength={3}
          maxLength={1000}
          autoComplete="off"
          spellCheck={false}
          aria-invalid={field === 'value' || undefined}
        />
      </Field>
      <div className="erasure-range">
        <Field label="Received from" hint="Empty: from the oldest webhook kept.">
          <input type="datetime-local" value={since} onChange={(e) => setSince(e.target.value)} aria-invalid={field === 'since' || undefined} />
        </Field>
        <Field label="Received until" hint="Empty: up to now.">
          <input type="datetime-local" value={until} onChange={(e) => setUntil(e.target.value)} aria-invalid={field === 'until' || undefined} />
        </Field>
      </div>
      <fieldset className="erasure-fieldset">
        <legend className="field-label">Integrations</legend>
        <label className="checkbox">
          <input type="radio" name="erasure-integrations" checked={allIntegrations} onChange={() => setAllIntegrations(true)} />
          <span>Every integration, deleted ones included</span>
        </label>
        <label className="checkbox">
          <input type="radio" name="erasure-integrations" checked={!allIntegrations} onChange={() => setAllIntegrations(false)} />
          <span>Only these:</span>
        </label>
        {!allIntegrations && (
          <div className="erasure-integration-list">
            {integrations.loading && list.length === 0 && <span className="muted small">Loading integrations…</span>}
            {!integrations.loading && list.length === 0 && <span className="muted small">The company has no integration yet.</span>}
            {list.map((integration) => (
              <label key={integration.id} className="checkbox">
                <input
                  type="checkbox"
                  checked={integrationIds.includes(integration.id)}
                  onChange={(e) => toggle(integration.id, e.target.checked)}
                />
                <span>
                  {integration.name}
                  {integration.enabled ? '' : <span className="muted small"> (disabled)</span>}
                </span>
              </label>
            ))}
          </div>
        )}
      </fieldset>
      <Field
        label="JSON paths, one a line"
        hint={
          <>
            Empty: the value anywhere in the body and the headers. With paths, only a value at one of them, equal to the value. From
            the body’s root: <code>data.customer.email</code>; <code>*</code> for any one key (<code>data.card.*</code>);{' '}
            <code>$..</code> at the start for any depth (<code>$..phone</code>). At most 20.
          </>
        }
      >
        <textarea
          value={paths}
          onChange={(e) => setPaths(e.target.value)}
          rows={3}
          spellCheck={false}
          className="mono"
          aria-invalid={field === 'paths' || undefined}
        />
      </Field>
      {error && <ErrorMessage error={error} />}
      <div className="actions">
        <button type="submit" className="button primary" disabled={busy}>
          {busy ? 'Starting…' : 'Preview'}
        </button>
        <span className="muted small erasure-form-note">A preview counts what an erasure would change, and changes nothing.</span>
      </div>
    </form>
  );
}
