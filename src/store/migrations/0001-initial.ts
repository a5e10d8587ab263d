import type { Kysely } from 'kysely';
import { AUTH_CHANGES_CHANNEL, type DialectTypes } from '../dialect-types.js';

/** Companies, users, integrations, keys, webhooks, the request log and what auth needs. */
export async function up(db: Kysely<unknown>, types: DialectTypes): Promise<void> {
  await db.schema
    .createTable('companies')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('retention_days', 'integer', (c) => c.notNull().defaultTo(30))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('users')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('email', 'text', (c) => c.notNull().unique())
    .addColumn('password_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('memberships')
    .addColumn('company_id', 'text', (c) => c.notNull().references('companies.id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('memberships_pk', ['company_id', 'user_id'])
    .execute();

  await db.schema
    .createTable('integrations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('company_id', 'text', (c) => c.notNull().references('companies.id').onDelete('cascade'))
    .addColumn('integration_key', 'text', (c) => c.notNull().unique())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('enabled', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('body_limit_bytes', 'integer', (c) => c.notNull())
    .addColumn('rate_limit_per_minute', 'integer')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addColumn('deleted_at', 'bigint')
    .execute();
  await db.schema.createIndex('integrations_company').on('integrations').columns(['company_id']).execute();

  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('company_id', 'text', (c) => c.notNull().references('companies.id').onDelete('cascade'))
    .addColumn('integration_id', 'text', (c) => c.references('integrations.id').onDelete('cascade'))
    .addColumn('scopes', 'text', (c) => c.notNull())
    .addColumn('prefix', 'text', (c) => c.notNull())
    .addColumn('key_hash', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint')
    .addColumn('revoked_at', 'bigint')
    .addColumn('last_used_at', 'bigint')
    .addColumn('last_used_ip', 'text')
    .execute();
  await db.schema.createIndex('api_keys_company').on('api_keys').columns(['company_id']).execute();
  await db.schema.createIndex('api_keys_integration').on('api_keys').columns(['integration_id']).execute();

  await types
    .addTimeSeriesKey(db.schema.createTable('webhooks'), 'webhooks', 'uuid', 'received_at')
    .addColumn('company_id', 'text', (c) => c.notNull())
    .addColumn('integration_id', 'text', (c) => c.notNull())
    .addColumn('event', 'text', (c) => c.notNull())
    .addColumn('received_at', 'bigint', (c) => c.notNull())
    .addColumn('raw_body', types.binary, (c) => c.notNull())
    .addColumn('headers', 'text', (c) => c.notNull())
    .addColumn('source_ip', 'text', (c) => c.notNull())
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('idempotency_key', 'text')
    .execute();
  await types.afterTimeSeriesTable(db, 'webhooks');
  // The contract's list queries: per integration newest first, optionally by event.
  await db.schema
    .createIndex('webhooks_integration_time')
    .on('webhooks')
    .columns(['integration_id', 'received_at desc', 'uuid desc'])
    .execute();
  await db.schema
    .createIndex('webhooks_integration_event_time')
    .on('webhooks')
    .columns(['integration_id', 'event', 'received_at desc', 'uuid desc'])
    .execute();
  await db.schema
    .createIndex('webhooks_company_time')
    .on('webhooks')
    .columns(['company_id', 'received_at desc', 'uuid desc'])
    .execute();

  await db.schema
    .createTable('idempotency_keys')
    .addColumn('integration_id', 'text', (c) => c.notNull())
    .addColumn('idempotency_key', 'text', (c) => c.notNull())
    .addColumn('company_id', 'text', (c) => c.notNull())
    .addColumn('webhook_uuid', 'text', (c) => c.notNull())
    .addColumn('body_sha256', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('idempotency_keys_pk', ['integration_id', 'idempotency_key'])
    .execute();

  await types
    .addTimeSeriesKey(db.schema.createTable('request_log'), 'request_log', 'id', 'received_at')
    .addColumn('company_id', 'text', (c) => c.notNull())
    .addColumn('integration_id', 'text', (c) => c.notNull())
    .addColumn('received_at', 'bigint', (c) => c.notNull())
    .addColumn('method', 'text', (c) => c.notNull())
    .addColumn('status', 'integer', (c) => c.notNull())
    .addColumn('error_code', 'text')
    .addColumn('key_id', 'text')
    .addColumn('ip', 'text', (c) => c.notNull())
    .addColumn('user_agent', 'text')
    .addColumn('size_bytes', 'integer', (c) => c.notNull())
    .addColumn('duration_ms', 'real', (c) => c.notNull())
    .addColumn('webhook_uuid', 'text')
    .execute();
  await types.afterTimeSeriesTable(db, 'request_log');
  await db.schema
    .createIndex('request_log_integration_time')
    .on('request_log')
    .columns(['integration_id', 'received_at desc'])
    .execute();
  await db.schema
    .createIndex('request_log_company_time')
    .on('request_log')
    .columns(['company_id', 'received_at desc'])
    .execute();

  await types
    .addSerialPrimaryKey(db.schema.createTable('auth_changes'), 'id')
    .addColumn('changed_at', 'bigint', (c) => c.notNull())
    .execute();
  await types.notifyOnInsert(db, 'auth_changes', AUTH_CHANGES_CHANNEL);

  await db.schema
    .createTable('setup_tokens')
    .addColumn('token_hash', 'text', (c) => c.primaryKey())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('used_at', 'bigint')
    .execute();
}
