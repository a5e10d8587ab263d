import { pino, type Logger } from 'pino';

/**
 * Paths that could hold a secret, censored wherever they appear in a log line. Request
 * logging does not include headers, and errors never carry keys; this is the second lock.
 */
const REDACTED_PATHS = [
  'req.headers["x-api-key"]',
  'req.headers.authorization',
  'req.headers.cookie',
  'headers["x-api-key"]',
  'headers.authorization',
  'headers.cookie',
  'apiKey',
  'api_key',
  'password',
  '*.apiKey',
  '*.api_key',
  '*.password',
];

/** The one logger: structured JSON lines on stdout. */
export function createLogger(level: string): Logger {
  return pino({ level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } });
}
