import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { checkRedaction, REDACTED, Redactor } from '../domain/redaction.js';
import { AppError } from '../errors.js';
import type { StoredWebhook } from '../store/store.js';
import { principalOf, type ApiDeps } from './context.js';
import { WebhookUuid } from './destination-schemas.js';
import { RedactionFields } from './integrations.js';
import { ERROR_RESPONSES, Id, Timestamp, iso } from './schemas.js';

const IntegrationParams = Type.Object({ integration_id: Id('int') });

/**
 * The largest body a preview redacts. The scan runs on the event loop (a 16 MiB body took
 * 339 ms: docs/personal-data.md), and a preview is asked for as often as a person likes,
 * unlike intake's, which its body limit and rate bound.
 */
const MAX_PREVIEW_BYTES = 1024 * 1024;

/** /api/v1/integrations/:id/redaction/preview: a redaction, unsaved, applied to one stored webhook of the integration. */
export async function redactionPreviewRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const limits = app.readLimits;

  app.post(
    '/integrations/:integration_id/redaction/preview',
    {
      config: { permission: 'logs:read' },
      schema: {
        tags: ['Integrations'],
        summary: 'Preview a redaction on a stored webhook',
        description:
          'Applies the redaction given (unsaved) to one stored webhook of the integration, the one named by webhook_uuid or else its ' +
          'newest, and answers its body and headers as that redaction would store them. Nothing is stored or changed. A stored ' +
          "webhook was already redacted by the integration's redaction when it was received: a value that redaction replaced shows " +
          `as "${REDACTED}" (or its hash) whatever the redaction given, and cannot be told again. It reads a payload, so it needs ` +
          'logs:read. One webhook, redacted as intake would redact it; a body over 1 MiB is a 413 (name a smaller one). ' +
          `404 when the integration has received no webhook (or all were purged). ${limits.describeHeavyReads()}`,
        params: IntegrationParams,
        body: Type.Object({
          redaction: RedactionFields,
          webhook_uuid: Type.Optional(WebhookUuid),
        }),
        response: {
          200: Type.Object({
            webhook_uuid: WebhookUuid,
            received_at: Timestamp,
            raw_body: Type.String({ description: 'The body (UTF-8) as the redaction given would store it.' }),
            headers: Type.Record(Type.String(), Type.String(), { description: 'The kept headers as the redaction given would store them.' }),
            replaced: Type.Object({
              body_values: Type.Integer({
                description: `Values of the body its paths name (an object or list named whole counts once; one stored as "${REDACTED}" already counts too).`,
              }),
              headers: Type.Array(Type.String(), { description: 'The kept headers it names.' }),
            }),
            changed: Type.Boolean({
              description: 'Whether raw_body or headers differ from the webhook as stored. false with values replaced: they are stored so already.',
            }),
          }),
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const integrationId = request.params.integration_id;
      const integration = await deps.store.getIntegration(companyId, integrationId);
      if (!integration) throw new AppError('not_found', `No integration with id ${integrationId}.`);
      const redaction = checkRedaction(request.body.redaction);
      if (typeof redaction === 'string') throw new AppError('invalid_request', redaction, { field: 'redaction' });
      const uuid = request.body.webhook_uuid;
      const redactor = new Redactor(redaction, redaction.mode === 'hash' ? deps.hashers.of(companyId) : undefined);
      // The scan inside the read's bound too: it runs on the event loop, so a company's
      // previews, one after the other, are held to the reads every company is.
      const previewed = await limits.read(companyId, async () => {
        const webhook = await storedWebhook(deps, companyId, integrationId, uuid);
        if (!webhook) return undefined;
        if (webhook.rawBody.length > MAX_PREVIEW_BYTES) return { webhook, tooLarge: true as const };
        return { webhook, body: redactor.redactedBody(webhook.rawBody, webhook.payloadFormat), headers: redactor.headersOf(webhook.headers) };
      });
      if (!previewed) {
        throw new AppError(
          'not_found',
          uuid === undefined
            ? `Integration ${integrationId} has received no webhook yet (or its webhooks were purged): send one to preview the redaction on it.`
            : `No webhook with uuid ${uuid} in integration ${integrationId}.`,
        );
      }
      const { webhook } = previewed;
      if ('tooLarge' in previewed) {
        throw new AppError(
          'payload_too_large',
          `This webhook's body is ${webhook.rawBody.length} bytes; a preview redacts bodies of up to ${MAX_PREVIEW_BYTES} bytes (1 MiB). Name a smaller one with webhook_uuid.`,
        );
      }
      const { body, headers } = previewed;
      const namedHeaders = Object.keys(webhook.headers).filter((name) => redaction.headers.includes(name.toLowerCase()));
      return {
        webhook_uuid: webhook.uuid,
        received_at: iso(webhook.receivedAt),
        raw_body: body.body.toString('utf8'),
        headers,
        replaced: { body_values: body.values, headers: namedHeaders },
        changed: !body.body.equals(webhook.rawBody) || namedHeaders.some((name) => headers[name] !== webhook.headers[name]),
      };
    },
  );
}

/** The integration's webhook named, or its newest. */
async function storedWebhook(deps: ApiDeps, companyId: string, integrationId: string, uuid: string | undefined): Promise<StoredWebhook | undefined> {
  if (uuid !== undefined) return deps.store.getWebhook(companyId, integrationId, uuid);
  const [newest] = await deps.store.listWebhooks(companyId, integrationId, { limit: 1 });
  return newest;
}
