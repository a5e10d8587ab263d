import { Type, type Static } from 'typebox';
import { Value } from 'typebox/value';
import { ENVIRONMENTS, type Environment } from './domain/environment.js';
import { parseSecretsKeys } from './domain/secret-box.js';
import { parseCidrList, type Cidr } from './destinations/address-guard.js';

/**
 * Every setting the service reads, in one schema. This module is the only reader of
 * process.env: everything else receives a Config.
 */
const ConfigSchema = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 8080 }),
  HOST: Type.String({ minLength: 1, default: '0.0.0.0' }),
  INTAKE_DATABASE_URL: Type.String({ pattern: '^(sqlite:.+|postgres(ql)?://.+)$', default: 'sqlite:./data/intake.db' }),
  /** PostgreSQL connections per node at most (ignored by SQLite). */
  INTAKE_DATABASE_POOL_SIZE: Type.Integer({ minimum: 1, maximum: 1000, default: 10 }),
  INTAKE_ENV: Type.Enum([...ENVIRONMENTS], { default: 'development' }),
  INTAKE_BASE_URL: Type.Optional(Type.String({ pattern: '^https?://[^\\s]+$' })),
  /**
   * Whose X-Forwarded-For to believe for the sender's IP: `false` (default), `true`, or a
   * comma-separated list of proxy addresses/CIDRs (the load balancer's).
   */
  INTAKE_TRUST_PROXY: Type.String({ pattern: '^(true|false|[0-9a-fA-F.:/, ]+)$', default: 'false' }),
  LOG_LEVEL: Type.Enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], { default: 'info' }),
  /** Webhooks waiting for their group commit; past this, intake answers 503. */
  INTAKE_WRITE_QUEUE_MAX: Type.Integer({ minimum: 1, default: 10000 }),
  /** Raw bytes waiting for their group commit; bounds memory whatever the body sizes. */
  INTAKE_WRITE_QUEUE_MAX_BYTES: Type.Integer({ minimum: 1024, default: 64 * 1024 * 1024 }),
  /**
   * How long the event loop may go without turning before the webhook addresses answer 503
   * (see src/intake/admission.ts); the write queue alone never fills when the CPU is the
   * limit. 0 turns it off.
   */
  INTAKE_MAX_EVENT_LOOP_LAG_MS: Type.Integer({ minimum: 0, maximum: 60_000, default: 250 }),
  /**
   * How long the oldest webhook may wait for its commit before the webhook addresses answer
   * 503 (the bound for when the database, not the CPU, is the limit). 0 turns it off.
   */
  INTAKE_MAX_QUEUE_WAIT_MS: Type.Integer({ minimum: 0, maximum: 60_000, default: 500 }),
  /** How often each node purges what is past retention, in seconds. */
  INTAKE_RETENTION_INTERVAL_SECONDS: Type.Integer({ minimum: 1, maximum: 86400, default: 600 }),
  /** Body limit of a new integration, in bytes (each integration may change its own). */
  INTAKE_DEFAULT_BODY_LIMIT: Type.Integer({ minimum: 1, maximum: 16 * 1024 * 1024, default: 1024 * 1024 }),
  /**
   * Failed authentications (missing or invalid API key) one client address may make per
   * window at the webhook addresses; past it, 429 without a key lookup. 0 turns it off.
   */
  INTAKE_AUTH_FAILURE_LIMIT: Type.Integer({ minimum: 0, default: 100 }),
  INTAKE_AUTH_FAILURE_WINDOW_SECONDS: Type.Integer({ minimum: 1, maximum: 86400, default: 60 }),
  /** Request line and headers together, in bytes; past it, 431. */
  INTAKE_MAX_HEADER_SIZE: Type.Integer({ minimum: 1024, maximum: 1024 * 1024, default: 16 * 1024 }),
  /** The request target (path and query), in characters; past it, 414. */
  INTAKE_MAX_URL_LENGTH: Type.Integer({ minimum: 256, maximum: 1024 * 1024, default: 8 * 1024 }),
  /** Time to receive a request's headers (slowloris), then 408 and the connection is closed. */
  INTAKE_HEADERS_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 600_000, default: 10_000 }),
  /** Time to receive a whole request, body included. */
  INTAKE_REQUEST_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 3_600_000, default: 30_000 }),
  /**
   * An idle keep-alive connection is closed after this; longer than the usual load balancer
   * idle timeout (60 s) so the balancer, not the server, closes first.
   */
  INTAKE_KEEP_ALIVE_TIMEOUT_MS: Type.Integer({ minimum: 1000, maximum: 3_600_000, default: 72_000 }),
  /** Open connections at most; one more is closed as soon as it is accepted. */
  INTAKE_MAX_CONNECTIONS: Type.Integer({ minimum: 1, default: 10_000 }),
  /** After SIGTERM, how long requests under way may take before their connections are closed. */
  INTAKE_SHUTDOWN_GRACE_MS: Type.Integer({ minimum: 0, maximum: 600_000, default: 10_000 }),
  /**
   * The key(s) sealing secrets the service reads back (see domain/secret-box.ts). SQLite
   * generates one into the data directory when unset; PostgreSQL needs it, the same on
   * every node.
   */
  INTAKE_SECRETS_KEY: Type.Optional(Type.String({ minLength: 1 })),
  /** `smtp://user:pass@host:port` or `smtps://…`: invitations and password resets by email. */
  INTAKE_SMTP_URL: Type.Optional(Type.String({ pattern: '^smtps?://[^\\s]+$' })),
  /** The From of those emails; default `intake <no-reply@HOST of INTAKE_BASE_URL>`. */
  INTAKE_SMTP_FROM: Type.Optional(Type.String({ minLength: 3, maxLength: 320 })),
  /**
   * CIDRs that destinations may reach although they are loopback, private or otherwise
   * refused (src/destinations/address-guard.ts), comma-separated.
   */
  INTAKE_DESTINATION_ALLOW: Type.Optional(Type.String({ minLength: 1 })),
  /** A destination failing this long without one success is disabled (its deliveries are held). */
  INTAKE_DESTINATION_DISABLE_AFTER_HOURS: Type.Integer({ minimum: 1, maximum: 8760, default: 120 }),
  /** Delivery requests in flight per node at most, across destinations. */
  INTAKE_DELIVERY_CONCURRENCY: Type.Integer({ minimum: 1, maximum: 10_000, default: 256 }),
  /**
   * How long a delivery's claim outlives its destination's timeout: a node that dies in the
   * middle of an attempt frees the delivery for another node (or itself, restarted) then.
   */
  INTAKE_DELIVERY_LEASE_SECONDS: Type.Integer({ minimum: 1, maximum: 3600, default: 30 }),
  /**
   * Deliveries one company may replay or send again an hour (src/services/redeliveries.ts),
   * 10,000 at once at most: what bounds the requests one company can make intake send
   * beyond what it receives.
   */
  INTAKE_REDELIVERY_BUDGET_PER_HOUR: Type.Integer({ minimum: 1, maximum: 10_000_000, default: 20_000 }),
  /**
   * A bearer token GET /metrics then asks for (`Authorization: Bearer …`); unset, /metrics
   * is open to whoever reaches it. At least 16 characters of RFC 6750's token alphabet.
   */
  INTAKE_METRICS_TOKEN: Type.Optional(Type.String({ minLength: 16, maxLength: 512, pattern: '^[A-Za-z0-9._~+/-]+=*$' })),
  /** /metrics on a port of its own (on HOST), and no longer on PORT; 0 takes any free port. */
  INTAKE_METRICS_PORT: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535 })),
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
    smtpUrl: raw.INTAKE_SMTP_URL,
    smtpFrom: raw.INTAKE_SMTP_FROM ?? `intake <no-reply@${new URL(baseUrl).hostname}>`,
    destinationAllow: raw.INTAKE_DESTINATION_ALLOW === undefined ? [] : parseCidrList(raw.INTAKE_DESTINATION_ALLOW),
    destinationDisableAfterMs: raw.INTAKE_DESTINATION_DISABLE_AFTER_HOURS * 3_600_000,
    deliveryConcurrency: raw.INTAKE_DELIVERY_CONCURRENCY,
    deliveryLeaseMarginMs: raw.INTAKE_DELIVERY_LEASE_SECONDS * 1000,
    redeliveryBudgetPerHour: raw.INTAKE_REDELIVERY_BUDGET_PER_HOUR,
    metricsToken: raw.INTAKE_METRICS_TOKEN,
    metricsPort: raw.INTAKE_METRICS_PORT,
  };
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
const SECRET_VARIABLES = new Set(['INTAKE_DATABASE_URL', 'INTAKE_SECRETS_KEY', 'INTAKE_SMTP_URL', 'INTAKE_METRICS_TOKEN']);
