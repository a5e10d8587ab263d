import { useState, type FormEvent } from 'react';
import { Navigate, useNavigate, useSearchParams } from 'react-router';
import { api, ApiError } from '../api/client';
import type { Session } from '../api/types';
import { Field } from '../components/dialog';
import { ErrorMessage, Loading } from '../components/ui';
import { useSessionState } from '../session';
import './integrations.css';

/** Where to go after signing in: `?next=` when it is a path of the panel, else Integrations. */
export function nextPath(next: string | null): string {
  return next && next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/\\') ? next : '/integrations';
}

/** Sign-in with email and password. */
export function LoginPage() {
  const { state, start } = useSessionState();
  const navigate = useNavigate();
  const [params] = useSearchParams();
  const next = nextPath(params.get('next'));
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError>();

  if (state.status === 'loading') return <Loading />;
  if (state.status === 'signed-in' && !busy) return <Navigate to={next} replace />;

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const session = await api.post<Session>('/auth/login', { email: email.trim(), password });
      start(session);
      navigate(next, { replace: true });
    } catch (e) {
      setError(e as ApiError);
      setBusy(false);
    }
  };

  return (
    <div className="auth-page">
      <main className="auth-card">
        <div className="brand">intake</div>
        <h1>Sign in</h1>
        <p className="muted">Sign in to manage your integrations and read their webhooks.</p>
        <form className="form" onSubmit={submit}>
          <Field label="Email">
            <input
              type="email"
              autoComplete="username"
              value={email}
              onChange={(e) => setEmail(e.target.value)}
              required
              maxLength={320}
              autoFocus
            />
          </Field>
          <Field label="Password">
            <input
              type="password"
              autoComplete="current-password"
              value={password}
              onChange={(e) => setPassword(e.target.value)}
              required
              maxLength={1024}
            />
          </Field>
          {error && <SignInError error={error} />}
          <button type="submit" className="button primary auth-submit" disabled={busy}>
            {busy ? 'Signing in…' : 'Sign in'}
          </button>
        </form>
        <p className="muted small auth-footnote">
          No account? An owner of your company can add you under Members. The first account of a new installation is made with
          the setup link the server printed when it first started.
        </p>
      </main>
    </div>
  );
}

/** The API's own words; a 429 also says when to try again (from Retry-After). */
function SignInError({ error }: { error: ApiError }) {
  if (error.status === 429 && error.retryAfterSeconds !== undefined) {
    const minutes = Math.ceil(error.retryAfterSeconds / 60);
    const when = minutes <= 1 ? 'in a minute' : `in ${minutes} minutes`;
    return <ErrorMessage error={new Error(`${error.message} You can try again ${when}.`)} />;
  }
  return <ErrorMessage error={error} />;
}
