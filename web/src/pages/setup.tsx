import { useState, type FormEvent } from 'react';
import { Link, useNavigate, useSearchParams } from 'react-router';
import { api, ApiError } from '../api/client';
import { MIN_PASSWORD_LENGTH, type Session } from '../api/types';
import { AuthPage, LinkProblem } from '../components/auth-page';
import { Field } from '../components/dialog';
import { EmailField } from '../components/password-fields';
import { ErrorMessage } from '../components/ui';
import { useSessionState } from '../session';

const NEW_SETUP_LINK = 'A new setup link is printed by the server when it starts with no accounts yet; ask its operator.';

/**
 * First-run setup from the one-time link the server printed (`/admin/setup?token=…`): the
 * company and its first owner, who is signed in at once.
 */
export function SetupPage() {
  const [params] = useSearchParams();
  const token = params.get('token')?.trim() ?? '';
  const { state, start } = useSessionState();
  const navigate = useNavigate();
  const [companyName, setCompanyName] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | Error>();
  const [linkInvalid, setLinkInvalid] = useState<string>();

  if (!token) {
    return (
      <LinkProblem title="This setup link is incomplete" footnote={NEW_SETUP_LINK}>
        The address has no setup token. Open the whole link the server printed when it first started (it ends with{' '}
        <code>?token=…</code>), or sign in if the installation is already set up.
      </LinkProblem>
    );
  }
  if (linkInvalid) {
    return (
      <LinkProblem title="This setup link cannot be used" footnote={NEW_SETUP_LINK}>
        {linkInvalid}
      </LinkProblem>
    );
  }

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setError(undefined);
    if (password.length < MIN_PASSWORD_LENGTH) {
      setError(new Error(`The password needs at least ${MIN_PASSWORD_LENGTH} characters.`));
      return;
    }
    setBusy(true);
    try {
      const session = await api.post<Session>('/auth/setup', {
        token,
        email: email.trim(),
        password,
        company_name: companyName.trim(),
      });
      start(session);
      navigate('/integrations', { replace: true });
    } catch (e) {
      const failure = e as ApiError;
      if (failure.code === 'setup_link_invalid') setLinkInvalid(failure.message);
      else setError(failure);
      setBusy(false);
    }
  };

  return (
    <AuthPage title="Set up intake" lead="Create your company and its first account. You will be its owner and can invite others later.">
      {state.status === 'signed-in' && (
        <p className="notice info">
          You are already signed in as {state.session.user.email}. <Link to="/integrations">Go to the panel</Link>.
        </p>
      )}
      <form className="form" onSubmit={submit}>
        <Field label="Company name" hint="Shown in the panel; you can change it later.">
          <input value={companyName} onChange={(e) => setCompanyName(e.target.value)} required maxLength={200} autoFocus />
        </Field>
        <EmailField value={email} onChange={setEmail} hint="You sign in with it." />
        <Field label="Password" hint={`At least ${MIN_PASSWORD_LENGTH} characters. A passphrase of a few words is easy to remember.`}>
          <input
            type="password"
            autoComplete="new-password"
            value={password}
            onChange={(e) => setPassword(e.target.value)}
            required
            minLength={MIN_PASSWORD_LENGTH}
            maxLength={1024}
          />
        </Field>
        {error && <ErrorMessage error={error} />}
        <button type="submit" className="button primary auth-submit" disabled={busy}>
          {busy ? 'Creating…' : 'Create company and account'}
        </button>
      </form>
      <p className="muted small auth-footnote">This link works once. Afterwards, sign in at the sign-in page.</p>
    </AuthPage>
  );
}
