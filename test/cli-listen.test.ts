import { randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { sign as signGitHub, verify as verifyGitHub } from '@octokit/webhooks-methods';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ListenProcess } from './support/listen.js';
import {
  cleanupAll,
  freePort,
  makeTempDir,
  runCli,
  runCliJson,
  sleep,
  startServer,
  type ServerProcess,
} from './support/processes.js';
import { startReceiver, type Receiver, type Received } from './support/receivers.js';

/**
 * `intake listen` from outside, as a developer runs it: a real server, the CLI as a child
 * process, and a local handler that verifies each webhook with the provider's own code
 * (stripe's constructEvent, @octokit/webhooks-methods' verify), knowing only the secrets
 * the providers signed with. What intake forwards must pass that check unchanged.
 */

const STRIPE_SECRET = `whsec_${randomUUID().replaceAll('-', '')}`;
const stripe = new Stripe('sk_test_unused');

interface Setup {
  server: ServerProcess;
  companyId: string;
  stripe: { id: string; url: string };
  github: { id: string; url: string; secret: string };
  key: string;
  keyId: string;
}

/** A company with a Stripe and a GitHub source, and a logs:read management key, made with the CLI. */
async function setUp(server: ServerProcess): Promise<Setup> {
  const env = server.cliEnv;
  const company = (await runCliJson<{ id: string }>(['company', 'create', '--name', 'Listen Co'], env)).json;
  const made = async (name: string, source: string, extra: string[] = []) =>
    (await runCliJson<{ id: string; webhook_url: string; source_secret?: string }>(
      ['integration', 'create', '--company', company.id, '--name', name, '--source', source, ...extra],
      env,
    )).json;
  const stripeIntegration = await made('Stripe', 'stripe', ['--secret', STRIPE_SECRET]);
  const github = await made('GitHub', 'github');
  const key = (await runCliJson<{ id: string; api_key: string }>(['key', 'create', '--company', company.id, '--scope', 'logs:read'], env)).json;
  return {
    server,
    companyId: company.id,
    stripe: { id: stripeIntegration.id, url: stripeIntegration.webhook_url },
    github: { id: github.id, url: github.webhook_url, secret: github.source_secret! },
    key: key.api_key,
    keyId: key.id,
  };
}

async function sendStripe(setup: Setup, type = 'payment_intent.succeeded', extra: Record<string, unknown> = {}): Promise<string> {
  const body = JSON.stringify({ id: `evt_${randomUUID()}`, object: 'event', type, livemode: false, data: { object: { id: 'pi_1', note: 'naïve ✓', ...extra } } });
  const signature = stripe.webhooks.generateTestHeaderString({ payload: body, secret: STRIPE_SECRET });
  return post(setup.stripe.url, body, { 'stripe-signature': signature });
}

async function sendGitHub(setup: Setup, event = 'issues'): Promise<string> {
  const body = JSON.stringify({ action: 'opened', issue: { number: Math.floor(Math.random() * 1e6), title: 'café' } }, null, 2);
  return post(setup.github.url, body, {
    'x-github-event': event,
    'x-github-delivery': randomUUID(),
    'x-hub-signature-256': await signGitHub(setup.github.secret, body),
  });
}

/** POSTs a webhook; the uuid of the 202. */
async function post(url: string, body: string, headers: Record<string, string>): Promise<string> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const answer = (await response.json()) as { uuid?: string };
  if (response.status !== 202 || !answer.uuid) throw new Error(`webhook refused: ${response.status} ${JSON.stringify(answer)}`);
  return answer.uuid;
}

/**
 * The developer's handler: /stripe verifies with Stripe's library, /github with GitHub's;
 * 200 when the signature holds, 400 with the library's reason when not.
 */
function verifyingHandler(githubSecret: string): Promise<Receiver> {
  return startReceiver((response, request) => {
    void verify(request, githubSecret).then(
      () => response.writeHead(200, { 'content-type': 'text/plain' }).end('ok'),
      (error: Error) => response.writeHead(400, { 'content-type': 'text/plain' }).end(`signature refused: ${error.message}`),
    );
  });
}

async function verify(request: Received, githubSecret: string): Promise<void> {
  if (request.path.startsWith('/stripe')) {
    stripe.webhooks.constructEvent(request.body, String(request.headers['stripe-signature']), STRIPE_SECRET);
  } else if (request.path.startsWith('/github')) {
    if (!(await verifyGitHub(githubSecret, request.body.toString('utf8'), String(request.headers['x-hub-signature-256'])))) {
      throw new Error('x-hub-signature-256 does not match');
    }
  } else {
    throw new Error(`no handler at ${request.path}`);
  }
}

function listen(setup: Setup, configDir: string, args: string[]): ListenProcess {
  return new ListenProcess(['--url', setup.server.baseUrl, '--json', ...args], { INTAKE_CONFIG_DIR: configDir, INTAKE_MANAGEMENT_KEY: setup.key });
}

const uuidsOf = (received: readonly Received[]) => received.map((r) => String(r.headers['intake-webhook-id']));

let setup: Setup;
beforeAll(async () => {
  setup = await setUp(await startServer());
});
afterAll(cleanupAll);

describe('forwarded as sent', () => {
  test("Stripe's and GitHub's own verification accept what listen forwards, with intake's headers and the developer's", async () => {
    const handler = await verifyingHandler(setup.github.secret);
    const listener = listen(setup, makeTempDir(), [
      '--forward-to',
      `Stripe=${handler.url.replace('/hook', '/stripe')}`,
      '--forward-to',
      `github=${handler.url.replace('/hook', '/github')}`,
      '--headers',
      'X-Dev-Run: yes',
    ]);
    try {
      await listener.ready();
      const sent = [await sendStripe(setup), await sendGitHub(setup), await sendStripe(setup, 'charge.refunded'), await sendGitHub(setup, 'push')];
      await listener.waitFor('four forwards', () => listener.forwarded().length >= 4);
      const lines = listener.forwarded();
      expect(lines.map((line) => line.uuid)).toEqual(sent);
      for (const line of lines) expect(line, JSON.stringify(line)).toMatchObject({ ok: true, status: 200, answer: 'ok' });
      expect(lines.map((line) => [line.integration, line.event])).toEqual([
        ['Stripe', 'payment_intent.succeeded'],
        ['GitHub', 'issues.opened'],
        ['Stripe', 'charge.refunded'],
        ['GitHub', 'push.opened'],
      ]);
      expect(uuidsOf(handler.received)).toEqual(sent);
      for (const request of handler.received) {
        expect(request.headers['content-type']).toBe('application/json');
        expect(request.headers['x-dev-run']).toBe('yes');
        expect(request.headers['intake-integration-id']).toBe(request.path.startsWith('/stripe') ? setup.stripe.id : setup.github.id);
        expect(request.headers['intake-event']).toEqual(expect.any(String));
      }
    } finally {
      await listener.interrupt();
      await handler.close();
    }
  });

  test('a handler that answers 500, or is not running, does not stop the stream: each line says what happened', async () => {
    const failing = await startReceiver((response) => response.writeHead(500).end('TypeError: boom\n    at handler (app.js:1:1)'));
    const closedPort = await freePort();
    const listener = listen(setup, makeTempDir(), ['--forward-to', `Stripe=${failing.url}`, '--forward-to', `GitHub=http://127.0.0.1:${closedPort}/down`]);
    try {
      await listener.ready();
      const sent = [await sendStripe(setup), await sendGitHub(setup), await sendStripe(setup)];
      await listener.waitFor('three forwards', () => listener.forwarded().length >= 3);
      const [first, second, third] = listener.forwarded();
      expect(first).toMatchObject({ uuid: sent[0], ok: false, status: 500, answer: 'TypeError: boom' });
      expect(second).toMatchObject({ uuid: sent[1], ok: false, status: null, error: expect.stringMatching(/^connection refused/) });
      expect(third).toMatchObject({ uuid: sent[2], status: 500 });
      expect(listener.exitInfo).toBeUndefined();
    } finally {
      await listener.interrupt();
      await failing.close();
    }
  });
});

describe('filters and where a run starts', () => {
  test('--integration and --event forward only what matches', async () => {
    const handler = await startReceiver((response) => response.writeHead(204).end());
    const listener = listen(setup, makeTempDir(), ['--forward-to', handler.url, '--integration', 'Stripe', '--event', 'payment_intent.*']);
    try {
      await listener.ready();
      const wanted = [await sendStripe(setup, 'payment_intent.created')];
      await sendGitHub(setup);
      await sendStripe(setup, 'charge.refunded');
      wanted.push(await sendStripe(setup, 'payment_intent.succeeded'));
      await listener.waitFor('two forwards', () => listener.forwarded().length >= 2);
      // The last one sent matches: anything that did not match was passed over before it.
      expect(listener.forwarded().map((line) => line.uuid)).toEqual(wanted);
      expect(uuidsOf(handler.received)).toEqual(wanted);
    } finally {
      await listener.interrupt();
      await handler.close();
    }
  });

  test('a first run starts from now; --replay N and --since send recent ones first', async () => {
    const handler = await startReceiver((response) => response.writeHead(200).end());
    const dir = makeTempDir();
    const before = [await sendGitHub(setup), await sendGitHub(setup)];
    const first = listen(setup, dir, ['--forward-to', handler.url, '--integration', 'GitHub']);
    await first.ready();
    expect(first.stderr).toMatch(/first run for this target: forwarding webhooks from now on/);
    const during = await sendGitHub(setup);
    await first.waitFor('one forward', () => first.forwarded().length >= 1);
    expect(first.forwarded().map((line) => line.uuid)).toEqual([during]);
    expect(await first.interrupt()).toEqual({ code: 0, signal: null });

    const replay = listen(setup, dir, ['--forward-to', handler.url, '--integration', 'GitHub', '--replay', '2']);
    await replay.waitFor('two forwards', () => replay.forwarded().length >= 2);
    expect(replay.forwarded().map((line) => line.uuid)).toEqual([before[1], during]);
    await replay.interrupt();

    const since = listen(setup, dir, ['--forward-to', handler.url, '--integration', 'GitHub', '--since', '1h']);
    // Earlier tests sent GitHub webhooks within the hour too: wait for the last of these.
    await since.waitFor('the webhook sent during the first run', () => since.forwarded().some((line) => line.uuid === during));
    // --since forwards in the order intake committed them, from an hour ago: these among them.
    const forwarded = since.forwarded().map((line) => line.uuid);
    expect(forwarded.slice(-3)).toEqual([...before, during]);
    await since.interrupt();
  });

  test('stopped and started again, it forwards what arrived meanwhile, each webhook once, and says how many', async () => {
    const handler = await startReceiver((response) => response.writeHead(200).end());
    const dir = makeTempDir();
    const args = ['--forward-to', handler.url, '--integration', 'Stripe'];
    const first = listen(setup, dir, args);
    await first.ready();
    const early = [await sendStripe(setup), await sendStripe(setup), await sendStripe(setup)];
    await first.waitFor('three forwards', () => first.forwarded().length >= 3);
    expect(await first.interrupt()).toEqual({ code: 0, signal: null });
    expect(first.stderr).toMatch(/stopped; the next run resumes here/);

    const meanwhile = [];
    for (let i = 0; i < 4; i++) meanwhile.push(await sendStripe(setup));
    const second = listen(setup, dir, args);
    await second.waitFor('four forwards', () => second.forwarded().length >= 4);
    await second.waitFor('caught-up line', () => /caught up: forwarded 4 webhooks that arrived since listen last ran/.test(second.stderr));
    const late = await sendStripe(setup);
    await second.waitFor('a fifth forward', () => second.forwarded().length >= 5);
    await second.interrupt();

    expect(second.forwarded().map((line) => line.uuid)).toEqual([...meanwhile, late]);
    expect(uuidsOf(handler.received)).toEqual([...early, ...meanwhile, late]);
    // The cursor file holds a read key's place only: mode 0600 in a 0700 folder.
    expect(statSync(join(dir, 'listen')).mode & 0o777).toBe(0o700);
  });
});

test('a revoked key ends the command with one clear line and status 1', async () => {
  const own = (await runCliJson<{ id: string; api_key: string }>(['key', 'create', '--company', setup.companyId, '--scope', 'logs:read'], setup.server.cliEnv)).json;
  const handler = await startReceiver((response) => response.writeHead(200).end());
  const listener = new ListenProcess(['--url', setup.server.baseUrl, '--key', own.api_key, '--forward-to', handler.url], {
    INTAKE_CONFIG_DIR: makeTempDir(),
  });
  try {
    await listener.ready();
    const revoked = await runCli(['key', 'revoke', '--key', own.id], setup.server.cliEnv);
    expect(revoked.code).toBe(0);
    const exit = await Promise.race([listener.exited, sleep(15_000).then(() => 'still running' as const)]);
    expect(exit).toEqual({ code: 1, signal: null });
    const last = listener.stderrLines().at(-1);
    expect(last).toMatch(/^intake: intake refused the key \(.+\): it may have been revoked/);
    expect(listener.stderr).not.toMatch(/\n\s+at /);
  } finally {
    await listener.kill();
    await handler.close();
  }
});

test('listen and intake killed with -9 during load, both restarted: every webhook intake acknowledged reaches the handler', async () => {
  const port = await freePort();
  let server = await startServer({ port });
  const own = await setUp(server);
  const handler = await startReceiver((response) => response.writeHead(200).end());
  const dir = makeTempDir();
  const args = ['--forward-to', handler.url, '--since', '1h'];
  const acknowledged: string[] = [];
  let sending = true;
  const load = Promise.all(
    Array.from({ length: 3 }, async () => {
      while (sending) {
        try {
          acknowledged.push(await sendStripe(own));
        } catch {
          // intake is down or refusing: not acknowledged, so not owed.
          await sleep(50);
        }
      }
    }),
  );
  const waitForAcks = async (n: number) => {
    const target = acknowledged.length + n;
    while (acknowledged.length < target) await sleep(10);
  };
  let listener = listen(own, dir, args);
  try {
    await listener.ready();
    await waitForAcks(30);
    expect((await listener.kill()).signal).toBe('SIGKILL');
    await waitForAcks(30);
    await server.kill();
    await sleep(300);
    server = await startServer({ port, databaseUrl: server.databaseUrl });
    // Started again without --since: from the cursor the killed one saved.
    listener = listen(own, dir, ['--forward-to', handler.url]);
    await waitForAcks(30);
    sending = false;
    await load;
    const owed = new Set(acknowledged);
    await listener.waitFor(`all ${owed.size} acknowledged webhooks at the handler`, () => {
      const got = new Set(uuidsOf(handler.received));
      return [...owed].every((uuid) => got.has(uuid));
    }, 60_000);
  } finally {
    sending = false;
    await load;
    await listener.kill();
    await server.kill();
    await handler.close();
  }
  // Two server starts, four CLI calls and the load: 16-19 s alone, over 30 s once in a full
  // run on two busy cores; the wait for the handler above may take up to 60 s of its own.
}, 120_000);
