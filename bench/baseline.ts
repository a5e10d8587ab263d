import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';

/*
 * The floor intake is measured against: a bare node:http server that does the least any
 * webhook receiver must do (read the body, parse the JSON, answer 202 with an id) and
 * nothing else: no authentication, no validation, no storage. Its own process, like the
 * service, so the two compete for the machine the same way.
 */
const port = Number(process.env.PORT ?? 0);

const server = createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    try {
      JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      response.writeHead(400).end();
      return;
    }
    const body = JSON.stringify({ uuid: randomUUID(), received_at: new Date().toISOString() });
    response
      .writeHead(202, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) })
      .end(body);
  });
});

server.listen(port, '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)));
