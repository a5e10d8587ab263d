import type { AppInstance } from '../app.js';
import { authRoutes } from './auth.js';
import { authenticateApi, type ApiDeps } from './context.js';
import { integrationRoutes } from './integrations.js';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Every route under /api/v1, behind one authentication hook. */
export async function apiV1Routes(app: AppInstance, deps: ApiDeps): Promise<void> {
  app.decorateRequest('principal', null);
  app.addHook('onRequest', authenticateApi(deps));
  // A change made here (a key revoked, an integration disabled) holds on this node before
  // the answer leaves; other nodes hear of it through the store within a second.
  app.addHook('onSend', async (request) => {
    if (!SAFE_METHODS.has(request.method)) deps.keyCache.invalidate();
  });

  await authRoutes(app, deps);
  await integrationRoutes(app, deps);
  // --- keys and management keys ---
  // --- webhooks, request log, usage ---
  // --- members, company settings, audit log ---
}
