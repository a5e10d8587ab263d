import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { newSecretsKey, parseSecretsKeys, SecretBox } from '../src/domain/secret-box.js';
import { openSecretBox, SECRETS_KEY_FILE } from '../src/secrets.js';

/** INTAKE_SECRETS_KEY and the box that seals the secrets the service reads back (today: TOTP secrets). */
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
    return [];
  } catch (error) {
    return (error as ConfigError).problems;
  }
}

describe('the secret box', () => {
  test('seals with a fresh nonce, opens what it sealed, and refuses anything altered', () => {
    const box = new SecretBox(parseSecretsKeys(newSecretsKey()));
    const a = box.seal('JBSWY3DPEHPK3PXP');
    const b = box.seal('JBSWY3DPEHPK3PXP');
    expect(a).not.toBe(b);
    expect(a).not.toContain('JBSWY3DPEHPK3PXP');
    expect(box.open(a)).toBe('JBSWY3DPEHPK3PXP');
    const [version, id, nonce, body] = a.split('.');
    const flipped = Buffer.from(body!, 'base64url');
    flipped[0]! ^= 1;
    expect(() => box.open([version, id, nonce, flipped.toString('base64url')].join('.'))).toThrow();
    expect(() => new SecretBox(parseSecretsKeys(newSecretsKey())).open(a)).toThrow(/not configured/);
  });

  test('keys rotate: the first seals, every key listed opens', () => {
    const [oldKey, newKey] = [newSecretsKey(), newSecretsKey()];
    const sealedBefore = new SecretBox(parseSecretsKeys(oldKey)).seal('before');
    const rotated = new SecretBox(parseSecretsKeys(`${newKey},${oldKey}`));
    expect(rotated.open(sealedBefore)).toBe('before');
    expect(new SecretBox(parseSecretsKeys(newKey)).open(rotated.seal('after'))).toBe('after');
  });
});

describe('INTAKE_SECRETS_KEY', () => {
  test('is required with PostgreSQL, and a bad one is refused without repeating it', () => {
    expect(problemsOf({ INTAKE_DATABASE_URL: 'postgres://db/intake' })).toEqual([
      expect.stringMatching(/^INTAKE_SECRETS_KEY is required with PostgreSQL/),
    ]);
    const problems = problemsOf({ INTAKE_SECRETS_KEY: 'too-short-to-be-a-key' });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^INTAKE_SECRETS_KEY: key 1 must be 32 bytes/);
    expect(problems[0]).not.toContain('too-short-to-be-a-key');
    expect(problemsOf({ INTAKE_DATABASE_URL: 'postgres://db/intake', INTAKE_SECRETS_KEY: `${newSecretsKey()},${'ab'.repeat(32)}` })).toEqual([]);
  });

  test('a bad SMTP URL or database URL is refused without its value (it may hold a password)', () => {
    const [smtp] = problemsOf({ INTAKE_SMTP_URL: 'http://user:hunter2@mail' });
    expect(smtp).toMatch(/^INTAKE_SMTP_URL=\(value not shown\)/);
    const [database] = problemsOf({ INTAKE_DATABASE_URL: 'mysql://user:hunter2@db' });
    expect(database).not.toContain('hunter2');
  });

  test('on SQLite without it, a key is generated once beside the database, readable by its owner only, and kept', () => {
    const dir = mkdtempSync(join(tmpdir(), 'intake-secrets-'));
    dirs.push(dir);
    const config = { databaseUrl: `sqlite:${join(dir, 'data', 'intake.db')}`, secretsKeys: undefined };
    const sealed = openSecretBox(config).seal('kept across restarts');
    const file = join(dir, 'data', SECRETS_KEY_FILE);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(parseSecretsKeys(readFileSync(file, 'utf8').trim())).toHaveLength(1);
    expect(openSecretBox(config).open(sealed)).toBe('kept across restarts');
  });
});
