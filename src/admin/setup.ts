import { createHash, randomBytes } from 'node:crypto';
import type { AppInstance } from '../app.js';
import type { Store } from '../store/store.js';

const SETUP_TOKEN_LIFETIME_MS = 24 * 60 * 60 * 1000;

/**
 * On a first run (nobody has an account yet) makes a one-time setup token and returns the
 * link to print; undefined once any user exists. Only the token's hash is stored.
 */
export async function setupLinkIfFirstRun(store: Store, baseUrl: string, now = Date.now()): Promise<string | undefined> {
  if ((await store.countUsers()) > 0) return undefined;
  const token = randomBytes(32).toString('base64url');
  await store.createSetupToken(createHash('sha256').update(token).digest('hex'), now, now + SETUP_TOKEN_LIFETIME_MS);
  return `${baseUrl}/admin/setup?token=${token}`;
}

const PLACEHOLDER = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>intake</title></head>
<body><main><h1>intake</h1>
<p>The admin panel is not built yet. Until it lands, create companies, users and integrations with the
<code>intake</code> command line (see the README).</p></main></body></html>
`;

/** `/` and `/admin` until the panel lands: a page that says what to use instead. */
export async function setupRoutes(app: AppInstance): Promise<void> {
  // Pages for people, not API: left out of the OpenAPI document.
  app.get('/', { schema: { hide: true } }, (_request, reply) => reply.redirect('/admin'));
  for (const path of ['/admin', '/admin/setup']) {
    app.get(path, { schema: { hide: true } }, (_request, reply) =>
      reply
        .type('text/html; charset=utf-8')
        .header('content-security-policy', "default-src 'none'; frame-ancestors 'none'")
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer')
        .send(PLACEHOLDER),
    );
  }
}
