import type { ReactNode } from 'react';
import { Link } from 'react-router';

/**
 * The frame of every page shown outside the signed-in layout (sign-in, setup, invitation,
 * password reset): one card in the middle of the page.
 */
export function AuthPage({ title, lead, children }: { title: string; lead?: ReactNode; children: ReactNode }) {
  return (
    <div className="auth-page">
      <main className="auth-card">
        <div className="brand">intake</div>
        <h1>{title}</h1>
        {lead && <p className="muted">{lead}</p>}
        {children}
      </main>
    </div>
  );
}

/** A one-time link that cannot be used: why, and the way on. */
export function LinkProblem({ title, children, footnote }: { title: string; children: ReactNode; footnote?: ReactNode }) {
  return (
    <AuthPage title={title}>
      <p role="alert">{children}</p>
      <p>
        <Link className="button primary" to="/login">
          Go to sign in
        </Link>
      </p>
      {footnote && <p className="muted small">{footnote}</p>}
    </AuthPage>
  );
}
