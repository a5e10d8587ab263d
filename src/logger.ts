import { pino, stdSerializers, type DestinationStream, type Logger } from 'pino';

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

/**
 * Properties of an error that hold what a client sent, byte for byte: Node's HTTP parser
 * keeps the raw request (cookies, keys, passwords) on `rawPacket`. pino's error serializer
 * copies every property of an error, so these are dropped wherever an error is logged.
 */
const RAW_REQUEST_PROPERTIES = ['rawPacket'];

function serializeError(error: Error): Record<string, unknown> {
  const serialized = stdSerializers.err(error) as unknown as Record<string, unknown>;
  for (const name of RAW_REQUEST_PROPERTIES) delete serialized[name];
  return serialized;
}

/** The one logger: structured JSON lines on stdout (or `destination`, for tests). */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino({ level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' }, serializers: { err: serializeError } }, destination);
}
