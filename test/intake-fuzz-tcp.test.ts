import fc from 'fast-check';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Management } from '../src/services/management.js';
import { freshStore, type TestTenant } from './helpers.js';
import type { TestDatabase } from './support/databases.js';
import { FUZZ_ENV, INTAKE_STATUSES, RUNS, TRANSPORT_STATUSES, expectJsonError } from './support/fuzz-expectations.js';
import { bodies, contentTypes, evilValidBody, validBody } from './support/fuzz-inputs.js';
import { cleanupAll, LOOPBACK, startServer, type ServerProcess } from './support/processes.js';

/**
 * The intake fuzzing of intake-fuzz.test.ts, as raw bytes on a socket to a real server
 * process: every answer is well-formed HTTP, never a 5xx, every error a JSON body with
 * `error` and `message`; an acknowledged webhook is stored, a clean request's byte for
 * byte; and the server keeps answering throughout, logging no error.
 *
 * Properties with `examples` always try those inputs first: each once broke the property
 * (see the comments there), so they are checked on every run, not only when drawn.
 */

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * Writes `request` on a new connection and collects everything the server sends until it
 * closes the connection (every request says Connection: close). A request known to be
 * truncated is followed at once by closing the sending side, so the server sees it end;
 * so is any request after `idleMs` without a byte from the server (one the server still
 * waits on). A complete request keeps the sending side open: a server may take a client's
 * half-close as the client giving up, and answer nothing.
 */
function exchange(
  port: number,
  request: Buffer,
  options: { truncated: boolean; idleMs?: number; timeoutMs?: number },
): Promise<{ data: Buffer; timedOut: boolean; error?: string }> {
  return new Promise((resolve) => {
    const socket = connect(port, LOOPBACK);
    const chunks: Buffer[] = [];
    let timedOut = false;
    let error: string | undefined;
    const timer = setTimeout(() => {
      timedOut = true;
      socket.destroy();
    }, options.timeoutMs ?? 10_000);
    let idle: NodeJS.Timeout | undefined;
    const armIdle = () => {
      clearTimeout(idle);
      idle = setTimeout(() => socket.end(), options.idleMs ?? 1_500);
    };
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      armIdle();
    });
    socket.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
    socket.on('close', () => {
      clearTimeout(timer);
      clearTimeout(idle);
      resolve({ data: Buffer.concat(chunks), timedOut, error });
    });
    if (options.truncated) socket.end(request);
    else {
      socket.write(request);
      armIdle();
    }
  });
}

/** The HTTP/1.1 responses in a byte stream, in order; throws on anything that is not one. */
function parseResponses(data: Buffer): RawResponse[] {
  const responses: RawResponse[] = [];
  let at = 0;
  while (at < data.length) {
    const headEnd = data.indexOf('\r\n\r\n', at);
    if (headEnd < 0) throw new Error(`incomplete response head: ${JSON.stringify(data.subarray(at).toString('latin1').slice(0, 300))}`);
    const [statusLine, ...lines] = data.subarray(at, headEnd).toString('latin1').split('\r\n');
    const match = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(statusLine!);
    if (!match) throw new Error(`not an HTTP response: ${JSON.stringify(statusLine)}`);
    const status = Number(match[1]);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    at = headEnd + 4;
    let body: Buffer = Buffer.alloc(0);
    if (status >= 200 && status !== 204 && status !== 304) {
      if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
        const parts: Buffer[] = [];
        for (;;) {
          const lineEnd = data.indexOf('\r\n', at);
          if (lineEnd < 0) throw new Error('truncated chunked body');
          const size = parseInt(data.subarray(at, lineEnd).toString('latin1'), 16);
          at = lineEnd + 2;
          if (size === 0) {
            at = data.indexOf('\r\n', at) + 2;
            break;
          }
          parts.push(data.subarray(at, at + size));
          at += size + 2;
        }
        body = Buffer.concat(parts);
      } else if (headers['content-length'] !== undefined) {
        const length = Number(headers['content-length']);
        body = data.subarray(at, at + length);
        if (body.length !== length) throw new Error(`body shorter than Content-Length ${length}`);
        at += length;
      } else {
        body = data.subarray(at);
        at = data.length;
      }
    }
    responses.push({ status, headers, body });
  }
  return responses;
}

const latin1 = (bytes: Uint8Array) => Buffer.from(bytes).toString('latin1');

describe('intake fuzzing, a real server process over TCP', () => {
  let database: TestDatabase;
  let server: ServerProcess;
  let tenant: TestTenant;

  beforeAll(async () => {
    database = await freshStore();
    const management = new Management(
      database.store,
      { environment: 'development', baseUrl: 'http://127.0.0.1', defaultBodyLimit: 1024 * 1024 },
      { type: 'cli', id: 'fuzz', ip: null },
    );
    const companyId = (await management.createCompany('Raw fuzz')).id;
    const created = await management.createIntegration(companyId, { name: 'Raw' });
    tenant = {
      companyId,
      integrationId: created.integration.id,
      integrationKey: created.integration.integrationKey,
      apiKey: created.apiKey,
      keyId: created.keyId,
    };
    server = await startServer({ databaseUrl: database.databaseUrl, env: FUZZ_ENV });
  });

  afterAll(async () => {
    await cleanupAll();
    await database?.cleanup();
  });

  const readWebhook = (uuid: string) =>
    fetch(server.url(`/api/webhooks/${tenant.integrationKey}/${uuid}`), { headers: { 'x-api-key': tenant.apiKey } });

  test('whatever bytes arrive, every answer is well-formed, no 5xx, errors are JSON, and a 202 is stored byte for byte', async () => {
    const address = () => `/api/webhooks/${tenant.integrationKey}`;
    const targets = fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom(address(), `/api/webhook/${tenant.integrationKey}`) },
      fc.constantFrom(
        `${address()}/`,
        `${address()}?x=1&x=2`,
        `//api/webhooks/${tenant.integrationKey}`,
        `${address()}/../${tenant.integrationKey}`,
        `/api/webhooks/%2e%2e/${tenant.integrationKey}`,
        `http://evil.test${address()}`,
        '*',
        `${address()}#fragment`,
        `${address()}%00`,
        '/api/webhooks/%',
        '/api/webhooks/%ff%fe',
      ),
      fc.integer({ min: 1, max: 40_000 }).map((n) => `${address()}/${'a'.repeat(n)}`),
      fc.integer({ min: 1, max: 40_000 }).map((n) => `/api/webhooks/${'k'.repeat(n)}`),
      fc.uint8Array({ minLength: 1, maxLength: 40 }).map((bytes) => `/api/webhooks/${latin1(bytes)}`),
    );
    /** Header values as raw bytes: CR, LF, NUL, DEL, obs-text, folded lines, whole smuggled requests, very long ones. */
    const injected = fc.oneof(
      fc.constantFrom(
        'a\rb',
        'a\nb',
        'a\u0000b',
        '\u007f',
        'a\r\nX-Injected: 1',
        `a\r\n\r\nPOST ${address()} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${tenant.apiKey}\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{"event":"smug"}`,
        'a\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n',
        'a\r\nContent-Length: 0',
        'a\r\nTransfer-Encoding: chunked',
        'a\r\n X-Injected: folded',
        ' \t ',
        'é\u00ff',
      ),
      fc.uint8Array({ maxLength: 40 }).map(latin1),
      fc.integer({ min: 1000, max: 40_000 }).map((n) => 'x'.repeat(n)),
    );
    const sometimes = <T>(arbitrary: fc.Arbitrary<T>, weight = 1) =>
      fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight, arbitrary });
    /** Anything at all, on every part of the request. */
    const fuzzed = fc.record({
      method: fc.constantFrom('POST', 'POST', 'POST', 'GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'post', 'P@ST', 'PROPFIND'),
      target: targets,
      version: fc.constantFrom('HTTP/1.1', 'HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0', 'HTTP/1.2', 'HTTP/2.0', 'HTTP/9'),
      host: fc.constantFrom(true, true, true, true, false),
      apiKey: fc.oneof(
        { weight: 5, arbitrary: fc.constant(tenant.apiKey) },
        { weight: 1, arbitrary: fc.constant(undefined) },
        { weight: 1, arbitrary: fc.uint8Array({ maxLength: 60 }).map(latin1) },
      ),
      contentType: fc.oneof(
        { weight: 5, arbitrary: fc.constant('application/json') },
        { weight: 1, arbitrary: fc.constant(undefined) },
        { weight: 1, arbitrary: contentTypes },
      ),
      injection: sometimes(
        fc.tuple(
          fc.constantFrom('Idempotency-Key', 'X-API-Key', 'Content-Type', 'User-Agent', 'Webhook-Id', 'X-Fuzz', 'Host', 'Content-Length', 'Expect'),
          injected,
        ),
        3,
      ),
      expect: sometimes(fc.constantFrom('100-continue', '100-Continue', 'bogus', '')),
      body: fc.oneof({ weight: 3, arbitrary: validBody }, bodies),
      framing: fc.constantFrom('length', 'length', 'length', 'chunked', 'none', 'short', 'long', 'both'),
      chunkSize: fc.integer({ min: 1, max: 64 }),
    });
    /** A well-formed request to the address with the right key: its 202 must read back byte for byte. */
    const wellFormed = fc.record({
      method: fc.constant('POST'),
      target: fc.constantFrom(address(), `/api/webhook/${tenant.integrationKey}`),
      version: fc.constant('HTTP/1.1'),
      host: fc.constant(true),
      apiKey: fc.constant<string | undefined>(tenant.apiKey),
      contentType: fc.constant<string | undefined>('application/json'),
      injection: fc.constant(undefined),
      expect: fc.constantFrom(undefined, '100-continue'),
      // Mostly bodies that are accepted, whose bytes then must come back exactly.
      body: fc.oneof({ weight: 2, arbitrary: validBody }, { weight: 2, arbitrary: evilValidBody }, { weight: 1, arbitrary: bodies }),
      framing: fc.constantFrom('length', 'chunked'),
      chunkSize: fc.integer({ min: 1, max: 64 }),
    });
    const request = fc.oneof({ weight: 3, arbitrary: wellFormed }, { weight: 7, arbitrary: fuzzed });
    /** Requests that once broke a rule here, always tried first. */
    type Spec = typeof request extends fc.Arbitrary<infer T> ? T : never;
    const plain: Spec = {
      method: 'POST',
      target: address(),
      version: 'HTTP/1.1',
      host: true,
      apiKey: tenant.apiKey,
      contentType: 'application/json',
      injection: undefined,
      expect: undefined,
      body: Buffer.from('{"event":"e"}'),
      framing: 'length',
      chunkSize: 1,
    };
    const examples: Array<[Spec]> = [
      [{ ...plain, host: false }], // HTTP/1.1 without Host: Node's own 400, with an empty body
      [{ ...plain, expect: 'bogus' } as Spec], // Node's own 417, with an empty body
      [{ ...plain, body: Buffer.from('{"event":"\\u0000"}') }], // 503 on PostgreSQL
      [{ ...plain, target: `${address()}%00` }], // 503 on PostgreSQL
    ];

    let clean = 0;
    await fc.assert(
      fc.asyncProperty(request, async (spec) => {
        const head: string[] = [`${spec.method} ${spec.target} ${spec.version}`];
        if (spec.host) head.push(`Host: ${LOOPBACK}`);
        if (spec.apiKey !== undefined) head.push(`X-API-Key: ${spec.apiKey}`);
        if (spec.contentType !== undefined) head.push(`Content-Type: ${spec.contentType}`);
        if (spec.expect !== undefined) head.push(`Expect: ${spec.expect}`);
        if (spec.injection) head.push(`${spec.injection[0]}: ${spec.injection[1]}`);
        let payload = spec.body;
        switch (spec.framing) {
          case 'length':
            head.push(`Content-Length: ${spec.body.length}`);
            break;
          case 'short':
            head.push(`Content-Length: ${Math.max(0, spec.body.length - 1 - (spec.chunkSize % 5))}`);
            break;
          case 'long':
            head.push(`Content-Length: ${spec.body.length + spec.chunkSize}`);
            break;
          case 'chunked':
          case 'both': {
            if (spec.framing === 'both') head.push(`Content-Length: ${spec.body.length}`);
            head.push('Transfer-Encoding: chunked');
            const chunks: Buffer[] = [];
            for (let at = 0; at < spec.body.length; at += spec.chunkSize) {
              const piece = spec.body.subarray(at, at + spec.chunkSize);
              chunks.push(Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n'));
            }
            payload = Buffer.concat([...chunks, Buffer.from('0\r\n\r\n')]);
            break;
          }
        }
        head.push('Connection: close');
        const bytes = Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`, 'latin1'), payload]);
        const isClean =
          spec.method === 'POST' &&
          spec.version === 'HTTP/1.1' &&
          spec.host &&
          spec.apiKey === tenant.apiKey &&
          spec.contentType === 'application/json' &&
          spec.injection === undefined &&
          (spec.expect === undefined || spec.expect.toLowerCase() === '100-continue') &&
          (spec.framing === 'length' || spec.framing === 'chunked') &&
          (spec.target === address() || spec.target === `/api/webhook/${tenant.integrationKey}`);

        const { data, timedOut, error } = await exchange(server.port, bytes, { truncated: spec.framing === 'long' });
        const describeRun = () =>
          `request ${JSON.stringify(bytes.toString('latin1').slice(0, 400))} → ${JSON.stringify(data.toString('latin1').slice(0, 600))}${error ? ` (${error})` : ''}`;
        expect(timedOut, `no end of answer: ${describeRun()}`).toBe(false);
        expect(server.running, `the server exited: ${server.describe()}`).toBe(true);
        let responses: RawResponse[];
        try {
          responses = parseResponses(data);
        } catch (parseError) {
          throw new Error(`${(parseError as Error).message}: ${describeRun()}`);
        }
        const final = responses.filter((r) => r.status >= 200);
        if (isClean) {
          clean++;
          expect(final, describeRun()).toHaveLength(1);
        }
        for (const response of responses) {
          const what = describeRun();
          expect(response.status < 500, `5xx: ${what}`).toBe(true);
          expect(response.headers['x-injected'], what).toBeUndefined();
          if (response.status >= 400) {
            expect(INTAKE_STATUSES.has(response.status) || TRANSPORT_STATUSES.has(response.status), `status: ${what}`).toBe(true);
            expectJsonError(response.status, response.headers['content-type'], response.body.toString('utf8'), what);
          }
          if (response.status === 202 || response.status === 200) {
            const json = JSON.parse(response.body.toString('utf8')) as { uuid?: string };
            if (typeof json.uuid !== 'string') continue; // a 200 of /healthz, smuggled
            // Every acknowledged webhook is stored; a clean request's, byte for byte.
            const read = await readWebhook(json.uuid);
            const text = await read.text();
            expect(read.status, `acknowledged ${json.uuid} but cannot read it: ${text}; ${what}`).toBe(200);
            if (isClean && response.status === 202) {
              const rawBody = (JSON.parse(text) as { raw_body: string }).raw_body;
              expect(Buffer.from(rawBody, 'utf8').equals(spec.body), `raw body differs: ${what}`).toBe(true);
            }
          }
        }
      }),
      { numRuns: RUNS.rawSocket, examples },
    );
    // The generator must keep sending well-formed requests too, or byte-for-byte is untested.
    expect(clean).toBeGreaterThan(RUNS.rawSocket / 20);
  });

  test('after the run the server still answers: health, a webhook read back, the unpolluted canary, no error logged', async () => {
    expect(server.running, server.describe()).toBe(true);
    const health = await fetch(server.url('/healthz'));
    expect(health.status).toBe(200);
    const send = (body: string) =>
      fetch(server.url(`/api/webhooks/${tenant.integrationKey}`), {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': tenant.apiKey },
        body,
      });
    // A body without an event is refused: nothing on Object.prototype supplies one.
    const missing = await send('{"data":{}}');
    expect(missing.status, await missing.text()).toBe(422);
    const body = '{"event":"after the fuzz","data":{"ok":true}}';
    const accepted = await send(body);
    expect(accepted.status).toBe(202);
    const { uuid } = (await accepted.json()) as { uuid: string };
    const read = (await (await readWebhook(uuid)).json()) as { raw_body: string; event: string; data: unknown };
    expect(read.raw_body).toBe(body);
    expect(read.data).toEqual({ ok: true });
    // Nothing a client sent made the server log an error (an unhandled error or a failed commit).
    const errors = server
      .stdoutLines()
      .filter((line) => line.startsWith('{'))
      .filter((line) => (JSON.parse(line) as { level?: number }).level! >= 50);
    expect(errors, errors.join('\n').slice(0, 2000)).toEqual([]);
    expect(server.stderr).toBe('');
  });
});
