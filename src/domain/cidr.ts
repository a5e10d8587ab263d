import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Address ranges as an operator writes them (INTAKE_DESTINATION_ALLOW): parsed with the
 * configuration, judged against by the destinations' address guard
 * (src/destinations/address-guard.ts).
 */

/** An address range: its first address and prefix length. */
export type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

/**
 * INTAKE_DESTINATION_ALLOW's text: comma-separated ranges (`127.0.0.1/32,::1/128`; a bare
 * address is a range of one). Throws naming the first entry that is not one.
 */
export function parseCidrList(text: string): Cidr[] {
  return text
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
    .map((entry) => {
      const [address = '', prefix, ...rest] = entry.split('/');
      // ipaddr.js also reads `10` or `0x7f.1` as IPv4; an operator's list takes the usual forms only.
      const usual = ipaddr.IPv4.isValidFourPartDecimal(address) || (address.includes(':') && ipaddr.IPv6.isValid(address));
      if (!usual || rest.length > 0 || (prefix !== undefined && !/^\d{1,3}$/.test(prefix))) throw badEntry(entry);
      const parsed = parseAsWritten(address);
      const bits = prefix === undefined ? (parsed.kind() === 'ipv4' ? 32 : 128) : Number(prefix);
      if (bits > (parsed.kind() === 'ipv4' ? 32 : 128)) throw badEntry(entry);
      return asIPv4Range([parsed, bits]);
    });
}

/**
 * An address as written. A dotted tail is first rewritten in hex: ipaddr.js reads
 * `::127.0.0.1` (IPv4-compatible, which Node's resolver prints so) as `::ffff:127.0.0.1`,
 * another address.
 */
export function parseAsWritten(ip: string): ipaddr.IPv4 | ipaddr.IPv6 {
  if (isIP(ip) !== 6 || !ip.includes('.')) return ipaddr.parse(ip);
  const colon = ip.lastIndexOf(':');
  const [a = 0, b = 0, c = 0, d = 0] = ip.slice(colon + 1).replace(/%.*$/, '').split('.').map(Number);
  return ipaddr.parse(`${ip.slice(0, colon + 1)}${(a * 256 + b).toString(16)}:${(c * 256 + d).toString(16)}`);
}

/** ::ffff:a.b.c.d/n (n ≥ 96) as the IPv4 range it means, since addresses are judged as IPv4. */
export function asIPv4Range(cidr: Cidr): Cidr {
  const [first, bits] = cidr;
  if (first.kind() === 'ipv6' && bits >= 96 && (first as ipaddr.IPv6).isIPv4MappedAddress()) {
    return [(first as ipaddr.IPv6).toIPv4Address(), bits - 96];
  }
  return cidr;
}

function badEntry(entry: string): Error {
  return new Error(`"${entry}" is not an address range such as 127.0.0.1/32 or ::1/128`);
}
