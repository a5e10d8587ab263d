import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import type { WebhookDefinition } from '@octokit/webhooks-examples';
import { sign, verify } from '@octokit/webhooks-methods';
import { describe, expect, test } from 'vitest';
import { github } from '../../src/sources/providers/github.js';
import { expectAccepted, expectRefused, flipped, MISMATCH, parsedBody, sampleRequest, secrets, signedRequest, verdictOf, verifyOnly, withHeaders } from './requests.js';

/** GitHub's X-Hub-Signature-256, against @octokit/webhooks-methods and GitHub's own examples. */

const SECRET = 'It’s a Secret to Everybody, really';
// CommonJS JSON whose types declare an ES default export, which TypeScript (NodeNext) reads differently from Node: required, as bench/event-body.ts does.
const examples = createRequire(import.meta.url)('@octokit/webhooks-examples') as WebhookDefinition[];

async function githubRequest(event: string, body: string, secret = SECRET) {
  return signedRequest({
    headers: {
      'content-type': 'application/json',
      'x-github-event': event,
      'x-github-delivery': randomUUID(),
      'x-hub-signature-256': await sign(secret, body),
    },
    body,
  });
}

describe('github', () => {
  test("GitHub's documented example verifies", async () => {
    // https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries#testing-the-webhook-payload-validation
    const request = signedRequest({
      headers: { 'x-hub-signature-256': 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17' },
      body: 'Hello, World!',
    });
    expectAccepted(await verifyOnly(github, request, secrets("It's a Secret to Everybody")));
    expectRefused(await verifyOnly(github, request, secrets('It’s a Secret to Everybody')), 'invalid_signature', MISMATCH);
  });

  test('a body signed by octokit verifies; a changed byte, another secret, a missing or malformed header do not', async () => {
    const body = JSON.stringify({ action: 'opened', issue: { number: 1, title: 'Ünïcödé ✓' } });
    const request = await githubRequest('issues', body);
    const signature = String(request.headers['x-hub-signature-256']);
    expectAccepted(await verdictOf(github, request, secrets(SECRET)));

    const hidden = [SECRET, signature.slice(7)];
    expectRefused(await verdictOf(github, { ...request, rawBody: flipped(body) }, secrets(SECRET)), 'invalid_signature', MISMATCH, hidden);
    expectRefused(await verdictOf(github, request, secrets('another secret entirely')), 'invalid_signature', MISMATCH, hidden);
    expectRefused(await verdictOf(github, request, secrets('one wrong secret', 'another wrong one')), 'invalid_signature', 'signature does not match any of the 2 secrets');

    const noHeader = withHeaders(request, { 'x-hub-signature-256': undefined });
    expectRefused(github.checkHeaders(noHeader, {}), 'invalid_signature', 'X-Hub-Signature-256 header is missing');
    expectRefused(await verifyOnly(github, noHeader, secrets(SECRET)), 'invalid_signature', 'X-Hub-Signature-256 header is missing');
    expectRefused(github.checkHeaders(withHeaders(request, { 'x-hub-signature-256': signature.replace('sha256=', 'sha1=') }), {}), 'invalid_signature', 'X-Hub-Signature-256 header does not start with sha256=');
    const lastDigit = signature.endsWith('0') ? '1' : '0';
    const changed = withHeaders(request, { 'x-hub-signature-256': signature.slice(0, -1) + lastDigit });
    expectRefused(await verdictOf(github, changed, secrets(SECRET)), 'invalid_signature', MISMATCH, hidden);
    const trailing = withHeaders(request, { 'x-hub-signature-256': `${signature}00` });
    expectRefused(await verdictOf(github, trailing, secrets(SECRET)), 'invalid_signature', 'X-Hub-Signature-256 header does not hold a hex SHA-256 signature', hidden);
  });

  test('the second of two live secrets is accepted and named', async () => {
    const request = await githubRequest('ping', JSON.stringify({ zen: 'Keep it logically awesome.' }));
    expectAccepted(await verdictOf(github, request, secrets('the old secret, rotated out', SECRET)), 'sec_2');
  });

  test('describes X-GitHub-Event, the action when there is one, and X-GitHub-Delivery; form bodies too', async () => {
    const request = await githubRequest('issues', JSON.stringify({ action: 'opened' }));
    expect(github.describe(request, parsedBody(request))).toEqual({ event: 'issues.opened', deliveryId: request.headers['x-github-delivery'] });
    const push = await githubRequest('push', JSON.stringify({ ref: 'refs/heads/main', action: 42 }));
    expect(github.describe(push, parsedBody(push)).event).toBe('push');

    const form = `payload=${encodeURIComponent(JSON.stringify({ action: 'created', comment: { body: 'a+b & c' } }))}`;
    const formRequest = signedRequest({
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-github-event': 'issue_comment', 'x-hub-signature-256': await sign(SECRET, form) },
      body: form,
    });
    expectAccepted(await verdictOf(github, formRequest, secrets(SECRET)));
    expect(github.describe(formRequest, parsedBody(formRequest)).event).toBe('issue_comment.created');
  });

  test('its sample passes its own verify and octokit verify, with a fresh delivery id', async () => {
    const now = Date.now();
    const [one, two] = [github.sample(SECRET, {}, '', now), github.sample(SECRET, {}, '', now)];
    const request = sampleRequest(one, now);
    expectAccepted(await verdictOf(github, request, secrets(SECRET)));
    expect(await verify(SECRET, one.body.toString('utf8'), one.headers['X-Hub-Signature-256']!)).toBe(true);
    expect(await verify('not the secret', one.body.toString('utf8'), one.headers['X-Hub-Signature-256']!)).toBe(false);
    const described = github.describe(request, parsedBody(request));
    expect(described.event).toBe('issues.opened');
    expect(described.deliveryId).toMatch(/^[0-9a-f-]{36}$/);
    expect(two.headers['X-GitHub-Delivery']).not.toBe(described.deliveryId);
  });

  test("every example payload of every event in @octokit/webhooks-examples verifies and describes as <event>[.<action>]", async () => {
    let count = 0;
    for (const definition of examples) {
      for (const example of definition.examples) {
        const body = JSON.stringify(example);
        const request = await githubRequest(definition.name, body);
        expectAccepted(await verdictOf(github, request, secrets(SECRET)));
        const action = (example as { action?: unknown }).action;
        const described = github.describe(request, parsedBody(request));
        expect(described.event).toBe(typeof action === 'string' ? `${definition.name}.${action}` : definition.name);
        expect(described.deliveryId).toBe(request.headers['x-github-delivery']);
        count += 1;
      }
    }
    expect(count).toBeGreaterThan(300);
  });
});
