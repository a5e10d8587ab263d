import { randomUUID } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { gitlab } from '../../src/sources/providers/gitlab.js';
import { expectAccepted, expectRefused, parsedBody, sampleRequest, secrets, signedRequest, verdictOf, withHeaders } from './requests.js';

/**
 * GitLab's X-Gitlab-Token. GitLab ships no verifier to test against: the requests below
 * carry the headers GitLab documents, with payloads shaped as its webhook events page shows.
 */

const TOKEN = 'gl-webhook-token-1234567890';

function gitlabRequest(body: object, headers: Record<string, string> = {}) {
  return signedRequest({
    headers: { 'content-type': 'application/json', 'x-gitlab-event': 'Push Hook', 'x-gitlab-token': TOKEN, 'idempotency-key': randomUUID(), ...headers },
    body: JSON.stringify(body),
  });
}

describe('gitlab', () => {
  test('the token verifies; another token, or none, does not', async () => {
    const request = gitlabRequest({ object_kind: 'push' });
    expectAccepted(await verdictOf(gitlab, request, secrets(TOKEN)));
    expectAccepted(await verdictOf(gitlab, request, secrets('the token before this one', TOKEN)), 'sec_2');
    for (const token of [`${TOKEN}x`, TOKEN.slice(0, -1), TOKEN.toUpperCase()]) {
      expectRefused(await verdictOf(gitlab, withHeaders(request, { 'x-gitlab-token': token }), secrets(TOKEN)), 'invalid_signature', 'X-Gitlab-Token does not match the secret', [TOKEN, token]);
    }
    expectRefused(gitlab.checkHeaders(withHeaders(request, { 'x-gitlab-token': undefined }), {}), 'invalid_signature', 'X-Gitlab-Token header is missing');
  });

  test('describes object_kind with its action, else the X-Gitlab-Event header; the id is Idempotency-Key', () => {
    const cases: Array<[object, string]> = [
      [{ object_kind: 'issue', object_attributes: { action: 'open' } }, 'issue.open'],
      [{ object_kind: 'merge_request', object_attributes: { action: 'merge', iid: 1 } }, 'merge_request.merge'],
      [{ object_kind: 'push', ref: 'refs/heads/main' }, 'push'],
      [{ object_kind: 'pipeline', object_attributes: { status: 'success' } }, 'pipeline'],
      [{ event_name: 'project_create', name: 'StoreCloud' }, 'project_create'],
      [{ something: 'else' }, 'Push Hook'],
    ];
    for (const [body, event] of cases) {
      const request = gitlabRequest(body);
      expect(gitlab.describe(request, parsedBody(request))).toEqual({ event, deliveryId: request.headers['idempotency-key'] });
    }
    const older = withHeaders(gitlabRequest({ object_kind: 'push' }), { 'idempotency-key': undefined, 'x-gitlab-event-uuid': randomUUID() });
    expect(gitlab.describe(older, parsedBody(older)).deliveryId).toBeUndefined();
  });

  test('its sample passes verify and describes as issue.open with a fresh Idempotency-Key', async () => {
    const now = Date.now();
    const sample = gitlab.sample(TOKEN, {}, '', now);
    const request = sampleRequest(sample, now);
    expectAccepted(await verdictOf(gitlab, request, secrets(TOKEN)));
    expect(gitlab.describe(request, parsedBody(request))).toEqual({ event: 'issue.open', deliveryId: sample.headers['Idempotency-Key'] });
    expect(gitlab.sample(TOKEN, {}, '', now).headers['Idempotency-Key']).not.toBe(sample.headers['Idempotency-Key']);
  });
});
