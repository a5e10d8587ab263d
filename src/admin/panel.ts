import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyReply } from 'fastify';
import type { AppInstance } from '../app-instance.js';
import { AppError } from '../errors.js';

/**
 * Where `npm run build` puts the panel (web/ built by Vite). The same path from src/admin
 * (tests) and dist/admin (the server): both sit two levels under the package root.
 */
export const PANEL_DIR = fileURLToPath(new URL('../../dist/web/', import.meta.url));

/**
 * The panel's security headers. No inline script or style anywhere (Vite's module preload
 * polyfill is turned off for this), so `'self'` is the whole policy; the API is same-origin.
 */
const PANEL_HEADERS = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
};

const NOT_BUILT = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>intake</title></head>
<body><main><h1>intake</h1>
<p>The admin panel has not been built. Run <code>npm run build</code> (npm install does it) and restart.</p></main></body></html>
`;

/**
 * The admin panel at /admin: built files from dist/web (hashed, cached for a year), and
 * index.html for every other path below /admin, so the app's own routes survive a reload.
 * `/` leads there. Pages for people, not API: left out of the OpenAPI document.
 */
export async function panelRoutes(app: AppInstance, options: { root?: string } = {}): Promise<void> {
  const root = options.root ?? PANEL_DIR;
  const indexFile = join(root, 'index.html');
  // Read once: the bundle is built ahead of time and never changes while the server runs.
  const indexHtml = existsSync(indexFile) ? readFileSync(indexFile, 'utf8') : undefined;

  app.get('/', { schema: { hide: true } }, (_request, reply) => reply.redirect('/admin/'));

  if (indexHtml !== undefined) {
    await app.register(fastifyStatic, {
      root,
      prefix: '/admin/',
      // One route per built file; unknown paths fall through to the app's page below.
      wildcard: false,
      index: false,
      decorateReply: false,
      globIgnore: ['index.html'],
      // File names carry a hash of their content, so a file never changes under its name.
      maxAge: '365d',
      immutable: true,
      setHeaders: (res) => {
        for (const [name, value] of Object.entries(PANEL_HEADERS)) res.setHeader(name, value);
      },
    });
  }

  const page = (reply: FastifyReply) =>
    reply
      .code(indexHtml === undefined ? 503 : 200)
      .headers(PANEL_HEADERS)
      .header('cache-control', 'no-cache')
      .type('text/html; charset=utf-8')
      .send(indexHtml ?? NOT_BUILT);
  // A missing asset is a 404, not the app's page served as script.
  app.get('/admin/assets/*', { schema: { hide: true } }, (request) => {
    throw new AppError('not_found', `No file ${request.url.split('?', 1)[0]}.`);
  });
  app.get('/admin', { schema: { hide: true } }, (_request, reply) => page(reply));
  app.get('/admin/*', { schema: { hide: true } }, (_request, reply) => page(reply));
}
