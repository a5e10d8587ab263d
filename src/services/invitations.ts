import type { Mailer } from '../admin/mailer.js';
import { INVITATION_LIFETIME_MS, invitationUrl, linkTokenHash, newLinkToken } from '../admin/links.js';
import type { SignInGuard } from '../admin/sign-in-guard.js';
import { newPasswordHash } from '../admin/accounts.js';
import { newId } from '../domain/ids.js';
import { AppError } from '../errors.js';
import { ROLES, type Actor, type AuditEvent, type Invitation, type InvitationForToken, type Role, type Store } from '../store/store.js';

export interface InvitationOptions {
  baseUrl: string;
  mailer: Mailer;
  guard: SignInGuard;
}

/** Pending invitations one company may have at once: rows and emails a hostile owner can make are bounded. */
export const MAX_PENDING_INVITATIONS = 100;
const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/**
 * How people join a company: an owner invites an email with a role; the link (shown once to
 * the owner, and emailed when SMTP is configured) lets the holder of that email join, with
 * an account of their own making or the one they sign in to. Nobody becomes a member, and
 * no account is made, without the invitee. One instance acts for one actor, whose name the
 * audit records carry.
 */
export class Invitations {
  constructor(
    private readonly store: Store,
    private readonly options: InvitationOptions,
    private readonly actor: Actor,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Invites `email` as `role`. The answer is the same whether or not the email has an
   * account anywhere; only a member of this company already is a 409.
   */
  async invite(companyId: string, input: { email: string; role: string }): Promise<{ invitation: Invitation; inviteUrl: string; emailed: boolean }> {
    const email = input.email.trim().toLowerCase();
    if (!EMAIL_PATTERN.test(email)) throw new AppError('invalid_request', `"${input.email}" is not an email address.`, { field: 'email' });
    if (!ROLES.includes(input.role as Role)) {
      throw new AppError('invalid_request', `The role must be one of ${ROLES.join(', ')}.`, { field: 'role' });
    }
    const company = await this.store.getCompany(companyId);
    if (!company) throw new AppError('not_found', `No company with id ${companyId}.`);
    const now = this.now();
    const pending = await this.store.listInvitations(companyId, { limit: MAX_PENDING_INVITATIONS }, now);
    if (pending.length >= MAX_PENDING_INVITATIONS && !pending.some((p) => p.email === email)) {
      throw new AppError('conflict', `A company may have ${MAX_PENDING_INVITATIONS} pending invitations at most: revoke some first.`);
    }
    const { token, hash } = newLinkToken();
    const id = newId('inv');
    const role = input.role as Role;
    const outcome = await this.store.createInvitation(
      companyId,
      {
        id,
        email,
        role,
        tokenHash: hash,
        invitedBy: this.actor.type === 'user' ? this.actor.id : null,
        createdAt: now,
        expiresAt: now + INVITATION_LIFETIME_MS,
      },
      this.audit('invitation.create', id, { after: { email, role } }),
    );
    if (outcome.kind === 'no_company') throw new AppError('not_found', `No company with id ${companyId}.`);
    if (outcome.kind === 'already_member') throw new AppError('conflict', `${email} is already a member of this company.`, { field: 'email' });
    const inviteUrl = invitationUrl(this.options.baseUrl, token);
    const emailed =
      this.options.mailer.enabled &&
      (await this.options.mailer.send({
        sender: companyId,
        to: email,
        subject: `You are invited to ${company.name} on intake`,
        text:
          `${outcome.invitation.invitedBy?.email ?? 'An owner'} invited you to join ${company.name} on intake as ${role}.\n\n` +
          `Accept here; the link works once, for 7 days:\n\n${inviteUrl}\n\n` +
          'If you did not expect this, ignore this email: nothing happens without you.\n',
      }));
    return { invitation: outcome.invitation, inviteUrl, emailed };
  }

  async revoke(companyId: string, invitationId: string): Promise<void> {
    const revoked = await this.store.revokeInvitation(companyId, invitationId, this.now(), this.audit('invitation.revoke', invitationId));
    if (!revoked) throw new AppError('not_found', `No pending invitation with id ${invitationId}.`);
  }

  /** What a link's holder is invited to; invitation_invalid when it is wrong, used, revoked or expired. */
  async lookup(token: string): Promise<InvitationForToken> {
    const invitation = await this.store.findInvitationByToken(linkTokenHash(token), this.now());
    if (!invitation) throw new AppError('invitation_invalid');
    return invitation;
  }

  /**
   * Accepts as the signed-in `userId` (whose email must be the invitation's), or makes the
   * invitee's account with the password they chose (`newUserId` is this instance's actor).
   */
  async accept(
    token: string,
    who: { userId: string } | { newUserId: string; password: string; ip: string },
  ): Promise<{ userId: string; email: string; companyId: string }> {
    const hash = linkTokenHash(token);
    const invitation = await this.lookup(token);
    const outcome = await this.store.acceptInvitation(
      hash,
      this.now(),
      'userId' in who
        ? { userId: who.userId }
        : {
            newUser: {
              id: who.newUserId,
              email: invitation.email,
              // Hashed only once the link is known good: guessing links costs no password work.
              passwordHash: await newPasswordHash(this.options.guard, who.password, who.ip),
              createdAt: this.now(),
            },
          },
      { actor: this.actor, action: 'member.add', targetType: 'user', at: this.now() },
    );
    switch (outcome.kind) {
      case 'joined':
        return { userId: outcome.userId, email: invitation.email, companyId: outcome.companyId };
      case 'invalid':
        throw new AppError('invitation_invalid');
      case 'email_taken':
        throw new AppError('conflict', `An account with ${invitation.email} exists already: sign in to accept the invitation.`);
      case 'wrong_account':
        throw new AppError(
          'invitation_wrong_account',
          `This invitation is for ${outcome.invitationEmail}, and you are signed in as ${outcome.accountEmail}. ` +
            `Sign out and sign in as ${outcome.invitationEmail}, or ask for an invitation to ${outcome.accountEmail}.`,
        );
    }
  }

  private audit(action: string, targetId: string, change: { before?: unknown; after?: unknown } = {}): AuditEvent {
    return { actor: this.actor, action, targetType: 'invitation', targetId, at: this.now(), ...change };
  }
}
