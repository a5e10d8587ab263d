import { useState } from 'react';
import { Link } from 'react-router';
import { api, type ApiError } from '../api/client';
import { Badge, ErrorMessage } from '../components/ui';
import { useSessionState } from '../session';
import type { Company } from './company-shared';

/**
 * Settings' "Sign-in security": whether every member must use two-factor sign-in. Owners
 * switch it; the API refuses to turn it on (409) for an owner who has not turned on their
 * own, so nobody can require what they cannot do.
 */
export function TwoFactorRequirementCard({ company, manage, onSaved }: { company: Company; manage: boolean; onSaved(): void }) {
  const { reload: reloadSession } = useSessionState();
  const [pending, setPending] = useState<boolean>();
  const [error, setError] = useState<ApiError>();
  const required = pending ?? company.require_two_factor;

  const change = async (value: boolean) => {
    setPending(value);
    setError(undefined);
    try {
      await api.patch<Company>('/company', { require_two_factor: value });
      reloadSession(); // the layout's banner reads the requirement from the session
      onSaved();
    } catch (e) {
      setError(e as ApiError);
    } finally {
      setPending(undefined);
    }
  };

  return (
    <section className="card company-card" aria-labelledby="security-heading">
      <header className="company-card-header">
        <h2 id="security-heading">Sign-in security</h2>
      </header>
      {manage ? (
        <label className="checkbox two-factor-requirement">
          <input type="checkbox" checked={required} disabled={pending !== undefined} onChange={(event) => void change(event.target.checked)} />
          Require two-factor sign-in for every member
        </label>
      ) : (
        <p>
          Two-factor sign-in:{' '}
          {company.require_two_factor ? <Badge tone="good">required for every member</Badge> : <Badge>not required</Badge>}
        </p>
      )}
      <p className="muted small">
        While it is required, a member without two-factor sign-in can only open their <Link to="/account">Account</Link> page in this
        company until they set it up, and nobody can turn theirs off. Management keys are not affected.
      </p>
      {error && <ErrorMessage error={error} />}
    </section>
  );
}
