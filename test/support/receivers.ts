import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Real HTTP receivers on loopback (port 0), standing for a company's systems: each behaves
 * one way a destination does in the field and keeps every request it got, byte for byte.
 */

/** One request as a receiver got it. */
export interface Received {
  method: string;
  path: string;
  /** Lower-cased names, as Node gives them. */
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** The client's port: two requests on one keep-alive connection share it. */
  remotePort: number;
}

export interface Receiver {
  /** `http://127.0.0.1:PORT/hook` (or `https://localhost:PORT/hook`). */
  url: string;
  port: number;
  received: Received[];
  /** TCP connections accepted so far. */
  readonly connections: number;
  close(): Promise<void>;
}

/** How a receiver answers its n-th request (0-based), once the whole body has arrived. */
export type Answer = (response: ServerResponse, request: Received, index: number) => void;

/** A receiver answering each request with `answer`. */
export async function startReceiver(answer: Answer): Promise<Receiver> {
  return listen(createServer(), answer, 'http', '127.0.0.1');
}

/** 2xx (200 unless told) with a short JSON body. */
export function okReceiver(status = 200): Promise<Receiver> {
  return startReceiver((response) => reply(response, status, '{"received":true}'));
}

/** `failures` times 500, then 200. */
export function flakyReceiver(failures: number): Promise<Receiver> {
  return startReceiver((response, _request, index) => (index < failures ? reply(response, 500, 'not yet') : reply(response, 200, 'ok')));
}

/** Never answers: the connection stays open until the client gives up. */
export function silentReceiver(): Promise<Receiver> {
  return startReceiver(() => undefined);
}

/** Reads the request, then closes the connection without a word of answer. */
export function hangUpReceiver(): Promise<Receiver> {
  return startReceiver((response) => response.socket?.destroy());
}

/** 429 with `Retry-After: <retryAfter>`. */
export function tooManyReceiver(retryAfter: string): Promise<Receiver> {
  return startReceiver((response) => reply(response, 429, 'slow down', { 'retry-after': retryAfter }));
}

/** 410 Gone: the destination no longer exists. */
export function goneReceiver(): Promise<Receiver> {
  return startReceiver((response) => reply(response, 410, 'gone'));
}

/** 302 to `location`. */
export function redirectReceiver(location: string): Promise<Receiver> {
  return startReceiver((response) => reply(response, 302, 'moved', { location }));
}

/** 200 with a body of `size` bytes (`abc…` repeated), longer than any excerpt. */
export function largeBodyReceiver(size = 10 * 1024): Promise<Receiver> {
  const body = Buffer.alloc(size, 'abcdefghijklmnopqrstuvwxyz');
  return startReceiver((response) => reply(response, 200, body));
}

/**
 * 200 over HTTPS with a self-signed certificate for `localhost` (made by openssl, which the
 * machine has): a client that verifies certificates refuses it.
 */
export async function selfSignedReceiver(): Promise<Receiver> {
  const dir = mkdtempSync(join(tmpdir(), 'intake-tls-'));
  const [keyFile, certFile] = [join(dir, 'key.pem'), join(dir, 'cert.pem')];
  const subject = ['-days', '1', '-subj', '/CN=localhost', '-keyout', keyFile, '-out', certFile];
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', ...subject], { stdio: 'ignore' });
  const [key, cert] = [readFileSync(keyFile), readFileSync(certFile)];
  rmSync(dir, { recursive: true });
  const server = createTlsServer({ key, cert });
  return listen(server, (response) => reply(response, 200, 'ok'), 'https', 'localhost');
}

function reply(response: ServerResponse, status: number, body: string | Buffer, headers: Record<string, string> = {}): void {
  response.writeHead(status, { 'content-type': 'text/plain', ...headers });
  response.end(body);
}

async function listen(server: Server, answer: Answer, scheme: 'http' | 'https', host: string): Promise<Receiver> {
  const received: Received[] = [];
  let connections = 0;
  server.on('connection', () => connections++);
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const got: Received = {
        method: request.method ?? '',
        path: request.url ?? '',
        headers: request.headers,
        body: Buffer.concat(chunks),
        remotePort: request.socket.remotePort ?? 0,
      };
      received.push(got);
      answer(response, got, received.length - 1);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `${scheme}://${host}:${port}/hook`,
    port,
    received,
    get connections() {
      return connections;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Receivers a test file starts, each closed by `closeAll` (its afterEach). */
export function receiverSet(): { add(start: Promise<Receiver>): Promise<Receiver>; closeAll(): Promise<void> } {
  const started: Receiver[] = [];
  return {
    async add(start) {
      const receiver = await start;
      started.push(receiver);
      return receiver;
    },
    async closeAll() {
      await Promise.all(started.splice(0).map((receiver) => receiver.close()));
    },
  };
}
