import { useState } from 'react';
import { api } from '../api/client';
import type { Paged } from '../api/use-api';
import type { Role } from '../api/types';
import { ConfirmDialog, Dialog, Field, FormDialog } from '../components/dialog';
import { ListFooter } from '../components/list-controls';
import { Badge, CopyField, ErrorMessage, Time } from '../components/ui';
import { ROLE_TONES, type CreatedInvitation, type Invitation } from './company-shared';
import { RoleSelect } from './role-select';

/**
 * Invitations, on the Members page: nobody sets another person's password, so an owner
 * invites an email with a role and passes on (or has the server email) a one-time link;
 * the person chooses their own password when they accept it.
 */

/** The pending invitations, newest first; owners may revoke one (its link stops working). */
export function PendingInvitations({ list, manage, onRevoked }: { list: Paged<Invitation>; manage: boolean; onRevoked(message: string): void }) {
  const [revoking, setRevoking] = useState<Invitation>();
  return (
    <section className="invitations-section" aria-labelledby="invitations-heading">
      <h2 id="invitations-heading">Pending invitations</h2>
      {list.error && <ErrorMessage error={list.error} retry={list.reload} />}
      {list.data && list.data.length === 0 && <p className="muted">No invitations are waiting to be accepted.</p>}
      {list.data && list.data.length > 0 && (
        <>
          <div className="table-wrap">
            <table className="members-table invitations-table">
              <thead>
                <tr>
                  <th scope="col">Email</th>
                  <th scope="col">Role</th>
                  <th scope="col">Invited by</th>
                  <th scope="col">Expires</th>
                  {manage && (
                    <th scope="col">
                      <span className="visually-hidden">Actions</span>
                    </th>
                  )}
                </tr>
              </thead>
              <tbody>
                {list.data.map((invitation) => (
                  <tr key={invitation.id} data-invitation-id={invitation.id}>
                    <td className="wrap">
                      <span className="member-email">{invitation.email}</span>
                    </td>
                    <td>
                      <Badge tone={ROLE_TONES[invitation.role]}>{invitation.role}</Badge>
                    </td>
                    <td className="wrap">{invitation.invited_by?.email ?? <span className="muted">an operator</span>}</td>
                    <td>
                      <Time iso={invitation.expires_at} />
                    </td>
                    {manage && (
                      <td className="company-row-actions">
                        <button
                          type="button"
                          className="button small"
                          aria-label={`Revoke the invitation of ${invitation.email}`}
                          onClick={() => setRevoking(invitation)}
                        >
                          Revoke
                        </button>
                      </td>
                    )}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <ListFooter list={list} />
        </>
      )}
      {revoking && (
        <ConfirmDialog
          title="Revoke invitation"
          confirmLabel="Revoke invitation"
          onClose={() => setRevoking(undefined)}
          onConfirm={async () => {
            await api.delete(`/invitations/${encodeURIComponent(revoking.id)}`);
            setRevoking(undefined);
            onRevoked(`The invitation of ${revoking.email} is revoked; its link no longer works.`);
          }}
        >
          <p>
            Revoke the invitation of <strong>{revoking.email}</strong> as {revoking.role}? Its link stops working at once. You can
            invite them again later.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}

/** Email and role; the API answers with the link, this once. */
export function InviteDialog({ onClose, onInvited }: { onClose(): void; onInvited(created: CreatedInvitation): void }) {
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<Role>('viewer');
  return (
    <FormDialog
      title="Invite member"
      submitLabel="Create invitation"
      onClose={onClose}
      onSubmit={async () => onInvited(await api.post<CreatedInvitation>('/invitations', { email: email.trim(), role }))}
    >
      <Field label="Email" hint="They join with this address, with their own password or the account they already have.">
        <input type="email" required maxLength={320} autoComplete="off" value={email} onChange={(event) => setEmail(event.target.value)} />
      </Field>
      <RoleSelect value={role} onChange={setRole} />
      <p className="muted small company-dialog-note">
        A new invitation to the same email replaces an earlier one that is still pending: the earlier link stops working.
      </p>
    </FormDialog>
  );
}

/** The invitation link, shown once: whether the server emailed it, and a copy button. */
export function InviteLinkDialog({ created, onClose }: { created: CreatedInvitation; onClose(): void }) {
  const { invitation } = created;
  return (
    <Dialog title="Invitation created" onClose={onClose} wide>
      <div className="company-new-key invite-link">
        <p>
          {/* The badge is not followed by punctuation: its padding read as a stray space ("viewer ."). */}
          <strong>{invitation.email}</strong> is invited as <Badge tone={ROLE_TONES[invitation.role]}>{invitation.role}</Badge> with a
          link that works once and expires <Time iso={invitation.expires_at} /> ({new Date(invitation.expires_at).toUTCString()}).
        </p>
        {created.emailed ? (
          <p className="notice info invite-emailed" role="status">
            The link was emailed to {invitation.email}. You can also pass it on yourself.
          </p>
        ) : (
          <p className="notice invite-emailed" role="status">
            No email was sent: this server has no email configured. Pass the link on to {invitation.email} yourself.
          </p>
        )}
        <p className="notice new-key-warning" role="alert">
          <strong>This link will not be shown again. Copy it now.</strong> Whoever opens it can join as {invitation.email}; send it
          only to them.
        </p>
        <CopyField label="Invitation link" value={created.invite_url} />
        <div className="dialog-actions">
          <button type="button" className="button primary" onClick={onClose}>
            Done
          </button>
        </div>
      </div>
    </Dialog>
  );
}
