import type { Command } from 'commander';
import { AppError } from '../errors.js';
import { SOURCE_TYPES } from '../domain/source-types.js';
import type { Redaction } from '../domain/redaction.js';
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
    .description(
      "change an integration's source (a new type or secret replaces the secrets at once), what it redacts, or how long it keeps webhooks",
    )
    .requiredOption('--integration <id>', 'integration id (int_…)')
    .option('--source <type>', SOURCE_TYPES.join(', '))
    .option('--secret <secret>', "the provider's signing secret (generated when absent, where the provider takes ours)")
    .option('--source-config <json>', 'hmac, basic and query_token settings, as the API takes them', parseJsonObject)
    .option('--redaction <json>', 'values replaced before storing from now on, as the API takes them; null: none', parseRedactionOrNull)
    .option('--retention-days <days>', "days its webhooks are kept, at most the company's; company: as the company's", parseRetention)
    .option('--json', 'print one JSON object')
    .action(
      (options: { integration: string; redaction?: Record<string, unknown> | 'none'; retentionDays?: number | 'company'; json?: boolean } & SourceOptions) =>
        withStore(async (context) => {
          const redaction = options.redaction === 'none' ? null : options.redaction;
          const retentionDays = options.retentionDays === 'company' ? null : options.retentionDays;
          const source = sourceInput(options);
          if (source === undefined && redaction === undefined && retentionDays === undefined) {
            throw new AppError('invalid_request', 'Say what to change: --source, --redaction or --retention-days.');
          }
          // Two writes could half succeed (a secret refused after the redaction was saved): one at a time.
          if (source !== undefined && (redaction !== undefined || retentionDays !== undefined)) {
            throw new AppError('invalid_request', 'Change the source on its own: --source in one edit, --redaction and --retention-days in another.');
          }
          const companyId = await companyOfIntegration(context, options.integration);
          // The redaction and the retention are one update, checked whole before anything changes.
          const settings =
            redaction === undefined && retentionDays === undefined
              ? undefined
              : await context.management.updateIntegration(companyId, options.integration, {
                  // As the API's PATCH: updateIntegration checks it (a 400 naming redaction).
                  ...(redaction !== undefined && { redaction: redaction as Redaction | null }),
                  ...(retentionDays !== undefined && { retentionDays }),
                });
          const changed = source === undefined ? undefined : await context.management.setSource(companyId, options.integration, source);
          const integration = changed?.integration ?? settings!;
          print(
            {
              id: integration.id,
              source_type: integration.source.type,
              ...(changed?.sourceSecretId !== undefined && { source_secret_id: changed.sourceSecretId }),
              ...(changed?.sourceSecret !== undefined && { source_secret: changed.sourceSecret }),
              ...(changed?.awaitingSecret && { awaiting_secret: true }),
              ...(redaction !== undefined && { redaction: integration.redaction }),
              ...(retentionDays !== undefined && { retention_days: integration.retentionDays }),
            },
            options,
            changed?.awaitingSecret
              ? awaitingNote(changed.integration)
              : changed?.sourceSecret === undefined
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

/** A redaction, or `none` (`null` said as JSON): commander turns a parser's null into '', so the word stands for it until the action. */
function parseRedactionOrNull(text: string): Record<string, unknown> | 'none' {
  return text.trim() === 'null' ? 'none' : parseRedaction(text);
}

/** Days, or `company`: the company's retention (null), kept as the word for the same reason. */
function parseRetention(text: string): number | 'company' {
  return text === 'company' ? 'company' : parseWhole(text);
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
