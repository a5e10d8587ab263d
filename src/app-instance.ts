import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { DeliveryDispatcher } from './destinations/dispatcher.js';
import type { FeedBell } from './intake/feed-bell.js';
import type { GroupCommitWriter } from './intake/group-commit.js';
import type { ErrorCode } from './errors.js';

/**
 * The app's type and what app.ts adds to Fastify's request and instance: its own module,
 * so that app.ts imports the route modules and the route modules import this, never app.ts
 * (no module imports the file that imports it).
 */
export type AppInstance = FastifyInstance<
  import('node:http').Server,
  import('node:http').IncomingMessage,
  import('node:http').ServerResponse,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

export interface RegisteredRoute {
  method: string;
  url: string;
  /** Left out of the OpenAPI document on purpose (`schema.hide`). */
  hidden: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The error code this request was answered with, for the request log. */
    errorCode: ErrorCode | undefined;
  }
  interface FastifyInstance {
    /** Every route registered (HEAD aside), so tests can hold the OpenAPI document and the audit table to them. */
    readonly registeredRoutes: readonly RegisteredRoute[];
    /** This node's delivery worker (tests drive it with runOnce and a clock of their own). */
    readonly dispatcher: DeliveryDispatcher;
    /** Runs erasures and previews in the background (src/services/erasures.ts's ErasureRunner; tests drive it with runOnce). */
    readonly erasureRunner: { runOnce(): Promise<void> };
    /** This node's group commit (tests wait for what is queued with drain). */
    readonly writer: GroupCommitWriter;
    /** Rung by the writer's commits; the feed's waiting reads listen to it. */
    readonly feedBell: FeedBell;
    /**
     * The server of INTAKE_METRICS_PORT, not listening yet (serve.ts listens on it beside the
     * app; the app's close closes it); undefined when /metrics is served with everything else.
     */
    readonly metricsServer: AppInstance | undefined;
  }
}
