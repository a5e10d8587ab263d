import { useState, type FormEvent } from 'react';
import { api, type ApiError } from '../api/client';
import type { Account, RecoveryCodes, TwoFactorSetup } from '../api/types';
import { Field, FormDialog } from '../components/dialog';
import { QrCode } from '../components/qr-code';
import { RecoveryCodesView } from '../components/recovery-codes';
import { Badge, CopyField, ErrorMessage } from '../components/ui';
import { useSessionState } from '../session';

/** Where the card is: showing the state, enrolling, or showing codes just made. */
type Stage = { kind: 'state' } | { kind: 'setup'; setup: TwoFactorSetup } | { kind: 'codes'; codes: string[] };

/** Codes left at which the card suggests making new ones. */
const FEW_CODES = 3;

/**
 * Two-factor sign-in (TOTP): set up with an authenticator app (QR code or the secret typed
 * in), confirmed by one code, which shows the recovery codes once; turned off or given new
 * recovery codes with the password.
 */
export function TwoFactorCard({ account, onChanged }: { account: Account; onChanged(): void }) {
  const { reload: reloadSession } = useSessionState();
  const [stage, setStage] = useState<Stage>({ kind: 'state' });
  const [dialog, setDialog] = useState<'disable' | 'codes'>();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError>();
  const [notice, setNotice] = useState<string>();

  const startSetup = async () => {
    setBusy(true);
    setError(undefined);
    setNotice(undefined);
    try {
      setStage({ kind: 'setup', setup: await api.post<TwoFactorSetup>('/account/two-factor/setup') });
    } catch (e) {
      setError(e as ApiError);
    } finally {
      setBusy(false);
    }
  };

  const backToState = (message?: string) => {
    setStage({ kind: 'state' });
    setNotice(message);
    onChanged();
  };

  return (
    <section className="card company-card" aria-labelledby="two-factor-heading">
      <header className="company-card-header">
        <h2 id="two-factor-heading">Two-factor sign-in</h2>
        {/* On from the moment the codes are shown: enabling made them, before the account is read again. */}
        {account.two_factor_enabled || stage.kind === 'codes' ? <Badge tone="good">on</Badge> : <Badge tone="warn">off</Badge>}
      </header>
      {notice && (
        <p className="notice info" role="status">
          {notice}
        </p>
      )}
      {stage.kind === 'setup' && (
        <Enrolment
          setup={stage.setup}
          onCancel={() => backToState()}
          onEnabled={(codes) => {
            setStage({ kind: 'codes', codes });
            reloadSession(); // the layout's two-factor banner reads the session
            onChanged();
          }}
        />
      )}
      {stage.kind === 'codes' && (
        <RecoveryCodesView codes={stage.codes} email={account.email} onDone={() => backToState('Two-factor sign-in is on.')} />
      )}
      {stage.kind === 'state' &&
        (account.two_factor_enabled ? (
          <>
            <p>
              Signing in asks for a code from your authenticator app after the password.{' '}
              <span className={account.recovery_codes_left <= FEW_CODES ? 'two-factor-codes-low' : undefined}>
                Recovery codes left: <strong className="recovery-codes-left">{account.recovery_codes_left}</strong>.
              </span>
            </p>
            <div className="actions">
              <button type="button" className="button" onClick={() => setDialog('codes')}>
                New recovery codes
              </button>
              <button type="button" className="button danger-outline" onClick={() => setDialog('disable')}>
                Turn off two-factor sign-in
              </button>
            </div>
          </>
        ) : (
          <>
            <p>
              With two-factor sign-in, a stolen password is not enough: signing in also asks for a code from an authenticator app on
              your phone (any app for time-based codes).
            </p>
            <button type="button" className="button primary" disabled={busy} onClick={() => void startSetup()}>
              {busy ? 'Starting…' : 'Set up two-factor sign-in'}
            </button>
          </>
        ))}
      {error && <ErrorMessage error={error} />}
      {dialog && (
        <PasswordDialog
          kind={dialog}
          onClose={() => setDialog(undefined)}
          onDone={(codes) => {
            setDialog(undefined);
            if (codes) {
              setNotice(undefined);
              setStage({ kind: 'codes', codes });
            } else {
              reloadSession();
              backToState('Two-factor sign-in is off.');
            }
          }}
        />
      )}
    </section>
  );
}

/** The QR code and the secret, then one code from the app to prove it is set up. */
function Enrolment({ setup, onCancel, onEnabled }: { setup: TwoFactorSetup; onCancel(): void; onEnabled(codes: string[]): void }) {
  const [code, setCode] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError>();

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const { recovery_codes } = await api.post<RecoveryCodes>('/account/two-factor/enable', { code: code.trim() });
      onEnabled(recovery_codes);
    } catch (e) {
      setError(e as ApiError);
      setCode('');
      setBusy(false);
    }
  };

  return (
    <div className="two-factor-setup">
      <ol className="two-factor-steps">
        <li>
          <p>Scan this QR code with your authenticator app:</p>
          <QrCode text={setup.otpauth_uri} label="QR code for your authenticator app" />
          <p className="muted small">
            On this phone? <a href={setup.otpauth_uri}>Open it in your authenticator app</a>. Or type the secret key in by hand:
          </p>
          <CopyField label="Secret key" value={setup.secret} />
        </li>
        <li>
          <form className="form company-form" onSubmit={submit} aria-label="Confirm two-factor sign-in">
            <Field label="6-digit code" hint="The code your app shows for intake now.">
              <input
                type="text"
                inputMode="numeric"
                autoComplete="one-time-code"
                pattern="\s*\d{6}\s*"
                value={code}
                onChange={(e) => setCode(e.target.value)}
                required
                maxLength={12}
              />
            </Field>
            {error && <ErrorMessage error={error} />}
            <div className="actions">
              <button type="submit" className="button primary" disabled={busy}>
                {busy ? 'Checking…' : 'Turn on two-factor sign-in'}
              </button>
              <button type="button" className="button" onClick={onCancel} disabled={busy}>
                Cancel
              </button>
            </div>
          </form>
        </li>
      </ol>
    </div>
  );
}

/** Turning off or replacing the recovery codes: both ask for the password again. */
function PasswordDialog({ kind, onClose, onDone }: { kind: 'disable' | 'codes'; onClose(): void; onDone(codes?: string[]): void }) {
  const [password, setPassword] = useState('');
  const disable = kind === 'disable';
  return (
    <FormDialog
      title={disable ? 'Turn off two-factor sign-in' : 'New recovery codes'}
      submitLabel={disable ? 'Turn off' : 'Make new codes'}
      danger={disable}
      onClose={onClose}
      onSubmit={async () => {
        try {
          if (disable) {
            await api.post('/account/two-factor/disable', { password });
            onDone();
          } else {
            onDone((await api.post<RecoveryCodes>('/account/two-factor/recovery-codes', { password })).recovery_codes);
          }
        } catch (e) {
          // The API's words are about signing in ("email or password"); here only the password was typed.
          throw (e as ApiError).code === 'invalid_credentials' ? new Error('The password is not correct.') : e;
        }
      }}
    >
      <p className="company-dialog-note">
        {disable
          ? 'Signing in will ask for your password only. Your recovery codes stop working.'
          : 'Your current recovery codes stop working; the new ones are shown once.'}
      </p>
      <Field label="Password">
        <input type="password" autoComplete="current-password" value={password} onChange={(e) => setPassword(e.target.value)} required maxLength={1024} autoFocus />
      </Field>
    </FormDialog>
  );
}
