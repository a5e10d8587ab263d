import type { Command } from 'commander';
import { AppError } from '../errors.js';
import { SOURCE_TYPES } from '../domain/source-types.js';
import type { SourceInput } from '../sources/settings.js';
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
    .option('--source <type>', `how senders prove themselves besides the API key: ${SOURCE_TYPES.join(', ')}`)
    .option('--secret <secret>', "the provider's signing secret (generated when absent, where the provider takes ours)")
    .option('--source-config <json>', 'hmac, basic and query_token settings, as the API takes them', parseJsonObject)
    .option('--redaction <json>', 'values replaced before storing, as the API takes them: \'{"paths":["data.customer.email"],"headers":[]}\'', parseRedaction)
    .option('--retention-days <days>', "days its webhooks are kept, at most the company's retention (default: the company's)", parseWhole)
    .option('--json', 'print one JSON object')
    .action(
      (options: {
        company: string;
        name: string;
        description?: string;
        bodyLimit?: number;
        rateLimit?: number;
        redaction?: Record<string, unknown>;
        retentionDays?: number;
        json?: boolean;
      } & SourceOptions) =>
        withStore(async ({ management }) => {
          const created = await management.createIntegration(options.company, {
            name: options.name,
            description: options.description,
            bodyLimitBytes: options.bodyLimit,
            rateLimitPerMinute: options.rateLimit,
            source: sourceInput(options),
            redaction: options.redaction,
            retentionDays: options.retentionDays,
          });
          print(
            {
              id: created.integration.id,
              integration_key: created.integration.integrationKey,
              api_key: created.apiKey,
              webhook_url: created.webhookUrl,
              // Only when asked for: without --source the answer is the contract's four fields.
              ...(options.source !== undefined && { source_type: created.integration.source.type }),
              ...(created.sourceSecret !== undefined && { source_secret: created.sourceSecret }),
              ...(created.awaitingSecret && { awaiting_secret: true }),
              ...(created.integration.redaction !== null && {
                redaction_paths: created.integration.redaction.paths,
                redaction_headers: created.integration.redaction.headers,
              }),
              ...(created.integration.retentionDays !== null && { retention_days: created.integration.retentionDays }),
            },
            options,
            [created.sourceSecret === undefined ? SHOWN_ONCE : SECRETS_SHOWN_ONCE, created.awaitingSecret && awaitingNote(created.integration)]
              .filter(Boolean)
              .join('\n'),
          );
        }),
    );

  integration
    .command('edit')
    .description("change an integration's source (a new type or secret replaces the secrets at once)")
    .requiredOption('--integration <id>', 'integration id (int_…)')
    .requiredOption('--source <type>', SOURCE_TYPES.join(', '))
    .option('--secret <secret>', "the provider's signing secret (generated when absent, where the provider takes ours)")
    .option('--source-config <json>', 'hmac, basic and query_token settings, as the API takes them', parseJsonObject)
    .option('--json', 'print one JSON object')
    .action((options: { integration: string; json?: boolean } & SourceOptions) =>
      withStore(async (context) => {
        const companyId = await companyOfIntegration(context, options.integration);
        const changed = await context.management.setSource(companyId, options.integration, sourceInput(options)!);
        print(
          {
            id: changed.integration.id,
            source_type: changed.integration.source.type,
            ...(changed.sourceSecretId !== undefined && { source_secret_id: changed.sourceSecretId }),
            ...(changed.sourceSecret !== undefined && { source_secret: changed.sourceSecret }),
            ...(changed.awaitingSecret && { awaiting_secret: true }),
          },
          options,
          changed.awaitingSecret
            ? awaitingNote(changed.integration)
            : changed.sourceSecret === undefined
              ? undefined
              : 'The signing secret is shown only this once: give it to the sender now.',
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

interface SourceOptions {
  source?: string;
  secret?: string;
  sourceConfig?: SourceInput['config'];
}

const SECRETS_SHOWN_ONCE = 'The API key and the signing secret are shown only this once: store them now.';

/** What to do next for a source that waits for the secret its provider will show (Stripe shows it once the endpoint exists). */
function awaitingNote(integration: { id: string; source: { type: string } }): string {
  const type = integration.source.type;
  return (
    `Give ${type} the webhook address, then paste the signing secret it shows: ` +
    `intake integration edit --integration ${integration.id} --source ${type} --secret <secret>. Until then its signed webhooks get 401.`
  );
}

function sourceInput(options: SourceOptions): SourceInput | undefined {
  if (options.source === undefined) {
    if (options.secret !== undefined || options.sourceConfig !== undefined) {
      throw new AppError('invalid_request', '--secret and --source-config need --source.');
    }
    return undefined;
  }
  return { type: options.source, config: options.sourceConfig, secret: options.secret };
}

function parseJsonObject(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // Said below.
  }
  throw new AppError('invalid_request', '--source-config must be a JSON object, e.g. \'{"header":"X-Signature"}\'.');
}

function parseRedaction(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // Said below.
  }
  throw new AppError('invalid_request', '--redaction must be a JSON object, e.g. \'{"paths":["data.customer.email"]}\'.');
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
