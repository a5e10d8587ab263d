import { Link } from 'react-router';
import { api, type Page } from '../api/client';
import { useApi } from '../api/use-api';
import { ErrorMessage, Loading, Time, numberFormat } from '../components/ui';
import { DeliveryStateBadge, Outcome, type Delivery, type Destination } from './destination-shared';

/** A webhook has at most one delivery per destination, and a company at most 50 destinations. */
const LIMIT = 50;

/**
 * Where a webhook went: its deliveries (GET /deliveries?webhook_uuid), one per destination
 * it matched, with the state, the attempts and the last answer, each linking to the
 * delivery on its destination's page (which links back here).
 */
export function WebhookDeliveries({ uuid, sourceTest }: { uuid: string; sourceTest: boolean }) {
  const deliveries = useApi(() => api.get<Page<Delivery>>('/deliveries', { webhook_uuid: uuid, limit: LIMIT }), [uuid]);
  // Names where the reader may see destinations; their ids otherwise.
  const destinations = useApi(
    () => api.get<Page<Destination>>('/destinations', { limit: LIMIT }).catch(() => ({ data: [], next_cursor: null })),
    [],
  );
  const nameOf = (id: string) => destinations.data?.data.find((destination) => destination.id === id)?.name;

  return (
    <section className="webhook-deliveries" aria-labelledby="webhook-deliveries-heading">
      <h3 id="webhook-deliveries-heading">Deliveries</h3>
      {deliveries.error ? (
        <ErrorMessage error={deliveries.error} retry={deliveries.reload} />
      ) : !deliveries.data ? (
        <Loading label="Loading its deliveries…" />
      ) : deliveries.data.data.length === 0 ? (
        <p className="muted" role="status">
          {sourceTest
            ? 'Sent to no destination: it is a test.'
            : 'Sent to no destination: none matched it when it arrived (a destination’s Send stored webhooks sends it later).'}
        </p>
      ) : (
        <div className="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Destination</th>
                <th scope="col">State</th>
                <th scope="col" className="numeric">
                  Attempts
                </th>
                <th scope="col">Last answer</th>
                <th scope="col">Last attempt</th>
              </tr>
            </thead>
            <tbody>
              {deliveries.data.data.map((delivery) => (
                <tr key={delivery.id} data-delivery-id={delivery.id}>
                  <td>
                    <Link to={`/destinations/${encodeURIComponent(delivery.destination_id)}?${new URLSearchParams({ delivery: delivery.id })}`}>
                      {nameOf(delivery.destination_id) ?? delivery.destination_id}
                    </Link>
                  </td>
                  <td>
                    <DeliveryStateBadge state={delivery.state} />
                  </td>
                  <td className="numeric">
                    {numberFormat.format(delivery.attempts)}
                    {delivery.series > 0 && <span className="muted small"> (replay {numberFormat.format(delivery.series)})</span>}
                  </td>
                  <td>
                    {delivery.last_attempt_at ? <Outcome status={delivery.last_status} error={delivery.last_error} /> : <span className="muted">—</span>}
                  </td>
                  <td>
                    <Time iso={delivery.last_attempt_at} fallback="Not yet" />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
