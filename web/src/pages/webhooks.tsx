import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { Link } from 'react-router';
import { api, ApiError } from '../api/client';
import { usePagedList } from '../api/use-api';
import { useLiveTail, type LiveStatus } from '../components/live-tail';
import { ListFooter, param, useQueryState, useTimeRange } from '../components/list-controls';
import {
  useIntegrations,
  type WebhookDetail,
  type WebhookSummary,
} from '../components/log-shared';
import { LiveIndicator, WebhookFilters, WebhookTable } from '../components/log-webhook-list';
import { EmptyState, ErrorMessage, Loading, PageHeader, numberFormat } from '../components/ui';
import { readAhead, WebhookViewer } from '../components/webhook-viewer';
import { useSession } from '../session';
import { UrlIntegration, type Integration } from './integration-shared';
import { WebhookDeliveries } from './webhook-deliveries';
import './logs.css';

/** What one search request reads at most (docs/api.md): a page may hold fewer matches. */
const SEARCH_SCAN_ROWS = 10_000;
const MAX_LIVE_ITEMS = 500;
const CLEARED = { event: undefined, q: undefined, range: undefined, since: undefined, until: undefined };

/**
 * The webhook log: the company's accepted webhooks, or one integration's, newest first,
 * with filters kept in the URL (so a view can be shared), a viewer for one webhook
 * (`?webhook=<uuid>`, also found by its uuid in the search box), and a live tail that adds
 * new ones as they arrive.
 */
export function WebhooksPage() {
  const [params] = useQueryState();
  return (
    <UrlIntegration id={param(params, 'integration_id')} back={{ to: '/webhooks', label: 'Show the webhooks of every integration' }}>
      {(integration) => <WebhookLog integration={integration} />}
    </UrlIntegration>
  );
}

function WebhookLog({ integration: named }: { integration: Integration | undefined }) {
  const { company } = useSession();
  const [params, update] = useQueryState();
  const integrationId = param(params, 'integration_id');
  const event = param(params, 'event');
  const q = param(params, 'q');
  const selected = param(params, 'webhook');
  const [refresh, setRefresh] = useState(0);
  const range = useTimeRange(params, refresh);
  const integrations = useIntegrations();
  // Filters narrowing the chosen log (the integration picks the log itself).
  const narrowed = event !== undefined || q !== undefined || range.since !== undefined || range.until !== undefined;

  const list = usePagedList<WebhookSummary>(
    '/webhooks',
    { integration_id: integrationId, event, q, since: range.since, until: range.until },
    [integrationId, event, q, range.since, range.until, refresh],
  );

  // Search: each request scans a slice of the range; count the slices to say how far it got.
  const filterKey = JSON.stringify([integrationId, event, q, range.since, range.until]);
  const [searchSteps, setSearchSteps] = useState(1);
  useEffect(() => setSearchSteps(1), [filterKey]);
  const searchList = useMemo(
    () => ({
      ...list,
      loadMore: () => {
        if (!list.hasMore || list.loadingMore) return;
        setSearchSteps((n) => n + 1);
        list.loadMore();
      },
    }),
    [list],
  );

  // Live tail: new webhooks first, highlighted, once each.
  const [liveWanted, setLiveWanted] = useState(false);
  const liveAllowed = q === undefined && !range.closed;
  const liveOn = liveWanted && liveAllowed;
  const [liveItems, setLiveItems] = useState<WebhookSummary[]>([]);
  useEffect(() => setLiveItems([]), [filterKey]);
  const receive = useCallback((item: WebhookSummary) => {
    if (typeof item?.uuid !== 'string') return;
    setLiveItems((previous) => (previous.some((p) => p.uuid === item.uuid) ? previous : [item, ...previous].slice(0, MAX_LIVE_ITEMS)));
  }, []);
  const live = useLiveTail<WebhookSummary>(liveOn, { integration_id: integrationId, event, company_id: company?.id }, receive);
  // Just connected (not a reconnect, which resumes from the last event): reload the first
  // page, so nothing sent between the list's load and the stream's start is missed.
  const previousStatus = useRef<LiveStatus>('off');
  useEffect(() => {
    if (live.status === 'live' && previousStatus.current === 'connecting') setRefresh((n) => n + 1);
    previousStatus.current = live.status;
  }, [live.status]);

  const rows = useMemo(() => {
    const seen = new Set<string>();
    const all: WebhookSummary[] = [];
    for (const item of [...liveItems, ...(list.data ?? [])]) {
      if (seen.has(item.uuid)) continue;
      seen.add(item.uuid);
      all.push(item);
    }
    return all;
  }, [liveItems, list.data]);
  const fresh = useMemo(() => new Set(liveItems.map((i) => i.uuid)), [liveItems]);

  // The viewer: opened from a row, closed back to it.
  const opener = useRef<HTMLElement | null>(null);
  const open = (uuid: string, changes: Record<string, string | undefined> = {}) => {
    opener.current = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    update({ ...changes, webhook: uuid }, true);
  };
  const close = () => {
    update({ webhook: undefined });
    const back = opener.current;
    setTimeout(() => back?.isConnected && back.focus(), 0);
  };
  const selectedIndex = selected === undefined ? -1 : rows.findIndex((r) => r.uuid === selected);
  const newer = selectedIndex > 0 ? rows[selectedIndex - 1] : undefined;
  const older = selectedIndex >= 0 ? rows[selectedIndex + 1] : undefined;

  const integration = integrationId === undefined ? undefined : (named?.name ?? integrations.nameOf(integrationId));
  // A uuid typed in the search box: open that webhook when the company has it.
  const find = async (uuid: string, changes: Record<string, string | undefined>) => {
    try {
      // Handed to the viewer, which would otherwise read the same body again.
      readAhead.set(uuid, await api.get<WebhookDetail>(`/webhooks/${encodeURIComponent(uuid)}`));
      open(uuid, changes);
      return true;
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) return false;
      throw error;
    }
  };
  const events = useMemo(() => [...new Set(rows.map((r) => r.event))].sort().slice(0, 100), [rows]);

  return (
    <div className="log-page">
      <PageHeader
        title="Webhooks"
        description={
          <>
            {integrationId ? (
              <>
                Accepted webhooks of <strong>{integration ?? integrationId}</strong>, newest first.
              </>
            ) : (
              'Accepted webhooks of every integration, newest first.'
            )}{' '}
            Refused ones are in{' '}
            <Link to={`/requests?${new URLSearchParams({ status_class: '4xx', ...(integrationId && { integration_id: integrationId }) })}`}>
              Requests
            </Link>
            .
          </>
        }
        actions={
          <>
            <LiveIndicator status={live.status} restart={live.restart} />
            <button
              type="button"
              className={liveOn ? 'button primary' : 'button'}
              aria-pressed={liveOn}
              disabled={!liveAllowed}
              title={liveAllowed ? 'Show new webhooks as they arrive' : 'Live tail needs no search and no fixed end time'}
              onClick={() => setLiveWanted((on) => !on)}
            >
              {liveOn ? 'Stop live tail' : 'Live tail'}
            </button>
            <button type="button" className="button" onClick={() => setRefresh((n) => n + 1)} disabled={list.loading}>
              Refresh
            </button>
          </>
        }
      />

      <WebhookFilters
        params={params}
        update={update}
        integrations={integrations}
        events={events}
        narrowed={narrowed}
        liveBlockedBySearch={liveWanted && !liveAllowed}
        findWebhook={find}
      />

      {list.error && !list.data ? (
        <ErrorMessage error={list.error} retry={list.reload} />
      ) : !list.data ? (
        <Loading label="Loading webhooks…" />
      ) : rows.length === 0 && !list.hasMore ? (
        narrowed ? (
          <EmptyState
            title="No webhooks match these filters"
            action={
              <button type="button" className="button" onClick={() => update(CLEARED)}>
                Clear filters
              </button>
            }
          >
            {liveOn ? 'Live tail is on: new matching webhooks will appear here.' : 'Try a longer time range or another event.'}
          </EmptyState>
        ) : (
          <EmptyState
            title="No webhooks yet"
            action={
              integrationId ? (
                <Link className="button primary" to={`/integrations/${encodeURIComponent(integrationId)}`}>
                  Open {integration ?? 'the integration'}
                </Link>
              ) : (
                <Link className="button primary" to="/integrations">
                  Go to integrations
                </Link>
              )
            }
          >
            <p>
              Send one with a POST to the integration's webhook address, with its API key in <code>X-API-Key</code> and a JSON
              body such as <code>{'{"event": "order.created", "data": {}}'}</code>. The integration's page has a ready{' '}
              <code>curl</code> line.
            </p>
            {liveOn && <p>Live tail is on: it will appear here as soon as it arrives.</p>}
          </EmptyState>
        )
      ) : rows.length === 0 ? (
        <EmptyState title="No matches yet">
          Searched up to {numberFormat.format(searchSteps * SEARCH_SCAN_ROWS)} webhooks of this range without a match. Older
          webhooks are left: keep scanning, or narrow the search with an integration, event or time range.
        </EmptyState>
      ) : (
        <>
          {list.error && <ErrorMessage error={list.error} retry={list.reload} />}
          <WebhookTable rows={rows} fresh={fresh} selected={selected} showIntegration={!integrationId} nameOf={integrations.nameOf} open={open} />
        </>
      )}
      {list.data &&
        (q !== undefined ? (
          <ListFooter
            list={searchList}
            auto={false}
            moreLabel="Keep scanning"
            note={`Searched up to ${numberFormat.format(searchSteps * SEARCH_SCAN_ROWS)} webhooks, ${numberFormat.format(rows.length)} ${rows.length === 1 ? 'match' : 'matches'} so far…`}
          />
        ) : (
          <ListFooter list={list} />
        ))}

      {selected && (
        <WebhookViewer
          uuid={selected}
          onClose={close}
          integrationName={integrations.nameOf}
          onNewer={newer && (() => update({ webhook: newer.uuid }))}
          onOlder={older && (() => update({ webhook: older.uuid }))}
          related={(webhook) => <WebhookDeliveries uuid={webhook.uuid} sourceTest={webhook.headers['intake-test'] === 'source-test'} />}
        />
      )}
    </div>
  );
}
