import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { panelRoutes } from '../src/admin/panel.js';
import type { AppInstance } from '../src/app.js';
import { buildTestApp, type TestApp } from './helpers.js';

/** The built panel (dist/web, made by `npm run build`, which `npm test` runs first) as the server serves it. */
let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(() => t.close());

const get = (url: string) => t.app.inject({ method: 'GET', url });

describe('the admin panel at /admin', () => {
  test('/ leads to the panel', async () => {
    const response = await get('/');
    expect(response.statusCode).toBe(302);
    expect(response.headers.location).toBe('/admin/');
  });

  test('every path below /admin is the app, with a strict Content-Security-Policy and no inline script', async () => {
    for (const path of ['/admin', '/admin/', '/admin/integrations/int_123', '/admin/setup?token=abc']) {
      const response = await get(path);
      expect(response.statusCode, path).toBe(200);
      expect(response.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(response.headers['content-security-policy']).toContain("script-src 'self'");
      expect(response.headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(response.headers['content-security-policy']).not.toContain('unsafe-inline');
      expect(response.headers['x-content-type-options']).toBe('nosniff');
      expect(response.headers['cache-control']).toBe('no-cache');
      expect(response.body).toContain('<div id="root">');
    }
    const html = (await get('/admin')).body;
    const scripts = [...html.matchAll(/<script\b[^>]*>([\s\S]*?)<\/script>/g)];
    expect(scripts.length).toBeGreaterThan(0);
    for (const [tag, body] of scripts) {
      expect(tag).toMatch(/src="\/admin\/assets\/[^"]+\.js"/);
      expect(body?.trim()).toBe('');
    }
    expect(html).not.toMatch(/<style\b/);
  });

  test('built assets are served with long caching; a missing one is a JSON 404, not the page', async () => {
    const html = (await get('/admin')).body;
    const script = html.match(/src="(\/admin\/assets\/[^"]+\.js)"/)![1]!;
    const asset = await get(script);
    expect(asset.statusCode).toBe(200);
    expect(asset.headers['content-type']).toMatch(/javascript/);
    expect(asset.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    const missing = await get('/admin/assets/missing-123.js');
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ error: 'Not found' });
  });
});

test('without a built panel, /admin says how to build it', async () => {
  const app = Fastify() as unknown as AppInstance;
  await app.register(panelRoutes, { root: mkdtempSync(join(tmpdir(), 'intake-no-panel-')) });
  const response = await app.inject({ method: 'GET', url: '/admin/integrations' });
  expect(response.statusCode).toBe(503);
  expect(response.body).toContain('npm run build');
  await app.close();
});

test('the page is read from the panel folder it is given', async () => {
  const root = mkdtempSync(join(tmpdir(), 'intake-panel-'));
  writeFileSync(join(root, 'index.html'), '<!doctype html><title>marker</title>');
  const app = Fastify() as unknown as AppInstance;
  await app.register(panelRoutes, { root });
  expect((await app.inject({ method: 'GET', url: '/admin/x' })).body).toContain('marker');
  await app.close();
});
