import { promises as dns, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { asIPv4Range, parseAsWritten, type Cidr } from '../domain/cidr.js';
import type { Environment } from '../domain/environment.js';
import { AppError } from '../errors.js';

/**
 * Server-side request forgery: a destination's URL is a tenant's choice, and intake's
 * network may reach what the internet may not (its database, the cloud's metadata service,
 * the admin ports of its neighbours). Every address is judged after name resolution, IPv4
 * inside IPv6 judged as the IPv4 it is; everything ipaddr.js does not call `unicast` is
 * refused, and so are the cloud metadata addresses. INTAKE_DESTINATION_ALLOW lists ranges
 * reached anyway (an operator's own network; the tests' 127.0.0.1).
 */

/** The `code` of the error `AddressGuard.lookup` fails a connection with. */
export const BLOCKED_ADDRESS = 'EBLOCKEDADDRESS';

/** Name resolution as `dns.lookup(hostname, { all: true })` does it (tests give their own). */
export type Resolve = (hostname: string, options: Pick<LookupOptions, 'family' | 'hints'>) => Promise<LookupAddress[]>;

const MAX_URL_LENGTH = 2048;

/** Cloud metadata services: AWS (both families), GCP and Azure (169.254.169.254), Alibaba, Oracle Cloud Classic. */
const METADATA: Cidr[] = ['169.254.169.254/32', 'fd00:ec2::254/128', '100.100.100.200/32', '192.0.0.192/32'].map((text) =>
  ipaddr.parseCIDR(text),
);

/**
 * ::a.b.c.d (IPv4-compatible, deprecated by RFC 4291): ipaddr.js calls it unicast, yet it
 * embeds an IPv4 address that some stacks still route to.
 */
const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96');

const RANGE_WORDS: Record<string, string> = {
  unspecified: 'an unspecified address',
  broadcast: 'the broadcast address',
  multicast: 'a multicast address',
  linkLocal: 'a link-local address',
  loopback: 'a loopback address',
  carrierGradeNat: 'a carrier-grade NAT (shared) address',
  private: 'a private address',
  uniqueLocal: 'a unique local (private) address',
  deprecatedSiteLocal: 'a site-local (private) address',
  reserved: 'a reserved address',
  benchmarking: 'a benchmarking address',
  rfc6145: 'an IPv4-translated address (it embeds an IPv4 address)',
  rfc6052: 'a NAT64 address (it embeds an IPv4 address)',
  '6to4': 'a 6to4 address (it embeds an IPv4 address)',
  teredo: 'a Teredo address (it embeds an IPv4 address)',
};

/** Judges addresses against the rules above and the allow list. */
export class AddressGuard {
  private readonly allow: Cidr[];

  constructor(
    allow: readonly Cidr[],
    private readonly resolve: Resolve = (hostname, options) => dns.lookup(hostname, { ...options, all: true }),
  ) {
    this.allow = allow.map(asIPv4Range);
  }

  /** Why intake refuses to connect to `ip`, in words (`127.0.0.1 is a loopback address`); undefined when it may. */
  refusal(ip: string): string | undefined {
    if (isIP(ip) === 0 || !ipaddr.isValid(ip)) return `${ip} is not an IP address`;
    const address = parseAddress(ip);
    const name = address.kind() === 'ipv4' && isIP(ip) === 6 ? `${ip} (IPv4 ${address.toString()})` : ip;
    // Inside a broad allowed range (a VPC's 100.64.0.0/10), metadata stays refused unless named alone.
    const allowedAlone = this.allow.some((cidr) => isSingle(cidr) && within(address, cidr));
    if (METADATA.some((cidr) => within(address, cidr)) && !allowedAlone) return `${name} is a cloud metadata address`;
    if (this.allowed(address)) return undefined;
    const range = address.range();
    if (range !== 'unicast') return `${name} is ${RANGE_WORDS[range] ?? `an address of the special range "${range}"`}`;
    if (within(address, IPV4_COMPATIBLE)) return `${name} is an IPv4-compatible address (it embeds an IPv4 address)`;
    return undefined;
  }

  /**
   * A `lookup` for the connections of deliveries (net calls it with `all` true or false, and a family): the
   * addresses the connection will use, or an error with `code` EBLOCKEDADDRESS when any of
   * them is refused. Judging exactly what is connected to leaves no room for DNS rebinding
   * (a name that answers a public address at creation and 127.0.0.1 at the attempt).
   */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    const all = options.all === true;
    this.resolve(hostname, { family: options.family, hints: options.hints }).then(
      (addresses) => {
        const error = addresses.length === 0 ? notFound(hostname) : this.blocked(hostname, addresses);
        if (error) return callback(error, all ? [] : '');
        if (all) return callback(null, addresses);
        callback(null, addresses[0]!.address, addresses[0]!.family);
      },
      (error: NodeJS.ErrnoException) => callback(error, all ? [] : ''),
    );
  };

  /**
   * A destination's URL at creation or change; throws `invalid_request` naming `url`. A name
   * that does not resolve now is accepted: every attempt resolves and judges it again.
   */
  async checkUrl(text: string, environment: Environment): Promise<void> {
    if (text.length > MAX_URL_LENGTH) throw invalidUrl(`url must be at most ${MAX_URL_LENGTH} characters.`);
    const url = URL.canParse(text) ? new URL(text) : undefined;
    if (url === undefined) throw invalidUrl('url must be an absolute URL such as https://example.com/webhooks.');
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw invalidUrl('url must start with https:// (or http://).');
    if (url.username !== '' || url.password !== '') {
      throw invalidUrl('url must not hold a user name or password; send credentials in a header, whose value is kept sealed.');
    }
    const host = hostOf(url);
    const literal = isIP(host) !== 0;
    const addresses = literal ? [host] : await this.resolve(host, {}).then((found) => found.map((a) => a.address), () => []);
    for (const address of addresses) {
      const why = this.refusal(address);
      if (why !== undefined) throw invalidUrl(literal ? `url: ${why}.` : `url: ${host} resolves to an address intake refuses: ${why}.`);
    }
    const inAllowList = addresses.length > 0 && addresses.every((address) => this.allowed(parseAddress(address)));
    if (url.protocol === 'http:' && environment === 'production' && !inAllowList) {
      throw invalidUrl('url must use https:// in production (http:// only for hosts inside INTAKE_DESTINATION_ALLOW).');
    }
  }

  private allowed(address: ipaddr.IPv4 | ipaddr.IPv6): boolean {
    return this.allow.some((cidr) => within(address, cidr));
  }

  private blocked(hostname: string, addresses: LookupAddress[]): NodeJS.ErrnoException | undefined {
    for (const { address } of addresses) {
      const why = this.refusal(address);
      if (why === undefined) continue;
      const error: NodeJS.ErrnoException = new Error(`${hostname} resolves to an address intake refuses: ${why}`);
      error.code = BLOCKED_ADDRESS;
      return error;
    }
    return undefined;
  }
}

/** The URL's host as an address or a name: IPv6 literals without their brackets. */
export function hostOf(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/** A valid address as ipaddr.js sees it, read as written (parseAsWritten), IPv4-mapped IPv6 as IPv4. */
function parseAddress(ip: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const address = parseAsWritten(ip);
  return address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress() ? (address as ipaddr.IPv6).toIPv4Address() : address;
}

function within(address: ipaddr.IPv4 | ipaddr.IPv6, [first, bits]: Cidr): boolean {
  return address.kind() === first.kind() && address.match(first, bits);
}

function isSingle([first, bits]: Cidr): boolean {
  return bits === (first.kind() === 'ipv4' ? 32 : 128);
}

function notFound(hostname: string): NodeJS.ErrnoException {
  const error: NodeJS.ErrnoException = new Error(`${hostname} has no address`);
  error.code = 'ENOTFOUND';
  return error;
}

function invalidUrl(message: string): AppError {
  return new AppError('invalid_request', message, { field: 'url' });
}
