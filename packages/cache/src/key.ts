/**
 * The cache key: SHA-256 over everything that makes two requests "the same" (issue 12 item 5:
 * dialect, path, resolved provider and model, team, stream flag and the exact body bytes).
 *
 * The team is part of the hash, so one team's entry can never answer another team's request,
 * whatever the bodies. The fields go in first, each prefixed with its length — so no choice
 * of field values can run into the next field or the body and make two different requests
 * hash the same input — followed by the body as received, byte for byte (no
 * re-serialisation: `{"a":1}` and `{ "a": 1 }` are different keys, which is what "exact"
 * means). Length prefixes rather than `JSON.stringify` of the fields: measured ~0.5 µs less
 * per key (docs/cache.md, "Costs"). SHA-256 is also the fastest cryptographic hash Node
 * offers here (SHA-NI): sha512, BLAKE2b and MD5 took 2–3.5× as long on a 64 KiB body. A
 * cryptographic hash because a collision would let one request be answered with another's
 * response: a team member able to craft colliding bodies could poison the team's cache.
 *
 * The result is base64url (43 characters): a valid NATS key-value key as it is.
 */
import { createHash } from 'node:crypto';

/** Changes when the key's input changes shape, so old entries simply stop matching. */
const KEY_VERSION = 'sightline-cache/1';

export interface CacheKeyParts {
  /** The team of the caller's key (never a header). */
  team: string;
  /** The API the client spoke. */
  dialect: 'openai' | 'anthropic';
  /** The request path as routed (`/v1/chat/completions`); include a query string if it changes the answer. */
  path: string;
  /** The provider and model the request resolved to (after routing), not the model the client named. */
  provider: string;
  model: string;
  stream: boolean;
  /** The request body exactly as received. */
  body: Uint8Array;
  /**
   * Further request values that change the provider's answer, in a fixed order chosen by
   * the caller — e.g. the `anthropic-version` and `anthropic-beta` headers. Default none.
   */
  vary?: readonly string[];
}

export function cacheKey(p: CacheKeyParts): string {
  let fields = KEY_VERSION + (p.stream ? '|s' : '|j') + field(p.team) + field(p.dialect) + field(p.path) + field(p.provider) + field(p.model);
  const vary = p.vary;
  if (vary !== undefined && vary.length > 0) {
    fields += `|v${vary.length}`;
    for (let i = 0; i < vary.length; i++) fields += field(vary[i]!);
  }
  return createHash('sha256').update(fields + '|b').update(p.body).digest('base64url');
}

const SURROGATE = /[\uD800-\uDFFF]/;

/**
 * `|<length>:<value>`. A string with a lone surrogate would be hashed as U+FFFD (UTF-8 has no
 * encoding for it), the same as a string holding U+FFFD itself: such a value is written
 * JSON-escaped instead (`|j"…"`, ASCII), which keeps the input to the hash unambiguous.
 */
function field(v: string): string {
  return SURROGATE.test(v) ? `|j${JSON.stringify(v)}` : `|${v.length}:${v}`;
}

/** What a key must look like to be stored: what `cacheKey` returns, and a valid NATS KV key in any case. */
export const KEY_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;
