import { useEffect, useRef, useState } from 'react';
import { apiUrl } from '../api/client';

/**
 * Live tail: while `enabled`, an EventSource on GET /api/v1/webhooks/stream hands every
 * `webhook` event (a list item as JSON) to `onItem`. EventSource reconnects by itself after
 * a network error ("reconnecting"); when the server refuses the stream it stops ("stopped")
 * and `restart()` opens it again. Closed when disabled, when the query changes, and on unmount.
 */
export type LiveStatus = 'off' | 'connecting' | 'live' | 'reconnecting' | 'stopped';

export function useLiveTail<T>(
  enabled: boolean,
  query: Record<string, string | undefined>,
  onItem: (item: T) => void,
): { status: LiveStatus; restart(): void } {
  const [status, setStatus] = useState<LiveStatus>('off');
  const [attempt, setAttempt] = useState(0);
  const handler = useRef(onItem);
  handler.current = onItem;
  const url = apiUrl('/webhooks/stream', query);

  useEffect(() => {
    if (!enabled || typeof EventSource === 'undefined') {
      setStatus('off');
      return;
    }
    setStatus('connecting');
    const source = new EventSource(url, { withCredentials: true });
    source.onopen = () => setStatus('live');
    source.onerror = () => setStatus(source.readyState === EventSource.CLOSED ? 'stopped' : 'reconnecting');
    const receive = (event: MessageEvent<string>) => {
      let item: T;
      try {
        item = JSON.parse(event.data) as T;
      } catch {
        return;
      }
      handler.current(item);
    };
    source.addEventListener('webhook', receive);
    return () => {
      source.removeEventListener('webhook', receive);
      source.close();
    };
  }, [enabled, url, attempt]);

  return { status: enabled ? status : 'off', restart: () => setAttempt((n) => n + 1) };
}
