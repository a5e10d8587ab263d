import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, expect, test } from 'vitest';
import { cleanupAll, mapConcurrent } from './support/processes.js';
import {
  closeTracedServers,
  delivered,
  otlpReceiver,
  requestLog,
  send,
  SENDER_SPAN_ID,
  SENDER_TRACE_ID,
  SENDER_TRACEPARENT,
  tenant,
  webhookSpans,
} from './support/traced-server.js';

/**
 * Traces as an operator gets them: `node dist/main.js` with the OTEL variables pointing at a
 * real OTLP/HTTP receiver on loopback, which decodes what the SDK's exporter sends. A
 * webhook's span, its delivery attempt's span and the `traceparent` the destination got, an
 * API request's span and the trace id in the request log; nothing secret in what is
 * exported; the sampling ratio holds, whatever a sender's `traceparent` says. That nothing is
 * exported nor propagated unless configured is test/tracing-off.test.ts: a file of its own,
 * so the suite's two workers run the two halves at once.
 */

afterEach(closeTracedServers);
afterAll(cleanupAll);

test('a webhook, its delivery attempt and an API request, each a span; the destination continues the trace; the request log names it', async () => {
  const marker = `m${randomBytes(12).toString('hex')}`;
  const otlp = await otlpReceiver();
  const t = await tenant({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_TRACES_SAMPLER: 'always_on', OTEL_SERVICE_NAME: 'intake-under-test' }, marker);
  const body = JSON.stringify({ event: 'order.created', data: { note: marker } });
  const answer = await send(t, body, {
    traceparent: SENDER_TRACEPARENT,
    tracestate: `sender=${marker}`,
    authorization: `Bearer ${marker}`,
    'x-hub-signature-256': `sha256=${marker}`,
    'idempotency-key': marker,
  });
  expect(answer.status).toBe(202);
  const { uuid } = (await answer.json()) as { uuid: string };
  const refused = await send(t, body, {}, `${t.apiKey.slice(0, -6)}AAAAAA`);
  expect(refused.status).toBe(401);
  await delivered(t.receiver, 1);
  const log = await requestLog(t);
  await t.server.stop();
  const spans = await otlp.waitFor((all) => webhookSpans(all).length === 2 && all.some((span) => span.kind === 'client') && all.some((span) => span.name === 'GET /api/v1/requests'));

  // The webhook's span: intake's own root, the sender's traceparent a link and nothing more.
  const webhook = webhookSpans(spans).find((span) => span.attributes['http.response.status_code'] === 202)!;
  expect(webhook).toMatchObject({ kind: 'server', parentSpanId: undefined, resource: { 'service.name': 'intake-under-test' } });
  expect(webhook.traceId).not.toBe(SENDER_TRACE_ID);
  expect(webhook.links.map((link) => [link.traceId, link.spanId])).toEqual([[SENDER_TRACE_ID, SENDER_SPAN_ID]]);
  expect(webhook.attributes).toMatchObject({
    'http.request.method': 'POST',
    'http.route': '/api/webhooks/:integration_key',
    'http.request.body.size': Buffer.byteLength(body),
    'intake.webhook.uuid': uuid,
    'intake.group_commit.webhooks': expect.any(Number),
    'intake.group_commit.wait_ms': expect.any(Number),
  });
  expect(webhook.attributes['intake.company.id']).toMatch(/^cmp_/);
  expect(webhook.attributes['intake.integration.id']).toMatch(/^int_/);
  expect(webhook.attributes['intake.group_commit.webhooks']).toBeGreaterThanOrEqual(1);
  expect(webhook.attributes).not.toHaveProperty('error.type');

  // The refused one: its integration, its status and the error code.
  const refusal = webhookSpans(spans).find((span) => span.attributes['http.response.status_code'] === 401)!;
  expect(refusal.attributes).toMatchObject({ 'error.type': 'invalid_api_key', 'intake.integration.id': webhook.attributes['intake.integration.id'] });

  // The attempt: a child of the webhook's span, and the destination's request continues it.
  const attempt = spans.find((span) => span.kind === 'client')!;
  expect(attempt).toMatchObject({ name: 'POST', traceId: webhook.traceId, parentSpanId: webhook.spanId, statusCode: 0 });
  const got = t.receiver.received[0]!;
  expect(attempt.attributes).toMatchObject({
    'http.request.method': 'POST',
    'http.response.status_code': 200,
    'server.address': '127.0.0.1',
    'server.port': t.receiver.port,
    'intake.destination.id': t.destinationId,
    'intake.delivery.id': got.headers['x-intake-delivery-id'],
    'intake.delivery.attempt': 1,
    'intake.webhook.uuid': uuid,
    'intake.delivery.duration_ms': expect.any(Number),
  });
  expect(got.headers.traceparent).toBe(`00-${attempt.traceId}-${attempt.spanId}-01`);
  // The sender's tracestate stops at intake.
  expect(got.headers.tracestate).toBeUndefined();
  // The signature covers the body, id and time; traceparent is beside it.
  expect(() => new Webhook(t.signingSecret).verify(got.body.toString(), got.headers as Record<string, string>)).not.toThrow();

  // An API request's span, by its route's shape.
  const api = spans.find((span) => span.name === 'GET /api/v1/requests')!;
  expect(api).toMatchObject({ kind: 'server', attributes: { 'http.route': '/api/v1/requests', 'http.response.status_code': 200 } });

  // The request log names each request's trace.
  expect(log.find((row) => row.webhook_uuid === uuid)).toMatchObject({ status: 202, trace_id: webhook.traceId });
  expect(log.find((row) => row.status === 401)).toMatchObject({ error_code: 'invalid_api_key', trace_id: refusal.traceId });

  // Nothing secret went out: not the body, not a key, not the destination's header, query or secret.
  const exported = otlp.allText();
  for (const secret of [marker, t.apiKey, t.apiKey.slice(9), t.managementKey, t.signingSecret]) expect(exported).not.toContain(secret);
  expect(exported).not.toContain('/hook');
});

test('at ratio 0 nothing is exported, though every request sends a sampled traceparent; what is propagated says not sampled', async () => {
  const otlp = await otlpReceiver();
  const t = await tenant({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' });
  const count = 40;
  const answers = await mapConcurrent([...Array(count).keys()], 8, (i) =>
    send(t, JSON.stringify({ event: 'order.created', data: { i } }), { traceparent: SENDER_TRACEPARENT }),
  );
  expect(answers.map((answer) => answer.status)).toEqual(Array(count).fill(202));
  await delivered(t.receiver, count);
  const log = await requestLog(t);
  await t.server.stop();

  expect(otlp.spans).toEqual([]);
  expect(log.filter((row) => row.status === 202)).toHaveLength(count);
  expect(log.every((row) => row.trace_id === null)).toBe(true);
  for (const got of t.receiver.received) {
    expect(got.headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    expect(got.headers.traceparent).not.toContain(SENDER_TRACE_ID);
  }
});

test('at ratio 0.25 about a quarter of the webhooks are traced, each with its attempts, and the request log names exactly those', async () => {
  const otlp = await otlpReceiver();
  const t = await tenant({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' });
  const count = 200;
  await mapConcurrent([...Array(count).keys()], 8, async (i) => {
    const answer = await send(t, JSON.stringify({ event: 'order.created', data: { i } }));
    expect(answer.status).toBe(202);
  });
  await delivered(t.receiver, count);
  const log = await requestLog(t);
  await t.server.stop();

  const traced = webhookSpans(otlp.spans);
  // 50 expected; 20 and 80 are five standard deviations away (binomial, n = 200, p = 1/4).
  expect(traced.length).toBeGreaterThan(20);
  expect(traced.length).toBeLessThan(80);
  const loggedTraces = log.flatMap((row) => (row.trace_id === null ? [] : [row.trace_id]));
  expect(new Set(loggedTraces)).toEqual(new Set(traced.map((span) => span.traceId)));
  // Parent-based: an attempt is traced when its webhook is, and only then.
  const attempts = otlp.spans.filter((span) => span.kind === 'client');
  expect(new Set(attempts.map((span) => span.parentSpanId))).toEqual(new Set(traced.map((span) => span.spanId)));
  const sampledHeaders = t.receiver.received.filter((got) => String(got.headers.traceparent).endsWith('-01'));
  expect(sampledHeaders).toHaveLength(attempts.length);
});
