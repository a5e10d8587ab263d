import type { AccountStore } from './account-store.js';
import type { AuditStore } from './audit-store.js';
import type { CliLoginStore } from './cli-login-store.js';
import type { CompanyStore } from './company-store.js';
import type { DatabaseStore } from './database-store.js';
import type { DestinationStore } from './destination-store.js';
import type { ErasureStore } from './erasure-store.js';
import type { IntegrationStore } from './integration-store.js';
import type { KeyStore } from './key-store.js';
import type { WebhookStore } from './webhook-store.js';

export type * from './destination-types.js';
export { DELIVERY_STATES, STATS_MAX_ATTEMPTS } from './destination-types.js';
export * from './account-store.js';
export * from './audit-store.js';
export * from './cli-login-store.js';
export * from './company-store.js';
export * from './database-store.js';
export * from './destination-store.js';
export * from './erasure-store.js';
export * from './integration-store.js';
export * from './key-store.js';
export * from './webhook-store.js';

/**
 * The storage interface. Every method that reads or changes a company's data takes the
 * company id first, so a query that forgets the tenant does not type-check; a row of
 * another company is "not found". The exceptions say why in their comment.
 *
 * It is made of one interface per aggregate, each in a file of its own beside this one with
 * its types, as queries/ holds their SQL; the rest of the code sees only this one, and
 * imports every type from here.
 */
export interface Store
  extends DatabaseStore,
    KeyStore,
    IntegrationStore,
    WebhookStore,
    CompanyStore,
    AccountStore,
    AuditStore,
    DestinationStore,
    CliLoginStore,
    ErasureStore {}
