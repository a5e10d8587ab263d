import { createHmac, randomInt, randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { ParsedBody } from '../../domain/source-types.js';
import type { Provider } from '../provider.js';
import {
  checkOwnSecret,
  decodeDigest,
  firstMatch,
  formField,
  headerOf,
  invalid,
  missing,
  newRandomSecret,
  refusalOf,
  sameBytes,
  stringField,
  type Checked,
} from './shared.js';

/**
 * GitHub: `X-Hub-Signature-256: sha256=<hex>`, the HMAC-SHA256 of the body keyed with the
 * webhook's secret; no timestamp, so no replay window.
 * https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
 * Event and delivery headers, and the `action` of most payloads:
 * https://docs.github.com/en/webhooks/webhook-events-and-payloads
 *
 * node:crypto rather than @octokit/webhooks-methods' verify: that one takes the body as a
 * string, so the bytes received would be decoded and re-encoded before the HMAC (a body
 * that is not valid UTF-8 could no longer be checked byte for byte), and it is async for
 * no gain on Node; the tests check both agree on GitHub's whole example corpus.
 */

const HEADER = 'X-Hub-Signature-256';
const PREFIX = 'sha256=';

function sentSignature(headers: IncomingHttpHeaders): Checked<Buffer> {
  const value = headerOf(headers, HEADER);
  if (value === undefined) return missing(HEADER);
  if (!value.startsWith(PREFIX)) return invalid(`${HEADER} header does not start with ${PREFIX}`);
  const digest = decodeDigest(value.slice(PREFIX.length), 'hex', 32);
  return digest ? { ok: true, value: digest } : invalid(`${HEADER} header does not hold a hex SHA-256 signature`);
}

/** The payload's `action`: a JSON body, or a form's `payload` field (GitHub's other content type). */
function actionOf(body: ParsedBody): string | undefined {
  if (body.kind === 'json') return stringField(body.value, 'action');
  const payload = formField(body.fields, 'payload');
  if (payload === undefined) return undefined;
  try {
    return stringField(JSON.parse(payload), 'action');
  } catch {
    return undefined;
  }
}

export const github: Provider = {
  type: 'github',
  signatureHeader: () => HEADER,
  accepts: ['json', 'form'],
  generatesSecret: true,
  newSecret: newRandomSecret,
  checkSecret: checkOwnSecret,

  checkHeaders: (request) => refusalOf(sentSignature(request.headers)),

  verify(request, secrets) {
    const sent = sentSignature(request.headers);
    if (!sent.ok) return sent;
    return firstMatch(secrets, (secret) => sameBytes(sent.value, createHmac('sha256', secret).update(request.rawBody).digest()), [request.rawBody]);
  },

  describe(request, body) {
    const name = headerOf(request.headers, 'X-GitHub-Event');
    const action = actionOf(body);
    return {
      event: name !== undefined && action !== undefined ? `${name}.${action}` : name,
      deliveryId: headerOf(request.headers, 'X-GitHub-Delivery'),
    };
  },

  sample(secret, _config, _publicUrl, now) {
    const issue = {
      id: randomInt(1e9, 2e9),
      number: 1,
      title: 'A test issue from intake',
      state: 'open',
      created_at: new Date(now).toISOString().replace(/\.\d+Z$/, 'Z'),
      user: { login: 'octocat', id: 1, type: 'User' },
    };
    const repository = { id: 1296269, name: 'Hello-World', full_name: 'octocat/Hello-World', private: false };
    const body = Buffer.from(JSON.stringify({ action: 'opened', issue, repository, sender: issue.user }));
    return {
      query: '',
      headers: {
        'Content-Type': 'application/json',
        'User-Agent': 'GitHub-Hookshot/intake-test',
        'X-GitHub-Event': 'issues',
        'X-GitHub-Delivery': randomUUID(),
        'X-GitHub-Hook-ID': '1',
        [HEADER]: PREFIX + createHmac('sha256', secret).update(body).digest('hex'),
      },
      body,
    };
  },
};
