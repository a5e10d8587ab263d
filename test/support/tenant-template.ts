import { copyFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { inject } from 'vitest';
import { openStore } from '../../src/store/open-store.js';
import type { TenantTemplate } from './crash.js';
import { operator } from './operator.js';
import { makeTempDir } from './processes.js';

/**
 * What support/crash.ts's makeSqliteTemplate makes with two CLI runs (a Node start each),
 * made in the test's process instead: a closed SQLite file holding one company and one
 * integration, started from the run's migrated template, so the nodes started on its
 * copies have no migration to apply either. Its folder goes with cleanupAll().
 */
export async function sqliteTenantTemplate(): Promise<TenantTemplate> {
  const dbPath = join(makeTempDir('intake-crash-template-'), 'template.db');
  copyFileSync(inject('sqliteTemplate'), dbPath);
  const store = openStore(`sqlite:${dbPath}`, { poolSize: 1 });
  let template: TenantTemplate;
  try {
    const { management } = operator(store);
    const company = await management.createCompany('Crash test');
    const created = await management.createIntegration(company.id, { name: 'crash' });
    template = { dbPath, tenant: { integrationKey: created.integration.integrationKey, apiKey: created.apiKey } };
  } finally {
    await store.close();
  }
  // Some copies take the file alone (test/disk-full.test.ts): everything must be in it.
  if (existsSync(`${dbPath}-wal`)) throw new Error(`${dbPath} was closed with a write-ahead log beside it`);
  return template;
}
