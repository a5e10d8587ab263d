import type { ProviderType } from '../../domain/source-types.js';
import type { Provider } from '../provider.js';
import { basic } from './basic.js';
import { github } from './github.js';
import { gitlab } from './gitlab.js';
import { hmac } from './hmac.js';
import { queryToken } from './query-token.js';
import { shopify } from './shopify.js';
import { slack } from './slack.js';
import { standardWebhooks } from './standard-webhooks.js';
import { stripe } from './stripe.js';
import { twilio } from './twilio.js';

/** Every provider type's module, by type: the one place a new provider is added. */
export const PROVIDERS: Readonly<Record<ProviderType, Provider>> = Object.freeze({
  github,
  gitlab,
  stripe,
  shopify,
  slack,
  standard_webhooks: standardWebhooks,
  twilio,
  hmac,
  basic,
  query_token: queryToken,
});

/** The module that verifies and describes requests of this type. */
export function providerFor(type: ProviderType): Provider {
  return PROVIDERS[type];
}
