import { useEffect, useState, type FormEvent } from 'react';
import { Field } from '../components/dialog';
import { fromLocalInput, toLocalInput } from '../components/list-controls';
import { ErrorMessage } from '../components/ui';
import { ACCOUNT_ACTION_WORDS, resolveChoice, textOf, type Choice, type Directory } from './audit-names';
import { AUDIT_ACTIONS } from './company-shared';

export const AUDIT_FILTERS = ['action', 'actor_id', 'target_id', 'since', 'until'] as const;
type AuditFilterName = (typeof AUDIT_FILTERS)[number];
export type AuditFilterValues = Record<AuditFilterName, string | undefined>;

/**
 * The audit log's filters. Actor and target are picked by what people know (an email, an
 * integration's or destination's name, a key's name or prefix), found as they type, and
 * sent as the id the API filters by; an id pasted still works.
 */
export function AuditFilters({
  filters,
  directory,
  apply,
  clear,
}: {
  filters: AuditFilterValues;
  directory: Directory;
  apply(changes: Partial<AuditFilterValues>): void;
  clear: (() => void) | undefined;
}) {
  const [draft, setDraft] = useState(() => draftOf(filters));
  // What was typed in the actor and target fields; until then they show the URL's choice.
  const [typed, setTyped] = useState<{ actor?: string; target?: string }>({});
  const [error, setError] = useState<Error>();
  // The URL changed (a filter from a record, Clear, back/forward): show it.
  useEffect(() => {
    setDraft(draftOf(filters));
    setTyped({});
    setError(undefined);
  }, [JSON.stringify(filters)]);
  const set = (name: keyof typeof draft) => (event: { target: { value: string } }) =>
    setDraft((previous) => ({ ...previous, [name]: event.target.value }));
  const actorText = typed.actor ?? textOf(filters.actor_id, directory.actors);
  const targetText = typed.target ?? textOf(filters.target_id, directory.targets);

  const submit = (event: FormEvent) => {
    event.preventDefault();
    try {
      apply({
        action: draft.action.trim() || undefined,
        actor_id: resolveChoice(actorText, directory.actors, 'member or management key'),
        target_id: resolveChoice(targetText, directory.targets, 'integration, destination, member or key'),
        since: fromLocalInput(draft.since),
        until: fromLocalInput(draft.until),
      });
      setError(undefined);
    } catch (failure) {
      setError(failure as Error);
    }
  };

  return (
    <form className="toolbar audit-filters" onSubmit={submit} aria-label="Filters">
      <Field label="Action">
        <input type="text" list="audit-actions" placeholder="Any action" value={draft.action} onChange={set('action')} />
      </Field>
      <datalist id="audit-actions">
        {AUDIT_ACTIONS.map((action) => (
          <option key={action} value={action} label={ACCOUNT_ACTION_WORDS[action]} />
        ))}
      </datalist>
      <ChoiceField
        label="Actor"
        placeholder="Anyone: email, key"
        value={actorText}
        choices={directory.actors}
        onChange={(actor) => setTyped((previous) => ({ ...previous, actor }))}
      />
      <ChoiceField
        label="Target"
        placeholder="Anything: name, email"
        value={targetText}
        choices={directory.targets}
        onChange={(target) => setTyped((previous) => ({ ...previous, target }))}
      />
      <Field label="From">
        <input type="datetime-local" value={draft.since} onChange={set('since')} />
      </Field>
      <Field label="To">
        <input type="datetime-local" value={draft.until} onChange={set('until')} />
      </Field>
      <div className="audit-filter-actions">
        <button type="submit" className="button primary">
          Apply filters
        </button>
        {clear && (
          <button type="button" className="button" onClick={clear}>
            Clear
          </button>
        )}
      </div>
      {error && (
        <div className="audit-filter-error">
          <ErrorMessage error={error} />
        </div>
      )}
    </form>
  );
}

/** A text field that suggests `choices` as one types (each with its kind). */
function ChoiceField({
  label,
  placeholder,
  value,
  choices,
  onChange,
}: {
  label: string;
  placeholder: string;
  value: string;
  choices: readonly Choice[];
  onChange(value: string): void;
}) {
  const listId = `audit-${label.toLowerCase()}-choices`;
  return (
    <Field label={label}>
      <input
        type="text"
        list={listId}
        placeholder={placeholder}
        value={value}
        autoComplete="off"
        spellCheck={false}
        onChange={(event) => onChange(event.target.value)}
      />
      <datalist id={listId}>
        {choices.map((choice) => (
          <option key={choice.id} value={choice.text} label={choice.kind} />
        ))}
      </datalist>
    </Field>
  );
}

function draftOf(filters: AuditFilterValues) {
  return {
    action: filters.action ?? '',
    since: toLocalInput(filters.since),
    until: toLocalInput(filters.until),
  };
}
