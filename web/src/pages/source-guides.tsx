import type { ReactNode } from 'react';
import type { Source } from './source-fields';

/**
 * How to set up each provider to send to an integration: where its address and signing
 * secret go at the provider. One place for every provider's words; the integration page's
 * Source section shows the one of its type.
 */

interface GuideFacts {
  /** The address to give the provider (for query_token, without the token). */
  address: ReactNode;
  source: Source;
}

const SECRET = <strong>signing secret</strong>;

const GUIDES: Record<Exclude<Source['type'], 'api_key'>, (facts: GuideFacts) => ReactNode[]> = {
  github: ({ address }) => [
    <>In the repository (or organization) on GitHub, open <strong>Settings → Webhooks → Add webhook</strong>.</>,
    <>Payload URL: {address}.</>,
    <>Content type: <code>application/json</code>.</>,
    <>Secret: the {SECRET} (shown once when intake generated it; rotate for a new one).</>,
    <>Choose the events, keep <strong>Active</strong> checked and click <strong>Add webhook</strong>. GitHub sends a <code>ping</code> at once: it shows in Webhooks.</>,
  ],
  gitlab: ({ address }) => [
    <>In the project (or group) on GitLab, open <strong>Settings → Webhooks → Add new webhook</strong>.</>,
    <>URL: {address}.</>,
    <>Secret token: the {SECRET}. GitLab sends it as it is in <code>X-Gitlab-Token</code>.</>,
    <>Choose the triggers and click <strong>Add webhook</strong>; <strong>Test</strong> sends a sample event.</>,
  ],
  stripe: ({ address }) => [
    <>In the Stripe Dashboard, open <strong>Developers → Webhooks → Add endpoint</strong> (in Workbench: <strong>Webhooks → Add destination</strong>).</>,
    <>Endpoint URL: {address}. Select the events to send and create the endpoint.</>,
    <>On the endpoint’s page, under <strong>Signing secret</strong>, click <strong>Reveal</strong> and copy the <code>whsec_…</code> value.</>,
    <>Paste it into intake as the {SECRET} (Save secret while the source waits for it; Rotate secret when Stripe rolls it). Stripe signs with a timestamp: a request more than 5 minutes old is refused.</>,
  ],
  shopify: ({ address }) => [
    <>In the Shopify admin, open <strong>Settings → Notifications → Webhooks → Create webhook</strong>; format JSON, URL: {address}.</>,
    <>The page says which key signs the webhooks: copy it and paste it here as the {SECRET}.</>,
    <>For an app’s webhook subscriptions, give the same address; the secret is then the app’s <strong>client secret</strong> (the app’s settings in the Partner or Dev Dashboard).</>,
  ],
  slack: ({ address }) => [
    <>At api.slack.com/apps, open the app’s <strong>Basic Information → App Credentials → Signing Secret</strong>, click <strong>Show</strong> and paste it here as the {SECRET} first.</>,
    <>Then open <strong>Event Subscriptions</strong>, turn on <strong>Enable Events</strong> and set the Request URL to {address}. Slack checks it at once; intake answers its challenge and Slack shows <strong>Verified</strong>.</>,
    <>Subscribe to the events and save. Interactivity and slash commands take the same address.</>,
  ],
  standard_webhooks: ({ address }) => [
    <>In the sender’s webhook settings (its Svix app portal or dashboard), add an endpoint with the address {address}.</>,
    <>If the sender shows a <code>whsec_…</code> secret for the endpoint, paste it here as the {SECRET}; if it asks for one, give it the one intake generated.</>,
    <>It signs with <code>webhook-id</code>, <code>webhook-timestamp</code> and <code>webhook-signature</code>; a request more than 5 minutes old is refused.</>,
  ],
  twilio: ({ address }) => [
    <>In the Twilio console, open <strong>Phone Numbers → Manage → Active numbers</strong> and the number.</>,
    <>Under <strong>Messaging Configuration</strong>, “A message comes in”: Webhook, {address}, HTTP POST. Save.</>,
    <>The {SECRET} is the account’s <strong>Auth Token</strong> (console home, Account Info): paste it here.</>,
    <>Twilio signs the address itself: give it exactly as shown, without any change.</>,
  ],
  hmac: ({ address, source }) => {
    const config = source.config;
    const signed = config.signed_payload ?? (config.timestamp_header ? '{timestamp}.{body}' : '{body}');
    return [
      <>Give the sender the address {address} and the {SECRET}.</>,
      <>
        It signs <code>{signed}</code> with HMAC-{(config.algorithm ?? 'sha256').toUpperCase()} keyed with the secret, encodes the
        digest in {config.encoding ?? 'hex'} and sends <code>{`${config.prefix ?? ''}<signature>`}</code> in the{' '}
        <code>{config.header ?? 'X-Signature'}</code> header.
      </>,
      config.timestamp_header ? (
        <>
          It sends the Unix time in seconds in <code>{config.timestamp_header}</code>; requests more than{' '}
          {config.tolerance_seconds ?? 300} seconds off are refused.
        </>
      ) : (
        <>No timestamp is signed, so a captured request could be sent again: add a timestamp header if the sender has one.</>
      ),
    ];
  },
  basic: ({ address, source }) => [
    <>Give the sender the address {address}.</>,
    <>
      It sends HTTP Basic authentication: user name <code>{source.config.username ?? 'intake'}</code>, password the {SECRET}. A
      sender that takes only an address can put them in it: <code>https://user:password@host/…</code>.
    </>,
  ],
  query_token: ({ address }) => [
    <>Give the sender the address {address}, the {SECRET} as the token at its end.</>,
    <>This is the weakest way in: the token travels in the address, which senders, proxies and browsers may log. Prefer a signature when the sender can make one.</>,
  ],
};

/** The numbered steps that set up a source's provider; nothing for api_key. */
export function SourceGuide({ source, address }: GuideFacts) {
  if (source.type === 'api_key') return null;
  const steps = GUIDES[source.type]({ source, address });
  return (
    <ol className="source-guide">
      {steps.map((step, index) => (
        <li key={index}>{step}</li>
      ))}
    </ol>
  );
}
