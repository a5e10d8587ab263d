import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Suites that start servers and kill them share two cores; keep them from starving.
    maxWorkers: 2,
  },
});
