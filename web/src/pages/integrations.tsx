import { useState, type KeyboardEvent } from 'react';
import { useNavigate } from 'react-router';
import { api } from '../api/client';
import { useApi, usePagedList } from '../api/use-api';
import { FormDialog } from '../components/dialog';
import { Badge, EmptyState, ErrorMessage, Loaded, PageHeader, Time, numberFormat } from '../components/ui';
import { useSession } from '../session';
import {
  IntegrationFields,
  parseDraft,
  useDraft,
  type CreatedIntegration,
  type Integration,
} from './integration-shared';
import { ListFooter } from '../components/list-controls';
import type { UsageItem } from '../components/log-shared';
import { CreatedIntegrationDialog } from './integration-created';
import { generatesSecret, parseSourceDraft, SourceFields, sourceDraftOf, sourceLabel, useSourceTypes } from './source-fields';
import './integrations.css';

/** Per integration: its requests of the last 24 hours by outcome. */
type Counts = Map<string, { accepted: number; refused: number; total: number }>;


/** The 24-hour column of the list: one request for the whole page, usage grouped by integration. */
function useCounts(enabled: boolean) {
  return useApi<Counts | null>(async () => {
    if (!enabled) return null;
    const usage = await api.get<{ data: UsageItem[] }>('/usage', { bucket: 'hour', group_by: 'integration' });
    const counts: Counts = new Map();
    for (const item of usage.data) {
      if (!item.integration_id) continue;
      const sum = counts.get(item.integration_id) ?? { accepted: 0, refused: 0, total: 0 };
      sum.accepted += item.accepted + item.replayed;
      sum.refused += item.rejected + item.failed;
      sum.total += item.total;
      counts.set(item.integration_id, sum);
    }
    return counts;
  }, [enabled]);
}

/** The company's integrations: status, activity, and creating one. */
export function IntegrationsPage() {
  const { can } = useSession();
  const navigate = useNavigate();
  const manage = can('integrations:manage');
  const list = usePagedList<Integration>('/integrations', {}, []);
  const activity = useCounts(can('logs:read'));
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<CreatedIntegration>();

  const createButton = manage && (
    <button type="button" className="button primary" onClick={() => setCreating(true)}>
      Create integration
    </button>
  );

  return (
    <>
      <PageHeader
        title="Integrations"
        description="Each integration has its own webhook address and API keys."
        actions={list.data && list.data.length > 0 ? createButton : undefined}
      />
      <Loaded
        state={list}
        empty={(items) =>
          items.length === 0 ? (
            <EmptyState
              title="No integrations yet"
              action={
                manage ? (
                  <button type="button" className="button primary" onClick={() => setCreating(true)}>
                    Create your first integration
                  </button>
                ) : undefined
              }
            >
              {manage
                ? 'An integration gives a sender its own webhook address and API key. Create one to start receiving webhooks.'
                : 'An admin or owner of this company can create one; it will show here.'}
            </EmptyState>
          ) : undefined
        }
      >
        {(items) => (
          <>
            {activity.error && <ErrorMessage error={activity.error} retry={activity.reload} />}
            <div className="table-wrap">
              <table className="integrations-table">
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Status</th>
                    <th scope="col">Last webhook</th>
                    <th scope="col">Last 24 h</th>
                    <th scope="col">Limits</th>
                    <th scope="col">Created</th>
                  </tr>
                </thead>
                <tbody>
                  {items.map((integration) => (
                    <IntegrationRow
                      key={integration.id}
                      integration={integration}
                      activity={activity.data ?? undefined}
                      activityLoading={activity.loading && !activity.data}
                      open={() => navigate(`/integrations/${integration.id}`)}
                    />
                  ))}
                </tbody>
              </table>
            </div>
            <ListFooter list={list} />
          </>
        )}
      </Loaded>
      {creating && (
        <CreateIntegrationDialog
          onClose={() => setCreating(false)}
          onCreated={(result) => {
            setCreating(false);
            setCreated(result);
            list.reload();
            activity.reload();
          }}
        />
      )}
      {created && <CreatedIntegrationDialog created={created} onClose={() => navigate(`/integrations/${created.integration.id}`)} />}
    </>
  );
}

function IntegrationRow({
  integration,
  activity,
  activityLoading,
  open,
}: {
  integration: Integration;
  activity: Counts | undefined;
  activityLoading: boolean;
  open(): void;
}) {
  const onKeyDown = (event: KeyboardEvent) => {
    if (event.key === 'Enter' && event.target === event.currentTarget) open();
  };
  const counts = activity?.get(integration.id);
  return (
    <tr className="clickable" tabIndex={0} onClick={open} onKeyDown={onKeyDown}>
      <td className="wrap integration-name-cell">
        <strong>{integration.name}</strong>
        {integration.description && <div className="muted small integration-description">{integration.description}</div>}
        <div className="muted small mono">{integration.integration_key}</div>
        {integration.source.type !== 'api_key' && (
          <div className="muted small">
            Source: {sourceLabel(integration.source.type)}{' '}
            {integration.source.awaiting_secret && <Badge tone="warn">waiting for the secret</Badge>}
          </div>
        )}
      </td>
      <td>{integration.enabled ? <Badge tone="good">enabled</Badge> : <Badge tone="neutral">disabled</Badge>}</td>
      <td>
        <Time iso={integration.last_webhook_at} fallback="Never" />
      </td>
      <td>
        {activityLoading ? (
          <span className="muted">…</span>
        ) : !counts || counts.total === 0 ? (
          <span className="muted">No requests</span>
        ) : (
          <span className="counts" title={`${numberFormat.format(counts.total)} requests in the last 24 hours`}>
            <span className="count-accepted">{numberFormat.format(counts.accepted)} accepted</span>
            {counts.refused > 0 && <span className="count-refused">{numberFormat.format(counts.refused)} refused</span>}
          </span>
        )}
      </td>
      <td className="muted small">
        {integration.rate_limit_per_minute === null ? 'no rate limit' : `${numberFormat.format(integration.rate_limit_per_minute)}/min`}
      </td>
      <td>
        <Time iso={integration.created_at} />
      </td>
    </tr>
  );
}

function CreateIntegrationDialog({ onClose, onCreated }: { onClose(): void; onCreated(result: CreatedIntegration): void }) {
  const [draft, setDraft] = useDraft();
  const [source, setSource] = useState(() => sourceDraftOf());
  const types = useSourceTypes();
  const submit = async () => {
    const fields = parseDraft(draft);
    const sourceBody = parseSourceDraft(source);
    onCreated(
      await api.post<CreatedIntegration>('/integrations', {
        name: fields.name,
        description: fields.description,
        enabled: fields.enabled,
        body_limit_bytes: fields.body_limit_bytes,
        ...(fields.rate_limit_per_minute !== null && { rate_limit_per_minute: fields.rate_limit_per_minute }),
        ...(sourceBody.type !== 'api_key' && { source: sourceBody }),
      }),
    );
  };
  return (
    <FormDialog title="Create integration" submitLabel="Create integration" onClose={onClose} onSubmit={submit}>
      <IntegrationFields draft={draft} onChange={setDraft} source={<SourceFields draft={source} onChange={setSource} types={types} />} />
      <p className="muted small">
        {source.type === 'api_key'
          ? 'Its first API key is shown once, right after it is created.'
          : !source.secret.trim() && generatesSecret(types, source.type)
            ? `Next: the address and the generated signing secret (shown once), how to set up ${sourceLabel(source.type)}, and a test.`
            : `Next: the address, how to set up ${sourceLabel(source.type)}${source.secret.trim() ? '' : ', where to paste its secret'}, and a test.`}
      </p>
    </FormDialog>
  );
}
