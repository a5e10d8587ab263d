import { INTEGRATION_SCOPES, issueApiKey } from '../../src/domain/api-key.js';
import { newId, newIntegrationKey } from '../../src/domain/ids.js';
import type { Store } from '../../src/store/store.js';

/** A company, an integration and its key, made directly in the store. */
export async function seedKey(store: Store) {
  const now = Date.now();
  const companyId = newId('cmp');
  await store.createCompany({ id: companyId, name: 'Acme', retentionDays: 30, createdAt: now });
  const integrationId = newId('int');
  const integrationKey = newIntegrationKey();
  const key = issueApiKey('development');
  const keyId = newId('key');
  await store.createIntegration(
    companyId,
    {
      id: integrationId,
      companyId,
      integrationKey,
      name: 'Billing',
      description: '',
      enabled: true,
      bodyLimitBytes: 1024,
      rateLimitPerMinute: null,
      createdAt: now,
      updatedAt: now,
      source: { type: 'api_key', config: {} },
      redaction: null,
      retentionDays: null,
    },
    { id: keyId, integrationId, scopes: [...INTEGRATION_SCOPES], prefix: key.prefix, hash: key.hash, createdAt: now, expiresAt: null },
  );
  return { companyId, integrationId, integrationKey, keyId, keyHash: key.hash };
}

/** Polls `check` until it returns true or `limitMs` passes; returns whether it did. */
export async function eventually(check: () => Promise<boolean>, limitMs: number): Promise<boolean> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
