import { useState, type FormEvent } from 'react';
import { api, type ApiError } from '../api/client';
import { useApi } from '../api/use-api';
import type { Account } from '../api/types';
import { Field } from '../components/dialog';
import { NewPasswordFields, newPasswordProblem } from '../components/password-fields';
import { ErrorMessage, Loaded, PageHeader } from '../components/ui';
import { useSession, useSessionState } from '../session';
import { TwoFactorCard } from './two-factor-card';
import './account.css';
import './company.css';

/**
 * The signed-in person's own account, the same in every company: their password and
 * two-factor sign-in. Only the account's holder ever chooses its password.
 */
export function AccountPage() {
  const { session } = useSession();
  const account = useApi(() => api.get<Account>('/account'), []);
  return (
    <>
      <PageHeader title="Account" description={`${session.user.email}: your password and two-factor sign-in, for every company you belong to.`} />
      <PasswordCard />
      <Loaded state={account}>{(data) => <TwoFactorCard account={data} onChanged={account.reload} />}</Loaded>
    </>
  );
}

function PasswordCard() {
  const { reload: reloadSession } = useSessionState();
  const [current, setCurrent] = useState('');
  const [password, setPassword] = useState('');
  const [repeat, setRepeat] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | Error>();
  const [done, setDone] = useState(false);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setError(undefined);
    setDone(false);
    const problem = newPasswordProblem(password, repeat);
    if (problem) return setError(new Error(problem));
    setBusy(true);
    try {
      await api.post('/account/password', { current_password: current, new_password: password });
      setCurrent('');
      setPassword('');
      setRepeat('');
      setDone(true);
      reloadSession(); // the session goes on; its CSRF token is read again in case it changed
    } catch (e) {
      const failure = e as ApiError;
      // The API's words are about signing in ("email or password"); here only one was typed.
      setError(failure.code === 'invalid_credentials' ? new Error('The current password is not correct.') : failure);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section className="card company-card" aria-labelledby="password-heading">
      <header className="company-card-header">
        <h2 id="password-heading">Password</h2>
      </header>
      {done && (
        <p className="notice info" role="status">
          Your password is changed. Every other session of your account was signed out; this one goes on.
        </p>
      )}
      <form className="form company-form" onSubmit={submit} aria-label="Change password">
        <Field label="Current password">
          <input type="password" autoComplete="current-password" value={current} onChange={(e) => setCurrent(e.target.value)} required maxLength={1024} />
        </Field>
        <NewPasswordFields password={password} repeat={repeat} onPassword={setPassword} onRepeat={setRepeat} />
        {error && <ErrorMessage error={error} />}
        <div className="actions">
          <button type="submit" className="button primary" disabled={busy}>
            {busy ? 'Saving…' : 'Change password'}
          </button>
          <span className="muted small">Every other session of your account ends: other browsers and devices sign in again.</span>
        </div>
      </form>
    </section>
  );
}
