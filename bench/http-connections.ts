import { connect, type Socket } from 'node:net';

/*
 * The open loop's HTTP/1.1 client: keep-alive connections, each carrying one request at a
 * time, over plain sockets. Each request is the same bytes, made once; an answer is read as
 * far as its status, its Content-Length and its body. node:http's client made a request
 * object, an agent's bookkeeping and a parser's events for each one: at twice intake's
 * maximum (12,000 a second, 10,000 connections) the generator, sharing the two cores with
 * the service, fell 5.9-10.4 s behind its schedule, and the overload measured the generator
 * (docs/performance-history.md, 2026-11-29).
 */

/** An answer, or why there is none: `error CODE`, or `error closed` when the server closed the connection first. */
export type Exchange = { status: number; body: Buffer } | { error: string };

interface Pending {
  /** The request has a connection and is being written. */
  onConnection(): void;
  onDone(exchange: Exchange): void;
  /** Its connection, once it has one. */
  connection?: Connection;
}

const HEADER_END = Buffer.from('\r\n\r\n');
const CONTENT_LENGTH = /\r\ncontent-length:[ \t]*(\d+)/i;
const CONNECTION_CLOSE = /\r\nconnection:[ \t]*close/i;

/** One keep-alive connection and the answer it is reading. */
class Connection {
  private readonly socket: Socket;
  private pending: Pending | undefined;
  private chunks: Buffer[] = [];
  private received = 0;
  /** Where the body starts and how long it is, once the head has been read. */
  private head: { bodyAt: number; length: number; close: boolean } | undefined;
  private open = false;
  private closed = false;

  constructor(
    host: string,
    port: number,
    private readonly request: Buffer,
    private readonly free: (connection: Connection) => void,
    private readonly gone: (connection: Connection) => void,
  ) {
    this.socket = connect({ host, port, noDelay: true });
    this.socket.on('connect', () => {
      this.open = true;
      if (this.pending) this.socket.write(this.request);
    });
    this.socket.on('data', (chunk: Buffer) => this.read(chunk));
    this.socket.on('error', (error: NodeJS.ErrnoException) => this.close(`error ${error.code ?? error.message}`));
    this.socket.on('close', () => this.close('error closed'));
  }

  /** Sends the request on this connection, which must be idle. */
  send(pending: Pending): void {
    this.pending = pending;
    pending.connection = this;
    pending.onConnection();
    if (this.open) this.socket.write(this.request);
  }

  /** Ends the connection (a request that timed out): its request, if any, settles as `reason`. */
  close(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.destroy();
    const pending = this.pending;
    this.pending = undefined;
    this.gone(this);
    pending?.onDone({ error: reason });
  }

  private read(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.received += chunk.length;
    if (this.head === undefined) {
      const data = this.chunks.length === 1 ? chunk : Buffer.concat(this.chunks);
      this.chunks = [data];
      const end = data.indexOf(HEADER_END);
      if (end < 0) return;
      const headText = data.toString('latin1', 0, end);
      const length = CONTENT_LENGTH.exec(headText)?.[1];
      if (length === undefined) {
        this.close('error no content-length');
        return;
      }
      this.head = { bodyAt: end + HEADER_END.length, length: Number(length), close: CONNECTION_CLOSE.test(headText) };
    }
    const { bodyAt, length, close } = this.head;
    if (this.received < bodyAt + length) return;
    const data = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    const status = Number(data.toString('latin1', 9, 12));
    const body = data.subarray(bodyAt, bodyAt + length);
    const pending = this.pending;
    this.pending = undefined;
    this.chunks = [];
    this.received = 0;
    this.head = undefined;
    if (close) this.close('error closed');
    else this.free(this);
    pending?.onDone({ status, body });
  }
}

/**
 * Up to `maxConnections` keep-alive connections to one address, sending the same request.
 * A request sent while every connection is busy waits for the first to be free.
 */
export class ConnectionPool {
  private readonly idle: Connection[] = [];
  /** Requests waiting for a connection, the next at `waitingFrom` (a queue without shift()'s copying). */
  private readonly waiting: Array<Pending | undefined> = [];
  private waitingFrom = 0;
  private connections = 0;
  private readonly request: Buffer;

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly maxConnections: number,
    request: { method: string; path: string; headers: Record<string, string>; body: Buffer },
  ) {
    const lines = Object.entries({ host: `${host}:${port}`, ...request.headers, 'content-length': String(request.body.length) }).map(
      ([name, value]) => `${name}: ${value}\r\n`,
    );
    this.request = Buffer.concat([Buffer.from(`${request.method} ${request.path} HTTP/1.1\r\n${lines.join('')}\r\n`, 'latin1'), request.body]);
  }

  /**
   * Sends the request when a connection is free; `onConnection` when it has one (where a
   * sender's timeout starts), `onDone` with its answer. The returned function ends it early
   * (its connection is closed, as a sender that gives up closes it).
   */
  send(onConnection: () => void, onDone: (exchange: Exchange) => void): { cancel(reason: string): void } {
    const pending: Pending = { onConnection, onDone };
    const connection = this.idle.pop() ?? this.newConnection();
    if (connection) connection.send(pending);
    else this.waiting.push(pending);
    return { cancel: (reason) => pending.connection?.close(reason) };
  }

  /** Requests still waiting for a connection: never sent, and forgotten. */
  abandonWaiting(): number {
    const count = this.waiting.length - this.waitingFrom;
    this.waiting.length = 0;
    this.waitingFrom = 0;
    return count;
  }

  /** Closes every idle connection (busy ones close as their requests settle or time out). */
  destroy(): void {
    for (const connection of this.idle.splice(0)) connection.close('error closed');
  }

  private newConnection(): Connection | undefined {
    if (this.connections >= this.maxConnections) return undefined;
    this.connections++;
    return new Connection(
      this.host,
      this.port,
      this.request,
      (free) => this.release(free),
      (closed) => this.closed(closed),
    );
  }

  /** A connection's answer is read: the next waiting request takes it, or it waits idle. */
  private release(connection: Connection): void {
    const next = this.nextWaiting();
    if (next) connection.send(next);
    else this.idle.push(connection);
  }

  /** A connection closed: a waiting request gets a new one in its place. */
  private closed(connection: Connection): void {
    this.connections--;
    const at = this.idle.indexOf(connection);
    if (at >= 0) this.idle.splice(at, 1);
    const next = this.nextWaiting();
    // There is room for one connection more: this one is gone.
    if (next) this.newConnection()!.send(next);
  }

  private nextWaiting(): Pending | undefined {
    if (this.waitingFrom === this.waiting.length) return undefined;
    const next = this.waiting[this.waitingFrom];
    this.waiting[this.waitingFrom++] = undefined;
    if (this.waitingFrom === this.waiting.length) {
      this.waiting.length = 0;
      this.waitingFrom = 0;
    }
    return next;
  }
}
