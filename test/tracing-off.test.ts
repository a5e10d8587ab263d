import { afterAll, afterEach, describe, expect, test } from 'vitest';
import { cleanupAll } from './support/processes.js';
import { closeTracedServers, delivered, otlpReceiver, requestLog, send, SENDER_TRACEPARENT, tenant } from './support/traced-server.js';

/**
 * Tracing off, as an operator leaves it or turns it off, with `node dist/main.js` and a
 * real OTLP/HTTP receiver on loopback (test/tracing.test.ts has it on): nothing exported,
 * no `traceparent` propagated and no trace id in the request log, whatever a sender's
 * `traceparent` says.
 */

afterEach(closeTracedServers);
afterAll(cleanupAll);

describe('off', () => {
  const ways: Array<[string, Record<string, string>]> = [
    ['by default (no endpoint)', {}],
    ['with OTEL_SDK_DISABLED=true', { OTEL_SDK_DISABLED: 'true' }],
    ['with OTEL_TRACES_EXPORTER=none', { OTEL_TRACES_EXPORTER: 'none' }],
  ];
  for (const [name, env] of ways) {
    test(`${name}: nothing exported, no traceparent sent, no trace id logged`, async () => {
      const otlp = await otlpReceiver();
      // The endpoint is set where turning tracing off is the point; by default there is none at all.
      const endpoint: Record<string, string> = Object.keys(env).length === 0 ? {} : { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url };
      const t = await tenant({ ...endpoint, OTEL_TRACES_SAMPLER: 'always_on', ...env });
      const answer = await send(t, JSON.stringify({ event: 'order.created' }), { traceparent: SENDER_TRACEPARENT });
      expect(answer.status).toBe(202);
      await delivered(t.receiver, 1);
      const log = await requestLog(t);
      await t.server.stop();
      expect(otlp.requests).toEqual([]);
      expect(t.receiver.received[0]!.headers).not.toHaveProperty('traceparent');
      expect(log.map((row) => row.trace_id)).toEqual([null]);
      expect(t.server.stdout).not.toContain('tracing on');
    });
  }
});
