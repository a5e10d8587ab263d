import type { Erasure } from '../api/types';
import { useEvery, type Paged } from '../api/use-api';
import { ListFooter } from '../components/list-controls';
import { Badge, EmptyState, Loaded, Time } from '../components/ui';
import type { Directory } from './audit-names';
import { actorName, awaitingErase, counted, ERASURE_TONES, inProgress, ReportButton } from './personal-data-shared';

/**
 * The company's erasures and previews, newest first: what was searched (masked), when and
 * by whom, what was found; each with its report, and Erase for a preview still waiting.
 */
export function ErasureHistory({
  list,
  directory,
  onShow,
  onErase,
}: {
  list: Paged<Erasure>;
  directory: Directory;
  onShow(erasure: Erasure): void;
  onErase(erasure: Erasure): void;
}) {
  const moving = (list.data ?? []).some(inProgress);
  useEvery(2000, () => moving && !list.loading && list.reload());
  return (
    <section className="erasure-history" aria-labelledby="erasure-history-heading">
      <header className="section-header">
        <h2 id="erasure-history-heading">Past erasures and previews</h2>
        <button type="button" className="button small" onClick={list.reload} disabled={list.loading}>
          Refresh
        </button>
      </header>
      <Loaded
        state={list}
        empty={(items) =>
          items.length === 0 ? (
            <EmptyState title="No erasures yet">
              A preview you make above is listed here, and stays listed once erased, with a report for the person who asked.
            </EmptyState>
          ) : undefined
        }
      >
        {(items) => (
          <>
            <div className="table-wrap">
              <table className="erasures-table">
                <thead>
                  <tr>
                    <th scope="col">State</th>
                    <th scope="col">Value</th>
                    <th scope="col">Requested</th>
                    <th scope="col">Found</th>
                    <th scope="col">
                      <span className="visually-hidden">Actions</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {items.map((erasure) => (
                    <tr key={erasure.id} data-erasure-id={erasure.id}>
                      <td>
                        <div className="muted small">{erasure.dry_run ? 'Preview' : 'Erasure'}</div>
                        <Badge tone={ERASURE_TONES[erasure.state]}>{erasure.state}</Badge>
                      </td>
                      <td>
                        <span className="erasure-hint">{erasure.value_hint}</span>
                        <div className="muted small mono">{erasure.id}</div>
                      </td>
                      <td>
                        <Time iso={erasure.created_at} />
                        <div className="muted small">by {actorName(erasure.requested_by, directory)}</div>
                        {erasure.confirmed_by && (
                          <div className="muted small">erase confirmed by {actorName(erasure.confirmed_by, directory)}</div>
                        )}
                      </td>
                      <td className="wrap erasure-found">
                        {inProgress(erasure) && erasure.scanned === 0 ? (
                          <span className="muted">—</span>
                        ) : (
                          <>
                            {counted(erasure.counts.webhooks, 'webhook')}
                            <div className="muted small">
                              {counted(erasure.counts.deliveries, 'delivery', 'deliveries')}, {counted(erasure.counts.attempts, 'response')},{' '}
                              {counted(erasure.counts.request_log, 'request-log row')}
                            </div>
                          </>
                        )}
                      </td>
                      <td className="erasure-row-actions">
                        <button
                          type="button"
                          className="button small"
                          aria-label={`Show ${erasure.id}`}
                          onClick={() => onShow(erasure)}
                        >
                          Show
                        </button>
                        <ReportButton erasure={erasure} />
                        {awaitingErase(erasure) && erasure.counts.webhooks > 0 && (
                          <button
                            type="button"
                            className="button small danger"
                            aria-label={`Erase ${erasure.id}`}
                            onClick={() => onErase(erasure)}
                          >
                            Erase
                          </button>
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            <ListFooter list={list} />
          </>
        )}
      </Loaded>
    </section>
  );
}
