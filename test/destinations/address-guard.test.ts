import type { LookupAddress, LookupOptions } from 'node:dns';
import { describe, expect, test } from 'vitest';
import { parseCidrList } from '../../src/domain/cidr.js';
import { AddressGuard, BLOCKED_ADDRESS, type Resolve } from '../../src/destinations/address-guard.js';
import { AppError } from '../../src/errors.js';

/**
 * Server-side request forgery: every address class refused, IPv4 inside IPv6 included, and
 * the allow list. Names resolve for real (`localhost` through /etc/hosts; this machine has
 * no other DNS) except where a test gives its own answers to show a name with many addresses.
 */

const GUARD = new AddressGuard([]);
const LOOPBACK_ALLOWED = new AddressGuard(parseCidrList('127.0.0.1/32'));

/** A resolver answering `answers` for every name, keeping the options it was called with. */
function fixedResolver(answers: string[]): Resolve & { calls: Array<Pick<LookupOptions, 'family' | 'hints'>> } {
  const calls: Array<Pick<LookupOptions, 'family' | 'hints'>> = [];
  const resolve = async (_hostname: string, options: Pick<LookupOptions, 'family' | 'hints'>) => {
    calls.push(options);
    return answers.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return Object.assign(resolve, { calls });
}

/** guard.lookup called as net calls it, its callback's arguments as a result. */
function lookup(guard: AddressGuard, hostname: string, options: LookupOptions) {
  return new Promise<{ error: NodeJS.ErrnoException | null; address: string | LookupAddress[]; family?: number }>((resolve) =>
    guard.lookup(hostname, options, (error, address, family) => resolve({ error, address, family })),
  );
}

async function urlRefusal(guard: AddressGuard, url: string, environment: 'development' | 'production' = 'development'): Promise<AppError> {
  const error = await guard.checkUrl(url, environment).then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error, `${url} refused`).toBeInstanceOf(AppError);
  expect((error as AppError).code).toBe('invalid_request');
  expect((error as AppError).details.field).toBe('url');
  return error as AppError;
}

describe('refusal', () => {
  test.each([
    ['127.0.0.1', /^127\.0\.0\.1 is a loopback address$/],
    ['127.255.0.9', /loopback/],
    ['10.0.0.1', /^10\.0\.0\.1 is a private address$/],
    ['10.255.255.255', /private/],
    ['172.16.0.1', /private/],
    ['172.31.255.254', /private/],
    ['192.168.1.1', /private/],
    ['169.254.169.254', /^169\.254\.169\.254 is a cloud metadata address$/],
    ['169.254.1.1', /link-local/],
    ['100.64.0.1', /carrier-grade NAT/],
    ['100.127.255.254', /carrier-grade NAT/],
    ['100.100.100.200', /cloud metadata/],
    ['192.0.0.192', /cloud metadata/],
    ['fd00:ec2::254', /cloud metadata/],
    ['0.0.0.0', /unspecified/],
    ['0.1.2.3', /unspecified/],
    ['255.255.255.255', /broadcast/],
    ['224.0.0.1', /multicast/],
    ['240.0.0.1', /reserved/],
    ['192.0.2.1', /reserved/],
    ['198.18.0.1', /reserved/],
    ['::1', /^::1 is a loopback address$/],
    ['::', /unspecified/],
    ['fe80::1', /link-local/],
    ['fe80::1%eth0', /link-local/],
    ['fc00::1', /unique local/],
    ['fd12:3456::1', /unique local/],
    ['fec0::1', /site-local/],
    ['ff02::1', /multicast/],
    ['2001:db8::1', /reserved/],
    ['::ffff:127.0.0.1', /^::ffff:127\.0\.0\.1 \(IPv4 127\.0\.0\.1\) is a loopback address$/],
    ['::ffff:7f00:1', /^::ffff:7f00:1 \(IPv4 127\.0\.0\.1\) is a loopback address$/],
    ['::ffff:169.254.169.254', /cloud metadata/],
    ['::ffff:10.0.0.1', /private/],
    ['::ffff:0:7f00:1', /IPv4-translated/],
    ['64:ff9b::7f00:1', /NAT64/],
    ['64:ff9b:1::a00:1', /NAT64/],
    ['2002:7f00:1::', /6to4/],
    ['2001:0:4136:e378::1', /Teredo/],
    ['::7f00:1', /IPv4-compatible/],
    ['::127.0.0.1', /IPv4-compatible/],
  ])('%s is refused', (ip, words) => {
    expect(GUARD.refusal(ip)).toMatch(words);
  });

  test.each(['93.184.216.34', '8.8.8.8', '172.32.0.1', '100.128.0.1', '169.253.255.255', '2606:4700::1111', '2a00:1450:4001:81c::200e', '::ffff:93.184.216.34'])(
    '%s, public, is allowed',
    (ip) => {
      expect(GUARD.refusal(ip)).toBeUndefined();
    },
  );

  test('what is not an IP address is refused', () => {
    expect(GUARD.refusal('localhost')).toBe('localhost is not an IP address');
    expect(GUARD.refusal('2130706433')).toMatch(/not an IP address/);
    expect(GUARD.refusal('')).toMatch(/not an IP address/);
  });

  test('an address inside the allow list is allowed whatever its class, IPv4-mapped forms included', () => {
    expect(LOOPBACK_ALLOWED.refusal('127.0.0.1')).toBeUndefined();
    expect(LOOPBACK_ALLOWED.refusal('::ffff:127.0.0.1')).toBeUndefined();
    expect(LOOPBACK_ALLOWED.refusal('::ffff:7f00:1')).toBeUndefined();
    expect(LOOPBACK_ALLOWED.refusal('127.0.0.2')).toMatch(/loopback/);
    expect(LOOPBACK_ALLOWED.refusal('::1')).toMatch(/loopback/);
    expect(LOOPBACK_ALLOWED.refusal('::127.0.0.1')).toMatch(/IPv4-compatible/);
    expect(LOOPBACK_ALLOWED.refusal('10.0.0.1')).toMatch(/private/);
    const mappedRange = new AddressGuard(parseCidrList('::ffff:10.0.0.0/104'));
    expect(mappedRange.refusal('10.1.2.3')).toBeUndefined();
    expect(mappedRange.refusal('11.0.0.1')).toBeUndefined();
    expect(mappedRange.refusal('192.168.0.1')).toMatch(/private/);
  });

  test('metadata addresses stay refused inside a broader allowed range, unless allowed by name', () => {
    const network = new AddressGuard(parseCidrList('100.64.0.0/10,169.254.0.0/16'));
    expect(network.refusal('100.64.0.1')).toBeUndefined();
    expect(network.refusal('169.254.1.1')).toBeUndefined();
    expect(network.refusal('100.100.100.200')).toMatch(/cloud metadata/);
    expect(network.refusal('169.254.169.254')).toMatch(/cloud metadata/);
    expect(new AddressGuard(parseCidrList('169.254.169.254/32')).refusal('169.254.169.254')).toBeUndefined();
  });
});

describe('parseCidrList', () => {
  test('comma-separated ranges; a bare address is a range of one', () => {
    const list = parseCidrList(' 127.0.0.1/32, ::1/128,10.0.0.0/8 ,192.168.0.7,, ');
    expect(list.map(([address, bits]) => `${address.toString()}/${bits}`)).toEqual(['127.0.0.1/32', '::1/128', '10.0.0.0/8', '192.168.0.7/32']);
    expect(parseCidrList('')).toEqual([]);
  });

  test.each(['localhost', '10/8', '0x7f.0.0.1/32', '127.0.0.1/33', '::1/129', '1.2.3.4/8/9', '1.2.3.4/x', '1.2.3.4/', '300.0.0.1/8'])(
    'refuses %j, naming it',
    (entry) => {
      expect(() => parseCidrList(`127.0.0.1/32,${entry}`)).toThrow(`"${entry}" is not an address range such as 127.0.0.1/32 or ::1/128`);
    },
  );
});

describe('lookup (the agent connects only to what it resolves and allows)', () => {
  test('a name resolving to a refused address fails with EBLOCKEDADDRESS, with or without `all`', async () => {
    for (const all of [true, false]) {
      const { error } = await lookup(GUARD, 'localhost', { all, family: 0 });
      expect(error?.code).toBe(BLOCKED_ADDRESS);
      expect(error?.message).toBe('localhost resolves to an address intake refuses: 127.0.0.1 is a loopback address');
    }
  });

  test('an allowed name answers in the form asked for', async () => {
    expect(await lookup(LOOPBACK_ALLOWED, 'localhost', { all: true })).toEqual({ error: null, address: [{ address: '127.0.0.1', family: 4 }], family: undefined });
    expect(await lookup(LOOPBACK_ALLOWED, 'localhost', { all: false, family: 4 })).toEqual({ error: null, address: '127.0.0.1', family: 4 });
  });

  test("the family asked for is passed on; a name without such an address is DNS's own error", async () => {
    const resolver = fixedResolver(['93.184.216.34']);
    await lookup(new AddressGuard([], resolver), 'example.com', { all: true, family: 6, hints: 32 });
    expect(resolver.calls).toEqual([{ family: 6, hints: 32 }]);
    // /etc/hosts gives localhost no IPv6 address here.
    expect((await lookup(LOOPBACK_ALLOWED, 'localhost', { all: true, family: 6 })).error?.code).toBe('ENOTFOUND');
    expect((await lookup(GUARD, 'nothing-here.invalid', { all: false })).error?.code).toBe('ENOTFOUND');
    expect((await lookup(new AddressGuard([], fixedResolver([])), 'empty.example', { all: true })).error?.code).toBe('ENOTFOUND');
  });

  test('one refused address among public ones blocks the name', async () => {
    const mixed = new AddressGuard([], fixedResolver(['93.184.216.34', '2606:4700::1111', '::ffff:10.0.0.1']));
    const { error } = await lookup(mixed, 'mixed.example', { all: true });
    expect(error?.code).toBe(BLOCKED_ADDRESS);
    expect(error?.message).toMatch(/::ffff:10\.0\.0\.1 \(IPv4 10\.0\.0\.1\) is a private address/);
    const publicOnly = new AddressGuard([], fixedResolver(['93.184.216.34', '2606:4700::1111']));
    expect(await lookup(publicOnly, 'public.example', { all: false })).toEqual({ error: null, address: '93.184.216.34', family: 4 });
  });
});

describe('checkUrl (at creation)', () => {
  test('a name resolving to a loopback address is refused, unless allowed', async () => {
    expect((await urlRefusal(GUARD, 'http://localhost:8080/hook')).message).toBe(
      'url: localhost resolves to an address intake refuses: 127.0.0.1 is a loopback address.',
    );
    await expect(LOOPBACK_ALLOWED.checkUrl('http://localhost:8080/hook', 'development')).resolves.toBeUndefined();
  });

  test.each([
    ['http://127.0.0.1/', /127\.0\.0\.1 is a loopback address/],
    ['http://[::1]:8080/', /::1 is a loopback address/],
    ['http://[::ffff:127.0.0.1]/', /\(IPv4 127\.0\.0\.1\) is a loopback address/],
    ['http://[::ffff:7f00:1]/', /loopback/],
    ['http://2130706433/', /127\.0\.0\.1 is a loopback address/],
    ['http://0x7f.1/', /loopback/],
    ['https://169.254.169.254/latest/meta-data/', /cloud metadata/],
    ['https://[fd00:ec2::254]/', /cloud metadata/],
    ['https://10.0.0.5/', /private/],
    ['https://[fe80::1]/', /link-local/],
    ['https://[64:ff9b::7f00:1]/', /NAT64/],
  ])('the IP literal %s is refused', async (url, words) => {
    expect((await urlRefusal(GUARD, url)).message).toMatch(words);
  });

  test.each([
    ['https://user:secret@example.com/hook', /user name or password/],
    ['https://token@example.com/hook', /user name or password/],
    ['ftp://example.com/hook', /https:\/\//],
    ['file:///etc/passwd', /https:\/\//],
    ['example.com/hook', /absolute URL/],
    ['', /absolute URL/],
    [`https://example.com/${'a'.repeat(2030)}`, /at most 2048 characters/],
  ])('%s is refused', async (url, words) => {
    expect((await urlRefusal(GUARD, url)).message).toMatch(words);
  });

  test('a public address or a name that does not resolve yet is accepted (attempts check again)', async () => {
    await expect(GUARD.checkUrl('https://93.184.216.34/hook', 'production')).resolves.toBeUndefined();
    await expect(GUARD.checkUrl('https://[2606:4700::1111]/hook', 'production')).resolves.toBeUndefined();
    await expect(GUARD.checkUrl('https://not-yet.invalid/hook', 'production')).resolves.toBeUndefined();
    await expect(GUARD.checkUrl(`https://example.com/${'a'.repeat(2028)}`, 'production')).resolves.toBeUndefined();
  });

  test('a name with one refused address among public ones is refused', async () => {
    const mixed = new AddressGuard([], fixedResolver(['93.184.216.34', '192.168.0.10']));
    expect((await urlRefusal(mixed, 'https://mixed.example/hook')).message).toMatch(/mixed\.example resolves to .*192\.168\.0\.10 is a private address/);
  });

  test('http: is refused in production unless every address is inside the allow list', async () => {
    expect((await urlRefusal(GUARD, 'http://93.184.216.34/hook', 'production')).message).toMatch(/https:\/\/ in production/);
    expect((await urlRefusal(GUARD, 'http://not-yet.invalid/hook', 'production')).message).toMatch(/https:\/\/ in production/);
    await expect(GUARD.checkUrl('http://93.184.216.34/hook', 'development')).resolves.toBeUndefined();
    await expect(GUARD.checkUrl('http://93.184.216.34/hook', 'staging')).resolves.toBeUndefined();
    await expect(LOOPBACK_ALLOWED.checkUrl('http://localhost:8080/hook', 'production')).resolves.toBeUndefined();
    await expect(LOOPBACK_ALLOWED.checkUrl('http://127.0.0.1:8080/hook', 'production')).resolves.toBeUndefined();
    const partly = new AddressGuard(parseCidrList('10.0.0.0/8'), fixedResolver(['10.0.0.1', '93.184.216.34']));
    expect((await urlRefusal(partly, 'http://partly.example/hook', 'production')).message).toMatch(/https:\/\/ in production/);
  });
});
