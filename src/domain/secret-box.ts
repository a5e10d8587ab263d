import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Seals the secrets the service must read back (a user's TOTP secret; later, sources'
 * signing secrets), so a copy of the database alone does not give them away. AES-256-GCM
 * with a random 96-bit nonce per secret; the key id travels with each sealed value, so
 * keys can be rotated: the first key seals, every key opens.
 *
 * Sealed form: `v1.<key id>.<nonce>.<ciphertext and tag>`, each part base64url.
 */
export class SecretBox {
  private readonly keys: Map<string, Buffer>;
  private readonly sealingKeyId: string;

  constructor(keys: readonly Buffer[]) {
    if (keys.length === 0) throw new Error('a SecretBox needs at least one key');
    for (const key of keys) if (key.length !== KEY_BYTES) throw new Error(`a secrets key is ${KEY_BYTES} bytes`);
    this.keys = new Map(keys.map((key) => [keyId(key), key]));
    this.sealingKeyId = keyId(keys[0]!);
  }

  seal(plaintext: string): string {
    const nonce = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(this.sealingKeyId)!, nonce);
    const sealed = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return ['v1', this.sealingKeyId, nonce.toString('base64url'), sealed.toString('base64url')].join('.');
  }

  /** The id of the key that seals: the first configured. */
  get currentKeyId(): string {
    return this.sealingKeyId;
  }

  /** Whether `sealed` was sealed with the current key (`intake secrets rotate` leaves those alone). */
  sealedWithCurrentKey(sealed: string): boolean {
    return sealed.split('.', 2)[1] === this.sealingKeyId;
  }

  /**
   * A key for `purpose` derived from each configured key (HKDF-SHA256), the sealing key's
   * first: for MACs the service checks itself (delivery origins), never the keys that seal.
   */
  derivedKeys(purpose: string): Buffer[] {
    const ordered = [this.keys.get(this.sealingKeyId)!, ...[...this.keys.values()].filter((key) => keyId(key) !== this.sealingKeyId)];
    return ordered.map((key) => Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), purpose, KEY_BYTES)));
  }

  /** The plaintext; throws when the value was sealed with a key this box lacks, or was altered. */
  open(sealed: string): string {
    const [version, id, nonce, body] = sealed.split('.');
    if (version !== 'v1' || !id || !nonce || !body) throw new Error('not a sealed secret');
    const key = this.keys.get(id);
    if (!key) throw new Error(`sealed with a secrets key that is not configured (key id ${id})`);
    const bytes = Buffer.from(body, 'base64url');
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(nonce, 'base64url'));
    decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
    return Buffer.concat([decipher.update(bytes.subarray(0, bytes.length - TAG_BYTES)), decipher.final()]).toString('utf8');
  }
}

const KEY_BYTES = 32;
const TAG_BYTES = 16;

/** A key's public name: enough to pick it among a few, nothing about the key itself. */
function keyId(key: Buffer): string {
  return createHash('sha256').update(key).digest('base64url').slice(0, 8);
}

/** A new key as INTAKE_SECRETS_KEY takes it: 32 random bytes in base64url. */
export function newSecretsKey(): string {
  return randomBytes(KEY_BYTES).toString('base64url');
}

/**
 * INTAKE_SECRETS_KEY's value: one key, or several separated by commas (the first seals),
 * each 32 bytes in base64/base64url (43-44 characters) or hex (64). Throws a sentence
 * saying what is wrong, without repeating the value.
 */
export function parseSecretsKeys(value: string): Buffer[] {
  const parts = value.split(',').map((part) => part.trim()).filter(Boolean);
  if (parts.length === 0) throw new Error('must hold at least one key');
  return parts.map((part, index) => {
    const key = /^[0-9a-fA-F]{64}$/.test(part) ? Buffer.from(part, 'hex') : Buffer.from(part, 'base64url');
    if (key.length !== KEY_BYTES || !/^[A-Za-z0-9+/_=-]+$/.test(part)) {
      throw new Error(`key ${index + 1} must be ${KEY_BYTES} bytes in base64url or hex (make one with: openssl rand -base64 32)`);
    }
    return key;
  });
}
