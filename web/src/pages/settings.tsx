import { useState, type FormEvent } from 'react';
import { Link } from 'react-router';
import { api, type ApiError } from '../api/client';
import { useApi } from '../api/use-api';
import { ConfirmDialog, Field } from '../components/dialog';
import { Badge, CopyButton, ErrorMessage, Loaded, PageHeader, Time, type Tone } from '../components/ui';
import { useSession, useSessionState } from '../session';
import { MAX_RETENTION_DAYS, ROLE_TONES, type Company } from './company-shared';
import { TwoFactorRequirementCard } from './two-factor-requirement';
import './company.css';

const ENVIRONMENT_TONES: Record<string, Tone> = { production: 'bad', staging: 'warn', development: 'info' };

/** The company (name, id, environment, retention, sign-in security) and the signed-in person's account. */
export function SettingsPage() {
  const { can } = useSession();
  const company = useApi(() => api.get<Company>('/company'), []);
  const manage = can('company:manage');
  return (
    <>
      <PageHeader
        title="Settings"
        description={manage ? 'The company and how long its logs are kept.' : 'The company and how long its logs are kept. Only an owner can change them.'}
      />
      <Loaded state={company}>
        {(data) => (
          <>
            <CompanyCard company={data} manage={manage} onSaved={company.reload} />
            <TwoFactorRequirementCard company={data} manage={manage} onSaved={company.reload} />
          </>
        )}
      </Loaded>
      <AccountCard />
    </>
  );
}

function CompanyCard({ company, manage, onSaved }: { company: Company; manage: boolean; onSaved(): void }) {
  const [editing, setEditing] = useState(false);
  const [saved, setSaved] = useState(false);
  return (
    <section className="card company-card" aria-labelledby="company-heading">
      <header className="company-card-header">
        <h2 id="company-heading">Company</h2>
        {manage && !editing && (
          <button
            type="button"
            className="button"
            onClick={() => {
              setSaved(false);
              setEditing(true);
            }}
          >
            Edit settings
          </button>
        )}
      </header>
      {saved && (
        <p className="notice info" role="status">
          Settings saved.
        </p>
      )}
      {editing ? (
        <CompanyForm
          company={company}
          onCancel={() => setEditing(false)}
          onSaved={() => {
            setEditing(false);
            setSaved(true);
            onSaved();
          }}
        />
      ) : (
        <dl className="details company-details">
          <dt>Name</dt>
          <dd className="company-setting-name">{company.name}</dd>
          <dt>Company id</dt>
          <dd>
            <span className="company-id-value">
              <code>{company.id}</code> <CopyButton text={company.id} label="Copy company id" />
            </span>
          </dd>
          <dt>Environment</dt>
          <dd>
            <Badge tone={ENVIRONMENT_TONES[company.environment] ?? 'neutral'}>{company.environment}</Badge>
          </dd>
          <dt>Created</dt>
          <dd>
            <Time iso={company.created_at} /> <span className="muted small">({new Date(company.created_at).toUTCString()})</span>
          </dd>
          <dt>Retention</dt>
          <dd>
            <span className="company-retention">
              {company.retention_days} {company.retention_days === 1 ? 'day' : 'days'}
            </span>
            <div className="muted small">Webhooks and request-log rows older than this are deleted.</div>
          </dd>
        </dl>
      )}
    </section>
  );
}

function CompanyForm({ company, onCancel, onSaved }: { company: Company; onCancel(): void; onSaved(): void }) {
  const { reload: reloadSession } = useSessionState();
  const [name, setName] = useState(company.name);
  const [retention, setRetention] = useState(String(company.retention_days));
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | Error>();
  const [confirming, setConfirming] = useState<{ name?: string; retention_days?: number }>();

  const days = Number(retention);
  const validDays = /^\d+$/.test(retention.trim()) && days >= 1 && days <= MAX_RETENTION_DAYS;
  const shorter = validDays && days < company.retention_days;

  /** Saves; an error is thrown to the caller (the form or the confirmation shows it). */
  const save = async (changes: { name?: string; retention_days?: number }) => {
    setBusy(true);
    try {
      await api.patch<Company>('/company', changes);
    } finally {
      setBusy(false);
    }
    if (changes.name !== undefined) reloadSession(); // the company's name in the navigation
    onSaved();
  };

  const submit = (event: FormEvent) => {
    event.preventDefault();
    setError(undefined);
    if (!validDays) {
      setError(new Error(`The retention must be a whole number of days from 1 to ${MAX_RETENTION_DAYS}.`));
      return;
    }
    const changes: { name?: string; retention_days?: number } = {};
    if (name.trim() !== company.name) changes.name = name.trim();
    if (days !== company.retention_days) changes.retention_days = days;
    if (Object.keys(changes).length === 0) return onCancel();
    if (shorter) setConfirming(changes);
    else save(changes).catch((e: ApiError) => setError(e));
  };

  return (
    <>
      <form className="form company-form" onSubmit={submit} aria-label="Company settings">
        <Field label="Company name">
          <input type="text" required maxLength={200} value={name} onChange={(event) => setName(event.target.value)} />
        </Field>
        <Field
          label="Retention (days)"
          hint={`From 1 to ${MAX_RETENTION_DAYS} days. Webhooks and request-log rows older than this are deleted. A shorter retention deletes the older rows at the next retention run (every few minutes), for good.`}
        >
          <input
            type="number"
            inputMode="numeric"
            min={1}
            max={MAX_RETENTION_DAYS}
            step={1}
            required
            value={retention}
            onChange={(event) => setRetention(event.target.value)}
          />
        </Field>
        {shorter && (
          <p className="notice" role="note">
            Shorter than now ({company.retention_days} days): webhooks and request-log rows older than {days} {days === 1 ? 'day' : 'days'}{' '}
            will be deleted at the next retention run.
          </p>
        )}
        {error && <ErrorMessage error={error} />}
        <div className="actions">
          <button type="submit" className="button primary" disabled={busy}>
            {busy ? 'Saving…' : 'Save settings'}
          </button>
          <button type="button" className="button" onClick={onCancel} disabled={busy}>
            Cancel
          </button>
        </div>
      </form>
      {confirming && (
        <ConfirmDialog
          title="Shorten the retention?"
          confirmLabel={`Keep ${confirming.retention_days} days`}
          onClose={() => setConfirming(undefined)}
          onConfirm={async () => {
            await save(confirming);
            setConfirming(undefined);
          }}
        >
          <p>
            Webhooks and request-log rows older than {confirming.retention_days} {confirming.retention_days === 1 ? 'day' : 'days'} will
            be deleted at the next retention run, within minutes. They cannot be brought back.
          </p>
        </ConfirmDialog>
      )}
    </>
  );
}

function AccountCard() {
  const { session, role, signOut } = useSession();
  const [error, setError] = useState<ApiError>();
  const [busy, setBusy] = useState(false);
  return (
    <section className="card company-card" aria-labelledby="account-heading">
      <header className="company-card-header">
        <h2 id="account-heading">Your account</h2>
      </header>
      <dl className="details company-details">
        <dt>Email</dt>
        <dd>{session.user.email}</dd>
        <dt>Role here</dt>
        <dd>{role ? <Badge tone={ROLE_TONES[role]}>{role}</Badge> : <span className="muted">none</span>}</dd>
        <dt>Password and two-factor</dt>
        <dd>
          <Link to="/account">Manage on the Account page</Link>
        </dd>
      </dl>
      <div className="company-account-actions">
        <button
          type="button"
          className="button"
          disabled={busy}
          onClick={() => {
            setBusy(true);
            setError(undefined);
            signOut(true).catch((e: ApiError) => {
              setError(e);
              setBusy(false);
            });
          }}
        >
          Sign out everywhere
        </button>
        <span className="muted small">Ends every session of your account, on every device, this one included.</span>
      </div>
      {error && <ErrorMessage error={error} />}
    </section>
  );
}
