import { useState } from 'react';
import { api } from '../api/client';
import { usePagedList } from '../api/use-api';
import type { Role } from '../api/types';
import { ConfirmDialog, FormDialog } from '../components/dialog';
import { Badge, EmptyState, Loaded, PageHeader, Time } from '../components/ui';
import { ListFooter } from '../components/list-controls';
import { useSession, useSessionState } from '../session';
import { ROLE_TONES, type CreatedInvitation, type Invitation, type Member } from './company-shared';
import { InviteDialog, InviteLinkDialog, PendingInvitations } from './invitations';
import { RoleSelect } from './role-select';
import './company.css';

type Dialogs = { invite: true } | { invited: CreatedInvitation } | { role: Member } | { remove: Member };

/**
 * Who may use the company, with which role, and who is invited. Every member reads both
 * lists; owners invite people (who choose their own password), revoke invitations, change
 * roles and remove.
 */
export function MembersPage() {
  const { can, session } = useSession();
  const { reload: reloadSession } = useSessionState();
  const manage = can('members:manage');
  const list = usePagedList<Member>('/members', {}, []);
  const invitations = usePagedList<Invitation>('/invitations', {}, []);
  const [dialog, setDialog] = useState<Dialogs>();
  const [notice, setNotice] = useState<string>();

  /** After a change: the list again, and the session when it was the signed-in person's own role. */
  const changed = (message: string, userId?: string) => {
    setDialog(undefined);
    setNotice(message);
    list.reload();
    if (userId === session.user.id) reloadSession();
  };

  const inviteButton = (label: string) =>
    manage && (
      <button
        type="button"
        className="button primary"
        onClick={() => {
          setNotice(undefined);
          setDialog({ invite: true });
        }}
      >
        {label}
      </button>
    );

  return (
    <>
      <PageHeader
        title="Members"
        description={
          manage
            ? 'People who may use this company, and what their role lets them do.'
            : 'People who may use this company. Only an owner can invite members or change their roles.'
        }
        actions={inviteButton('Invite member')}
      />
      {notice && (
        <p className="notice info company-notice" role="status">
          {notice}
        </p>
      )}
      <Loaded
        state={list}
        empty={(items) =>
          items.length === 0 ? (
            <EmptyState title="No members" action={inviteButton('Invite the first member')}>
              {manage ? 'Invite someone by email to give them access.' : 'An owner can invite members; they will show here.'}
            </EmptyState>
          ) : undefined
        }
      >
        {(items) => (
          <>
            <div className="table-wrap">
              <table className="members-table">
                <thead>
                  <tr>
                    <th scope="col">Email</th>
                    <th scope="col">Role</th>
                    <th scope="col">Added</th>
                    {manage && (
                      <th scope="col">
                        <span className="visually-hidden">Actions</span>
                      </th>
                    )}
                  </tr>
                </thead>
                <tbody>
                  {items.map((member) => (
                    <tr key={member.user_id} data-user-id={member.user_id}>
                      <td className="wrap">
                        <span className="member-email">{member.email}</span>
                        {member.user_id === session.user.id && <span className="muted small"> (you)</span>}
                      </td>
                      <td>
                        <Badge tone={ROLE_TONES[member.role]}>{member.role}</Badge>
                      </td>
                      <td>
                        <Time iso={member.added_at} />
                      </td>
                      {manage && (
                        <td className="company-row-actions">
                          {member.last_owner && (
                            <span className="muted small last-owner-note" id={`last-owner-${member.user_id}`}>
                              {member.user_id === session.user.id ? 'You are' : 'They are'} the only owner: make another member an
                              owner before {member.user_id === session.user.id ? 'you leave or change your role' : 'removing them or changing their role'}.
                            </span>
                          )}
                          <button
                            type="button"
                            className="button small"
                            aria-label={`Change role of ${member.email}`}
                            disabled={member.last_owner}
                            aria-describedby={member.last_owner ? `last-owner-${member.user_id}` : undefined}
                            onClick={() => {
                              setNotice(undefined);
                              setDialog({ role: member });
                            }}
                          >
                            Change role
                          </button>
                          <button
                            type="button"
                            className="button small"
                            aria-label={`Remove ${member.email}`}
                            disabled={member.last_owner}
                            aria-describedby={member.last_owner ? `last-owner-${member.user_id}` : undefined}
                            onClick={() => {
                              setNotice(undefined);
                              setDialog({ remove: member });
                            }}
                          >
                            Remove
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
      </Loaded>

      <PendingInvitations
        list={invitations}
        manage={manage}
        onRevoked={(message) => {
          setNotice(message);
          invitations.reload();
        }}
      />

      {dialog && 'invite' in dialog && (
        <InviteDialog
          onClose={() => setDialog(undefined)}
          onInvited={(created) => {
            setDialog({ invited: created });
            invitations.reload();
          }}
        />
      )}
      {dialog && 'invited' in dialog && <InviteLinkDialog created={dialog.invited} onClose={() => setDialog(undefined)} />}
      {dialog && 'role' in dialog && (
        <ChangeRoleDialog
          member={dialog.role}
          self={dialog.role.user_id === session.user.id}
          onClose={() => setDialog(undefined)}
          onChanged={(member) => changed(`${member.email} is now ${member.role}.`, member.user_id)}
        />
      )}
      {dialog && 'remove' in dialog && (
        <ConfirmDialog
          title="Remove member"
          confirmLabel="Remove member"
          onClose={() => setDialog(undefined)}
          onConfirm={async () => {
            const member = dialog.remove;
            await api.delete(`/members/${encodeURIComponent(member.user_id)}`);
            changed(`${member.email} is no longer a member.`, member.user_id);
          }}
        >
          <p>
            Remove <strong>{dialog.remove.email}</strong> from this company?
            {dialog.remove.user_id === session.user.id
              ? ' This is you: you lose access to this company with your next request.'
              : ' They lose access with their next request. Their account stays, with any other companies it belongs to.'}
          </p>
        </ConfirmDialog>
      )}
    </>
  );
}

function ChangeRoleDialog({
  member,
  self,
  onClose,
  onChanged,
}: {
  member: Member;
  self: boolean;
  onClose(): void;
  onChanged(member: Member): void;
}) {
  const [role, setRole] = useState<Role>(member.role);
  return (
    <FormDialog
      title="Change role"
      submitLabel="Save role"
      onClose={onClose}
      onSubmit={async () => {
        if (role === member.role) return onClose();
        onChanged(await api.patch<Member>(`/members/${encodeURIComponent(member.user_id)}`, { role }));
      }}
    >
      <p className="company-dialog-note">
        <strong>{member.email}</strong> is {member.role} now.
        {self && role !== 'owner' && member.role === 'owner' && ' You will no longer manage members or settings.'}
      </p>
      <RoleSelect value={role} onChange={setRole} />
    </FormDialog>
  );
}
