import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DEFAULT_PASSWORD_HASH_COST } from '../src/domain/password.js';
import { PASSWORD } from './support/api.js';
import { freshDatabase, type TestDatabase } from './support/databases.js';
import { operator } from './support/operator.js';
import { cleanupAll, startServer, type ServerProcess } from './support/processes.js';

/**
 * Issue 13, finding 2: the sign-in throttle was checked before the awaited lookup and the
 * password hashing, and counted after, so parallel guesses all got through (60 parallel
 * sign-ins for one account: 59 × 401, one 200, no 429); and 100 parallel junk sign-ins
 * from one address kept a real user waiting 26 s behind their password hashing. Here over
 * real TCP to the compiled server, requests in flight at once, each from the address it
 * names (Linux routes all of 127.0.0.0/8 to the loopback interface). At the production
 * password-hash cost: the bounds are about how long a check takes there.
 *
 * One server for the file: its sign-in bounds are per account and per address (and, for
 * the hashing, only while requests are in flight), so each test floods an account and
 * addresses of its own and finds them as a fresh server would. The accounts are made in the
 * store, as `intake user create` makes them (support/operator.ts), at the production cost.
 */
const PRODUCTION_COST = { INTAKE_PASSWORD_HASH_COST: String(DEFAULT_PASSWORD_HASH_COST) };
/** The account each test signs in to (the one its flood aims at, or another). */
const HOLDERS = { accountFlood: 'holder-1@example.com', junkFlood: 'holder-2@example.com', overallBound: 'holder-3@example.com' };
let server: ServerProcess;
let database: TestDatabase;

beforeAll(async () => {
  database = await freshDatabase({ dialect: 'sqlite' });
  const { management } = operator(database.store, PRODUCTION_COST);
  const company = await management.createCompany('Flooded');
  await Promise.all(Object.values(HOLDERS).map((email) => management.addUser(company.id, email, PASSWORD, 'owner')));
  server = await startServer({ databaseUrl: database.databaseUrl, env: PRODUCTION_COST });
});
afterAll(async () => {
  await server.stop();
  await cleanupAll();
  await database.cleanup();
});

interface Answer {
  status: number;
  retryAfter: string | undefined;
  code: string | undefined;
}

/** POST /api/v1/auth/login from `localAddress`, on a connection of its own. */
function signIn(email: string, password: string, localAddress: string): Promise<Answer> {
  const body = JSON.stringify({ email, password });
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: server.port,
        path: '/api/v1/auth/login',
        method: 'POST',
        localAddress,
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (response) => {
        let text = '';
        response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
        response.on('end', () => {
          const retryAfter = response.headers['retry-after'];
          resolve({ status: response.statusCode ?? 0, retryAfter, code: (JSON.parse(text) as { code?: string }).code });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const count = (answers: Answer[], status: number) => answers.filter((a) => a.status === status).length;

describe('sign-in under parallel requests (finding 2)', () => {
  test('60 parallel sign-ins for one account get at most 5 password checks; the rest are 429 with Retry-After', async () => {
    const account = HOLDERS.accountFlood;
    const guesses = Array.from({ length: 59 }, (_, i) => signIn(account, `wrong guess number ${i}`, '127.0.2.1'));
    const answers = await Promise.all([...guesses, signIn(account, PASSWORD, '127.0.2.1')]);
    expect(count(answers, 401)).toBeLessThanOrEqual(5);
    expect(count(answers, 429)).toBeGreaterThanOrEqual(54);
    expect(answers.filter((a) => a.status === 429).every((a) => Number(a.retryAfter) > 0)).toBe(true);
    expect(answers.every((a) => [200, 401, 429].includes(a.status))).toBe(true);
    // The throttle holds afterwards too: the right password gets no further check either.
    const later = await signIn(account, PASSWORD, '127.0.2.3');
    expect([200, 429]).toContain(later.status);
    if (count(answers, 401) === 5) expect(later.status).toBe(429);
  });

  test("100 parallel junk sign-ins from one address are refused at once, and another address's real sign-in goes through", async () => {
    const junk = Array.from({ length: 100 }, (_, i) => signIn(`nobody${i}@example.com`, 'some junk password', '127.0.3.1'));
    const real = signIn(HOLDERS.junkFlood, PASSWORD, '127.0.3.2');
    const [answers, mine] = await Promise.all([Promise.all(junk), real]);
    expect(mine.status).toBe(200);
    // Two at a time per address reach a password check; everything else is turned away before.
    expect(count(answers, 401)).toBeLessThanOrEqual(20);
    expect(count(answers, 429)).toBeGreaterThanOrEqual(80);
    expect(answers.every((a) => a.status === 401 || (a.status === 429 && Number(a.retryAfter) > 0))).toBe(true);
  });

  test('past the overall bound on password checks, sign-ins from many addresses are refused at once with 503 and Retry-After', async () => {
    const addresses = Array.from({ length: 40 }, (_, i) => `127.0.4.${i + 1}`);
    const answers = await Promise.all(addresses.map((address, i) => signIn(`someone${i}@example.com`, 'a wrong password', address)));
    // Two hashing and eight waiting: the other thirty are told to come back (a margin of
    // ten for the first checks that end before the last requests arrive on a busy machine).
    expect(count(answers, 401)).toBeLessThanOrEqual(20);
    expect(count(answers, 503)).toBeGreaterThanOrEqual(20);
    expect(count(answers, 401) + count(answers, 503)).toBe(40);
    expect(answers.filter((a) => a.status === 503).every((a) => a.retryAfter === '1' && a.code === 'service_unavailable')).toBe(true);
    // Once they are done, the real user signs in.
    expect((await signIn(HOLDERS.overallBound, PASSWORD, '127.0.4.100')).status).toBe(200);
  });
});
