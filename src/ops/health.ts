import type { AppInstance } from '../app-instance.js';
import type { DeliveryDispatcher } from '../destinations/dispatcher.js';
import type { AdmissionGate } from '../intake/admission.js';
import type { AuthFailureLimiter } from '../intake/auth-failures.js';
import type { GroupCommitWriter } from '../intake/group-commit.js';
import type { Store } from '../store/store.js';

export interface HealthDeps {
  store: Store;
  writer: GroupCommitWriter;
  counters: { unknownIntegrationRequests: number };
  admission: AdmissionGate;
  authFailures: AuthFailureLimiter;
  dispatcher: DeliveryDispatcher;
}

/** Liveness, readiness and a few counters, for load balancers and monitoring. */
export async function healthRoutes(app: AppInstance, deps: HealthDeps): Promise<void> {
  const tags = ['Operations'];
  app.get(
    '/healthz',
    { schema: { tags, summary: 'Liveness', description: 'The process is up.', security: [] } },
    async () => ({ status: 'ok' }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        tags,
        summary: 'Readiness',
        description: '503 when the database does not answer or the last write failed: take the node out of the balancer.',
        security: [],
      },
    },
    async (_request, reply) => {
      try {
        await deps.store.ping();
      } catch {
        return reply.code(503).send({ status: 'unavailable', error: 'Not ready', message: 'The database does not answer.' });
      }
      if (deps.writer.failing) {
        return reply
          .code(503)
          .send({ status: 'unavailable', error: 'Not ready', message: 'The last write to the database failed.' });
      }
      return { status: 'ok', queued: deps.writer.queued };
    },
  );

  // Prometheus text format: what this node has seen since it started.
  app.get('/metrics', { schema: { tags, summary: 'Prometheus metrics', security: [] } }, async (_request, reply) =>
    reply.type('text/plain; version=0.0.4').send(
      [
        '# HELP intake_unknown_integration_requests_total Requests to addresses that name no integration (not stored).',
        '# TYPE intake_unknown_integration_requests_total counter',
        `intake_unknown_integration_requests_total ${deps.counters.unknownIntegrationRequests}`,
        '# HELP intake_requests_shed_total Requests to webhook addresses refused with 503 because the event loop lagged or the write queue was slow (not stored, not logged).',
        '# TYPE intake_requests_shed_total counter',
        `intake_requests_shed_total ${deps.admission.shed}`,
        '# HELP intake_request_log_dropped_total Request-log rows of rejected requests dropped while the database fell behind.',
        '# TYPE intake_request_log_dropped_total counter',
        `intake_request_log_dropped_total ${deps.writer.droppedLogs}`,
        '# HELP intake_auth_rate_limited_unlogged_total Requests refused with 429 auth_rate_limited beyond the first of their address at an integration in a window (counted, not in the request log).',
        '# TYPE intake_auth_rate_limited_unlogged_total counter',
        `intake_auth_rate_limited_unlogged_total ${deps.authFailures.unloggedRefusals}`,
        '# HELP intake_write_queue_depth Webhooks waiting for their group commit.',
        '# TYPE intake_write_queue_depth gauge',
        `intake_write_queue_depth ${deps.writer.queued}`,
        '# HELP intake_delivery_attempts_total Delivery attempts made by this node, by outcome (retry: failed, another attempt scheduled).',
        '# TYPE intake_delivery_attempts_total counter',
        `intake_delivery_attempts_total{outcome="succeeded"} ${deps.dispatcher.counts.succeeded}`,
        `intake_delivery_attempts_total{outcome="retry"} ${deps.dispatcher.counts.retried}`,
        `intake_delivery_attempts_total{outcome="failed"} ${deps.dispatcher.counts.failed}`,
        '# HELP intake_delivery_claims_shed_total Times this node skipped claiming deliveries because intake was near one of its bounds.',
        '# TYPE intake_delivery_claims_shed_total counter',
        `intake_delivery_claims_shed_total ${deps.dispatcher.counts.shed}`,
        '# HELP intake_deliveries_in_flight Delivery requests this node is making now.',
        '# TYPE intake_deliveries_in_flight gauge',
        `intake_deliveries_in_flight ${deps.dispatcher.inFlightCount}`,
        '',
      ].join('\n'),
    ),
  );
}
