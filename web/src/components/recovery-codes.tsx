import { CopyButton } from './ui';

/**
 * Recovery codes just made, shown this once: each signs in once in place of the app's
 * code. Copy them all, or download them as a text file (a Blob URL, never a data: URL).
 */
export function RecoveryCodesView({ codes, email, onDone }: { codes: string[]; email: string; onDone(): void }) {
  const text = [
    `intake recovery codes for ${email}`,
    `Made ${new Date().toUTCString()}. Each code signs in once, in place of the code from your authenticator app.`,
    '',
    ...codes,
    '',
  ].join('\n');
  const download = () => {
    const url = URL.createObjectURL(new Blob([text], { type: 'text/plain;charset=utf-8' }));
    const link = document.createElement('a');
    link.href = url;
    link.download = 'intake-recovery-codes.txt';
    link.click();
    // Chrome reads the Blob when the download starts, a moment after the click; a minute
    // is ample, and the codes leave the page's memory then.
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  };
  return (
    <div className="recovery-codes">
      <p className="notice" role="alert">
        <strong>These recovery codes will not be shown again. Save them now</strong>, somewhere other than the device with your
        authenticator app. Each works once, if you lose the app.
      </p>
      <ol className="recovery-code-list" aria-label="Recovery codes">
        {codes.map((code) => (
          <li key={code}>
            <code>{code}</code>
          </li>
        ))}
      </ol>
      <div className="actions">
        <CopyButton text={codes.join('\n')} label="Copy the codes" />
        <button type="button" className="button small" onClick={download}>
          Download as text
        </button>
        <button type="button" className="button primary" onClick={onDone}>
          I have saved the codes
        </button>
      </div>
    </div>
  );
}
