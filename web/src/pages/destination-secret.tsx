import type { ReactNode } from 'react';
import { NewSecretDialog } from '../components/new-secret-dialog';
import { CopyButton } from '../components/ui';

/** How a receiver verifies what intake sends, with the standardwebhooks package (any Standard Webhooks library works). */
const VERIFY_NODE = `import { Webhook } from 'standardwebhooks';

const webhook = new Webhook(process.env.INTAKE_SIGNING_SECRET); // whsec_…

// rawBody: the request's body exactly as received, before any JSON parsing.
// headers: must hold webhook-id, webhook-timestamp and webhook-signature.
// Throws when the signature does not match or the timestamp is too old.
const payload = webhook.verify(rawBody, headers);`;

const VERIFY_PYTHON = `from standardwebhooks.webhooks import Webhook

payload = Webhook(os.environ["INTAKE_SIGNING_SECRET"]).verify(raw_body, headers)`;

/**
 * A destination's signing secret, shown once (at creation or rotation), and how the
 * receiving side checks that a request comes from intake.
 */
export function DestinationSecretDialog({ secret, children, onClose }: { secret: string; children?: ReactNode; onClose(): void }) {
  return (
    <NewSecretDialog
      secret={secret}
      title="Your destination’s signing secret"
      use="give it to the service behind the URL, which checks with it that each request comes from intake"
      details={<VerifyHelp />}
      onClose={onClose}
    >
      {children}
    </NewSecretDialog>
  );
}

function VerifyHelp() {
  return (
    <section className="destination-verify" aria-labelledby="verify-heading">
      <h3 id="verify-heading">Verify with any Standard Webhooks library</h3>
      <p className="muted small">
        Each request carries <code>webhook-id</code>, <code>webhook-timestamp</code> and <code>webhook-signature</code> headers,
        as the Standard Webhooks specification describes; libraries exist for most languages. In Node.js:
      </p>
      <Snippet code={VERIFY_NODE} />
      <p className="muted small">In Python:</p>
      <Snippet code={VERIFY_PYTHON} />
    </section>
  );
}

function Snippet({ code }: { code: string }) {
  return (
    <div className="destination-snippet">
      <pre>
        <code>{code}</code>
      </pre>
      <CopyButton text={code} label="Copy example" />
    </div>
  );
}
