import type { Forwarded } from './forwarder.js';
import type { FeedWebhook } from './intake-client.js';

/**
 * What `intake listen` prints. A line per webhook on stdout (with `--json` one JSON object
 * a line, for scripts); everything else (connected, reconnecting, caught up) on stderr,
 * so stdout stays the webhooks alone.
 */
export interface Report {
  forwarded(webhook: FeedWebhook, integration: string, url: string, result: Forwarded, resent?: boolean): void;
  skipped(webhook: FeedWebhook, integration: string, why: string): void;
  /** A line about the session itself. */
  say(text: string): void;
}

export function jsonReport(out: NodeJS.WritableStream, err: NodeJS.WritableStream): Report {
  return {
    forwarded(webhook, integration, url, result, resent = false) {
      const line = {
        time: new Date().toISOString(),
        uuid: webhook.uuid,
        integration_id: webhook.integration_id,
        integration,
        event: webhook.event,
        received_at: webhook.received_at,
        url,
        status: result.status,
        ok: result.ok,
        duration_ms: Math.round(result.durationMs * 10) / 10,
        ...('failure' in result ? { error: result.failure } : { answer: result.firstLine }),
        ...(resent ? { resent: true } : {}),
      };
      out.write(`${JSON.stringify(line)}\n`);
    },
    skipped(webhook, integration, why) {
      out.write(`${JSON.stringify({ time: new Date().toISOString(), uuid: webhook.uuid, integration_id: webhook.integration_id, integration, event: webhook.event, skipped: why })}\n`);
    },
    say(text) {
      err.write(`${text}\n`);
    },
  };
}

const ANSI = { green: '\u001b[32m', red: '\u001b[31m', yellow: '\u001b[33m', dim: '\u001b[2m', reset: '\u001b[0m' } as const;

/** Lines for a person: time, integration, event, uuid, the local answer and its duration; coloured on a terminal. */
export function textReport(out: NodeJS.WritableStream & { isTTY?: boolean }, err: NodeJS.WritableStream, env = process.env): Report {
  const colour = Boolean(out.isTTY) && env.NO_COLOR === undefined && env.TERM !== 'dumb';
  const paint = (name: keyof typeof ANSI, text: string) => (colour ? `${ANSI[name]}${text}${ANSI.reset}` : text);
  const clock = () => new Date().toTimeString().slice(0, 8);
  return {
    forwarded(webhook, integration, _url, result, resent = false) {
      const answer =
        'failure' in result
          ? paint('red', result.failure)
          : paint(result.ok ? 'green' : 'red', String(result.status)) + (result.ok || !result.firstLine ? '' : ` ${result.firstLine}`);
      const again = resent ? paint('yellow', ' (sent again)') : '';
      out.write(`${paint('dim', clock())}  ${integration}  ${webhook.event}  ${paint('dim', webhook.uuid)}  → ${answer}  ${Math.round(result.durationMs)} ms${again}\n`);
    },
    skipped(webhook, integration, why) {
      out.write(`${paint('dim', clock())}  ${integration}  ${webhook.event}  ${paint('dim', webhook.uuid)}  ${paint('yellow', `skipped: ${why}`)}\n`);
    },
    say(text) {
      err.write(`${text}\n`);
    },
  };
}
