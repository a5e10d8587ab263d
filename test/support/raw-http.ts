/**
 * HTTP/1.1 spoken by hand over a TCP connection, for tests of what node:http clients
 * cannot send or observe: oversized or malformed requests, several requests written in one
 * go, and when the server closes a connection.
 */
import { connect, type Socket } from 'node:net';
import { waitFor } from '../helpers.js';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export function parseResponse(text: string): RawResponse {
  const end = text.indexOf('\r\n\r\n');
  const [statusLine = '', ...lines] = text.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body: text.slice(end + 4) };
}

/** A TCP connection to the server, with everything it receives and whether it was closed. */
export interface Connection {
  socket: Socket;
  received: () => string;
  closed: Promise<void>;
  isClosed: () => boolean;
}

/** Opens a connection to the loopback port; its socket joins `opened`, for the test to destroy. */
export function openConnection(port: number, opened: Socket[]): Promise<Connection> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    opened.push(socket);
    let data = '';
    let closed = false;
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (data += chunk));
    // A reset is one way the server closes a connection.
    socket.on('error', () => {});
    const closedPromise = new Promise<void>((done) =>
      socket.once('close', () => {
        closed = true;
        done();
      }),
    );
    socket.once('connect', () => resolve({ socket, received: () => data, closed: closedPromise, isClosed: () => closed }));
    socket.once('error', reject);
  });
}

/** Sends one whole request and waits for its whole answer. */
export async function exchange(connection: Connection, request: string): Promise<RawResponse> {
  const before = connection.received().length;
  connection.socket.write(request);
  return answerAfter(connection, before);
}

/**
 * The first whole answer received after the first `from` characters (Content-Length bodies
 * only), or what came before the server closed the connection.
 */
export function answerAfter(connection: Connection, from: number): Promise<RawResponse> {
  return waitFor(async () => {
    const text = connection.received().slice(from);
    const end = text.indexOf('\r\n\r\n');
    if (end < 0) return connection.isClosed() ? parseResponse(text) : undefined;
    const response = parseResponse(text);
    const length = Number(response.headers['content-length'] ?? 0);
    return Buffer.byteLength(response.body) >= length || connection.isClosed() ? response : undefined;
  }, 'an answer');
}
