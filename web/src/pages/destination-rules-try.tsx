import { useEffect, useState } from 'react';
import { api, ApiError, type Page } from '../api/client';
import { useApi } from '../api/use-api';
import { CodeEditor } from '../components/code-editor';
import { Field } from '../components/dialog';
import { JsonView } from '../components/json-view';
import type { Integrations, WebhookDetail, WebhookSummary } from '../components/log-shared';
import { Badge, ErrorMessage, relativeTime } from '../components/ui';
import { PART_NAMES, partOfField, RuleProblem, type RulesBody } from './destination-rules-draft';
import type { Destination } from './destination-shared';

/**
 * "Try it": the editor's rules, unsaved, run on a sample (one of the integration's recent
 * webhooks, or a body pasted in) by POST /destinations/{id}/rules/try, which sends nothing;
 * what would be sent, or why nothing would.
 */

/** POST /destinations/{id}/rules/try. */
export interface TryAnswer {
  /** The saved version tried; null: the rules were the request's (the editor's). */
  rules_version: number | null;
  would_send: boolean;
  reason: string | null;
  filter: { passed: boolean } | null;
  dedupe_key: string | null;
  transformation: { outcome: 'request' | 'dropped' | 'error'; message: string | null } | null;
  request: { url: string; content_type: string; headers: Record<string, string>; body: string; body_truncated: boolean } | null;
}

/** Recent webhooks offered as samples. */
const SAMPLES = 20;
const PASTED_EXAMPLE = JSON.stringify({ event: 'order.created', data: { id: 1001, total_price: '25.00', currency: 'EUR' } }, null, 2);

export function RulesTry({
  destination,
  integrations,
  rules,
  onProblem,
  onTried,
}: {
  destination: Destination;
  integrations: Integrations;
  /** The editor's rules as the API takes them; throws a RuleProblem when they cannot be sent. */
  rules(): RulesBody;
  /** A problem with a part of the rules, shown by the editor beside that part. */
  onProblem(problem: RuleProblem | undefined): void;
  onTried(answer: TryAnswer): void;
}) {
  const [mode, setMode] = useState<'stored' | 'pasted'>('stored');
  const [uuid, setUuid] = useState<string>();
  const [pastedBody, setPastedBody] = useState(PASTED_EXAMPLE);
  const [pastedHeaders, setPastedHeaders] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error>();
  const [answer, setAnswer] = useState<{ result: TryAnswer; rules: string }>();

  // A problem with the rules is shown beside its part, and said here too (on a phone that part is far above).
  const refuse = (problem: RuleProblem) => {
    onProblem(problem);
    setError(new Error(`Not tried: the ${PART_NAMES[problem.part!]} has a problem, shown beside it.`));
    setAnswer(undefined);
  };
  const run = async () => {
    setError(undefined);
    let body: Record<string, unknown>;
    try {
      const tried = rules();
      body = { rules: tried, ...(mode === 'stored' ? { webhook_uuid: uuid } : { webhook: pastedWebhook(pastedBody, pastedHeaders) }) };
    } catch (problem) {
      if (problem instanceof RuleProblem && problem.part) refuse(problem);
      else setError(problem as Error);
      return;
    }
    if (mode === 'stored' && !uuid) return setError(new Error('Pick a webhook to try the rules on, or paste one.'));
    setBusy(true);
    try {
      const result = await api.post<TryAnswer>(`/destinations/${destination.id}/rules/try`, body);
      onProblem(undefined);
      onTried(result);
      setAnswer({ result, rules: JSON.stringify(body.rules) });
    } catch (failure) {
      const part = failure instanceof ApiError && failure.status === 400 ? partOfField(failure.field) : undefined;
      if (part) refuse(new RuleProblem(part, (failure as Error).message));
      else setError(failure as Error);
      setAnswer(undefined);
    } finally {
      setBusy(false);
    }
  };
  // Whether the editor changed since the answer shown (the rules are read at each render).
  let current: string | undefined;
  try {
    current = JSON.stringify(rules());
  } catch {
    current = undefined;
  }

  return (
    <section className="rules-try" aria-labelledby="rules-try-heading">
      <h3 id="rules-try-heading">Try it</h3>
      <p className="muted small">Runs the rules in the editor, unsaved, on a sample webhook. Nothing is sent.</p>
      <div className="rules-sample-modes" role="radiogroup" aria-label="Sample">
        <label className="checkbox">
          <input type="radio" name="rules-sample" checked={mode === 'stored'} onChange={() => setMode('stored')} />
          A recent webhook
        </label>
        <label className="checkbox">
          <input type="radio" name="rules-sample" checked={mode === 'pasted'} onChange={() => setMode('pasted')} />
          Paste a body
        </label>
      </div>
      {mode === 'stored' ? (
        <StoredSample destination={destination} integrations={integrations} uuid={uuid} onPick={setUuid} />
      ) : (
        <>
          <div className="field">
            <label className="field-label" htmlFor="rules-sample-body">
              Body (JSON)
            </label>
            <CodeEditor id="rules-sample-body" language="json" value={pastedBody} onChange={setPastedBody} rows={8} />
          </div>
          <div className="field">
            <label className="field-label" htmlFor="rules-sample-headers">
              Headers (JSON object, optional)
            </label>
            <CodeEditor
              id="rules-sample-headers"
              language="json"
              value={pastedHeaders}
              onChange={setPastedHeaders}
              rows={3}
              placeholder='{ "x-github-event": "push" }'
            />
          </div>
        </>
      )}
      <div className="actions">
        <button type="button" className="button" onClick={() => void run()} disabled={busy}>
          {busy ? 'Trying…' : 'Try'}
        </button>
      </div>
      {error && <ErrorMessage error={error} />}
      {answer && <TryResult answer={answer.result} stale={current !== answer.rules} />}
    </section>
  );
}

/** A pasted sample as the try route takes it; an Error in words when it is not JSON. */
function pastedWebhook(bodyText: string, headersText: string): { body: unknown; headers?: Record<string, string> } {
  let body: unknown;
  try {
    body = JSON.parse(bodyText);
  } catch (error) {
    throw new Error(`The pasted body is not valid JSON: ${(error as Error).message}`);
  }
  if (headersText.trim() === '') return { body };
  let headers: unknown;
  try {
    headers = JSON.parse(headersText);
  } catch (error) {
    throw new Error(`The pasted headers are not valid JSON: ${(error as Error).message}`);
  }
  if (typeof headers !== 'object' || headers === null || Array.isArray(headers) || Object.values(headers).some((v) => typeof v !== 'string')) {
    throw new Error('The pasted headers must be a JSON object of names and text values, e.g. {"x-github-event": "push"}.');
  }
  return { body, headers: headers as Record<string, string> };
}

/**
 * The integration's recent webhooks to pick from; a destination limited to some
 * integrations offers only theirs, one integration at a time (the list reads one or all).
 */
function StoredSample({
  destination,
  integrations,
  uuid,
  onPick,
}: {
  destination: Destination;
  integrations: Integrations;
  uuid: string | undefined;
  onPick(uuid: string | undefined): void;
}) {
  const limited = destination.integration_ids;
  const [integrationId, setIntegrationId] = useState<string | undefined>(limited?.[0]);
  const recent = useApi(
    async () => (await api.get<Page<WebhookSummary>>('/webhooks', { integration_id: integrationId, limit: SAMPLES })).data,
    [integrationId],
  );
  const webhooks = recent.data ?? [];
  // The newest is picked until the person picks another; one no longer listed is let go.
  useEffect(() => {
    if (recent.data && !recent.data.some((w) => w.uuid === uuid)) onPick(recent.data[0]?.uuid);
  }, [recent.data]);
  const detail = useApi(async () => (uuid ? api.get<WebhookDetail>(`/webhooks/${uuid}`) : undefined), [uuid]);

  return (
    <>
      <div className="rules-sample-pickers">
        <Field label="Integration">
          <select value={integrationId ?? ''} onChange={(e) => setIntegrationId(e.target.value || undefined)}>
            {limited === null && <option value="">All integrations</option>}
            {(limited ?? (integrations.data ?? []).map((i) => i.id)).map((id) => (
              <option key={id} value={id}>
                {integrations.nameOf(id) ?? id}
              </option>
            ))}
          </select>
        </Field>
        <Field label="Webhook">
          <select value={uuid ?? ''} onChange={(e) => onPick(e.target.value || undefined)} disabled={webhooks.length === 0}>
            {webhooks.length === 0 && <option value="">{recent.loading ? 'Loading…' : 'No webhooks yet'}</option>}
            {webhooks.map((webhook) => (
              <option key={webhook.uuid} value={webhook.uuid}>
                {webhook.event} · {relativeTime(webhook.received_at)} · {webhook.uuid.slice(0, 8)}
              </option>
            ))}
          </select>
        </Field>
        <button type="button" className="button small" onClick={recent.reload} disabled={recent.loading}>
          Refresh
        </button>
      </div>
      {recent.error && <ErrorMessage error={recent.error} retry={recent.reload} />}
      {recent.data && webhooks.length === 0 && (
        <p className="muted small">No webhook has arrived here yet: paste a body to try the rules on instead.</p>
      )}
      {detail.data && detail.data.uuid === uuid && (
        <details className="rules-sample-body">
          <summary>Its body, as the filter sees it</summary>
          <JsonView value={parsedJson(detail.data.raw_body)?.value ?? detail.data.raw_body} label="Sample body" expandDepth={3} />
        </details>
      )}
    </>
  );
}

const OUTCOMES = {
  request: 'Returned a request',
  dropped: 'Returned nothing: the delivery would be filtered',
  error: 'Failed',
} as const;

function TryResult({ answer, stale }: { answer: TryAnswer; stale: boolean }) {
  const { request, transformation } = answer;
  return (
    <div className="rules-try-result">
      <p className="rules-verdict" role="status">
        {answer.would_send ? <Badge tone="good">Would be sent</Badge> : <Badge tone={transformation?.outcome === 'error' ? 'bad' : 'warn'}>Would not be sent</Badge>}{' '}
        {answer.reason}
      </p>
      {stale && <p className="notice">The rules changed since this try: try again to see what they do now.</p>}
      <dl className="details">
        <dt>Filter</dt>
        <dd>{answer.filter === null ? <span className="muted">No filter</span> : answer.filter.passed ? 'Passed' : 'Refused'}</dd>
        <dt>Deduplication key</dt>
        <dd>
          {answer.dedupe_key ? (
            <code title={answer.dedupe_key}>{answer.dedupe_key.slice(0, 16)}…</code>
          ) : (
            <span className="muted">None</span>
          )}
        </dd>
        <dt>Transformation</dt>
        <dd>{transformation === null ? <span className="muted">No transformation</span> : OUTCOMES[transformation.outcome]}</dd>
      </dl>
      {transformation?.message && (
        <pre className="rules-try-error" role="alert">
          {transformation.message}
        </pre>
      )}
      {request && <WouldSend request={request} />}
    </div>
  );
}

function WouldSend({ request }: { request: NonNullable<TryAnswer['request']> }) {
  const headers = Object.entries(request.headers);
  const json = /json/i.test(request.content_type) ? parsedJson(request.body) : undefined;
  return (
    <section className="rules-request" aria-labelledby="rules-request-heading">
      <h4 id="rules-request-heading">The request it would send</h4>
      <dl className="details">
        <dt>URL</dt>
        <dd className="mono">POST {request.url}</dd>
        <dt>Content type</dt>
        <dd className="mono">{request.content_type}</dd>
        <dt>Headers</dt>
        <dd>
          {headers.length === 0 ? (
            <span className="muted">Only intake&apos;s own (the signature and ids)</span>
          ) : (
            <ul className="rules-headers">
              {headers.map(([name, value]) => (
                <li key={name} className="mono small">
                  {name}: {value}
                </li>
              ))}
            </ul>
          )}
        </dd>
      </dl>
      {request.body_truncated && <p className="notice">The body is longer than shown: its first 256 KiB.</p>}
      {json !== undefined ? <JsonView value={json.value} label="Request body" /> : <pre className="rules-request-body">{request.body}</pre>}
    </section>
  );
}

function parsedJson(text: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return undefined;
  }
}

