import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { openStore } from '../../src/store/open-store.js';

/**
 * One migrated SQLite database for the run, closed: every migrated SQLite database a test
 * asks for (support/databases.ts) is a copy of it, made in a millisecond, instead of running
 * every migration again (50–200 ms a database, several hundred databases a run).
 */
export default async function setup(project: TestProject): Promise<() => void> {
  const dir = mkdtempSync(join(tmpdir(), 'intake-template-'));
  const path = join(dir, 'intake.db');
  const store = openStore(`sqlite:${path}`, { poolSize: 1 });
  await store.migrate();
  // Closed, the last connection checkpoints the WAL into the file: the file is the whole database.
  await store.close();
  project.provide('sqliteTemplate', path);
  return () => rmSync(dir, { recursive: true, force: true });
}
