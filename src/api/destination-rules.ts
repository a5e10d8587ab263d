import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { previewRules, type PreviewWebhook } from '../destinations/delivery-rules.js';
import { validRules } from '../domain/rules/rules.js';
import { AppError } from '../errors.js';
import { principalOf, requirePermission, type ApiDeps } from './context.js';
import { DestinationSettings, WebhookUuid } from './destination-schemas.js';
import { PAYLOADS_NEED_LOGS_READ } from './destinations.js';
import { ERROR_RESPONSES, Id } from './schemas.js';

const DestinationParams = Type.Object({ destination_id: Id('dst') });

/** A pasted webhook's body, as text, at most: what a person pastes into the panel's editor. */
const MAX_PASTED_BYTES = 256 * 1024;
/** Of the request that would be sent, the body shown at most. */
const MAX_SHOWN_BODY_BYTES = 256 * 1024;
/**
 * Tries running at once per company on this node: each may hold a sandbox worker for its
 * CPU limit, and the workers are the deliveries' too. A company past it is answered 429.
 */
const MAX_TRIES_PER_COMPANY = 2;

/** /api/v1/destinations/:id/rules/try: what a destination's rules would do, without sending. */
export async function destinationRulesRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const running = new Map<string, number>();

  app.post(
    '/destinations/:destination_id/rules/try',
    {
      config: { permission: 'integrations:read' },
      schema: {
        tags: ['Destinations'],
        summary: "Try a destination's rules on a webhook",
        description:
          'Runs the filter, the deduplication key and the transformation on a stored webhook (webhook_uuid) or a pasted one ' +
          '(webhook: {body, headers}), with the saved rules or the rules given (unsaved), and shows what would be sent, or why ' +
          'nothing would. Sends nothing and takes no deduplication key. Needs logs:read as well (it reads payloads).',
        params: DestinationParams,
        body: Type.Object({
          webhook_uuid: Type.Optional(WebhookUuid),
          webhook: Type.Optional(
            Type.Object({
              body: Type.Unsafe<unknown>({ description: 'The JSON body, as a provider would send it.' }),
              headers: Type.Optional(Type.Record(Type.String(), Type.String(), { maxProperties: 100 })),
              event: Type.Optional(Type.String({ maxLength: 200 })),
            }),
          ),
          rules: Type.Optional(DestinationSettings.rules),
        }),
        response: {
          200: Type.Object({
            rules_version: Type.Union([Type.Integer(), Type.Null()], { description: 'The saved version tried; null when the request gave the rules.' }),
            would_send: Type.Boolean(),
            reason: Type.Union([Type.String(), Type.Null()], { description: 'Why nothing would be sent, in words.' }),
            filter: Type.Union([Type.Object({ passed: Type.Boolean() }), Type.Null()]),
            dedupe_key: Type.Union([Type.String(), Type.Null()]),
            transformation: Type.Union([
              Type.Object({
                outcome: Type.Union([Type.Literal('request'), Type.Literal('dropped'), Type.Literal('error')]),
                message: Type.Union([Type.String(), Type.Null()], { description: "The transformation's error, with its line where it has one." }),
              }),
              Type.Null(),
            ]),
            request: Type.Union([
              Type.Object({
                url: Type.String(),
                content_type: Type.String(),
                headers: Type.Record(Type.String(), Type.String(), { description: 'Set by the transformation, beside the signature and intake headers.' }),
                body: Type.String({ description: 'As UTF-8 text, cut at 256 KiB.' }),
                body_truncated: Type.Boolean(),
              }),
              Type.Null(),
            ]),
          }),
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request) => {
      requirePermission(request, 'logs:read', PAYLOADS_NEED_LOGS_READ);
      const { companyId } = principalOf(request);
      const destination = await deps.store.getDestination(companyId, request.params.destination_id);
      if (!destination) throw new AppError('not_found', `No destination with id ${request.params.destination_id}.`);
      const rules = request.body.rules === undefined ? destination.rules : validRules(request.body.rules);
      const webhook = await webhookToTry(deps, companyId, request.body);
      const count = running.get(companyId) ?? 0;
      if (count >= MAX_TRIES_PER_COMPANY) throw new AppError('rate_limited', 'Two tries are running for this company already: wait for them.', { retryAfterSeconds: 1 });
      running.set(companyId, count + 1);
      try {
        const preview = await previewRules(rules, destination.url, webhook, () => app.dispatcher.transformPool());
        const body = preview.request?.body;
        return {
          rules_version: request.body.rules === undefined ? destination.rulesVersion : null,
          would_send: preview.request !== null,
          reason: reasonOf(preview),
          filter: preview.filter,
          dedupe_key: preview.dedupeKey,
          transformation: preview.transformation,
          request:
            preview.request === null
              ? null
              : {
                  url: preview.request.url,
                  content_type: preview.request.contentType,
                  headers: preview.request.headers,
                  body: body!.subarray(0, MAX_SHOWN_BODY_BYTES).toString('utf8'),
                  body_truncated: body!.length > MAX_SHOWN_BODY_BYTES,
                },
        };
      } finally {
        const left = (running.get(companyId) ?? 1) - 1;
        if (left === 0) running.delete(companyId);
        else running.set(companyId, left);
      }
    },
  );
}

/** Why the preview would send nothing; null when it would send. */
function reasonOf(preview: Awaited<ReturnType<typeof previewRules>>): string | null {
  if (preview.filter?.passed === false) return "The destination's filter refuses this webhook: its delivery would be filtered.";
  if (preview.transformation?.outcome === 'dropped') return 'The transformation returned nothing: the delivery would be filtered.';
  if (preview.transformation?.outcome === 'error') return 'The transformation failed: the attempt would fail with transformation_error and be retried.';
  return null;
}

interface TryBody {
  webhook_uuid?: string;
  webhook?: { body: unknown; headers?: Record<string, string>; event?: string };
}

/** The stored webhook named, or the one pasted: exactly one of them. */
async function webhookToTry(deps: ApiDeps, companyId: string, body: TryBody): Promise<PreviewWebhook> {
  if ((body.webhook_uuid === undefined) === (body.webhook === undefined)) {
    throw new AppError('invalid_request', 'Give either webhook_uuid (a stored webhook) or webhook (one pasted in), not both.', { field: 'webhook_uuid' });
  }
  if (body.webhook_uuid !== undefined) {
    const stored = await deps.store.getCompanyWebhook(companyId, body.webhook_uuid);
    if (!stored) throw new AppError('not_found', `No webhook with uuid ${body.webhook_uuid}.`);
    const headers = Object.fromEntries(Object.entries(stored.headers).map(([name, value]) => [name.toLowerCase(), value]));
    return {
      rawBody: stored.rawBody,
      payloadFormat: stored.payloadFormat,
      headersJson: JSON.stringify(headers),
      contentType: headers['content-type'] ?? 'application/json',
      uuid: stored.uuid,
      event: stored.event,
      integrationId: stored.integrationId,
      receivedAt: stored.receivedAt,
    };
  }
  const pasted = body.webhook!;
  const rawBody = Buffer.from(JSON.stringify(pasted.body ?? null), 'utf8');
  if (rawBody.length > MAX_PASTED_BYTES) throw new AppError('invalid_request', `A pasted webhook's body is at most ${MAX_PASTED_BYTES / 1024} KiB.`, { field: 'webhook.body' });
  const headers = Object.fromEntries(Object.entries(pasted.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value]));
  return {
    rawBody,
    payloadFormat: 'json',
    headersJson: JSON.stringify(headers),
    contentType: headers['content-type'] ?? 'application/json',
    uuid: '00000000-0000-4000-8000-000000000000',
    event: pasted.event ?? 'example',
    integrationId: 'int_example',
    receivedAt: Date.now(),
  };
}
