import { createHmac } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { randomBase62 } from '../../domain/ids.js';
import type { ParsedBody } from '../../domain/source-types.js';
import type { Described, Provider } from '../provider.js';
import {
  decodeDigest,
  field,
  firstMatch,
  formField,
  headerOf,
  invalid,
  issuedByProvider,
  missing,
  outsideWindow,
  refusalOf,
  sameBytes,
  stringField,
  unixSeconds,
  type Checked,
} from './shared.js';

/**
 * Slack: `X-Slack-Signature: v0=<hex>`, the HMAC-SHA256 of `v0:<X-Slack-Request-Timestamp>:<body>`
 * keyed with the app's signing secret; a timestamp more than five minutes off is refused.
 * https://api.slack.com/authentication/verifying-requests-from-slack
 * Bodies: the Events API's JSON (https://api.slack.com/apis/events-api), interactivity's
 * form with a JSON `payload` (https://api.slack.com/interactivity/handling#payloads) and
 * slash commands' form (https://api.slack.com/interactivity/slash-commands).
 */

const HEADER = 'X-Slack-Signature';
const TIMESTAMP = 'X-Slack-Request-Timestamp';
const TOLERANCE_SECONDS = 300;

interface Signature {
  timestamp: string;
  digest: Buffer;
}

function sentSignature(headers: IncomingHttpHeaders, now: number): Checked<Signature> {
  const value = headerOf(headers, HEADER);
  if (value === undefined) return missing(HEADER);
  const timestamp = headerOf(headers, TIMESTAMP);
  if (timestamp === undefined) return missing(TIMESTAMP);
  const seconds = unixSeconds(timestamp);
  if (seconds === undefined) return invalid(`${TIMESTAMP} header is not a Unix time in seconds`);
  const digest = value.startsWith('v0=') ? decodeDigest(value.slice(3), 'hex', 32) : undefined;
  if (!digest) return invalid(`${HEADER} header is not v0= and a hex SHA-256 signature`);
  const expired = outsideWindow(seconds, now, TOLERANCE_SECONDS);
  return expired ? { ok: false, refusal: expired } : { ok: true, value: { timestamp, digest } };
}

function describeJson(event: unknown): Described {
  const type = stringField(event, 'type');
  // Slack checks a new Request URL by asking for its challenge back.
  if (type === 'url_verification') return { event: type, deliveryId: undefined, answer: { challenge: field(event, 'challenge') } };
  if (type === 'event_callback') return { event: stringField(field(event, 'event'), 'type'), deliveryId: stringField(event, 'event_id') };
  return { event: type, deliveryId: undefined };
}

function describeForm(fields: ReadonlyArray<[string, string]>): Described {
  const payload = formField(fields, 'payload');
  if (payload !== undefined) {
    try {
      return { event: stringField(JSON.parse(payload), 'type'), deliveryId: undefined };
    } catch {
      return { event: undefined, deliveryId: undefined };
    }
  }
  return { event: formField(fields, 'command') === undefined ? undefined : 'slash_command', deliveryId: undefined };
}

export const slack: Provider = {
  type: 'slack',
  signatureHeader: () => HEADER,
  accepts: ['json', 'form'],
  generatesSecret: false,
  newSecret: issuedByProvider('Slack'),
  checkSecret: (secret) =>
    /^[0-9A-Za-z]{32}$/.test(secret)
      ? undefined
      : "A Slack signing secret is 32 letters and digits: copy it from the app's Basic Information page.",

  checkHeaders: (request) => refusalOf(sentSignature(request.headers, request.now)),

  verify(request, secrets) {
    const sent = sentSignature(request.headers, request.now);
    if (!sent.ok) return sent;
    const base = `v0:${sent.value.timestamp}:`;
    return firstMatch(
      secrets,
      (secret) => sameBytes(sent.value.digest, createHmac('sha256', secret).update(base).update(request.rawBody).digest()),
      [base, request.rawBody],
    );
  },

  describe: (_request, body: ParsedBody) => (body.kind === 'json' ? describeJson(body.value) : describeForm(body.fields)),

  sample(secret, _config, _publicUrl, now) {
    const seconds = Math.floor(now / 1000);
    const mention = {
      type: 'app_mention',
      user: 'U061F7AUR',
      text: '<@U0LAN0Z89> a test event from intake',
      ts: `${seconds}.000200`,
      channel: 'C123ABC456',
      event_ts: `${seconds}.000200`,
    };
    const body = Buffer.from(
      JSON.stringify({
        token: 'XXYYZZ',
        team_id: 'T123ABC456',
        api_app_id: 'A123ABC456',
        event: mention,
        type: 'event_callback',
        event_id: `Ev${randomBase62(10).toUpperCase()}`,
        event_time: seconds,
      }),
    );
    const signature = createHmac('sha256', secret).update(`v0:${seconds}:`).update(body).digest('hex');
    return {
      query: '',
      headers: {
        'Content-Type': 'application/json',
        'User-Agent': 'Slackbot 1.0 (+https://api.slack.com/robots)',
        [TIMESTAMP]: String(seconds),
        [HEADER]: `v0=${signature}`,
      },
      body,
    };
  },
};
