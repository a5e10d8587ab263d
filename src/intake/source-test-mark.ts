import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

/**
 * How a source test (POST /api/v1/integrations/{id}/source-test, "Send a test" in the panel)
 * is told apart from a provider's webhook: the test goes through the integration's own
 * address in this process (app.inject), carrying `intake-test` with a token made at start
 * and never shown, so no sender can mark a webhook of theirs a test. The webhook is then
 * stored with `intake-test: source-test` among its headers (what the panel and `intake
 * listen` read) and gets no deliveries: a sample event is not one for the company's systems.
 * An `intake-test` header from anyone else is not kept.
 */
export const SOURCE_TEST_HEADER = 'intake-test';
export const SOURCE_TEST_STORED = 'source-test';
const TOKEN = Buffer.from(randomBytes(32).toString('base64url'));

/** The header the source test sends. */
export function sourceTestHeader(): Record<string, string> {
  return { [SOURCE_TEST_HEADER]: TOKEN.toString() };
}

/** Whether a request to a webhook address is this process's own source test. */
export function isSourceTest(headers: IncomingHttpHeaders): boolean {
  const value = headers[SOURCE_TEST_HEADER];
  if (typeof value !== 'string') return false;
  const given = Buffer.from(value);
  return given.length === TOKEN.length && timingSafeEqual(given, TOKEN);
}
