import type { Command } from 'commander';
import { AppError } from '../errors.js';
import { SHOWN_ONCE, iso, print, withStore } from './context.js';
import { companyOfIntegration, parseWhole } from './integration.js';
import { MANAGEMENT_SCOPES } from '../domain/api-key.js';
import { isId } from '../domain/ids.js';

export function registerKeyCommands(program: Command): void {
  const key = program.command('key').description('API keys');
  key
    .command('create')
    .description("create a company management key")
    .requiredOption('--company <id>', 'company id (cmp_…)')
    .option('--scope <scope...>', `one or more of ${MANAGEMENT_SCOPES.join(', ')} (repeat or separate with commas)`, ['integrations:manage'])
    .option('--json', 'print one JSON object')
    .action((options: { company: string; scope: string[]; json?: boolean }) =>
      withStore(async ({ management }) => {
        const scopes = options.scope.flatMap((s) => s.split(',')).map((s) => s.trim()).filter(Boolean);
        const created = await management.createManagementKey(options.company, scopes);
        print({ id: created.id, api_key: created.apiKey }, options, SHOWN_ONCE);
      }),
    );
  key
    .command('rotate')
    .description("issue a new key for an integration; the old ones expire after the grace period")
    .requiredOption('--integration <id>', 'integration id (int_…)')
    .option('--grace <seconds>', 'how long the old keys keep working (0 to 604800)', parseWhole, 86_400)
    .option('--json', 'print one JSON object')
    .action((options: { integration: string; grace: number; json?: boolean }) =>
      withStore(async (context) => {
        const companyId = await companyOfIntegration(context, options.integration);
        const rotated = await context.management.rotateIntegrationKey(companyId, options.integration, options.grace);
        print(
          { id: rotated.id, api_key: rotated.apiKey, previous_key_expires_at: iso(rotated.previousKeyExpiresAt) },
          options,
          SHOWN_ONCE,
        );
      }),
    );
  key
    .command('revoke')
    .description('revoke a key at once, on every node')
    .requiredOption('--key <id>', 'key id (key_…)')
    .option('--json', 'print one JSON object')
    .action((options: { key: string; json?: boolean }) =>
      withStore(async ({ store, management }) => {
        // Not echoed unless it is an id: someone may paste the API key itself here.
        if (!isId('key', options.key)) throw new AppError('invalid_request', '--key takes a key id (key_…), not the key itself.');
        const companyId = await store.companyOfKey(options.key);
        if (!companyId) throw new AppError('not_found', `No key with id ${options.key}.`);
        const revoked = await management.revokeKey(companyId, options.key);
        print({ id: revoked.id, revoked_at: iso(revoked.revokedAt) }, options);
      }),
    );
}
