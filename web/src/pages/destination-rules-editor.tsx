import { useState, type FormEvent, type ReactNode } from 'react';
import { api, ApiError } from '../api/client';
import { CodeEditor, lineOfMessage, type Language } from '../components/code-editor';
import { Field } from '../components/dialog';
import type { Integrations } from '../components/log-shared';
import { ErrorMessage } from '../components/ui';
import {
  draftOfRules,
  FILTER_EXAMPLES,
  parseRulesDraft,
  partOfDraftKey,
  partOfField,
  RuleProblem,
  TRANSFORMATION_EXAMPLES,
  TRANSFORMATION_PLACEHOLDER,
  type Example,
  type RulePart,
  type RulesDraft,
} from './destination-rules-draft';
import { RulesTry } from './destination-rules-try';
import type { Destination, DestinationRules } from './destination-shared';

/** What "Clear all" leaves in the editor: saved, it removes every rule. */
const NO_RULES: DestinationRules = { version: 0, filter: null, transformation: null, deduplicate: null, delay_seconds: 0, retry: null };

/**
 * The editor of a destination's rules: each part (the filter and the transformation as
 * highlighted code, with examples), "Try it" beside them, and Save, which replaces the whole
 * set; the API's words for a part it refuses are shown beside that part.
 */
export function RulesEditor({
  destination,
  integrations,
  onCancel,
  onSaved,
}: {
  destination: Destination;
  integrations: Integrations;
  onCancel(): void;
  onSaved(next: Destination): void;
}) {
  const [draft, setDraft] = useState<RulesDraft>(() => draftOfRules(destination.rules));
  const [problem, setProblem] = useState<RuleProblem>();
  // A problem shown beside a part lasts until that part is changed.
  const set = (changes: Partial<RulesDraft>) => {
    setDraft((d) => ({ ...d, ...changes }));
    if (problem?.part && Object.keys(changes).some((key) => partOfDraftKey(key as keyof RulesDraft) === problem.part)) setProblem(undefined);
  };
  const [errorLine, setErrorLine] = useState<number>();
  const [busy, setBusy] = useState(false);

  const save = async (event: FormEvent) => {
    event.preventDefault();
    setProblem(undefined);
    setBusy(true);
    try {
      onSaved(await api.patch<Destination>(`/destinations/${destination.id}`, { rules: parseRulesDraft(draft) }));
    } catch (error) {
      setProblem(
        error instanceof RuleProblem ? error : new RuleProblem(error instanceof ApiError ? partOfField(error.field) : undefined, (error as Error).message),
      );
      setBusy(false);
    }
  };
  const problemAt = (part: RulePart) => (problem?.part === part ? problem : undefined);

  return (
    <form className="rules-editor" onSubmit={save} noValidate>
      <div className="rules-layout">
        <div className="rules-fields">
          <CodeField
            id="rules-filter"
            label="Filter"
            language="json"
            value={draft.filter}
            onChange={(filter) => set({ filter })}
            rows={8}
            placeholder={'{ "body": { "event": "order.created" } }'}
            examples={FILTER_EXAMPLES}
            hint={
              <>
                JSON over <code>body</code>, <code>headers</code>, <code>query</code> and <code>path</code>: values match by equality,
                objects nest, an array contains; operators such as <code>$gte</code>, <code>$in</code>, <code>$startsWith</code>,{' '}
                <code>$exist</code>, <code>$or</code>, <code>$not</code>. Empty: every webhook.
              </>
            }
            problem={problemAt('filter')}
          />
          <CodeField
            id="rules-transformation"
            label="Transformation"
            language="javascript"
            value={draft.transformation}
            onChange={(transformation) => {
              set({ transformation });
              setErrorLine(undefined);
            }}
            rows={14}
            placeholder={TRANSFORMATION_PLACEHOLDER}
            examples={TRANSFORMATION_EXAMPLES}
            hint={
              <>
                JavaScript defining <code>function transform(request, context)</code>; <code>request</code> is{' '}
                <code>{'{body, headers, path, query}'}</code>. What it returns is sent; returning nothing filters the delivery. Empty:
                sent as received.
              </>
            }
            problem={problemAt('transformation')}
            errorLine={errorLine}
          />

          <fieldset className="destination-fieldset">
            <legend className="field-label">Deduplicate</legend>
            <label className="checkbox">
              <input type="checkbox" checked={draft.deduplicate} onChange={(e) => set({ deduplicate: e.target.checked })} />
              Deliver a repeated webhook only once within a window
            </label>
            {draft.deduplicate && (
              <div className="destination-limits">
                <Field label="Fields" hint="Paths such as body.id or headers.x-request-id; empty: the whole body.">
                  <input value={draft.dedupeFields} onChange={(e) => set({ dedupeFields: e.target.value })} placeholder="body.id" spellCheck={false} />
                </Field>
                <Field label="Window (seconds)" hint="1 to 3600">
                  <input type="number" inputMode="numeric" value={draft.dedupeWindow} onChange={(e) => set({ dedupeWindow: e.target.value })} />
                </Field>
              </div>
            )}
            <PartProblem problem={problemAt('deduplicate')} />
          </fieldset>

          <div className="destination-limits">
            <Field label="Delay (seconds)" hint="Each delivery waits this long after its webhook arrived; empty: none.">
              <input type="number" inputMode="numeric" value={draft.delay} onChange={(e) => set({ delay: e.target.value })} placeholder="0" />
            </Field>
          </div>
          <PartProblem problem={problemAt('delay')} />

          <fieldset className="destination-fieldset">
            <legend className="field-label">Retry</legend>
            <label className="checkbox">
              <input type="checkbox" checked={draft.retry} onChange={(e) => set({ retry: e.target.checked })} />
              A schedule of its own (else the standard one)
            </label>
            {draft.retry && (
              <div className="destination-limits">
                <Field label="Strategy">
                  <select value={draft.retryStrategy} onChange={(e) => set({ retryStrategy: e.target.value as RulesDraft['retryStrategy'] })}>
                    <option value="exponential">Exponential: the interval doubles</option>
                    <option value="linear">Linear: the same interval</option>
                  </select>
                </Field>
                <Field label="Attempts" hint="1 to 50, the first included">
                  <input type="number" inputMode="numeric" value={draft.retryAttempts} onChange={(e) => set({ retryAttempts: e.target.value })} />
                </Field>
                <Field label="Interval (seconds)" hint="10 to 86400">
                  <input type="number" inputMode="numeric" value={draft.retryInterval} onChange={(e) => set({ retryInterval: e.target.value })} />
                </Field>
                <Field label="Max age (seconds)" hint="No retry later than this after arrival; empty: no bound">
                  <input type="number" inputMode="numeric" value={draft.retryMaxAge} onChange={(e) => set({ retryMaxAge: e.target.value })} />
                </Field>
              </div>
            )}
            <PartProblem problem={problemAt('retry')} />
          </fieldset>
        </div>

        <RulesTry
          destination={destination}
          integrations={integrations}
          rules={() => parseRulesDraft(draft)}
          onProblem={setProblem}
          onTried={(answer) => setErrorLine(lineOfMessage(answer.transformation?.outcome === 'error' ? answer.transformation.message : undefined))}
        />
      </div>

      {problem && !problem.part && <ErrorMessage error={problem} />}
      <div className="rules-actions">
        <button
          type="button"
          className="button ghost"
          onClick={() => {
            setDraft(draftOfRules(NO_RULES));
            setProblem(undefined);
          }}
        >
          Clear all
        </button>
        <button type="button" className="button" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" className="button primary" disabled={busy}>
          {busy ? 'Saving…' : 'Save rules'}
        </button>
      </div>
    </form>
  );
}

/** A code part of the rules: its label, one-click examples, the editor, its hint and its problem. */
function CodeField({
  id,
  label,
  language,
  value,
  onChange,
  rows,
  placeholder,
  examples,
  hint,
  problem,
  errorLine,
}: {
  id: string;
  label: string;
  language: Language;
  value: string;
  onChange(value: string): void;
  rows: number;
  placeholder: string;
  examples: Example[];
  hint: ReactNode;
  problem: RuleProblem | undefined;
  errorLine?: number;
}) {
  return (
    <div className="field">
      <div className="rules-field-head">
        <label className="field-label" htmlFor={id}>
          {label}
        </label>
        <span className="rules-examples">
          <span className="muted small">Examples:</span>
          {examples.map((example) => (
            <button key={example.label} type="button" className="button small" onClick={() => onChange(example.text)}>
              {example.label}
            </button>
          ))}
        </span>
      </div>
      <CodeEditor
        id={id}
        language={language}
        value={value}
        onChange={onChange}
        rows={rows}
        placeholder={placeholder}
        invalid={problem !== undefined}
        describedBy={problem ? `${id}-hint ${id}-problem` : `${id}-hint`}
        errorLine={errorLine}
      />
      <span className="field-hint" id={`${id}-hint`}>
        {hint}
      </span>
      <PartProblem problem={problem} id={`${id}-problem`} />
    </div>
  );
}

function PartProblem({ problem, id }: { problem: RuleProblem | undefined; id?: string }) {
  if (!problem) return null;
  return (
    <div id={id}>
      <ErrorMessage error={problem} />
    </div>
  );
}
