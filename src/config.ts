import { Type, type Static } from 'typebox';
import { Value } from 'typebox/value';
import { ENVIRONMENTS, type Environment } from './domain/environment.js';
import { DEFAULT_PASSWORD_HASH_COST, MAX_PASSWORD_HASH_COST, MIN_PASSWORD_HASH_COST } from './domain/password.js';
import { parseSecretsKeys } from './domain/secret-box.js';
import { parseCidrList, type Cidr } from './domain/cidr.js';
import { TRACE_SAMPLERS, type TracingSettings } from './telemetry/tracing.js';

/**
 * Every setting the service reads, in one schema. This module is the only reader of
 * process.env: everything else receives a Config. Each variable's `description` (and
 * `unset`, what leaving an optional one out means) is the operator's documentation:
 * `npm run docs` renders docs/reference/configuration.md from them.
 */
export const ConfigSchema = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 8080, description: 'Port to listen on.' }),
  HOST: Type.String({ minLength: 1, default: '0.0.0.0', description: 'Address to bind.' }),
  INTAKE_DATABASE_URL: Type.String({
    pattern: '^(sqlite:.+|postgres(ql)?://.+)$',
    default: 'sqlite:./data/intake.db',
    description: '`sqlite:PATH` for one node, or `postgres://…` for one or several nodes sharing the database.',
  }),
  INTAKE_DATABASE_POOL_SIZE: Type.Integer({
    minimum: 1,
    maximum: 1000,
    default: 10,
    description: 'PostgreSQL connections per node at most (SQLite ignores it).',
  }),
  INTAKE_ENV: Type.Enum([...ENVIRONMENTS], {
    default: 'development',
    description: 'The environment, shown on every panel page; keys carry it (`whk_dev_`, `whk_stg_`, `whk_live_`).',
  }),
  INTAKE_BASE_URL: Type.Optional(
    Type.String({
      pattern: '^https?://[^\\s]+$',
      unset: '`http://localhost:$PORT`',
      description: 'Public base address, printed by the CLI, in the setup link and in the panel.',
    }),
  ),
  INTAKE_TRUST_PROXY: Type.String({
    pattern: '^(true|false|[0-9a-fA-F.:/, ]+)$',
    default: 'false',
    description: "Whose `X-Forwarded-For` gives the sender's IP: `false`, `true`, or a comma-separated list of proxy addresses or CIDRs (the load balancer's).",
  }),
  LOG_LEVEL: Type.Enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
    default: 'info',
    description: 'Pino level of the JSON log lines on stdout (`silent` mutes them).',
  }),
  INTAKE_WRITE_QUEUE_MAX: Type.Integer({
    minimum: 1,
    default: 10000,
    description: 'Webhooks waiting for their group commit; past this, intake answers 503.',
  }),
  INTAKE_WRITE_QUEUE_MAX_BYTES: Type.Integer({
    minimum: 1024,
    default: 64 * 1024 * 1024,
    description: 'Raw bytes waiting for their group commit; past this, intake answers 503 (bounds memory whatever the body sizes).',
  }),
  INTAKE_MAX_EVENT_LOOP_LAG_MS: Type.Integer({
    minimum: 0,
    maximum: 60_000,
    default: 250,
    description:
      'How long the event loop may go without turning before the webhook addresses answer 503 with `Retry-After`, before authentication (nothing stored or logged, counted in `/metrics`): the write queue alone never fills when the CPU is the limit (src/intake/admission.ts). `0` turns it off.',
  }),
  INTAKE_MAX_QUEUE_WAIT_MS: Type.Integer({
    minimum: 0,
    maximum: 60_000,
    default: 500,
    description:
      'How long the oldest webhook may wait for its commit before the webhook addresses answer 503 the same way (the bound for when the database, not the CPU, is the limit). `0` turns it off.',
  }),
  INTAKE_RETENTION_INTERVAL_SECONDS: Type.Integer({
    minimum: 1,
    maximum: 86400,
    default: 600,
    description: "How often each node purges webhooks and request-log rows past their company's retention (default 30 days).",
  }),
  INTAKE_DEFAULT_BODY_LIMIT: Type.Integer({
    minimum: 1,
    maximum: 16 * 1024 * 1024,
    default: 1024 * 1024,
    description: 'Body limit of a new integration, in bytes (each integration may change its own).',
  }),
  INTAKE_AUTH_FAILURE_LIMIT: Type.Integer({
    minimum: 0,
    default: 100,
    description:
      'Missing or invalid API keys one client address (IPv6: its /64) may send per window at the webhook addresses; past it, 429 with `Retry-After` before any key is looked up. Behind a proxy, set `INTAKE_TRUST_PROXY` so senders are told apart. `0` turns it off.',
  }),
  INTAKE_AUTH_FAILURE_WINDOW_SECONDS: Type.Integer({
    minimum: 1,
    maximum: 86400,
    default: 60,
    description: "The window of `INTAKE_AUTH_FAILURE_LIMIT`, in seconds.",
  }),
  INTAKE_MAX_HEADER_SIZE: Type.Integer({
    minimum: 1024,
    maximum: 1024 * 1024,
    default: 16 * 1024,
    description: 'Bytes of request line and headers together; past it, 431.',
  }),
  INTAKE_MAX_URL_LENGTH: Type.Integer({
    minimum: 256,
    maximum: 1024 * 1024,
    default: 8 * 1024,
    description: 'Characters of the request target (path and query); past it, 414.',
  }),
  INTAKE_HEADERS_TIMEOUT_MS: Type.Integer({
    minimum: 100,
    maximum: 600_000,
    default: 10_000,
    description: "Time to receive a request's headers (against slowloris); then 408 and the connection is closed. At most `INTAKE_REQUEST_TIMEOUT_MS`.",
  }),
  INTAKE_REQUEST_TIMEOUT_MS: Type.Integer({
    minimum: 100,
    maximum: 3_600_000,
    default: 30_000,
    description: 'Time to receive a whole request, body included.',
  }),
  INTAKE_KEEP_ALIVE_TIMEOUT_MS: Type.Integer({
    minimum: 1000,
    maximum: 3_600_000,
    default: 72_000,
    description:
      "An idle keep-alive connection is closed after this: longer than a load balancer's usual idle timeout (60 s), so the balancer, not the server, closes first.",
  }),
  INTAKE_MAX_CONNECTIONS: Type.Integer({
    minimum: 1,
    default: 10_000,
    description: 'Open connections at most; one more is closed as soon as it is accepted.',
  }),
  INTAKE_SHUTDOWN_GRACE_MS: Type.Integer({
    minimum: 0,
    maximum: 600_000,
    default: 10_000,
    description:
      'After SIGTERM, how long requests under way may take; then their connections are closed (a client holding one open cannot hold a deploy).',
  }),
  INTAKE_SECRETS_KEY: Type.Optional(
    Type.String({
      minLength: 1,
      unset: 'SQLite generates one once into the database\'s directory as `secrets.key`; PostgreSQL refuses to start',
      description:
        'Key(s) sealing the secrets the service reads back (two-factor secrets, sources\' signing secrets, destinations\' signing secrets and headers; src/domain/secret-box.ts): 32 bytes in base64url or hex (`openssl rand -base64 32`), comma-separated to rotate (the first seals, all open; `intake secrets rotate` reseals with the first). Required with PostgreSQL, the same on every node; back it up with the database.',
    }),
  ),
  INTAKE_PASSWORD_HASH_COST: Type.Integer({
    minimum: MIN_PASSWORD_HASH_COST,
    maximum: MAX_PASSWORD_HASH_COST,
    default: DEFAULT_PASSWORD_HASH_COST,
    description:
      "scrypt's cost for the passwords set from now on, as log2 N (r=8, p=1): the default, OWASP's 2^17, takes 128 MiB and about 0.4 s of a thread per hash, each step up doubles both. Every hash keeps the cost it was made with, so a change re-hashes nothing and every password still signs in; sign-ins for unknown emails cost what the setting does. Lower it only for tests.",
  }),
  INTAKE_SMTP_URL: Type.Optional(
    Type.String({
      pattern: '^smtps?://[^\\s]+$',
      unset: 'no email: invitation links are shown to the owner who creates them, reset links are printed by `intake user reset-password`',
      description: '`smtp://user:pass@host:port` (or `smtps://…`) to email invitations and password reset links.',
    }),
  ),
  INTAKE_SMTP_FROM: Type.Optional(
    Type.String({
      minLength: 3,
      maxLength: 320,
      unset: '`intake <no-reply@HOST of INTAKE_BASE_URL>`',
      description: 'The sender of those emails.',
    }),
  ),
  INTAKE_DESTINATION_ALLOW: Type.Optional(
    Type.String({
      minLength: 1,
      unset: 'none',
      description:
        'Comma-separated CIDRs that destinations may reach although they are loopback, private or otherwise refused (src/destinations/address-guard.ts; docs/destinations.md, "Addresses intake refuses").',
    }),
  ),
  INTAKE_DESTINATION_DISABLE_AFTER_HOURS: Type.Integer({
    minimum: 1,
    maximum: 8760,
    default: 120,
    description: 'A destination failing this long without one success is disabled (its deliveries are held until it is resumed).',
  }),
  INTAKE_DELIVERY_CONCURRENCY: Type.Integer({
    minimum: 1,
    maximum: 10_000,
    default: 256,
    description: 'Delivery requests in flight per node at most, across destinations.',
  }),
  INTAKE_DELIVERY_LEASE_SECONDS: Type.Integer({
    minimum: 1,
    maximum: 3600,
    default: 30,
    description:
      "How long a delivery's claim outlives its destination's timeout: a node that dies in the middle of an attempt frees the delivery for another node (or itself, restarted) then.",
  }),
  INTAKE_REDELIVERY_BUDGET_PER_HOUR: Type.Integer({
    minimum: 1,
    maximum: 10_000_000,
    default: 20_000,
    description:
      'Deliveries one company may replay or send again an hour, 10,000 at once at most (src/services/redeliveries.ts): what bounds the requests one company can make intake send beyond what it receives.',
  }),
  INTAKE_METRICS_TOKEN: Type.Optional(
    Type.String({
      minLength: 16,
      maxLength: 512,
      pattern: '^[A-Za-z0-9._~+/-]+=*$',
      unset: '`/metrics` answers whoever reaches it',
      description:
        'A bearer token `GET /metrics` then asks for (`Authorization: Bearer …`; 401 without it): 16–512 characters of RFC 6750\'s token alphabet (`A-Z a-z 0-9 - . _ ~ + /`, `=` at the end), e.g. `openssl rand -hex 32`.',
    }),
  ),
  INTAKE_METRICS_PORT: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: 65535,
      unset: '`/metrics` is served on `PORT` with everything else',
      description: 'Serve `/metrics` on this port of its own (on `HOST`) instead of `PORT`, so it need not be reachable where webhooks are; must differ from `PORT`; `0` takes any free port.',
    }),
  ),
  // OpenTelemetry's own variables, as its SDKs name them (docs/operations.md, "Traces").
  // Tracing is off unless one of the two endpoints is set.
  OTEL_EXPORTER_OTLP_ENDPOINT: Type.Optional(
    Type.String({
      pattern: '^https?://[^\\s]+$',
      unset: 'no traces (unless `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set)',
      description: 'The OTLP/HTTP collector\'s base address (`http://collector:4318`): spans are POSTed to `/v1/traces` under it, as OTLP JSON.',
    }),
  ),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: Type.Optional(
    Type.String({
      pattern: '^https?://[^\\s]+$',
      unset: '`OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/traces`',
      description: 'The full address spans are POSTed to, used as it is (wins over `OTEL_EXPORTER_OTLP_ENDPOINT`).',
    }),
  ),
  OTEL_EXPORTER_OTLP_HEADERS: Type.Optional(
    Type.String({
      minLength: 1,
      unset: 'none',
      description: 'Headers sent with every export, `name=value` pairs separated by commas, values percent-encoded (a collector\'s credentials: `x-api-key=…`). Never logged.',
    }),
  ),
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: Type.Optional(
    Type.String({
      minLength: 1,
      unset: 'none',
      description: 'The same for traces alone; a name given in both takes this value.',
    }),
  ),
  OTEL_EXPORTER_OTLP_PROTOCOL: Type.Optional(
    Type.Enum(['http/json'], {
      unset: '`http/json`',
      description: 'How spans are sent: intake exports OTLP/HTTP JSON only (every OpenTelemetry Collector takes it), so another protocol stops the start rather than send what the collector cannot read.',
    }),
  ),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: Type.Optional(
    Type.Enum(['http/json'], { unset: '`OTEL_EXPORTER_OTLP_PROTOCOL`', description: 'The same for traces alone.' }),
  ),
  OTEL_SDK_DISABLED: Type.Enum(['true', 'false'], {
    default: 'false',
    description: '`true` turns tracing off whatever the endpoints say: the SDK is then not loaded.',
  }),
  OTEL_TRACES_EXPORTER: Type.Enum(['otlp', 'none'], {
    default: 'otlp',
    description: '`none` turns tracing off, as `OTEL_SDK_DISABLED=true` does.',
  }),
  OTEL_TRACES_SAMPLER: Type.Enum([...TRACE_SAMPLERS], {
    default: 'parentbased_always_on',
    description:
      'Which traces are kept: every one, none, or a share of them by trace id (`traceidratio`, `parentbased_traceidratio` with `OTEL_TRACES_SAMPLER_ARG`). A request\'s span is always a root of intake\'s own (a sender\'s `traceparent` is a link), so `parentbased_` only makes a delivery attempt follow its webhook\'s decision.',
  }),
  OTEL_TRACES_SAMPLER_ARG: Type.Optional(
    Type.Number({
      minimum: 0,
      maximum: 1,
      unset: '`1`',
      description: 'The share of traces the ratio samplers keep, from `0` to `1` (`0.1`: one in ten).',
    }),
  ),
  OTEL_SERVICE_NAME: Type.String({
    minLength: 1,
    maxLength: 256,
    default: 'intake',
    description: 'The spans\' `service.name`.',
  }),
  OTEL_RESOURCE_ATTRIBUTES: Type.Optional(
    Type.String({
      minLength: 1,
      unset: 'none but `deployment.environment.name` (`INTAKE_ENV`) and `service.instance.id` (one per process)',
      description: 'More attributes of the spans\' resource, `name=value` pairs separated by commas, values percent-encoded (`service.namespace=webhooks,cloud.region=eu-west-1`).',
    }),
  ),
});

type RawConfig = Static<typeof ConfigSchema>;

export type { Environment } from './domain/environment.js';

export interface Config {
  port: number;
  host: string;
  databaseUrl: string;
  databasePoolSize: number;
  environment: Environment;
  baseUrl: string;
  logLevel: RawConfig['LOG_LEVEL'];
  trustProxy: boolean | string[];
  writeQueueMax: number;
  writeQueueMaxBytes: number;
  /** 0: no bound on the event loop's lag. */
  maxEventLoopLagMs: number;
  /** 0: no bound on the write queue's wait. */
  maxQueueWaitMs: number;
  defaultBodyLimit: number;
  retentionIntervalMs: number;
  /** 0: no limit. */
  authFailureLimit: number;
  authFailureWindowMs: number;
  maxHeaderSize: number;
  maxUrlLength: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  maxConnections: number;
  shutdownGraceMs: number;
  /** Undefined: SQLite keeps its own key file (see src/secrets.ts). */
  secretsKeys: Buffer[] | undefined;
  /** scrypt's log2 N for new password hashes (and the decoy an unknown email is checked against). */
  passwordHashCost: number;
  /** Undefined: no email; invitation and reset links are shown to whoever creates them. */
  smtpUrl: string | undefined;
  smtpFrom: string;
  /** Address ranges destinations may reach whatever their class. */
  destinationAllow: Cidr[];
  destinationDisableAfterMs: number;
  deliveryConcurrency: number;
  deliveryLeaseMarginMs: number;
  /** Deliveries one company may replay or send again an hour. */
  redeliveryBudgetPerHour: number;
  /** Undefined: /metrics asks for no token. */
  metricsToken: string | undefined;
  /** Undefined: /metrics is served on `port` with everything else. */
  metricsPort: number | undefined;
  /** Undefined: tracing is off (no OTLP endpoint, or turned off), and the OpenTelemetry SDK is not loaded. */
  tracing: TracingSettings | undefined;
}

/** Thrown with every problem found, one line each, so a bad start says all at once. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  ${p}`).join('\n')}`);
  }
}

/** Parses and validates the environment once; throws ConfigError listing every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const known: Record<string, unknown> = {};
  for (const name of Object.keys(ConfigSchema.properties)) {
    const value = env[name];
    if (value !== undefined && value !== '') known[name] = value;
  }
  const candidate = Value.Convert(ConfigSchema, Value.Default(ConfigSchema, { ...known }));
  const problems = describeProblems(candidate, known);
  if (problems.length === 0) problems.push(...crossProblems(candidate as RawConfig));
  if (problems.length > 0) throw new ConfigError(problems);
  const raw = candidate as RawConfig;
  const baseUrl = (raw.INTAKE_BASE_URL ?? `http://localhost:${raw.PORT}`).replace(/\/+$/, '');
  return {
    port: raw.PORT,
    host: raw.HOST,
    databaseUrl: raw.INTAKE_DATABASE_URL,
    databasePoolSize: raw.INTAKE_DATABASE_POOL_SIZE,
    environment: raw.INTAKE_ENV,
    baseUrl,
    logLevel: raw.LOG_LEVEL,
    trustProxy: parseTrustProxy(raw.INTAKE_TRUST_PROXY),
    writeQueueMax: raw.INTAKE_WRITE_QUEUE_MAX,
    writeQueueMaxBytes: raw.INTAKE_WRITE_QUEUE_MAX_BYTES,
    maxEventLoopLagMs: raw.INTAKE_MAX_EVENT_LOOP_LAG_MS,
    maxQueueWaitMs: raw.INTAKE_MAX_QUEUE_WAIT_MS,
    defaultBodyLimit: raw.INTAKE_DEFAULT_BODY_LIMIT,
    retentionIntervalMs: raw.INTAKE_RETENTION_INTERVAL_SECONDS * 1000,
    authFailureLimit: raw.INTAKE_AUTH_FAILURE_LIMIT,
    authFailureWindowMs: raw.INTAKE_AUTH_FAILURE_WINDOW_SECONDS * 1000,
    maxHeaderSize: raw.INTAKE_MAX_HEADER_SIZE,
    maxUrlLength: raw.INTAKE_MAX_URL_LENGTH,
    headersTimeoutMs: raw.INTAKE_HEADERS_TIMEOUT_MS,
    requestTimeoutMs: raw.INTAKE_REQUEST_TIMEOUT_MS,
    keepAliveTimeoutMs: raw.INTAKE_KEEP_ALIVE_TIMEOUT_MS,
    maxConnections: raw.INTAKE_MAX_CONNECTIONS,
    shutdownGraceMs: raw.INTAKE_SHUTDOWN_GRACE_MS,
    secretsKeys: raw.INTAKE_SECRETS_KEY === undefined ? undefined : parseSecretsKeys(raw.INTAKE_SECRETS_KEY),
    passwordHashCost: raw.INTAKE_PASSWORD_HASH_COST,
    smtpUrl: raw.INTAKE_SMTP_URL,
    smtpFrom: raw.INTAKE_SMTP_FROM ?? `intake <no-reply@${new URL(baseUrl).hostname}>`,
    destinationAllow: raw.INTAKE_DESTINATION_ALLOW === undefined ? [] : parseCidrList(raw.INTAKE_DESTINATION_ALLOW),
    destinationDisableAfterMs: raw.INTAKE_DESTINATION_DISABLE_AFTER_HOURS * 3_600_000,
    deliveryConcurrency: raw.INTAKE_DELIVERY_CONCURRENCY,
    deliveryLeaseMarginMs: raw.INTAKE_DELIVERY_LEASE_SECONDS * 1000,
    redeliveryBudgetPerHour: raw.INTAKE_REDELIVERY_BUDGET_PER_HOUR,
    metricsToken: raw.INTAKE_METRICS_TOKEN,
    metricsPort: raw.INTAKE_METRICS_PORT,
    tracing: tracingSettings(raw),
  };
}

/** Where and how spans are exported; undefined when no endpoint is set or tracing is turned off. */
function tracingSettings(raw: RawConfig): TracingSettings | undefined {
  if (raw.OTEL_SDK_DISABLED === 'true' || raw.OTEL_TRACES_EXPORTER === 'none') return undefined;
  const base = raw.OTEL_EXPORTER_OTLP_ENDPOINT;
  const tracesUrl = raw.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (base === undefined ? undefined : `${base.replace(/\/+$/, '')}/v1/traces`);
  if (tracesUrl === undefined) return undefined;
  return {
    tracesUrl,
    headers: { ...parsePairs(raw.OTEL_EXPORTER_OTLP_HEADERS), ...parsePairs(raw.OTEL_EXPORTER_OTLP_TRACES_HEADERS) },
    sampler: raw.OTEL_TRACES_SAMPLER,
    samplerRatio: raw.OTEL_TRACES_SAMPLER_ARG ?? 1,
    serviceName: raw.OTEL_SERVICE_NAME,
    resourceAttributes: { 'deployment.environment.name': raw.INTAKE_ENV, ...parsePairs(raw.OTEL_RESOURCE_ATTRIBUTES) },
  };
}

/** RFC 9110's token: what a header name may be made of. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * OpenTelemetry's `name=value,name=value` (OTEL_EXPORTER_OTLP_HEADERS, OTEL_RESOURCE_ATTRIBUTES):
 * values percent-decoded, spaces around each part dropped. Throws on a malformed pair
 * without quoting it (the headers are credentials); names must be header names, and values
 * hold no control character, which rules out CR/LF injected into the export's request.
 */
function parsePairs(text: string | undefined): Record<string, string> {
  const pairs: Record<string, string> = {};
  if (text === undefined) return pairs;
  for (const [index, part] of text.split(',').entries()) {
    if (part.trim() === '') continue;
    const equals = part.indexOf('=');
    const name = part.slice(0, Math.max(0, equals)).trim();
    let value: string;
    try {
      value = decodeURIComponent(part.slice(equals + 1).trim());
    } catch {
      throw new Error(`pair ${index + 1} holds a malformed percent-escape`);
    }
    if (equals < 0 || !HEADER_NAME.test(name)) throw new Error(`pair ${index + 1} is not name=value (a name of letters, digits and !#$%&'*+-.^_\`|~)`);
    if (/[\u0000-\u001f\u007f]/.test(value)) throw new Error(`the value of pair ${index + 1} holds a control character`);
    pairs[name] = value;
  }
  return pairs;
}

function parseTrustProxy(value: string): boolean | string[] {
  if (value === 'true' || value === 'false') return value === 'true';
  return value.split(',').map((part) => part.trim()).filter(Boolean);
}

/** Rules between variables, checked once each variable is valid on its own. */
function crossProblems(raw: RawConfig): string[] {
  const problems: string[] = [];
  // Node refuses to start a server whose headers may take longer than the whole request.
  if (raw.INTAKE_HEADERS_TIMEOUT_MS > raw.INTAKE_REQUEST_TIMEOUT_MS) {
    problems.push(
      `INTAKE_HEADERS_TIMEOUT_MS=${raw.INTAKE_HEADERS_TIMEOUT_MS}: must not exceed INTAKE_REQUEST_TIMEOUT_MS (${raw.INTAKE_REQUEST_TIMEOUT_MS})`,
    );
  }
  if (raw.INTAKE_SECRETS_KEY === undefined && raw.INTAKE_DATABASE_URL.startsWith('postgres')) {
    problems.push('INTAKE_SECRETS_KEY is required with PostgreSQL (the same on every node); make one with: openssl rand -base64 32');
  }
  if (raw.INTAKE_SECRETS_KEY !== undefined) {
    try {
      parseSecretsKeys(raw.INTAKE_SECRETS_KEY);
    } catch (error) {
      // The value is a secret: the problem is said without it.
      problems.push(`INTAKE_SECRETS_KEY: ${(error as Error).message}`);
    }
  }
  if (raw.INTAKE_METRICS_PORT !== undefined && raw.INTAKE_METRICS_PORT !== 0 && raw.INTAKE_METRICS_PORT === raw.PORT) {
    problems.push(`INTAKE_METRICS_PORT=${raw.INTAKE_METRICS_PORT}: must differ from PORT (unset it to serve /metrics on PORT)`);
  }
  if (raw.INTAKE_DESTINATION_ALLOW !== undefined) {
    try {
      parseCidrList(raw.INTAKE_DESTINATION_ALLOW);
    } catch (error) {
      problems.push(`INTAKE_DESTINATION_ALLOW: ${(error as Error).message}`);
    }
  }
  for (const name of ['OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_EXPORTER_OTLP_TRACES_HEADERS', 'OTEL_RESOURCE_ATTRIBUTES'] as const) {
    try {
      parsePairs(raw[name]);
    } catch (error) {
      // Said without the value: the headers are a collector's credentials.
      problems.push(`${name}: ${(error as Error).message}`);
    }
  }
  return problems;
}

function describeProblems(candidate: unknown, given: Record<string, unknown>): string[] {
  const byVariable = new Map<string, string>();
  // Convert would quietly read "80.5" or "0x50" as 80: whole numbers are digits only.
  for (const [name, schema] of Object.entries(ConfigSchema.properties as Record<string, { type?: string }>)) {
    const value = given[name];
    if (schema.type === 'integer' && value !== undefined && !/^\d+$/.test(String(value))) {
      byVariable.set(name, `${name}=${JSON.stringify(value)}: must be a whole number`);
    }
  }
  for (const error of Value.Errors(ConfigSchema, candidate)) {
    const name = error.instancePath.replace(/^\//, '');
    if (byVariable.has(name)) continue;
    const schema = (ConfigSchema.properties as Record<string, { enum?: string[] }>)[name];
    const rule = schema?.enum ? `must be one of ${schema.enum.join(', ')}` : error.message;
    const shown = SECRET_VARIABLES.has(name) ? '(value not shown)' : JSON.stringify(given[name] ?? '');
    byVariable.set(name, `${name}=${shown}: ${rule}`);
  }
  return [...byVariable.values()];
}

/** Variables that may carry a password or a key: a problem with one is told without its value. */
const SECRET_VARIABLES = new Set([
  'INTAKE_DATABASE_URL',
  'INTAKE_SECRETS_KEY',
  'INTAKE_SMTP_URL',
  'INTAKE_METRICS_TOKEN',
  'OTEL_EXPORTER_OTLP_HEADERS',
  'OTEL_EXPORTER_OTLP_TRACES_HEADERS',
]);
