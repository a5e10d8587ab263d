import { useState } from 'react';
import { Field } from '../components/dialog';
import type { Integrations } from '../components/log-shared';
import { draftOf, MAX_HEADERS, type DestinationDraft, type HeaderRow } from './destination-draft';
import type { Destination } from './destination-shared';

/**
 * The form that creates and edits a destination: where it sends, which webhooks feed it,
 * its extra headers (write-only: an edit shows their names and replaces the whole set) and
 * its limits.
 */

/** The fields of the create and edit dialogs; `headerNames` are the current headers' (editing). */
export function DestinationFields({
  draft,
  onChange,
  integrations,
  headerNames,
}: {
  draft: DestinationDraft;
  onChange(draft: DestinationDraft): void;
  integrations: Integrations;
  headerNames?: string[];
}) {
  const set = (changes: Partial<DestinationDraft>) => onChange({ ...draft, ...changes });
  return (
    <>
      <Field label="Name" hint="What receives, e.g. “Order service”.">
        <input value={draft.name} onChange={(e) => set({ name: e.target.value })} required maxLength={200} autoFocus />
      </Field>
      <Field label="URL" hint="Each webhook is POSTed here, signed. HTTPS; credentials go in a header, not the URL.">
        <input
          type="url"
          value={draft.url}
          onChange={(e) => set({ url: e.target.value })}
          required
          maxLength={2048}
          placeholder="https://example.com/webhooks"
          spellCheck={false}
        />
      </Field>
      <IntegrationChoice draft={draft} set={set} integrations={integrations} />
      <Field
        label="Events"
        hint={
          <>
            Patterns separated by commas: <code>*</code> matches any run of characters, e.g. <code>order.*</code> or{' '}
            <code>*.failed</code>. <code>*</code> alone takes every event.
          </>
        }
      >
        <input value={draft.eventPatterns} onChange={(e) => set({ eventPatterns: e.target.value })} required spellCheck={false} />
      </Field>
      <HeaderRows draft={draft} set={set} headerNames={headerNames} />
      <div className="destination-limits">
        <Field label="Timeout (seconds)" hint="Slower answers count as failed. Default 15.">
          <input
            type="number"
            inputMode="decimal"
            min={1}
            max={60}
            step="any"
            value={draft.timeoutSeconds}
            onChange={(e) => set({ timeoutSeconds: e.target.value })}
            required
          />
        </Field>
        <Field label="Rate (per second)" hint="Default 100. Empty: no limit.">
          <input
            type="number"
            inputMode="numeric"
            min={1}
            max={10_000}
            step={1}
            value={draft.ratePerSecond}
            placeholder="No limit"
            onChange={(e) => set({ ratePerSecond: e.target.value })}
          />
        </Field>
        <Field label="Max in flight" hint="Requests at once. Default 100.">
          <input
            type="number"
            inputMode="numeric"
            min={1}
            max={1000}
            step={1}
            value={draft.maxInFlight}
            onChange={(e) => set({ maxInFlight: e.target.value })}
            required
          />
        </Field>
      </div>
    </>
  );
}

function IntegrationChoice({
  draft,
  set,
  integrations,
}: {
  draft: DestinationDraft;
  set(changes: Partial<DestinationDraft>): void;
  integrations: Integrations;
}) {
  const list = integrations.data ?? [];
  // Ids no longer in the list (deleted since) stay picked, so an edit does not drop them silently.
  const unknown = draft.integrationIds.filter((id) => !list.some((i) => i.id === id));
  const toggle = (id: string, on: boolean) =>
    set({ integrationIds: on ? [...draft.integrationIds, id] : draft.integrationIds.filter((picked) => picked !== id) });
  return (
    <fieldset className="destination-fieldset">
      <legend className="field-label">Integrations</legend>
      <label className="checkbox">
        <input type="radio" name="integrations" checked={draft.allIntegrations} onChange={() => set({ allIntegrations: true })} />
        <span>Every integration, including ones created later</span>
      </label>
      <label className="checkbox">
        <input type="radio" name="integrations" checked={!draft.allIntegrations} onChange={() => set({ allIntegrations: false })} />
        <span>Only these:</span>
      </label>
      {!draft.allIntegrations && (
        <div className="destination-integration-list">
          {integrations.loading && list.length === 0 && <span className="muted small">Loading integrations…</span>}
          {!integrations.loading && list.length === 0 && <span className="muted small">The company has no integration yet.</span>}
          {list.map((integration) => (
            <label key={integration.id} className="checkbox">
              <input
                type="checkbox"
                checked={draft.integrationIds.includes(integration.id)}
                onChange={(e) => toggle(integration.id, e.target.checked)}
              />
              <span>
                {integration.name}
                {integration.enabled ? '' : <span className="muted small"> (disabled)</span>}
              </span>
            </label>
          ))}
          {unknown.map((id) => (
            <label key={id} className="checkbox">
              <input type="checkbox" checked onChange={() => toggle(id, false)} />
              <span className="mono small">{id}</span>
            </label>
          ))}
        </div>
      )}
    </fieldset>
  );
}

function HeaderRows({
  draft,
  set,
  headerNames,
}: {
  draft: DestinationDraft;
  set(changes: Partial<DestinationDraft>): void;
  headerNames: string[] | undefined;
}) {
  const rows = draft.headers;
  const change = (index: number, changes: Partial<HeaderRow>) =>
    set({ headers: rows.map((row, i) => (i === index ? { ...row, ...changes } : row)) });
  return (
    <fieldset className="destination-fieldset">
      <legend className="field-label">Extra headers</legend>
      {!draft.replaceHeaders ? (
        <>
          <p className="muted small">
            {headerNames && headerNames.length > 0 ? (
              <>
                Sent with every request:{' '}
                {headerNames.map((n, i) => (
                  <span key={n}>
                    {i > 0 && ', '}
                    <code>{n}</code>
                  </span>
                ))}
                . Their values are kept encrypted and never shown.
              </>
            ) : (
              'None.'
            )}
          </p>
          <div>
            <button
              type="button"
              className="button small"
              onClick={() => set({ replaceHeaders: true, headers: (headerNames ?? []).map((name) => ({ name, value: '' })) })}
            >
              {headerNames && headerNames.length > 0 ? 'Replace headers' : 'Add headers'}
            </button>
          </div>
        </>
      ) : (
        <>
          <p className="muted small">
            Sent with every request, e.g. an <code>Authorization</code> for the receiver. Values are kept encrypted and never shown
            again.
            {headerNames !== undefined && ' These replace the current set: fill in every value again.'}
          </p>
          {rows.map((row, index) => (
            <div className="destination-header-row" key={index}>
              <input
                aria-label={`Header ${index + 1} name`}
                placeholder="Authorization"
                value={row.name}
                onChange={(e) => change(index, { name: e.target.value })}
                maxLength={100}
                spellCheck={false}
                autoComplete="off"
              />
              <input
                aria-label={`Header ${index + 1} value`}
                type="password"
                placeholder="Value"
                value={row.value}
                onChange={(e) => change(index, { value: e.target.value })}
                maxLength={4096}
                autoComplete="off"
              />
              <button
                type="button"
                className="button small"
                aria-label={`Remove header ${index + 1}`}
                onClick={() => set({ headers: rows.filter((_, i) => i !== index) })}
              >
                Remove
              </button>
            </div>
          ))}
          <div className="actions">
            <button
              type="button"
              className="button small"
              disabled={rows.length >= MAX_HEADERS}
              onClick={() => set({ headers: [...rows, { name: '', value: '' }] })}
            >
              Add header
            </button>
            {headerNames !== undefined && (
              <button type="button" className="button small ghost" onClick={() => set({ replaceHeaders: false, headers: [] })}>
                Keep the current headers
              </button>
            )}
          </div>
        </>
      )}
    </fieldset>
  );
}

/** A draft held by a dialog, started from the destination (or the defaults). */
export function useDestinationDraft(destination?: Destination) {
  return useState<DestinationDraft>(() => draftOf(destination));
}
