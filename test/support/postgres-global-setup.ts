import type { TestProject } from 'vitest/node';
import { TEST_POSTGRES_URL, withClient, withDatabase } from './postgres-server.js';

/**
 * The PostgreSQL project's database: created for this run, dropped after it. Each store in
 * a test gets a schema of its own inside it (see databases.ts), so tests run in parallel
 * without seeing each other's rows.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const name = `intake_test_${Date.now()}_${process.pid}`;
  await withClient(TEST_POSTGRES_URL, (client) => client.query(`create database ${name}`));
  project.provide('postgresUrl', withDatabase(TEST_POSTGRES_URL, name));
  return async () => {
    await withClient(TEST_POSTGRES_URL, (client) => client.query(`drop database if exists ${name} with (force)`));
  };
}
