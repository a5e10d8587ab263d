import type { AppInstance } from '../app.js';
import type { GroupCommitWriter } from '../intake/group-commit.js';
import type { Store } from '../store/store.js';

/** Liveness and readiness, for load balancers and orchestrators. */
export async function healthRoutes(app: AppInstance, deps: { store: Store; writer: GroupCommitWriter }): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async (_request, reply) => {
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
  });
}
