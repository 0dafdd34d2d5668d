/**
 * Key secrets and their hashes.
 *
 * A secret is `sl-` and 43 base64url characters of 32 random bytes (256 bits). It is
 * stored only as HMAC-SHA-256 under a server secret (`SIGHTLINE_KEY_HASH_SECRET`, or one
 * derived from `SIGHTLINE_ADMIN_TOKEN`): without the server secret a dump of the store
 * cannot even be used to test guesses offline.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const KEY_PREFIX = 'sl-';
const SECRET_RE = /^sl-[A-Za-z0-9_-]{43}$/;
const ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** A new key secret. */
export function newKeySecret(): string {
  return KEY_PREFIX + randomBytes(32).toString('base64url');
}

/** A new key id: `key_` and 16 lowercase letters or digits (~82 bits; public). */
export function newKeyId(): string {
  const b = randomBytes(16);
  let id = 'key_';
  for (let i = 0; i < 16; i++) id += ID_ALPHABET[b[i]! % ID_ALPHABET.length];
  return id;
}

/** Whether a string has the shape of a Sightline key secret. */
export function looksLikeKey(s: string): boolean {
  return SECRET_RE.test(s);
}

/** `sl-…abcd`: enough to recognise a key in a list, nothing to use. */
export function hintOf(secret: string): string {
  return `${KEY_PREFIX}…${secret.slice(-4)}`;
}

/** HMAC-SHA-256 of secrets under one server secret. */
export class KeyHasher {
  readonly #secret: Buffer;
  constructor(serverSecret: string | Buffer) {
    const s = typeof serverSecret === 'string' ? Buffer.from(serverSecret, 'utf8') : serverSecret;
    if (s.length < 16) throw new RangeError('the key hashing secret must be at least 16 bytes');
    this.#secret = s;
  }

  /**
   * The hashing secret derived from the admin token when no separate one is set: changing
   * the admin token then invalidates every key, which docs/configuration.md says.
   */
  static fromAdminToken(adminToken: string): KeyHasher {
    return new KeyHasher(createHmac('sha256', adminToken).update('sightline/key-hash/v1').digest());
  }

  hash(secret: string): string {
    return createHmac('sha256', this.#secret).update(secret).digest('hex');
  }
}

/** Constant-time comparison of two strings (the admin token). */
export function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}
