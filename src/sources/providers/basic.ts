import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { SourceConfig } from '../../domain/source-types.js';
import type { Provider } from '../provider.js';
import {
  checkOwnSecret,
  genericEvent,
  genericSampleBody,
  headerOf,
  invalid,
  missing,
  newRandomSecret,
  refusalOf,
  sameSecret,
  type Checked,
} from './shared.js';

/**
 * HTTP Basic authentication, for senders that can only put a user name and password in the
 * address or a header: `Authorization: Basic base64(user:password)`, the password being the
 * source's secret. Nothing covers the body: it proves who sent, not what.
 * https://www.rfc-editor.org/rfc/rfc7617
 */

const HEADER = 'Authorization';
const DEFAULT_USERNAME = 'intake';

interface Credentials {
  username: string;
  password: string;
}

function sentCredentials(headers: IncomingHttpHeaders): Checked<Credentials> {
  const value = headerOf(headers, HEADER);
  if (value === undefined) return missing(HEADER);
  const [scheme = '', encoded = ''] = value.split(' ', 2);
  if (scheme.toLowerCase() !== 'basic') return invalid(`${HEADER} header is not Basic`);
  // RFC 7617: UTF-8, and the user name ends at the first colon (a password may hold more).
  const decoded = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon === -1) return invalid(`${HEADER} header holds no user name and password`);
  return { ok: true, value: { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) } };
}

export const basic: Provider = {
  type: 'basic',
  signatureHeader: () => HEADER,
  accepts: ['json', 'form'],
  generatesSecret: true,
  newSecret: newRandomSecret,
  checkSecret: checkOwnSecret,

  checkHeaders: (request) => refusalOf(sentCredentials(request.headers)),

  verify(request, secrets, config: SourceConfig) {
    const sent = sentCredentials(request.headers);
    if (!sent.ok) return sent;
    const { username, password } = sent.value;
    // Both compared every time, so the timing does not tell a right user name from a wrong one.
    const userMatches = sameSecret(username, config.username ?? DEFAULT_USERNAME);
    for (const secret of secrets) {
      if (sameSecret(password, secret.value) && userMatches) return { ok: true, secretId: secret.id, signed: [request.rawBody] };
    }
    return invalid('user name or password does not match');
  },

  describe: (_request, body) => ({ event: genericEvent(body), deliveryId: undefined }),

  sample(secret, config, _publicUrl, now) {
    const credentials = Buffer.from(`${config.username ?? DEFAULT_USERNAME}:${secret}`).toString('base64');
    return {
      query: '',
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': randomUUID(), [HEADER]: `Basic ${credentials}` },
      body: genericSampleBody(now),
    };
  },
};
