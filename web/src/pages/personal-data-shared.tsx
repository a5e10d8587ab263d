import { useState } from 'react';
import { api, type ApiError } from '../api/client';
import type { Erasure, ErasureState } from '../api/types';
import { ErrorMessage, numberFormat, type Tone } from '../components/ui';
import type { Directory } from './audit-names';

/** What the Personal data page's parts share: states in words, who asked, the report. */

/** Each state's badge; the state itself is shown as the API names it. */
export const ERASURE_TONES: Record<ErasureState, Tone> = {
  counting: 'info',
  previewed: 'warn',
  queued: 'info',
  running: 'info',
  completed: 'good',
  failed: 'bad',
  expired: 'neutral',
};

/** Still moving: the page asks again until it is not. */
export function inProgress(erasure: Erasure): boolean {
  return erasure.state === 'counting' || erasure.state === 'queued' || erasure.state === 'running';
}

/** A preview that finished counting and may still be confirmed. */
export function awaitingErase(erasure: Erasure, now = Date.now()): boolean {
  return erasure.state === 'previewed' && (erasure.expires_at === null || Date.parse(erasure.expires_at) > now);
}

/** Who requested or confirmed it, as the audit log names them. */
export function actorName(actor: { type: string; id: string | null } | null, directory: Directory): string {
  if (actor === null) return '—';
  if (actor.type === 'system') return 'intake';
  if (actor.id === null) return actor.type;
  if (actor.type === 'user') return directory.user(actor.id) ?? actor.id;
  if (actor.type === 'key') return `key ${directory.key(actor.id) ?? actor.id}`;
  return `operator ${actor.id}`;
}

/** "3 webhooks", "1 webhook". */
export function counted(n: number, one: string, many = `${one}s`): string {
  return `${numberFormat.format(n)} ${n === 1 ? one : many}`;
}

/**
 * Downloads the erasure's report (plain text, for the person who asked) as a file. It is
 * read through the panel's client, which names the company, then handed over as a Blob.
 */
export function ReportButton({ erasure }: { erasure: Erasure }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError>();
  const download = async () => {
    setBusy(true);
    setError(undefined);
    try {
      const text = await api.getText(`/erasures/${encodeURIComponent(erasure.id)}/report`);
      const url = URL.createObjectURL(new Blob([text], { type: 'text/plain;charset=utf-8' }));
      const link = document.createElement('a');
      link.href = url;
      link.download = `${erasure.id}.txt`;
      link.click();
      // As with recovery codes: Chrome reads the Blob a moment after the click.
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    } catch (e) {
      setError(e as ApiError);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button
        type="button"
        className="button small"
        aria-label={`Download the report of ${erasure.id}`}
        onClick={() => void download()}
        disabled={busy}
      >
        {busy ? 'Downloading…' : 'Report'}
      </button>
      {error && <ErrorMessage error={error} />}
    </>
  );
}
