import { useState } from 'react';
import { Link, Navigate, useLocation, useSearchParams } from 'react-router';
import { AuthPage } from '../components/auth-page';
import { SignInForm } from '../components/sign-in-form';
import { Loading } from '../components/ui';
import { useSessionState } from '../session';

/** Where to go after signing in: `?next=` when it is a path of the panel, else Integrations. */
export function nextPath(next: string | null): string {
  return next && next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/\\') ? next : '/integrations';
}

/** What a page that sends people here may say above the form (router state, never the URL). */
export interface LoginNotice {
  notice?: string;
}

/** Sign-in with email and password, and the two-factor code when the account has it. */
export function LoginPage() {
  const { state, start } = useSessionState();
  const location = useLocation();
  const [params] = useSearchParams();
  const next = nextPath(params.get('next'));
  // Why the session ended, until the password is accepted: the code step is a new start.
  const [passwordAccepted, setPasswordAccepted] = useState(false);
  const notice = passwordAccepted ? undefined : (location.state as LoginNotice | null)?.notice;

  if (state.status === 'loading') return <Loading />;
  // Also right after signing in: start() makes the state signed-in.
  if (state.status === 'signed-in') return <Navigate to={next} replace />;

  return (
    <AuthPage title="Sign in" lead="Sign in to manage your integrations and read their webhooks.">
      {notice && (
        <p className="notice info" role="status">
          {notice}
        </p>
      )}
      <SignInForm onSignedIn={(session) => start(session)} onCodeAsked={() => setPasswordAccepted(true)} />
      <p className="auth-links">
        <Link to="/forgot-password">Forgot your password?</Link>
      </p>
      <p className="muted small auth-footnote">
        No account? An owner of your company can invite you under Members. The first account of a new installation is made with
        the setup link the server printed when it first started.
      </p>
    </AuthPage>
  );
}
