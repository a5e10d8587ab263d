import { randomBytes, randomInt } from 'node:crypto';

/**
 * The two codes of a command-line sign-in (`intake login`, after RFC 8628's device flow).
 *
 * The device code is the terminal's secret: 256 random bits, only its SHA-256 stored (as the
 * one-time links are). The user code is what a person compares between the terminal and the
 * panel, and may type: 8 letters from RFC 8628's 20 consonants (section 6.1: no vowels, so no
 * words, and no digits to mistake for O or I), about 34.6 bits, shown as ABCD-EFGH. It is only
 * good for the ten minutes a sign-in waits, by a signed-in person, and lookups that find
 * nothing count against the address's failed authentications.
 */
const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
const USER_CODE_LENGTH = 8;

export function newDeviceCode(): string {
  return randomBytes(32).toString('base64url');
}

/** A new user code, as stored: 8 letters, no separator. */
export function newUserCode(): string {
  let code = '';
  for (let i = 0; i < USER_CODE_LENGTH; i++) code += USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)];
  return code;
}

/** ABCDEFGH as people read it: ABCD-EFGH. */
export function displayUserCode(code: string): string {
  return `${code.slice(0, 4)}-${code.slice(4)}`;
}

/**
 * A user code as typed or pasted (any case, with or without the dash or spaces) in its
 * stored form, or undefined when it cannot be one.
 */
export function normalizeUserCode(typed: string): string | undefined {
  const letters = typed.toUpperCase().replace(/[\s-]/g, '');
  if (letters.length !== USER_CODE_LENGTH) return undefined;
  return [...letters].every((letter) => USER_CODE_ALPHABET.includes(letter)) ? letters : undefined;
}
