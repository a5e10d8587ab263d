import type { ReactNode } from 'react';
import { Dialog } from './dialog';
import { CopyField } from './ui';

/** A signing secret intake generated, shown this once: the API never shows it again. */
export function ShownSecret({ secret }: { secret: string }) {
  return (
    <>
      <p className="notice new-key-warning" role="alert">
        <strong>This signing secret will not be shown again. Copy it now</strong> and paste it where the sender asks for its
        webhook secret; if it is lost, rotate the secret.
      </p>
      <CopyField label="Signing secret" value={secret} />
    </>
  );
}

/** A new signing secret (a rotation, a changed source), with what happened above it. */
export function NewSecretDialog({ secret, children, onClose }: { secret: string; children?: ReactNode; onClose(): void }) {
  return (
    <Dialog title="Your new signing secret" onClose={onClose} wide>
      <div className="new-key">
        {children}
        <ShownSecret secret={secret} />
        <div className="dialog-actions">
          <button type="button" className="button primary" onClick={onClose}>
            I have copied the secret
          </button>
        </div>
      </div>
    </Dialog>
  );
}
