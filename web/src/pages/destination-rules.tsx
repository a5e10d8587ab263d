import { useState } from 'react';
import { CodeBlock } from '../components/code-editor';
import type { Integrations } from '../components/log-shared';
import { numberFormat } from '../components/ui';
import { formatSeconds } from './destination-rules-draft';
import { RulesEditor } from './destination-rules-editor';
import type { Destination, DestinationRules } from './destination-shared';
import './destination-rules.css';

/**
 * A destination's rules on its page (docs/destinations.md, "Rules"): what they are and their
 * version; for those who may change them, an editor of each part, tried on a sample before
 * it is saved (PATCH /destinations/{id} replaces the whole set, a new version).
 */
export function DestinationRulesSection({
  destination,
  integrations,
  canEdit,
  onSaved,
}: {
  destination: Destination;
  integrations: Integrations;
  /** integrations:manage and logs:read: the rules choose what is sent and read payloads. */
  canEdit: boolean;
  onSaved(next: Destination): void;
}) {
  const [editing, setEditing] = useState(false);
  const [savedVersion, setSavedVersion] = useState<number>();
  const { version } = destination.rules;
  return (
    <section className="card destination-rules" aria-labelledby="rules-heading">
      <header className="section-header">
        <div>
          <h2 id="rules-heading">Rules</h2>
          <p className="muted small">
            Applied to each delivery in order: delay, filter, deduplicate, transformation; then its retry schedule.{' '}
            <span className="rules-version">{version === 0 ? 'None saved yet.' : `Version ${numberFormat.format(version)}.`}</span>
          </p>
        </div>
        {canEdit && !editing && (
          <div className="actions">
            <button
              type="button"
              className="button"
              onClick={() => {
                setSavedVersion(undefined);
                setEditing(true);
              }}
            >
              Edit rules
            </button>
          </div>
        )}
      </header>
      {savedVersion !== undefined && !editing && (
        <p className="notice info" role="status">
          {savedVersion === 0 ? 'The rules are removed: every matching webhook is sent as received.' : `Saved as version ${numberFormat.format(savedVersion)}.`}{' '}
          Deliveries made from now on follow them.
        </p>
      )}
      {editing ? (
        <RulesEditor
          destination={destination}
          integrations={integrations}
          onCancel={() => setEditing(false)}
          onSaved={(next) => {
            setEditing(false);
            setSavedVersion(next.rules.version);
            onSaved(next);
          }}
        />
      ) : (
        <RulesSummary rules={destination.rules} />
      )}
    </section>
  );
}

function RulesSummary({ rules }: { rules: DestinationRules }) {
  const { filter, transformation, deduplicate, retry } = rules;
  return (
    <dl className="details rules-summary">
      <dt>Filter</dt>
      <dd>
        {filter === null ? (
          <span className="muted">None: every webhook that matches its integrations and events</span>
        ) : (
          <CodeBlock code={JSON.stringify(filter, null, 2)} language="json" label="Filter" />
        )}
      </dd>
      <dt>Deduplicate</dt>
      <dd>
        {deduplicate === null ? (
          <span className="muted">Off</span>
        ) : (
          <>
            {deduplicate.fields === null
              ? 'The same body'
              : deduplicate.fields.map((field, i) => (
                  <span key={field}>
                    {i > 0 && ', '}
                    <code>{field}</code>
                  </span>
                ))}{' '}
            within{' '}
            {formatSeconds(deduplicate.window_seconds)}: delivered once
          </>
        )}
      </dd>
      <dt>Transformation</dt>
      <dd>
        {transformation === null ? (
          <span className="muted">None: sent as received</span>
        ) : (
          <CodeBlock code={transformation.code} language="javascript" label="Transformation" />
        )}
      </dd>
      <dt>Delay</dt>
      <dd>{rules.delay_seconds === 0 ? <span className="muted">None: sent at once</span> : `${formatSeconds(rules.delay_seconds)} after arrival`}</dd>
      <dt>Retry</dt>
      <dd>
        {retry === null ? (
          <span className="muted">The standard schedule</span>
        ) : (
          <>
            {numberFormat.format(retry.attempts)} attempts,{' '}
            {retry.strategy === 'exponential'
              ? `${formatSeconds(retry.interval_seconds)} after the first failure, doubling each time`
              : `every ${formatSeconds(retry.interval_seconds)}`}
            {retry.max_age_seconds !== null && `, none later than ${formatSeconds(retry.max_age_seconds)} after arrival`}
          </>
        )}
      </dd>
    </dl>
  );
}
