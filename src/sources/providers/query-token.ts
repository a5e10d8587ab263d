import { randomUUID } from 'node:crypto';
import type { SourceConfig } from '../../domain/source-types.js';
import type { Provider, SignedRequest } from '../provider.js';
import {
  checkOwnSecret,
  firstMatch,
  genericEvent,
  genericSampleBody,
  invalid,
  newRandomSecret,
  refusalOf,
  sameSecret,
  type Checked,
} from './shared.js';

/**
 * A token in the address's query (`?token=…`): the last resort for senders that can set
 * nothing but a URL. The weakest type: nothing covers the body, and the token travels in
 * the address, which proxies, logs and browsers' histories keep. No provider documents it;
 * it is the "secret in the URL" scheme many webhook senders fall back to.
 */

const DEFAULT_PARAMETER = 'token';

function parameterOf(config: SourceConfig): string {
  return config.parameter ?? DEFAULT_PARAMETER;
}

function sentToken(request: Pick<SignedRequest, 'query'>, parameter: string): Checked<string> {
  const values = request.query.getAll(parameter);
  if (values.length > 1) return invalid(`${parameter} query parameter is given more than once`);
  const token = values[0];
  return token === undefined || token === '' ? invalid(`${parameter} query parameter is missing`) : { ok: true, value: token };
}

export const queryToken: Provider = {
  type: 'query_token',
  signatureHeader: (config) => `?${parameterOf(config)}=`,
  accepts: ['json', 'form'],
  generatesSecret: true,
  newSecret: newRandomSecret,
  checkSecret: checkOwnSecret,

  checkHeaders: (request, config) => refusalOf(sentToken(request, parameterOf(config))),

  verify(request, secrets, config) {
    const sent = sentToken(request, parameterOf(config));
    if (!sent.ok) return sent;
    return firstMatch(secrets, (secret) => sameSecret(sent.value, secret), [request.rawBody], 'token');
  },

  describe: (_request, body) => ({ event: genericEvent(body), deliveryId: undefined }),

  sample: (secret, config, _publicUrl, now) => ({
    query: `?${new URLSearchParams([[parameterOf(config), secret]]).toString()}`,
    headers: { 'Content-Type': 'application/json', 'Idempotency-Key': randomUUID() },
    body: genericSampleBody(now),
  }),
};
