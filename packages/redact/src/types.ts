/**
 * Types and placeholder names of the redaction library.
 *
 * Every replacement is a typed placeholder in square brackets. The names are a public
 * contract (they are stored in ClickHouse and searched with SQL), so keep them stable:
 *
 * | counts key        | placeholder        | what                                             |
 * | ----------------- | ------------------ | ------------------------------------------------ |
 * | `secret:<kind>`   | `[SECRET:<kind>]`  | a provider key or token of a known shape         |
 * | `secret`          | `[SECRET]`         | a bearer/basic credential or labelled secret     |
 * | `jwt`             | `[JWT]`            | a JSON Web Token                                 |
 * | `private_key`     | `[PRIVATE_KEY]`    | a PEM private key block                          |
 * | `password`        | `[PASSWORD]`       | a password in a URL or a `password=` assignment  |
 * | `email`           | `[EMAIL]`          | an e-mail address                                |
 * | `phone`           | `[PHONE]`          | a phone number                                   |
 * | `card`            | `[CARD]`           | a payment card number (Luhn-checked)             |
 * | `iban`            | `[IBAN]`           | an IBAN (mod-97 checked)                         |
 * | `ip`              | `[IP]`             | an IPv4 or IPv6 address                          |
 * | `ssn`             | `[SSN]`            | a US social security number                      |
 *
 * Placeholders contain no digit, no quote and no backslash, so they never match a detector
 * again (redaction is idempotent) and never break the JSON text they are written into.
 */

/**
 * What a team's content capture keeps (issue 11, item 4). `none` captures nothing, so
 * redaction never sees it: `full` redacts secrets only, `redacted` secrets and personal data.
 */
export type RedactionPolicy = 'full' | 'redacted';

/** Replacements made, per counts key (see the table above). Only non-zero entries appear. */
export type RedactionCounts = Record<string, number>;

export interface TextRedaction {
  text: string;
  counts: RedactionCounts;
}

/** A parsed JSON value (what `JSON.parse` returns). */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export interface JsonRedaction {
  value: JsonValue;
  counts: RedactionCounts;
}

/** Providers whose keys have a recognisable shape; `[SECRET:<kind>]`. */
export const SECRET_KINDS = [
  'openai',
  'anthropic',
  'openrouter',
  'langfuse',
  'sightline',
  'google',
  'aws',
  'github',
  'gitlab',
  'slack',
  'discord',
  'stripe',
  'huggingface',
  'groq',
  'xai',
  'perplexity',
  'replicate',
  'npm',
  'sendgrid',
] as const;
export type SecretKind = (typeof SECRET_KINDS)[number];

export type PersonalType = 'email' | 'phone' | 'card' | 'iban' | 'ip' | 'ssn';
export type SecretType = 'secret' | 'jwt' | 'private_key' | 'password' | `secret:${SecretKind}`;
export type RedactionType = PersonalType | SecretType;

/** The placeholder written for a redaction type: `[EMAIL]`, `[SECRET:openai]`. */
export function placeholderOf(type: RedactionType): string {
  return type.startsWith('secret:') ? `[SECRET:${type.slice(7)}]` : `[${type.toUpperCase()}]`;
}

const PLACEHOLDER = /^\[(?:[A-Z_]+|SECRET:[a-z]+)\]$/;

/** Whether a string is exactly one placeholder (so a second pass leaves it alone). */
export function isPlaceholder(s: string): boolean {
  return s.length >= 4 && s.length <= 24 && s.charCodeAt(0) === 91 /* [ */ && PLACEHOLDER.test(s);
}

/** Adds `from` into `into` (e.g. the counts of request and response of one capture). */
export function addCounts(into: RedactionCounts, from: RedactionCounts): RedactionCounts {
  for (const key of Object.keys(from)) into[key] = (into[key] ?? 0) + (from[key] ?? 0);
  return into;
}

/** Counts one replacement and returns its placeholder. */
export function note(counts: RedactionCounts, type: RedactionType): string {
  counts[type] = (counts[type] ?? 0) + 1;
  return placeholderOf(type);
}
