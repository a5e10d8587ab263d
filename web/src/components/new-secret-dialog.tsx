import type { ReactNode } from 'react';
import { Dialog } from './dialog';
import { CopyField } from './ui';

/**
 * A signing secret intake generated, shown this once: the API never shows it again. `use`
 * says where it goes (by default: where the sender of a source asks for its secret).
 */
export function ShownSecret({ secret, use = 'paste it where the sender asks for its webhook secret' }: { secret: string; use?: string }) {
  return (
    <>
      <p className="notice new-key-warning" role="alert">
        <strong>This signing secret will not be shown again. Copy it now</strong> and {use}; if it is lost, rotate the secret.
      </p>
      <CopyField label="Signing secret" value={secret} />
    </>
  );
}

/**
 * A new signing secret (a rotation, a changed source, a new destination), with what
 * happened above it and, in `details`, how to use it below.
 */
export function NewSecretDialog({
  secret,
  title = 'Your new signing secret',
  use,
  children,
  details,
  onClose,
}: {
  secret: string;
  title?: string;
  use?: string;
  children?: ReactNode;
  details?: ReactNode;
  onClose(): void;
}) {
  return (
    <Dialog title={title} onClose={onClose} wide>
      <div className="new-key">
        {children}
        <ShownSecret secret={secret} use={use} />
        {details}
        <div className="dialog-actions">
          <button type="button" className="button primary" onClick={onClose}>
            I have copied the secret
          </button>
        </div>
      </div>
    </Dialog>
  );
}
