import { useEffect, useRef, useState, type FormEvent } from 'react';
import { useNavigate, useSearchParams } from 'react-router';
import { api, ApiError } from '../api/client';
import { useApi } from '../api/use-api';
import { MIN_PASSWORD_LENGTH, type InvitationOffer, type Session } from '../api/types';
import { AuthPage, LinkProblem } from '../components/auth-page';
import { Field } from '../components/dialog';
import { SignInForm } from '../components/sign-in-form';
import { Badge, ErrorMessage, Loading, Time } from '../components/ui';
import { useSessionState } from '../session';
import { ROLES, ROLE_TONES } from './company-shared';
import './account.css';

const ASK_AGAIN = 'An invitation works once and for a limited time. Ask the owner who invited you to invite you again.';

/**
 * An invitation link (`/admin/invite?token=…`), outside the signed-in layout: what it
 * offers, then joining as the signed-in user, with a new account, or after signing in to
 * an existing one. Only the person holding the link chooses the account's password.
 */
export function InvitePage() {
  const [params] = useSearchParams();
  const token = params.get('token')?.trim() ?? '';
  if (!token) {
    return (
      <LinkProblem title="This invitation link is incomplete" footnote={ASK_AGAIN}>
        The address has no invitation token. Open the whole link you were given (it ends with <code>?token=…</code>).
      </LinkProblem>
    );
  }
  return <Invitation token={token} />;
}

function Invitation({ token }: { token: string }) {
  const { state, start } = useSessionState();
  const navigate = useNavigate();
  const offer = useApi(() => api.post<InvitationOffer>('/invitations/lookup', { token }), [token]);
  const [invalid, setInvalid] = useState<string>();
  // Set when the person signs in on this page: the signed-in view then accepts at once.
  const [acceptOnArrival, setAcceptOnArrival] = useState(false);

  const lookupInvalid = offer.error?.code === 'invitation_invalid' ? offer.error.message : undefined;
  if (invalid ?? lookupInvalid) {
    return (
      <LinkProblem title="This invitation cannot be used" footnote={ASK_AGAIN}>
        {invalid ?? lookupInvalid}
      </LinkProblem>
    );
  }
  if (offer.error) {
    return (
      <AuthPage title="Invitation">
        <ErrorMessage error={offer.error} retry={offer.reload} />
      </AuthPage>
    );
  }
  if (!offer.data || state.status === 'loading') return <Loading />;
  const invitation = offer.data;

  /** Joins; the panel opens on the company just joined (the one the session did not have). */
  const join = async (body: { password?: string }, before: Session['companies']) => {
    try {
      const session = await api.post<Session>('/invitations/accept', { token, ...body });
      const joined =
        session.companies.find((c) => !before.some((b) => b.id === c.id)) ?? session.companies.find((c) => c.name === invitation.company_name);
      start(session, joined?.id);
      navigate('/integrations', { replace: true });
    } catch (e) {
      if ((e as ApiError).code === 'invitation_invalid') setInvalid((e as ApiError).message);
      throw e;
    }
  };

  return (
    <AuthPage title={`Join ${invitation.company_name}`}>
      <InvitationDetails invitation={invitation} />
      {state.status === 'signed-in' ? (
        <SignedInAccept session={state.session} acceptOnArrival={acceptOnArrival} join={join} />
      ) : state.status === 'signed-out' ? (
        <SignedOutAccept
          invitation={invitation}
          join={join}
          onSignedIn={(session) => {
            setAcceptOnArrival(true);
            start(session);
          }}
        />
      ) : (
        <ErrorMessage error={state.error} />
      )}
    </AuthPage>
  );
}

function InvitationDetails({ invitation }: { invitation: InvitationOffer }) {
  return (
    <>
      <p className="muted">
        {invitation.invited_by ?? 'An owner'} invited <strong>{invitation.email}</strong> to join {invitation.company_name}.
      </p>
      <dl className="details invite-details" aria-label="Invitation">
        <dt>Company</dt>
        <dd className="invite-company">{invitation.company_name}</dd>
        <dt>Role</dt>
        <dd>
          <Badge tone={ROLE_TONES[invitation.role]}>{invitation.role}</Badge>{' '}
          <span className="muted small">{ROLES.find((r) => r.role === invitation.role)?.description}</span>
        </dd>
        <dt>Invited by</dt>
        <dd>{invitation.invited_by ?? <span className="muted">an operator</span>}</dd>
        <dt>For</dt>
        <dd>{invitation.email}</dd>
        <dt>Expires</dt>
        <dd>
          <Time iso={invitation.expires_at} />
        </dd>
      </dl>
    </>
  );
}

type Join = (body: { password?: string }, before: Session['companies']) => Promise<void>;

function SignedInAccept({ session, acceptOnArrival, join }: { session: Session; acceptOnArrival: boolean; join: Join }) {
  const { signedIn } = useSessionState();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError>();
  const started = useRef(false);

  const accept = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await join({}, session.companies);
    } catch (e) {
      setError(e as ApiError);
      setBusy(false);
    }
  };

  useEffect(() => {
    if (acceptOnArrival && !started.current) {
      started.current = true;
      void accept();
    }
  }, [acceptOnArrival]);

  const wrongAccount = error?.code === 'invitation_wrong_account';
  return (
    <section className="invite-choice" aria-label="Accept">
      <p>
        You are signed in as <strong>{session.user.email}</strong>.
      </p>
      {error && <ErrorMessage error={error} />}
      {wrongAccount ? (
        <button type="button" className="button primary auth-submit" onClick={() => void signedIn?.signOut()}>
          Sign out
        </button>
      ) : (
        <button type="button" className="button primary auth-submit" disabled={busy} onClick={() => void accept()}>
          {busy ? 'Joining…' : 'Accept invitation'}
        </button>
      )}
    </section>
  );
}

function SignedOutAccept({
  invitation,
  join,
  onSignedIn,
}: {
  invitation: InvitationOffer;
  join: Join;
  onSignedIn(session: Session): void;
}) {
  const [mode, setMode] = useState<'create' | 'sign-in'>('create');
  const [notice, setNotice] = useState<string>();

  if (mode === 'sign-in') {
    return (
      <section className="invite-choice" aria-labelledby="invite-sign-in">
        <h2 id="invite-sign-in">Sign in to accept</h2>
        {notice && (
          <p className="notice info" role="status">
            {notice}
          </p>
        )}
        <SignInForm fixedEmail={invitation.email} submitLabel="Sign in and accept" onSignedIn={onSignedIn} />
        <p className="auth-links">
          <button type="button" className="button ghost small" onClick={() => setMode('create')}>
            I have no account yet: create one
          </button>
        </p>
      </section>
    );
  }
  return (
    <section className="invite-choice" aria-labelledby="invite-create">
      <h2 id="invite-create">Create your account</h2>
      <CreateAccountForm
        email={invitation.email}
        join={join}
        onExists={(message) => {
          setNotice(message);
          setMode('sign-in');
        }}
      />
      <p className="auth-links">
        <button type="button" className="button ghost small" onClick={() => setMode('sign-in')}>
          I already have an account: sign in
        </button>
      </p>
    </section>
  );
}

function CreateAccountForm({ email, join, onExists }: { email: string; join: Join; onExists(message: string): void }) {
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | Error>();

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setError(undefined);
    if (password.length < MIN_PASSWORD_LENGTH) return setError(new Error(`The password needs at least ${MIN_PASSWORD_LENGTH} characters.`));
    setBusy(true);
    try {
      await join({ password }, []);
    } catch (e) {
      const failure = e as ApiError;
      if (failure.status === 409) onExists(failure.message);
      else setError(failure);
      setBusy(false);
    }
  };

  return (
    <form className="form" onSubmit={submit} aria-label="Create your account">
      <Field label="Email" hint="The invitation is for this address; you sign in with it.">
        <input type="email" autoComplete="username" value={email} readOnly />
      </Field>
      <Field label="Password" hint={`At least ${MIN_PASSWORD_LENGTH} characters. Only you choose it; nobody else ever sees it.`}>
        <input
          type="password"
          autoComplete="new-password"
          value={password}
          onChange={(e) => setPassword(e.target.value)}
          required
          minLength={MIN_PASSWORD_LENGTH}
          maxLength={1024}
          autoFocus
        />
      </Field>
      {error && <ErrorMessage error={error} />}
      <button type="submit" className="button primary auth-submit" disabled={busy}>
        {busy ? 'Creating…' : 'Create account and join'}
      </button>
    </form>
  );
}
