import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';

/** The request body of POST /api/webhooks/…: read raw by the handler, so described here only. */
const WebhookBody = Type.Object(
  {
    event: Type.String({ minLength: 1, maxLength: 200, description: 'What happened, 1–200 characters.' }),
    data: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'Any JSON object; missing means {}.' })),
  },
  { additionalProperties: true, description: 'Other top-level fields are kept in the raw body.' },
);

/**
 * The OpenAPI 3.1 document, generated from the route schemas as routes register (so this
 * must be registered before them), served at /api/openapi.json, with a reference page at
 * /api/docs.
 */
export async function registerOpenApi(app: AppInstance, baseUrl: string): Promise<void> {
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'intake',
        version: '1',
        description:
          'Webhook intake: send webhooks with an integration key; manage integrations, keys, logs, members and ' +
          'settings under /api/v1 with a management key (X-API-Key) or a panel session (cookie + X-CSRF-Token). ' +
          'Lists are newest first with `limit` (1–200, default 50) and an opaque `cursor`; errors are JSON with `error` and `message`.',
      },
      servers: [{ url: baseUrl }],
      components: {
        securitySchemes: {
          apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
          session: { type: 'apiKey', in: 'cookie', name: 'intake_session' },
        },
      },
      security: [{ apiKey: [] }, { session: [] }],
    },
    transform: ({ schema, url, route }) => {
      if (route.method === 'POST' && /^\/api\/webhooks?\/:integration_key$/.test(url)) {
        return { schema: { ...schema, body: WebhookBody }, url };
      }
      return { schema, url };
    },
  });
  await app.register(fastifySwaggerUi, { routePrefix: '/api/docs' });
  app.get('/api/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
