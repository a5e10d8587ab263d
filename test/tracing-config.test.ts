import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, test } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { validDestinationHeaders } from '../src/domain/destination-headers.js';
import { ROOT } from './support/processes.js';

/**
 * Which OTEL variables turn tracing on, and what the SDK is given from them (src/config.ts
 * is their only reader); that the SDK is loaded only through the dynamic import a
 * configured endpoint makes; that a destination's own headers cannot name the trace.
 */

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error('the configuration was accepted');
}

describe('the OTEL variables', () => {
  test('no endpoint: tracing is off, whatever else is set', () => {
    expect(loadConfig({}).tracing).toBeUndefined();
    expect(loadConfig({ OTEL_TRACES_SAMPLER: 'always_on', OTEL_SERVICE_NAME: 'x' }).tracing).toBeUndefined();
  });

  test('an endpoint turns it on, with the defaults of the specification (and intake as the service)', () => {
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318/', INTAKE_ENV: 'staging' }).tracing).toEqual({
      tracesUrl: 'http://127.0.0.1:4318/v1/traces',
      headers: {},
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
      serviceName: 'intake',
      resourceAttributes: { 'deployment.environment.name': 'staging' },
    });
  });

  test('the traces endpoint is used as it is, and wins', () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://b/otlp/traces' };
    expect(loadConfig(env).tracing?.tracesUrl).toBe('https://b/otlp/traces');
  });

  test('OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn it off', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' };
    expect(loadConfig({ ...endpoint, OTEL_SDK_DISABLED: 'true' }).tracing).toBeUndefined();
    expect(loadConfig({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' }).tracing).toBeUndefined();
    expect(loadConfig({ ...endpoint, OTEL_SDK_DISABLED: 'false', OTEL_TRACES_EXPORTER: 'otlp' }).tracing).toBeDefined();
  });

  test('sampler, ratio, service name, headers and resource attributes', () => {
    const tracing = loadConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.1',
      OTEL_SERVICE_NAME: 'intake-eu',
      OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=abc%3D%3D, x-team = one',
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-team=traces',
      OTEL_RESOURCE_ATTRIBUTES: 'service.namespace=webhooks,deployment.environment.name=eu-prod',
    }).tracing;
    expect(tracing).toMatchObject({
      sampler: 'parentbased_traceidratio',
      samplerRatio: 0.1,
      serviceName: 'intake-eu',
      headers: { 'x-api-key': 'abc==', 'x-team': 'traces' },
      resourceAttributes: { 'service.namespace': 'webhooks', 'deployment.environment.name': 'eu-prod' },
    });
  });

  test('bad values stop the start, one line each; the headers are not repeated', () => {
    const secret = 'collector-secret-marker';
    const problems = problemsOf({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      OTEL_TRACES_SAMPLER: 'sometimes',
      OTEL_TRACES_SAMPLER_ARG: '1.5',
    });
    expect(problems.map((line) => line.split('=')[0])).toEqual(
      expect.arrayContaining(['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_PROTOCOL', 'OTEL_TRACES_SAMPLER', 'OTEL_TRACES_SAMPLER_ARG']),
    );
    expect(problems.find((line) => line.startsWith('OTEL_EXPORTER_OTLP_PROTOCOL'))).toContain('http/json');
    for (const headers of [`x-api-key=${secret}%zz`, `${secret}`, `x-api-key=${secret}%0d%0aHost: evil`, `bad name=${secret}`]) {
      const [line, ...more] = problemsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_EXPORTER_OTLP_HEADERS: headers });
      expect(more).toEqual([]);
      expect(line).toMatch(/^OTEL_EXPORTER_OTLP_HEADERS: /);
      expect(line).not.toContain(secret);
    }
  });
});

test("a destination's own headers cannot set traceparent or tracestate: intake's name the attempt", () => {
  for (const name of ['traceparent', 'TraceState']) {
    expect(() => validDestinationHeaders({ [name]: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' })).toThrow(/set by intake/);
  }
});

/** Every module of src, by its path from the root. */
function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

test('the SDK is loaded only when tracing is on: one module imports OpenTelemetry, and only a dynamic import reaches it', () => {
  const loaded = 'src/telemetry/otel-tracing.ts';
  const files = sources(join(ROOT, 'src')).map((path) => ({ path: relative(ROOT, path), text: readFileSync(path, 'utf8') }));
  // Type-only imports are erased from the build; any other names a module Node loads at start.
  const importsOtel = /^\s*import\s+(?!type\b)[^;]*?from\s+'@opentelemetry\//m;
  expect(files.filter((file) => importsOtel.test(file.text)).map((file) => file.path)).toEqual([loaded]);
  const staticImport = /^\s*(?:import|export)\s+(?!type\b)[^;]*?from\s+'[./]+(?:telemetry\/)?otel-tracing\.js'/m;
  expect(files.filter((file) => staticImport.test(file.text)).map((file) => file.path)).toEqual([]);
  expect(files.filter((file) => file.text.includes("import('./otel-tracing.js')")).map((file) => file.path)).toEqual(['src/telemetry/tracing.ts']);
});
