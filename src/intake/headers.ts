import type { Redactor } from '../domain/redaction.js';
import type { IncomingHttpHeaders } from 'node:http';
import { SOURCE_TEST_HEADER } from './source-test-mark.js';

/** Never stored: credentials, and hop-by-hop headers that say nothing about the webhook. */
const NOT_KEPT = new Set([
  'x-api-key',
  // GitLab sends its source's secret itself, not a signature of the body.
  'x-gitlab-token',
  'authorization',
  'proxy-authorization',
  'cookie',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
  // Intake's own mark of a source test (source-test-mark.ts): a sender's is not kept.
  SOURCE_TEST_HEADER,
]);

/**
 * The headers stored with a webhook, as one JSON object: everything the sender sent
 * (signatures, event ids, user agent) except credentials and hop-by-hop headers, plus
 * intake's own `marks`; the values the integration redacts replaced.
 */
export function keptHeaders(headers: IncomingHttpHeaders, marks?: Record<string, string>, redactor?: Redactor | null): string {
  const kept: Record<string, string> = { ...marks };
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || NOT_KEPT.has(name)) continue;
    kept[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return JSON.stringify(redactor ? redactor.headersOf(kept) : kept);
}
