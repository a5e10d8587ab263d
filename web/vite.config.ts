import react from '@vitejs/plugin-react';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/**
 * The admin panel, built ahead of time into dist/web (next to the compiled server, which
 * serves it at /admin). The server never compiles anything at request time.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/admin/',
  plugins: [react()],
  build: {
    outDir: fileURLToPath(new URL('../dist/web', import.meta.url)),
    emptyOutDir: true,
    // The polyfill is an inline script, which the panel's Content-Security-Policy forbids.
    modulePreload: { polyfill: false },
    // Kept small and cacheable: assets get content hashes, index.html is never cached.
    assetsInlineLimit: 0,
  },
  server: {
    // `npx vite web` for panel development, against `npm start` on :8080.
    proxy: { '/api': 'http://127.0.0.1:8080' },
  },
});
