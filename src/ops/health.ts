import type { AppInstance } from '../app-instance.js';
import type { GroupCommitWriter } from '../intake/group-commit.js';
import type { Store } from '../store/store.js';

export interface HealthDeps {
  store: Store;
  writer: GroupCommitWriter;
}

/** Liveness and readiness, for load balancers (/metrics: metrics-http.ts). */
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
}
