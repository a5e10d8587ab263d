import { SMTPServer } from 'smtp-server';

export interface ReceivedEmail {
  to: string[];
  subject: string;
  text: string;
}

export interface SmtpSink {
  /** `smtp://127.0.0.1:PORT`, for INTAKE_SMTP_URL. */
  url: string;
  messages: ReceivedEmail[];
  /** The first message to `to` received from now on or already, waiting up to `timeoutMs`. */
  waitForMessage(to: string, timeoutMs?: number): Promise<ReceivedEmail>;
  close(): Promise<void>;
}

/**
 * A real SMTP server on loopback (the `smtp-server` package), keeping what it receives:
 * the service's emails go through nodemailer and SMTP as they would to a mail relay.
 */
export async function startSmtpSink(): Promise<SmtpSink> {
  const messages: ReceivedEmail[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, done) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        messages.push(parse(Buffer.concat(chunks).toString('utf8'), session.envelope.rcptTo.map((r) => r.address)));
        done();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as { port: number }).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    async waitForMessage(to, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = messages.find((m) => m.to.includes(to));
        if (found) return found;
        if (Date.now() > deadline) throw new Error(`no email to ${to} within ${timeoutMs} ms (received: ${messages.length})`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Subject and text of a plain message as nodemailer writes it (quoted-printable or 7bit). */
function parse(raw: string, to: string[]): ReceivedEmail {
  const [head = '', ...body] = raw.split(/\r?\n\r?\n/);
  const headers = head.replace(/\r?\n[ \t]+/g, ' ');
  const subject = /^Subject: (.*)$/im.exec(headers)?.[1] ?? '';
  const quotedPrintable = /^Content-Transfer-Encoding: quoted-printable$/im.test(headers);
  let text = body.join('\n\n');
  if (quotedPrintable) {
    text = text.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  }
  return { to, subject, text };
}
