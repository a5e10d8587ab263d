import { spawn } from 'node:child_process';
import { CLI_ENTRY, ROOT, baseEnv, type ServerProcess } from './processes.js';

/** `intake login` running as a child process: its code once printed, and its end. */
export interface RunningLogin {
  /** The user code (ABCD-EFGH) and the link, once the command has printed them; rejects if it exits first. */
  printed: Promise<{ code: string; link: string }>;
  exited: Promise<{ status: number | null; stdout: string; stderr: string }>;
}

/**
 * Starts `intake login --url <server> ARGS…` with its own config folder, as a person runs it
 * in a terminal; SIGKILLed after a minute, so a test that never approves does not hang.
 */
export function startLogin(server: ServerProcess, configDir: string, args: string[] = []): RunningLogin {
  const child = spawn(process.execPath, [CLI_ENTRY, 'login', '--url', server.baseUrl, ...args], {
    cwd: ROOT,
    env: { ...baseEnv(), INTAKE_CONFIG_DIR: configDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let found: (printed: { code: string; link: string }) => void = () => {};
  const printed = new Promise<{ code: string; link: string }>((resolve) => (found = resolve));
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    const match = /open (\S+)\n.*the code ([A-Z]{4}-[A-Z]{4})/.exec(stderr);
    if (match) found({ link: match[1]!, code: match[2]! });
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const exited = new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) =>
    child.once('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    }),
  );
  const exitedFirst = exited.then(({ stderr: said }) => Promise.reject(new Error(`intake login exited before printing its code: ${said}`)));
  return { printed: Promise.race([printed, exitedFirst]), exited };
}
