import { loadConfig } from '../../src/config.js';
import { operatorServices } from '../../src/cli/context.js';
import { parseSecretsKeys, SecretBox } from '../../src/domain/secret-box.js';
import type { DestinationManagement } from '../../src/services/destinations.js';
import type { Management } from '../../src/services/management.js';
import type { Store } from '../../src/store/store.js';
import { TEST_PASSWORD_HASH_COST, TEST_SECRETS_KEY } from './processes.js';

/**
 * What `intake company create`, `integration create`, `destination create` and `key create`
 * do (src/cli/context.ts builds the same services), run in the test's own process on the
 * database a server then starts on, or already runs on. For tests whose subject is not the
 * CLI: each CLI run is a Node start (0.5–1.5 s), and the CLI has tests of its own
 * (test/cli-*.test.ts, test/e2e.test.ts).
 */
export interface Operator {
  management: Management;
  destinations: DestinationManagement;
}

/** The services on `store`, configured as a CLI run with `env` (INTAKE_DESTINATION_ALLOW…) would be. */
export function operator(store: Store, env: Record<string, string> = {}): Operator {
  const config = loadConfig({ LOG_LEVEL: 'silent', INTAKE_PASSWORD_HASH_COST: TEST_PASSWORD_HASH_COST, ...env });
  const secrets = new SecretBox(parseSecretsKeys(TEST_SECRETS_KEY));
  return operatorServices(store, config, secrets, { type: 'cli', id: 'test', ip: null });
}
