import type { IncomingMessage, ServerResponse } from 'node:http';
import { newTimeOrderedId } from '../domain/ids.js';
import { writeErrorAnswer, type EarlyAnswer } from '../http-hardening.js';
import type { Metrics } from '../telemetry/metrics.js';
import { OVERLOADED, type AdmissionGate } from './admission.js';

/** A POST to a webhook address, as the router matches it (a trailing slash and a query allowed); the prefix captured. */
const WEBHOOK_POST_PATH = /^(\/api\/webhooks?)\/[^/?#]+\/?(?:\?|$)/;

/**
 * The gate on intake's hot path, in the HTTP server before Fastify: a POST to a webhook
 * address that the gate refuses costs the parse and one write here, instead of a request and
 * a reply, routing, hooks, the error handler and the onSend hooks (what made turns long
 * under 2x overload: docs/performance-history.md). Counted in /metrics as the same refusal in the
 * router would be. Every other request goes on to Fastify, where the intake routes' own
 * onRequest hook asks the gate again (requests injected in tests, and the reads).
 */
export function shedBeforeRouting(gate: AdmissionGate, metrics: Pick<Metrics, 'answered' | 'webhookAnswered'>): EarlyAnswer {
  return (request: IncomingMessage, response: ServerResponse) => {
    if (request.method !== 'POST') return false;
    const prefix = WEBHOOK_POST_PATH.exec(request.url ?? '')?.[1];
    if (prefix === undefined || gate.admit()) return false;
    const startedAt = performance.now();
    writeErrorAnswer(response, OVERLOADED, { requestId: newTimeOrderedId('req', Date.now()) });
    const route = `${prefix}/:integration_key`;
    metrics.answered(route, 'POST', OVERLOADED.status, (performance.now() - startedAt) / 1000, OVERLOADED.code);
    metrics.webhookAnswered(route, 'POST', OVERLOADED.status, OVERLOADED.code, undefined);
    return true;
  };
}
