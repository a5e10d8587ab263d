import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Config } from './config.js';
import { newSecretsKey, parseSecretsKeys, SecretBox } from './domain/secret-box.js';

/** Where SQLite keeps its generated key: beside the database, readable by the service's user only. */
export const SECRETS_KEY_FILE = 'secrets.key';

/**
 * The box sealing secrets the service reads back. INTAKE_SECRETS_KEY when set (PostgreSQL
 * requires it, config.ts says so at start); otherwise, on SQLite, a key generated once into
 * the data directory, so `npm start` needs no setting. Back that file up with the database:
 * without it, sealed secrets (two-factor secrets) cannot be opened.
 */
export function openSecretBox(config: Pick<Config, 'secretsKeys' | 'databaseUrl'>): SecretBox {
  if (config.secretsKeys) return new SecretBox(config.secretsKeys);
  if (!config.databaseUrl.startsWith('sqlite:')) throw new Error('INTAKE_SECRETS_KEY is required with PostgreSQL');
  const path = config.databaseUrl.slice('sqlite:'.length);
  // An in-memory database lives as long as the process: so does its key.
  if (path === ':memory:') return new SecretBox(parseSecretsKeys(newSecretsKey()));
  const file = join(dirname(path), SECRETS_KEY_FILE);
  if (!existsSync(file)) {
    mkdirSync(dirname(file), { recursive: true });
    try {
      // 'wx': two processes starting at once cannot both write one.
      writeFileSync(file, `${newSecretsKey()}\n`, { mode: 0o600, flag: 'wx' });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
  chmodSync(file, 0o600);
  return new SecretBox(parseSecretsKeys(readFileSync(file, 'utf8').trim()));
}
