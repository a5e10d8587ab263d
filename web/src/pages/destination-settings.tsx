import type { ReactNode } from 'react';
import { Link } from 'react-router';
import type { Integrations } from '../components/log-shared';
import { Time, numberFormat, relativeTime } from '../components/ui';
import { disabledWhy, formatMs, type Destination } from './destination-shared';

/** A destination's page, its upper half: the notice when nothing is sent, and the settings. */

/** Why nothing is sent, when nothing is: paused by a person, or disabled by intake (and why). */
export function StatusNotice({ destination, manage, resumeButton }: { destination: Destination; manage: boolean; resumeButton: ReactNode }) {
  if (destination.status === 'active') return null;
  const held = 'Its deliveries are held, not lost: they are sent when it is resumed.';
  if (destination.status === 'paused') {
    return (
      <div className="notice destination-notice" role="status">
        <p>
          <strong>This destination is paused.</strong> {held}
        </p>
        {manage && resumeButton}
      </div>
    );
  }
  return (
    <div className="notice destination-notice destination-disabled" role="alert">
      <p title={destination.disabled_reason ?? undefined}>
        <strong>
          Intake turned this destination off
          {destination.disabled_at && <> {relativeTime(destination.disabled_at)}</>}.
        </strong>{' '}
        {disabledWhy(destination)} {held}{' '}
        {manage ? 'Fix the receiver, then resume it.' : 'An admin or owner can resume it once the receiver is fixed.'}
      </p>
      {manage && resumeButton}
    </div>
  );
}

/** What the destination is set to, and its signing secret's overlap. */
export function DestinationSettings({ destination, integrations }: { destination: Destination; integrations: Integrations }) {
  return (
    <section className="card" aria-labelledby="settings-heading">
      <h2 id="settings-heading">Settings</h2>
      <dl className="details">
        <dt>Destination ID</dt>
        <dd className="mono">{destination.id}</dd>
        <dt>URL</dt>
        <dd className="mono">{destination.url}</dd>
        <dt>Integrations</dt>
        <dd>
          {destination.integration_ids === null ? (
            'Every integration'
          ) : (
            <ul className="destination-inline-list">
              {destination.integration_ids.map((id) => (
                <li key={id}>
                  <Link to={`/integrations/${id}`}>{integrations.nameOf(id) ?? id}</Link>
                </li>
              ))}
            </ul>
          )}
        </dd>
        <dt>Events</dt>
        <dd>
          {destination.event_patterns.length === 1 && destination.event_patterns[0] === '*' ? (
            'Every event'
          ) : (
            <ul className="destination-inline-list">
              {destination.event_patterns.map((pattern) => (
                <li key={pattern}>
                  <code>{pattern}</code>
                </li>
              ))}
            </ul>
          )}
        </dd>
        <dt>Extra headers</dt>
        <dd>
          {destination.header_names.length === 0 ? (
            <span className="muted">None</span>
          ) : (
            <>
              <ul className="destination-inline-list">
                {destination.header_names.map((name) => (
                  <li key={name}>
                    <code>{name}</code>
                  </li>
                ))}
              </ul>
              <div className="muted small">Values are kept encrypted and never shown.</div>
            </>
          )}
        </dd>
        <dt>Timeout</dt>
        <dd>{formatMs(destination.timeout_ms)}</dd>
        <dt>Rate</dt>
        <dd>
          {destination.rate_per_second === null ? 'No limit' : `${numberFormat.format(destination.rate_per_second)} requests per second`}
        </dd>
        <dt>Max in flight</dt>
        <dd>{numberFormat.format(destination.max_in_flight)} requests at once</dd>
        <dt>Signing secret</dt>
        <dd>
          Shown once, at creation and rotation.
          {destination.previous_secret_expires_at && new Date(destination.previous_secret_expires_at).getTime() > Date.now() && (
            <div className="muted small">
              The previous secret signs too until {new Date(destination.previous_secret_expires_at).toLocaleString()}.
            </div>
          )}
        </dd>
        <dt>Last success</dt>
        <dd>
          <Time iso={destination.last_success_at} fallback="Never" />
        </dd>
        <dt>Created</dt>
        <dd>
          <Time iso={destination.created_at} />
        </dd>
        <dt>Updated</dt>
        <dd>
          <Time iso={destination.updated_at} />
        </dd>
      </dl>
    </section>
  );
}
