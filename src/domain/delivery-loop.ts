import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Delivery loops: a destination whose URL is one of intake's own webhook addresses (with
 * the integration's key as an extra header, or signed as a `standard_webhooks` source
 * accepts) turns one webhook into an endless chain, and two such destinations into an
 * exponential one (860 requests from one webhook in 3 s, issue 33). In production the
 * service's public address is an ordinary public address, so the address guard cannot
 * tell.
 *
 * So every delivery carries two marks:
 *
 * - `x-intake-origin`: an HMAC of its delivery id (`x-intake-delivery-id`) under a key
 *   derived from INTAKE_SECRETS_KEY. Only this deployment can make it, and a tenant cannot
 *   set an `x-intake-*` header on a destination. A request that carries a valid one is
 *   this intake's own delivery coming back, directly or through a relay that passes
 *   headers on, and the webhook addresses refuse it (508 `delivery_loop`).
 * - `x-intake-hops`: how many intake deliveries the webhook has come through, one more
 *   than the `x-intake-hops` it arrived with. A loop through other services or another
 *   intake deployment (intake → elsewhere → intake), where the origin mark is not this
 *   deployment's, ends when the count passes MAX_HOPS.
 *
 * A relay that drops every header cannot be told from a sender; its loop is bounded by
 * the company's own limits (rate limit, destinations' rates), not by this.
 */

export const DELIVERY_ID_HEADER = 'x-intake-delivery-id';
export const ORIGIN_HEADER = 'x-intake-origin';
export const HOPS_HEADER = 'x-intake-hops';
/** Intake deliveries a webhook may have come through; one that comes with more is refused. */
export const MAX_HOPS = 3;
/** The purpose the origin key is derived for (SecretBox.derivedKeys). */
export const ORIGIN_KEY_PURPOSE = 'intake delivery origin v1';

const TAG_BYTES = 16;
/** What a hop count may look like: a few digits, nothing else. */
const HOPS = /^\d{1,6}$/;

export class DeliveryMarks {
  /**
   * @param keys the origin keys, the current one first: every key verifies, so a rotation
   *   of INTAKE_SECRETS_KEY does not let deliveries already under way back in.
   */
  constructor(private readonly keys: readonly Buffer[]) {
    if (keys.length === 0) throw new Error('DeliveryMarks needs a key');
  }

  /** The headers marking a delivery: its origin and its hop count, for a webhook that arrived with `hopsBefore`. */
  mark(deliveryId: string, hopsBefore: number): Record<string, string> {
    return { [ORIGIN_HEADER]: this.tag(this.keys[0]!, deliveryId).toString('base64url'), [HOPS_HEADER]: String(hopsBefore + 1) };
  }

  /** Why a request to a webhook address is part of a loop, in words; undefined when it is not. */
  loopOf(headers: Record<string, string | string[] | undefined>): string | undefined {
    const deliveryId = single(headers[DELIVERY_ID_HEADER]);
    const origin = single(headers[ORIGIN_HEADER]);
    if (deliveryId !== undefined && origin !== undefined && this.isOurs(deliveryId, origin)) {
      return (
        `This request is this intake's own delivery ${printable(deliveryId)} coming back to a webhook address: a destination ` +
        'sends to intake itself. Intake refuses it, so that one webhook cannot turn into endless deliveries; point the ' +
        'destination at the service that should receive them.'
      );
    }
    const hops = hopsOf(single(headers[HOPS_HEADER]));
    if (hops > MAX_HOPS) {
      return (
        `This webhook has already come through ${hops} intake deliveries (${HOPS_HEADER}); intake takes one that has come ` +
        `through ${MAX_HOPS} at most, so that a loop through other services ends.`
      );
    }
    return undefined;
  }

  private isOurs(deliveryId: string, origin: string): boolean {
    const sent = Buffer.from(origin, 'base64url');
    if (sent.length !== TAG_BYTES) return false;
    // Every key, matched or not: the time taken says nothing of which.
    let ours = false;
    for (const key of this.keys) ours = timingSafeEqual(this.tag(key, deliveryId), sent) || ours;
    return ours;
  }

  private tag(key: Buffer, deliveryId: string): Buffer {
    return createHmac('sha256', key).update(deliveryId).digest().subarray(0, TAG_BYTES);
  }
}

/** The hop count a webhook arrived with, from its `x-intake-hops` (0 when absent or not a count). */
export function hopsOf(value: string | undefined): number {
  return value !== undefined && HOPS.test(value.trim()) ? Number(value.trim()) : 0;
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** A delivery id as a refusal may quote it: what a delivery id is made of, not too long. */
function printable(value: string): string {
  return value.replace(/[^A-Za-z0-9_-]/g, '?').slice(0, 40);
}
