import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { ROOT } from './support/processes.js';

/**
 * Every relative link and anchor in README.md, CONTRIBUTING.md and docs/ leads somewhere:
 * docs/README.md is an index into sections by name, and a renamed heading would otherwise
 * break it without a sound. scripts/check-doc-links.mjs lists each broken one.
 */
test('every relative link and anchor in the docs resolves', () => {
  const run = spawnSync(process.execPath, [join(ROOT, 'scripts', 'check-doc-links.mjs')], { cwd: ROOT, encoding: 'utf8' });
  expect(run.stderr + run.stdout).not.toMatch(/broken/i);
  expect(run.status, run.stderr + run.stdout).toBe(0);
});
