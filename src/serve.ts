import { buildApp } from './app.js';
import { setupLinkIfFirstRun } from './admin/setup.js';
import { loadConfig } from './config.js';
import { createLogger } from './logger.js';
import { openSecretBox } from './secrets.js';
import { openStore } from './store/open-store.js';
import { openTracing } from './telemetry/tracing.js';

/**
 * config → store (migrated) → tracing (when an OTLP endpoint is set) → app → listen (and
 * /metrics on its own port when one is set). SIGTERM and SIGINT close the server: no new
 * connections, the write queue drains, connections still busy after the grace period are
 * closed, the spans still queued are exported, then the process exits.
 */
export async function serve(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  const store = openStore(config.databaseUrl, { poolSize: config.databasePoolSize, log: logger, sqliteThreads: true });
  const applied = await store.migrate();
  if (applied.length > 0) logger.info({ applied }, 'migrations applied');
  // Off without an OTLP endpoint: then not even the SDK is loaded.
  const tracing = await openTracing(config.tracing, logger);
  const app = await buildApp({ config, store, logger, secrets: openSecretBox(config), tracing });

  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    logger.info({ signal }, 'shutting down: draining the write queue');
    // close() only ends connections idle at that moment; a keep-alive connection whose
    // request finishes later would hold the process until its keep-alive timeout (72 s by
    // default), so idle connections are closed again as in-flight requests complete.
    const closeIdle = setInterval(() => app.server.closeIdleConnections(), 100);
    // A connection still busy after the grace period is cut: a client that keeps one open
    // (an aborted fetch can leave its socket mid-request, a slow upload) must not hold a
    // deploy until the request timeout. Its sender got no answer and sends again.
    const cutOff = setTimeout(() => {
      logger.warn({ graceMs: config.shutdownGraceMs }, 'shutting down: closing connections still busy');
      app.server.closeAllConnections();
    }, config.shutdownGraceMs);
    await app.close();
    clearTimeout(cutOff);
    clearInterval(closeIdle);
    // After the app: the last requests' and attempts' spans have ended by then.
    await tracing?.shutdown();
    await store.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));

  await app.listen({ port: config.port, host: config.host });
  if (app.metricsServer) {
    await app.metricsServer.listen({ port: config.metricsPort, host: config.host });
    logger.info({ address: app.metricsServer.addresses() }, '/metrics served on its own port');
  }
  const setupLink = await setupLinkIfFirstRun(store, config.baseUrl);
  // One plain line, meant for the person at the terminal (logs stay JSON).
  if (setupLink) process.stdout.write(`First run: create the first account at ${setupLink}\n`);
}
