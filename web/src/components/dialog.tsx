import { useEffect, useRef, useState, type FormEvent, type ReactNode } from 'react';
import type { ApiError } from '../api/client';
import { ErrorMessage } from './ui';

/**
 * A modal on the native <dialog>: focus stays inside, Escape closes, the page behind is
 * inert. Mounted while open; `onClose` unmounts it.
 */
export function Dialog({ title, onClose, children, wide }: { title: string; onClose(): void; children: ReactNode; wide?: boolean }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
  }, []);
  return (
    <dialog ref={ref} className={wide ? 'dialog wide' : 'dialog'} aria-label={title} onClose={onClose} onCancel={onClose}>
      <header className="dialog-header">
        <h2>{title}</h2>
        <button type="button" className="button ghost small" aria-label="Close" onClick={onClose}>
          ✕
        </button>
      </header>
      <div className="dialog-body">{children}</div>
    </dialog>
  );
}

/**
 * A dialog around a form: runs `onSubmit`, shows the API's message when it fails, and
 * keeps the form open so nothing typed is lost.
 */
export function FormDialog({
  title,
  submitLabel,
  danger,
  wide,
  onClose,
  onSubmit,
  children,
}: {
  title: string;
  submitLabel: string;
  danger?: boolean;
  /** Room for what the form shows besides its fields (a preview). */
  wide?: boolean;
  onClose(): void;
  onSubmit(): Promise<void>;
  children: ReactNode;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError>();
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await onSubmit();
    } catch (e) {
      setError(e as ApiError);
      setBusy(false);
    }
  };
  return (
    <Dialog title={title} onClose={onClose} wide={wide}>
      <form onSubmit={submit} className="form">
        {children}
        {error && <ErrorMessage error={error} />}
        <div className="dialog-actions">
          <button type="button" className="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className={danger ? 'button danger' : 'button primary'} disabled={busy}>
            {busy ? 'Working…' : submitLabel}
          </button>
        </div>
      </form>
    </Dialog>
  );
}

/** "Are you sure?" for what cannot be undone. */
export function ConfirmDialog({
  title,
  children,
  confirmLabel,
  onClose,
  onConfirm,
}: {
  title: string;
  children: ReactNode;
  confirmLabel: string;
  onClose(): void;
  onConfirm(): Promise<void>;
}) {
  return (
    <FormDialog title={title} submitLabel={confirmLabel} danger onClose={onClose} onSubmit={onConfirm}>
      <div>{children}</div>
    </FormDialog>
  );
}

/** A labelled form field; `hint` explains, `children` is the input. */
export function Field({ label, hint, children }: { label: string; hint?: ReactNode; children: ReactNode }) {
  return (
    <label className="field">
      <span className="field-label">{label}</span>
      {children}
      {hint && <span className="field-hint">{hint}</span>}
    </label>
  );
}
