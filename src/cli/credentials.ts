import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * Where the commands that talk to a running intake over HTTP (`intake login`, `intake
 * listen`) keep what they need between runs: the key `intake login` received, and
 * `intake listen`'s cursors. INTAKE_CONFIG_DIR names the folder; otherwise
 * $XDG_CONFIG_HOME/intake, otherwise ~/.config/intake. The folder is 0700 and every file
 * in it 0600: a key in it reads the company's webhooks.
 */
export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.INTAKE_CONFIG_DIR) return env.INTAKE_CONFIG_DIR;
  const base = env.XDG_CONFIG_HOME || join(homedir(), '.config');
  return join(base, 'intake');
}

/** A key `intake login` received for one intake. */
export interface SavedLogin {
  /** The intake's origin, as given to `--url` (no trailing slash). */
  url: string;
  apiKey: string;
  keyId: string;
  companyId: string;
  companyName: string;
  /** The key's name in the panel (the machine's). */
  name: string;
  createdAt: string;
}

interface CredentialsFile {
  version: 1;
  /** By origin: one key per intake. */
  logins: Record<string, SavedLogin>;
}

const CREDENTIALS = 'credentials.json';

/** The origin a saved login is filed under: scheme, host and port, lower case. */
export function originOf(url: string): string {
  return new URL(url).origin;
}

export async function readLogins(dir = configDir()): Promise<Record<string, SavedLogin>> {
  const file = await readJson<CredentialsFile>(join(dir, CREDENTIALS));
  return file?.version === 1 && file.logins && typeof file.logins === 'object' ? file.logins : {};
}

/** The saved login for an intake, or the only one saved when no url is given. */
export async function findLogin(url: string | undefined, dir = configDir()): Promise<SavedLogin | undefined> {
  const logins = await readLogins(dir);
  if (url !== undefined) return logins[originOf(url)];
  const all = Object.values(logins);
  return all.length === 1 ? all[0] : undefined;
}

export async function saveLogin(login: SavedLogin, dir = configDir()): Promise<string> {
  const logins = await readLogins(dir);
  logins[originOf(login.url)] = login;
  const file: CredentialsFile = { version: 1, logins };
  return writePrivate(dir, CREDENTIALS, `${JSON.stringify(file, null, 2)}\n`);
}

export async function forgetLogin(url: string, dir = configDir()): Promise<SavedLogin | undefined> {
  const logins = await readLogins(dir);
  const origin = originOf(url);
  const gone = logins[origin];
  if (!gone) return undefined;
  delete logins[origin];
  await writePrivate(dir, CREDENTIALS, `${JSON.stringify({ version: 1, logins } satisfies CredentialsFile, null, 2)}\n`);
  return gone;
}

/** Parsed JSON, or undefined when the file is missing or not JSON (a half-written file is treated as none). */
export async function readJson<T>(path: string): Promise<T | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}

/**
 * Writes `name` in `dir` with mode 0600 (the folder 0700), whole or not at all: a temporary
 * file renamed over the old one, so a crash mid-write never leaves half a file. Returns the path.
 */
export async function writePrivate(dir: string, name: string, text: string): Promise<string> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const path = join(dir, name);
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, text, { mode: 0o600 });
  // writeFile's mode applies only to a new file; a leftover temporary keeps its own.
  await chmod(temporary, 0o600);
  await rename(temporary, path);
  return path;
}
