import type { ServerResponse } from 'node:http';

/**
 * Cuts off a long answer (a live tail, an export) whose client has stopped taking bytes:
 * once a write found the socket's buffer full, the answer has `timeoutMs` to drain, else
 * its connection is destroyed. That frees what was queued for it and, through the stream
 * feeding it, ends its reads, so a client that stops reading holds neither memory nor a
 * slot for longer than the bound. Returns the stop function (also called on close).
 */
export function cutOffStalledClient(response: ServerResponse, timeoutMs: number): () => void {
  let stalledSince: number | undefined;
  const check = () => {
    if (!response.writableNeedDrain) {
      stalledSince = undefined;
      return;
    }
    const now = Date.now();
    stalledSince ??= now;
    if (now - stalledSince >= timeoutMs) response.destroy();
  };
  const timer = setInterval(check, Math.min(1_000, Math.max(50, timeoutMs / 4)));
  timer.unref();
  const onDrain = () => (stalledSince = undefined);
  const stop = () => {
    clearInterval(timer);
    response.off('drain', onDrain);
  };
  response.on('drain', onDrain);
  response.once('close', stop);
  return stop;
}
