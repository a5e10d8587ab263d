import type { Command } from 'commander';
import { AppError } from '../errors.js';
import { SHOWN_ONCE, print, withStore, type CommandContext } from './context.js';

export function registerIntegrationCommands(program: Command): void {
  const integration = program.command('integration').description('integrations (webhook addresses)');
  integration
    .command('create')
    .description('create an integration and its first API key')
    .requiredOption('--company <id>', 'company id (cmp_…)')
    .requiredOption('--name <name>', 'integration name')
    .option('--description <text>', 'what sends to it')
    .option('--body-limit <bytes>', 'largest body accepted, in bytes', parseWhole)
    .option('--rate-limit <per-minute>', 'webhooks accepted per minute', parseWhole)
    .option('--json', 'print one JSON object')
    .action(
      (options: {
        company: string;
        name: string;
        description?: string;
        bodyLimit?: number;
        rateLimit?: number;
        json?: boolean;
      }) =>
        withStore(async ({ management }) => {
          const created = await management.createIntegration(options.company, {
            name: options.name,
            description: options.description,
            bodyLimitBytes: options.bodyLimit,
            rateLimitPerMinute: options.rateLimit,
          });
          print(
            {
              id: created.integration.id,
              integration_key: created.integration.integrationKey,
              api_key: created.apiKey,
              webhook_url: created.webhookUrl,
            },
            options,
            SHOWN_ONCE,
          );
        }),
    );

  for (const enabled of [false, true]) {
    integration
      .command(enabled ? 'enable' : 'disable')
      .description(enabled ? 'accept webhooks again' : 'refuse webhooks (403) until enabled again')
      .requiredOption('--integration <id>', 'integration id (int_…)')
      .option('--json', 'print one JSON object')
      .action((options: { integration: string; json?: boolean }) =>
        withStore(async (context) => {
          const companyId = await companyOfIntegration(context, options.integration);
          print(await context.management.setIntegrationEnabled(companyId, options.integration, enabled), options);
        }),
      );
  }
}

export async function companyOfIntegration({ store }: CommandContext, integrationId: string): Promise<string> {
  const companyId = await store.companyOfIntegration(integrationId);
  if (!companyId) throw new AppError('not_found', `No integration with id ${integrationId}.`);
  return companyId;
}

export function parseWhole(text: string): number {
  if (!/^\d+$/.test(text)) throw new AppError('invalid_request', `"${text}" is not a whole number.`);
  return Number(text);
}
