import { useState, type FormEvent } from 'react';
import { Link, useNavigate, useSearchParams } from 'react-router';
import { api, ApiError } from '../api/client';
import { useApi } from '../api/use-api';
import { AuthPage, LinkProblem } from '../components/auth-page';
import { EmailField, NewPasswordFields, newPasswordProblem } from '../components/password-fields';
import { SignInError } from '../components/sign-in-form';
import { ErrorMessage, Loading } from '../components/ui';
import { useSessionState } from '../session';
import type { LoginNotice } from './login';

const NEW_RESET_LINK = (
  <>
    A reset link works once, for an hour. <Link to="/forgot-password">Ask for a new one</Link>.
  </>
);

/**
 * "Forgot your password?": asks for a reset link by email. The API answers the same words
 * whether or not the email has an account, so this page cannot tell who has one.
 */
export function ForgotPasswordPage() {
  const [email, setEmail] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError>();
  const [answer, setAnswer] = useState<string>();

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const { message } = await api.post<{ message: string }>('/auth/password-reset', { email: email.trim() });
      setAnswer(message);
    } catch (e) {
      setError(e as ApiError);
    } finally {
      setBusy(false);
    }
  };

  return (
    <AuthPage title="Reset your password" lead="Enter the email you sign in with; a link to choose a new password goes to it.">
      {answer ? (
        <p className="notice info" role="status">
          {answer}
        </p>
      ) : (
        <form className="form" onSubmit={submit}>
          <EmailField value={email} onChange={setEmail} autoFocus />
          {error && <SignInError error={error} />}
          <button type="submit" className="button primary auth-submit" disabled={busy}>
            {busy ? 'Sending…' : 'Send the reset link'}
          </button>
        </form>
      )}
      <p className="auth-links">
        <Link to="/login">Back to sign in</Link>
      </p>
    </AuthPage>
  );
}

/**
 * The reset link (`/admin/reset-password?token=…`): checked when it opens (which account,
 * or at once that it is used or expired), then a new password, twice. Every session of the
 * account ends, so the person signs in afresh (with their code if they have two-factor).
 */
export function ResetPasswordPage() {
  const [params] = useSearchParams();
  const token = params.get('token')?.trim() ?? '';
  if (!token) {
    return (
      <LinkProblem title="This reset link is incomplete" footnote={NEW_RESET_LINK}>
        The address has no reset token. Open the whole link from the email or from your operator (it ends with <code>?token=…</code>).
      </LinkProblem>
    );
  }
  return <ResetPassword token={token} />;
}

function ResetPassword({ token }: { token: string }) {
  const navigate = useNavigate();
  const { forget } = useSessionState();
  const link = useApi(() => api.post<{ email: string; expires_at: string }>('/auth/password-reset/check', { token }), [token]);
  const [password, setPassword] = useState('');
  const [repeat, setRepeat] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | Error>();
  const [linkInvalid, setLinkInvalid] = useState<string>();

  const invalid = linkInvalid ?? (link.error?.code === 'reset_link_invalid' ? link.error.message : undefined);
  if (invalid) {
    return (
      <LinkProblem title="This reset link cannot be used" footnote={NEW_RESET_LINK}>
        {invalid}
      </LinkProblem>
    );
  }
  if (link.error) {
    return (
      <AuthPage title="Choose a new password">
        <ErrorMessage error={link.error} retry={link.reload} />
      </AuthPage>
    );
  }
  if (!link.data) return <Loading />;

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setError(undefined);
    const problem = newPasswordProblem(password, repeat);
    if (problem) return setError(new Error(problem));
    setBusy(true);
    try {
      await api.post('/auth/password-reset/complete', { token, password });
      forget(); // this browser's session too, if it had one
      const state: LoginNotice = { notice: 'Your password is changed and every session of your account has ended. Sign in with the new password.' };
      navigate('/login', { replace: true, state });
    } catch (e) {
      const failure = e as ApiError;
      if (failure.code === 'reset_link_invalid') setLinkInvalid(failure.message);
      else setError(failure);
      setBusy(false);
    }
  };

  return (
    <AuthPage
      title="Choose a new password"
      lead={
        <>
          Choose a new password for <strong className="reset-email">{link.data.email}</strong>. Every session of the account ends; then
          you sign in with the new password.
        </>
      }
    >
      <form className="form" onSubmit={submit}>
        <NewPasswordFields password={password} repeat={repeat} onPassword={setPassword} onRepeat={setRepeat} autoFocus />
        {error && <ErrorMessage error={error} />}
        <button type="submit" className="button primary auth-submit" disabled={busy}>
          {busy ? 'Saving…' : 'Set the new password'}
        </button>
      </form>
    </AuthPage>
  );
}
