import { readFileSync, writeFileSync } from 'node:fs';
import { ensureDebianPackage, freePort, startProcess, type ServerProcess } from './processes.js';

/*
 * The destination the benchmark delivers to: nginx (Debian's nginx-light), one process,
 * answering every POST with 204 once it has read the body, and writing one line per
 * request to its access log: the arrival time and the `webhook-id`.
 *
 * It stands for the company's own systems, which in use run on other machines. Here it
 * shares the machine's two cores with the service, so every microsecond it spends is one
 * the service does not get: the bench's first receiver, bare node:http, took 47–48 µs of
 * CPU a delivery, nginx takes 17–20 (docs/performance-history.md, "fourth"). The closed loop's
 * generator was made wrk (C) for the same reason.
 *
 * Times are wall-clock milliseconds (`$msec`, to the millisecond), which the open loop's
 * generator stamps its 202s with as well (AcceptedLog).
 */
const NGINX = '/usr/sbin/nginx';

/** The receiver's process and what it saw, read from its access log. */
export class Receiver {
  private constructor(
    readonly server: ServerProcess,
    private readonly arrivalsPath: string,
  ) {}

  /** Installs nginx when missing (as the bench does wrk), starts it on a free port, resolves once it listens. */
  static async start(workDir: string, idHeader = 'webhook-id'): Promise<Receiver> {
    await ensureDebianPackage(NGINX, 'nginx-light', 'the destinations\' receiver');
    const port = await freePort();
    const arrivalsPath = `${workDir}/receiver-arrivals.log`;
    const logPath = `${workDir}/receiver.log`;
    writeFileSync(arrivalsPath, '');
    const configPath = `${workDir}/receiver-nginx.conf`;
    writeFileSync(configPath, nginxConfig(workDir, port, arrivalsPath, logPath, idHeader));
    const args = ['-p', workDir, '-c', configPath];
    // Ready once it answers; GETs are not logged as arrivals.
    const server = await startProcess(NGINX, args, process.env, { port, logPath, readyPath: '/', acceptAnyStatus: true });
    return new Receiver(server, arrivalsPath);
  }

  /** POSTs received since it started. */
  count(): number {
    let lines = 0;
    const log = readFileSync(this.arrivalsPath);
    for (let at = log.indexOf(10); at !== -1; at = log.indexOf(10, at + 1)) lines++;
    return lines;
  }

  /** Each request received from the `from`-th on: its webhook id and arrival (wall clock, ms). */
  arrivals(from: number): { ids: string[]; arrivedAt: number[] } {
    const ids: string[] = [];
    const arrivedAt: number[] = [];
    const lines = readFileSync(this.arrivalsPath, 'utf8').split('\n');
    for (const line of lines.slice(from)) {
      if (line === '') continue;
      const space = line.indexOf(' ');
      arrivedAt.push(Number(line.slice(0, space)) * 1000);
      ids.push(line.slice(space + 1));
    }
    return { ids, arrivedAt };
  }
}

/**
 * One process, no daemon, everything under the run's work dir. Keep-alive connections are
 * never closed by the receiver (the service's client keeps them), and bodies are read and
 * dropped (`return` discards them).
 */
function nginxConfig(workDir: string, port: number, arrivalsPath: string, logPath: string, idHeader: string): string {
  return `
daemon off;
master_process off;
worker_processes 1;
pid ${workDir}/receiver-nginx.pid;
error_log ${logPath} warn;
events { worker_connections 4096; }
http {
  client_body_temp_path ${workDir}/receiver-body;
  proxy_temp_path ${workDir}/receiver-proxy;
  fastcgi_temp_path ${workDir}/receiver-fastcgi;
  uwsgi_temp_path ${workDir}/receiver-uwsgi;
  scgi_temp_path ${workDir}/receiver-scgi;
  keepalive_requests 10000000;
  keepalive_timeout 300s;
  client_max_body_size 0;
  log_format arrivals '$msec $http_${idHeader.toLowerCase().replaceAll('-', '_')}';
  map $request_method $arrival { POST 1; default 0; }
  server {
    listen 127.0.0.1:${port} backlog=4096;
    access_log ${arrivalsPath} arrivals if=$arrival;
    location / { return 204; }
  }
}
`;
}
