import { randomInt, randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { Provider } from '../provider.js';
import {
  checkOwnSecret,
  field,
  firstMatch,
  headerOf,
  missing,
  newRandomSecret,
  refusalOf,
  sameSecret,
  stringField,
  type Checked,
} from './shared.js';

/**
 * GitLab: no signature; the webhook's secret token is sent as it is in `X-Gitlab-Token`.
 * https://docs.gitlab.com/user/project/integrations/webhooks/#create-a-webhook
 * Events (`object_kind`, `object_attributes.action`):
 * https://docs.gitlab.com/user/project/integrations/webhook_events/
 *
 * The delivery id is `Idempotency-Key`, which GitLab documents as the one ID that stays the
 * same across retries (https://docs.gitlab.com/user/project/integrations/webhooks/#delivery-headers).
 * `X-Gitlab-Event-UUID` is not: a retry gets a new one, and webhooks triggered by an earlier
 * webhook share one, so taking it could drop a distinct event as a repeat.
 */

const HEADER = 'X-Gitlab-Token';

function sentToken(headers: IncomingHttpHeaders): Checked<string> {
  const token = headerOf(headers, HEADER);
  return token === undefined ? missing(HEADER) : { ok: true, value: token };
}

export const gitlab: Provider = {
  type: 'gitlab',
  signatureHeader: () => HEADER,
  accepts: ['json'],
  generatesSecret: true,
  newSecret: newRandomSecret,
  checkSecret: checkOwnSecret,

  checkHeaders: (request) => refusalOf(sentToken(request.headers)),

  verify(request, secrets) {
    const sent = sentToken(request.headers);
    if (!sent.ok) return sent;
    return firstMatch(secrets, (secret) => sameSecret(sent.value, secret), [request.rawBody], HEADER);
  },

  describe(request, body) {
    const document = body.kind === 'json' ? body.value : undefined;
    // System hooks name some events in `event_name` only; the header ("Issue Hook") is the last resort.
    const kind = stringField(document, 'object_kind') ?? stringField(document, 'event_name');
    const action = stringField(field(document, 'object_attributes'), 'action');
    const deliveryId = headerOf(request.headers, 'Idempotency-Key');
    if (kind === undefined) return { event: headerOf(request.headers, 'X-Gitlab-Event'), deliveryId };
    return { event: action === undefined ? kind : `${kind}.${action}`, deliveryId };
  },

  sample(secret, _config, _publicUrl, now) {
    const at = new Date(now).toISOString();
    const user = { id: 1, name: 'Administrator', username: 'root' };
    const project = { id: 1, name: 'Gitlab Test', path_with_namespace: 'gitlabhq/gitlab-test', web_url: 'https://gitlab.example.com/gitlabhq' };
    const issue = { id: randomInt(1e6, 1e7), iid: 23, title: 'A test issue from intake', state: 'opened', action: 'open', created_at: at };
    const body = Buffer.from(JSON.stringify({ object_kind: 'issue', event_type: 'issue', user, project, object_attributes: issue }));
    return {
      query: '',
      headers: {
        'Content-Type': 'application/json',
        'User-Agent': 'GitLab/17.6.0',
        'X-Gitlab-Event': 'Issue Hook',
        'X-Gitlab-Instance': 'https://gitlab.example.com',
        'X-Gitlab-Webhook-UUID': randomUUID(),
        'X-Gitlab-Event-UUID': randomUUID(),
        'Idempotency-Key': randomUUID(),
        [HEADER]: secret,
      },
      body,
    };
  },
};
