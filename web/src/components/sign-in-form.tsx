import { useState, type FormEvent } from 'react';
import { api, ApiError } from '../api/client';
import type { Session, TwoFactorStep } from '../api/types';
import { Field } from './dialog';
import { EmailField } from './password-fields';
import { ErrorMessage } from './ui';

/**
 * Email and password, then (when the account has two-factor sign-in) the code: the same
 * email and password are sent again with `two_factor_code`, as the API's 202 step asks.
 * Used by the sign-in page and by the invitation page for people who already have an account.
 */
export function SignInForm({
  fixedEmail,
  submitLabel = 'Sign in',
  onSignedIn,
  onCodeAsked,
}: {
  /** The email is not the person's choice here (an invitation names it). */
  fixedEmail?: string;
  submitLabel?: string;
  /** Runs with the new session; a failure it throws is shown in the form. */
  onSignedIn(session: Session): Promise<void> | void;
  /** The password was right and the form now asks for the two-factor code. */
  onCodeAsked?(): void;
}) {
  const [email, setEmail] = useState(fixedEmail ?? '');
  const [password, setPassword] = useState('');
  const [code, setCode] = useState('');
  const [askCode, setAskCode] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError>();

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const body = { email: email.trim(), password, ...(askCode && { two_factor_code: code.trim() }) };
      const answer = await api.post<Session | TwoFactorStep>('/auth/login', body);
      if ('two_factor_required' in answer) {
        setAskCode(true);
        onCodeAsked?.();
        setCode('');
        setBusy(false);
        return;
      }
      await onSignedIn(answer);
    } catch (e) {
      const failure = e as ApiError;
      // A wrong password at the code step (changed meanwhile) starts again from the top.
      if (failure.code === 'invalid_credentials') setAskCode(false);
      setError(failure);
      setCode('');
      setBusy(false);
    }
  };

  const back = () => {
    setAskCode(false);
    setPassword('');
    setCode('');
    setError(undefined);
  };

  return (
    <form className="form" onSubmit={submit} aria-label={askCode ? 'Two-factor sign-in' : 'Sign in'}>
      {askCode ? (
        <>
          <p className="notice info" role="status">
            Your account has two-factor sign-in. Enter the 6-digit code your authenticator app shows for intake, or one of your
            recovery codes.
          </p>
          <Field label="Code" hint="A recovery code works once.">
            <input
              type="text"
              autoComplete="one-time-code"
              autoCapitalize="off"
              spellCheck={false}
              value={code}
              onChange={(e) => setCode(e.target.value)}
              required
              maxLength={64}
              autoFocus
            />
          </Field>
        </>
      ) : (
        <>
          <EmailField value={email} onChange={setEmail} readOnly={fixedEmail !== undefined} autoFocus={fixedEmail === undefined} />
          <Field label="Password">
            <input
              type="password"
              autoComplete="current-password"
              value={password}
              onChange={(e) => setPassword(e.target.value)}
              required
              maxLength={1024}
              autoFocus={fixedEmail !== undefined}
            />
          </Field>
        </>
      )}
      {error && <SignInError error={error} />}
      <button type="submit" className="button primary auth-submit" disabled={busy}>
        {busy ? 'Signing in…' : askCode ? 'Verify code' : submitLabel}
      </button>
      {askCode && (
        <button type="button" className="button ghost small" onClick={back}>
          Start again
        </button>
      )}
    </form>
  );
}

/** The API's own words; a 429 or 503 also says when to try again (from Retry-After). */
export function SignInError({ error }: { error: ApiError }) {
  if ((error.status === 429 || error.status === 503) && error.retryAfterSeconds !== undefined) {
    const minutes = Math.ceil(error.retryAfterSeconds / 60);
    const when = minutes <= 1 ? 'in a minute' : `in ${minutes} minutes`;
    return <ErrorMessage error={new Error(`${error.message} You can try again ${when}.`)} />;
  }
  return <ErrorMessage error={error} />;
}
