import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { DEFAULT_PASSWORD_HASH_COST, hashPassword, verifyPassword } from '../src/domain/password.js';
import { openStore } from '../src/store/open-store.js';
import { PASSWORD } from './support/api.js';
import { operator } from './support/operator.js';
import { cleanupAll, runCliJson, startServer, TEST_PASSWORD_HASH_COST, type ServerProcess } from './support/processes.js';

/**
 * Every other test runs at the lowest password-hash cost (TEST_PASSWORD_HASH_COST, given to
 * every test process): these check what production gets. A start without
 * INTAKE_PASSWORD_HASH_COST hashes at OWASP's N=2^17, such a hash verifies, and a node
 * configured otherwise still signs in with the hashes it already has.
 */

const PRODUCTION_N = 2 ** 17;
/** The N a stored `scrypt$N$r$p$salt$hash` was made with. */
const costOf = (hash: string) => Number(hash.split('$')[1]);

describe('INTAKE_PASSWORD_HASH_COST', () => {
  test('unset, it is 17 (N=2^17); 10 to 20 are taken, anything else stops the start naming it', () => {
    expect(DEFAULT_PASSWORD_HASH_COST).toBe(17);
    expect(loadConfig({}).passwordHashCost).toBe(17);
    expect(loadConfig({ INTAKE_PASSWORD_HASH_COST: '' }).passwordHashCost).toBe(17);
    expect(loadConfig({ INTAKE_PASSWORD_HASH_COST: '10' }).passwordHashCost).toBe(10);
    expect(loadConfig({ INTAKE_PASSWORD_HASH_COST: '20' }).passwordHashCost).toBe(20);
    for (const value of ['9', '21', '0', '17.5', 'high']) {
      let error: unknown;
      try {
        loadConfig({ INTAKE_PASSWORD_HASH_COST: value });
      } catch (caught) {
        error = caught;
      }
      expect(error, value).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).problems, value).toEqual([expect.stringMatching(/^INTAKE_PASSWORD_HASH_COST=/)]);
    }
  });

  test('a hash made at the production cost carries it and verifies, as one of the tests’ cost does', async () => {
    const production = await hashPassword(PASSWORD, DEFAULT_PASSWORD_HASH_COST);
    const cheap = await hashPassword(PASSWORD, Number(TEST_PASSWORD_HASH_COST));
    expect(production).toMatch(/^scrypt\$131072\$8\$1\$/);
    expect(costOf(cheap)).toBe(2 ** Number(TEST_PASSWORD_HASH_COST));
    for (const hash of [production, cheap]) {
      expect(await verifyPassword(PASSWORD, hash)).toBe(true);
      expect(await verifyPassword(`${PASSWORD}!`, hash)).toBe(false);
    }
  });
});

describe('a real start, without the variable', () => {
  let server: ServerProcess;
  let setupToken: string;
  // Empty is unset (the test processes' environment carries the low cost otherwise).
  const unset = { INTAKE_PASSWORD_HASH_COST: '' };
  const storedHash = (email: string) => {
    const db = new Database(server.dbPath!, { readonly: true });
    try {
      return (db.prepare('select password_hash from users where email = ?').get(email) as { password_hash: string }).password_hash;
    } finally {
      db.close();
    }
  };
  /** A company for `intake user create` to add to, made in the store: only the user's hash is the CLI's part here. */
  const company = async (name: string) => {
    const store = openStore(server.databaseUrl, { poolSize: 1 });
    try {
      return (await operator(store).management.createCompany(name)).id;
    } finally {
      await store.close();
    }
  };
  const signIn = async (email: string, password = PASSWORD) =>
    (
      await fetch(server.url('/api/v1/auth/login'), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email, password }),
      })
    ).status;

  beforeAll(async () => {
    server = await startServer({ env: unset });
    setupToken = (await server.waitForStdout(/\/admin\/setup\?token=([\w-]+)/))[1]!;
  });
  afterAll(() => cleanupAll());

  test('hashes the first owner’s password (setup link) and a CLI user’s at N=2^17, and both sign in', async () => {
    const setup = await fetch(server.url('/api/v1/auth/setup'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: setupToken, company_name: 'Acme', email: 'founder@example.com', password: PASSWORD }),
    });
    expect(setup.status).toBe(200);
    const { user } = (await setup.json()) as { user: { email: string }; companies: Array<{ id: string }> };
    const companyId = await company('Globex');
    await runCliJson(['user', 'create', '--company', companyId, '--email', 'operator@example.com', '--password', PASSWORD, '--role', 'owner'], server.cliEnv);

    for (const email of [user.email, 'operator@example.com']) {
      expect(costOf(storedHash(email)), email).toBe(PRODUCTION_N);
      expect(await signIn(email), email).toBe(200);
    }
    expect(await signIn(user.email, 'not the password at all')).toBe(401);
    expect(await signIn('nobody@example.com')).toBe(401);
  });

  test('restarted at a lower cost, the node and the CLI sign in with the hashes they have and make new ones at their own cost', async () => {
    const email = 'founder@example.com';
    const before = storedHash(email);
    expect(costOf(before)).toBe(PRODUCTION_N);
    await server.stop();
    server = await startServer({ dbPath: server.dbPath!, env: { INTAKE_PASSWORD_HASH_COST: '12' } });

    const login = await fetch(server.url('/api/v1/auth/login'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: PASSWORD }),
    });
    expect(login.status).toBe(200);
    const cookie = login.headers.getSetCookie().map((c) => c.split(';', 1)[0]!).join('; ');
    const { csrf_token } = (await login.json()) as { csrf_token: string };
    const changed = await fetch(server.url('/api/v1/account/password'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie, 'x-csrf-token': csrf_token },
      body: JSON.stringify({ current_password: PASSWORD, new_password: 'a new passphrase here' }),
    });
    expect(changed.status, await changed.text()).toBe(204);
    expect(costOf(storedHash(email))).toBe(2 ** 12);
    expect(await signIn(email, 'a new passphrase here')).toBe(200);

    const companyId = await company('Initech');
    await runCliJson(['user', 'create', '--company', companyId, '--email', 'second@example.com', '--password', PASSWORD, '--role', 'owner'], server.cliEnv);
    expect(costOf(storedHash('second@example.com'))).toBe(2 ** 12);
  });
});
