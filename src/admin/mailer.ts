import nodemailer, { type Transporter } from 'nodemailer';
import type { Logger } from 'pino';
import { FailureWindows } from '../domain/failure-windows.js';

export interface Email {
  to: string;
  subject: string;
  text: string;
  /** Who asked for it (a company's id, or 'password-reset'): each asker has an hourly budget. */
  sender: string;
}

/** Sends the emails of accounts: invitations and password resets. */
export interface Mailer {
  /** False when no SMTP server is configured: links are then shown to whoever creates them. */
  readonly enabled: boolean;
  /** Whether the server took the message; failures are logged (without the message), never thrown. */
  send(email: Email): Promise<boolean>;
}

/** Sends no more than this many at once; more are dropped (and logged), not queued without bound. */
const MAX_SENDING = 10;
const TIMEOUT_MS = 10_000;
/**
 * Nobody can use the service to flood an inbox (re-inviting one address again and again)
 * or to mail the world (inviting, revoking and inviting others): per hour, at most this
 * many emails to one address, and from one asker.
 */
const BUDGET_WINDOW_MS = 60 * 60 * 1000;
const EMAILS_PER_RECIPIENT = 5;
const EMAILS_PER_SENDER = 50;

/** The mailer INTAKE_SMTP_URL asks for: nodemailer over SMTP, or none. */
export function createMailer(smtpUrl: string | undefined, from: string, logger: Logger): Mailer {
  if (smtpUrl === undefined) return { enabled: false, send: async () => false };
  const transport: Transporter = nodemailer.createTransport(
    { url: smtpUrl, connectionTimeout: TIMEOUT_MS, greetingTimeout: TIMEOUT_MS, socketTimeout: TIMEOUT_MS },
    { from },
  );
  let sending = 0;
  const budgets = new FailureWindows(BUDGET_WINDOW_MS);
  return {
    enabled: true,
    async send({ sender, ...email }) {
      const recipient = `to:${email.to.toLowerCase()}`;
      const asker = `from:${sender}`;
      if (budgets.blockedFor(recipient, EMAILS_PER_RECIPIENT) > 0 || budgets.blockedFor(asker, EMAILS_PER_SENDER) > 0) {
        logger.warn({ subject: email.subject, sender }, 'email not sent: hourly budget of its recipient or its sender used up');
        return false;
      }
      if (sending >= MAX_SENDING) {
        logger.warn({ subject: email.subject }, 'email not sent: too many emails being sent at once');
        return false;
      }
      budgets.count(recipient);
      budgets.count(asker);
      sending++;
      try {
        await transport.sendMail(email);
        return true;
      } catch (error) {
        // The message holds a one-time link: only what went wrong is logged.
        const { code, message } = error as { code?: string; message?: string };
        logger.warn({ code, reason: message, subject: email.subject }, 'email not sent');
        return false;
      } finally {
        sending--;
      }
    },
  };
}
