import { useEffect, useState, type ReactNode } from 'react';
import { Link, useSearchParams } from 'react-router';
import { api, type ApiError } from '../api/client';
import { useApi } from '../api/use-api';
import type { CliLogin } from '../api/types';
import { AuthPage } from '../components/auth-page';
import { Field } from '../components/dialog';
import { ErrorMessage, Loading, Time } from '../components/ui';
import { useSession } from '../session';
import './cli-login.css';

/** How often the page asks whether the terminal has collected its key, after the approval. */
const COLLECTED_CHECK_MS = 2000;
const START_AGAIN = 'Run intake login again in the terminal for a new code.';

/**
 * `/admin/cli-login?code=…`, the link `intake login` prints: the sign-in a terminal asked
 * for, to compare with the terminal and approve for one of the user's companies, or deny.
 * Signed in only (an anonymous visitor signs in first and comes back), outside the layout:
 * one decision, on a page of its own.
 */
export function CliLoginPage() {
  const [params] = useSearchParams();
  const code = params.get('code')?.trim() ?? '';
  if (!code) {
    return (
      <CliLoginFrame title="This sign-in link is incomplete">
        <p role="alert">
          The address has no code. Open the whole link the terminal printed (it ends with <code>?code=…</code>).
        </p>
      </CliLoginFrame>
    );
  }
  return <CliLoginDecision code={code} />;
}

function CliLoginFrame({ title, children }: { title: string; children: ReactNode }) {
  return (
    <AuthPage title={title}>
      {children}
      <p className="muted small auth-footnote">
        <Link to="/">Back to the panel</Link>
      </p>
    </AuthPage>
  );
}

function CliLoginDecision({ code }: { code: string }) {
  const { session, company } = useSession();
  const request = useApi(() => api.get<CliLogin>(`/cli-logins/${encodeURIComponent(code)}`), [code]);
  const [companyId, setCompanyId] = useState(company?.id ?? session.companies[0]?.id ?? '');
  const [decided, setDecided] = useState<CliLogin>();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError>();

  if (request.error && !request.data) {
    return (
      <CliLoginFrame title="This sign-in cannot be approved">
        <ErrorMessage error={request.error} retry={request.error.status === 404 ? undefined : request.reload} />
        <p>{START_AGAIN}</p>
      </CliLoginFrame>
    );
  }
  if (!request.data) return <Loading />;
  const login = decided ?? request.data;
  if (login.state === 'approved' || login.state === 'issued') return <Approved login={login} />;
  if (login.state === 'denied') {
    return (
      <CliLoginFrame title="Sign-in denied">
        <p role="status">The terminal is told so at its next check; no key was issued.</p>
      </CliLoginFrame>
    );
  }

  const decide = async (decision: 'approve' | 'deny') => {
    setBusy(true);
    setError(undefined);
    try {
      const path = `/cli-logins/${encodeURIComponent(login.user_code)}/${decision}`;
      setDecided(await api.post<CliLogin>(path, decision === 'approve' ? { company_id: companyId } : {}));
    } catch (e) {
      setError(e as ApiError);
      // Decided elsewhere meanwhile (another tab, another person): show what it is now.
      if ((e as ApiError).status === 409) request.reload();
    } finally {
      setBusy(false);
    }
  };
  const chosen = session.companies.find((c) => c.id === companyId);

  return (
    <AuthPage
      title="Approve a command-line sign-in"
      lead="A terminal asked to sign in to intake. Approve it only if you started it yourself and it shows the same code."
    >
      <p className="cli-login-code" aria-label="Code">
        {login.user_code}
      </p>
      <dl className="details cli-login-details" aria-label="Sign-in">
        <dt>Machine</dt>
        <dd>{login.name}</dd>
        <dt>From address</dt>
        <dd className="mono">{login.requested_ip}</dd>
        <dt>Asked</dt>
        <dd>
          <Time iso={login.created_at} />
        </dd>
        <dt>Expires</dt>
        <dd>
          <Time iso={login.expires_at} />
        </dd>
      </dl>
      {session.companies.length > 1 ? (
        <Field label="Company">
          <select value={companyId} onChange={(event) => setCompanyId(event.target.value)}>
            {session.companies.map((c) => (
              <option key={c.id} value={c.id}>
                {c.name}
              </option>
            ))}
          </select>
        </Field>
      ) : (
        <p>
          For <strong>{chosen?.name ?? 'your company'}</strong>.
        </p>
      )}
      <p className="muted small cli-login-note">
        The terminal gets a key that reads {chosen?.name ?? 'the company'}’s webhooks and logs (<code>logs:read</code>) and nothing
        else. The key is the company’s, not yours: it works until it is revoked with <code>intake logout</code>, or by an owner under
        Management keys.
      </p>
      {error && <ErrorMessage error={error} />}
      <div className="cli-login-actions">
        <button type="button" className="button primary" disabled={busy || !chosen} onClick={() => void decide('approve')}>
          Approve
        </button>
        <button type="button" className="button" disabled={busy} onClick={() => void decide('deny')}>
          Deny
        </button>
      </div>
    </AuthPage>
  );
}

/** After the approval: waits for the terminal to collect its key, then says it has it. */
function Approved({ login }: { login: CliLogin }) {
  const [state, setState] = useState<CliLogin['state'] | 'expired'>(login.state);

  useEffect(() => {
    if (state !== 'approved') return;
    const timer = setInterval(() => {
      api
        .get<CliLogin>(`/cli-logins/${encodeURIComponent(login.user_code)}`)
        .then((now) => setState(now.state))
        // Gone: its 10 minutes passed. Anything else (the network) is asked again at the next tick.
        .catch((e: ApiError) => e.status === 404 && setState('expired'));
    }, COLLECTED_CHECK_MS);
    return () => clearInterval(timer);
  }, [state, login.user_code]);

  if (state === 'issued') {
    return (
      <CliLoginFrame title="Signed in">
        <p role="status">You can close this page; the terminal has its key.</p>
      </CliLoginFrame>
    );
  }
  if (state === 'expired') {
    return (
      <CliLoginFrame title="The terminal did not collect its key">
        <p role="alert">The sign-in expired before the terminal asked for its key; no key was issued. {START_AGAIN}</p>
      </CliLoginFrame>
    );
  }
  return (
    <CliLoginFrame title="Approved">
      <Loading label="Waiting for the terminal to collect its key…" />
    </CliLoginFrame>
  );
}
