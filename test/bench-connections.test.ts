import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { ConnectionPool, type Exchange } from '../bench/http-connections.js';

/** The bench's open-loop client (bench/http-connections.ts): its figures are only as right as what it reads. */

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function serve(handler: (request: IncomingMessage, response: ServerResponse, body: Buffer) => void) {
  const sockets = new Set<Socket>();
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => handler(request, response, Buffer.concat(chunks)));
  });
  server.on('connection', (socket) => sockets.add(socket));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, sockets };
}

function poolFor(port: number, maxConnections: number) {
  return new ConnectionPool('127.0.0.1', port, maxConnections, {
    method: 'POST',
    path: '/api/webhooks/k?x=1',
    headers: { 'content-type': 'application/json', 'x-api-key': 'key' },
    body: Buffer.from('{"event":"e"}'),
  });
}

function exchange(pool: ConnectionPool): Promise<Exchange> {
  return new Promise((resolve) => pool.send(() => {}, resolve));
}

describe('ConnectionPool', () => {
  test('sends the request as given and reads each status and body, in pieces too, over one kept-alive connection', async () => {
    const { port, sockets } = await serve((request, response, body) => {
      const answer = JSON.stringify({ method: request.method, url: request.url, key: request.headers['x-api-key'], body: body.toString() });
      response.writeHead(202, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
      // Head and body apart, the body in two writes.
      response.flushHeaders();
      response.write(answer.slice(0, 5));
      setTimeout(() => response.end(answer.slice(5)), 5);
    });
    const pool = poolFor(port, 4);
    for (let i = 0; i < 3; i++) {
      const answer = await exchange(pool);
      expect(answer).toEqual({ status: 202, body: expect.any(Buffer) });
      expect(JSON.parse((answer as { body: Buffer }).body.toString())).toEqual({ method: 'POST', url: '/api/webhooks/k?x=1', key: 'key', body: '{"event":"e"}' });
    }
    expect(sockets.size).toBe(1);
    pool.destroy();
  });

  test('opens at most maxConnections; requests beyond wait for a free one, and those still waiting can be abandoned', async () => {
    const held: ServerResponse[] = [];
    const { port, sockets } = await serve((_request, response) => held.push(response));
    const pool = poolFor(port, 2);
    const answers: Exchange[] = [];
    const connected: number[] = [];
    for (let i = 0; i < 5; i++) pool.send(() => connected.push(i), (answer) => answers.push(answer));
    await expect.poll(() => held.length).toBe(2);
    expect(connected).toEqual([0, 1]);
    held.shift()!.writeHead(503, { 'content-length': 0 }).end();
    await expect.poll(() => held.length).toBe(2);
    expect(answers).toEqual([{ status: 503, body: Buffer.alloc(0) }]);
    expect(connected).toEqual([0, 1, 2]);
    expect(pool.abandonWaiting()).toBe(2);
    for (const response of held.splice(0)) response.writeHead(202, { 'content-length': 2 }).end('{}');
    await expect.poll(() => answers.length).toBe(3);
    expect(sockets.size).toBe(2);
    pool.destroy();
  });

  test('a connection the server closes, or says it will close, is not reused; a cancelled request closes its own', async () => {
    let served = 0;
    const { port, sockets } = await serve((_request, response) => {
      served++;
      if (served === 1) response.writeHead(200, { connection: 'close', 'content-length': 0 }).end();
      else if (served === 2) response.socket!.destroy();
      // The third is never answered.
    });
    const pool = poolFor(port, 1);
    expect(await exchange(pool)).toEqual({ status: 200, body: Buffer.alloc(0) });
    expect(await exchange(pool)).toEqual({ error: 'error closed' });
    const third = new Promise<Exchange>((resolve) => {
      const sent = pool.send(() => {}, resolve);
      setTimeout(() => sent.cancel('timeout'), 50);
    });
    expect(await third).toEqual({ error: 'timeout' });
    expect(sockets.size).toBe(3);
    pool.destroy();
  });
});
