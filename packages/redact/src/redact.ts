/**
 * Policy-level entry points: raw text and parsed JSON.
 *
 * JSON is walked without recursion (an explicit stack), so depth costs heap, not call stack;
 * the gateway caps nesting at 128 levels, and `maxDepth` (default 1,000) turns anything deeper,
 * or a cyclic object that is not JSON at all, into a `RedactError` rather than a hang.
 *
 * Object keys are redacted like values: a key is a string the client chose and can carry an
 * address or a key (`{"alice@example.com": {...}}`). Two keys that become the same placeholder
 * are kept apart with a suffix (`[EMAIL]`, `[EMAIL]#2`). Values under keys that name a
 * credential (`password`, `api_key`, `authorization`, …) are replaced whole, whatever their
 * shape: by the token's own placeholder when the value is one recognised token, else by the
 * key's (`[PASSWORD]`, `[SECRET]`).
 */

import { RedactError } from './errors.js';
import { redactPersonalInto } from './personal.js';
import { redactSecretsInto } from './secrets.js';
import { addCounts, isPlaceholder, note } from './types.js';
import type { JsonRedaction, JsonValue, RedactionCounts, RedactionPolicy, TextRedaction } from './types.js';

export interface RedactJsonOptions {
  /**
   * Deepest nesting walked; deeper input throws `RedactError` (`SL_REDACT_TOO_DEEP`).
   * Default 1000: well past the gateway's 128-level cap on request bodies.
   */
  maxDepth?: number;
}

const DEFAULT_MAX_DEPTH = 1000;

// Nothing we detect is shorter than six characters (`a@b.co`; `1.2.3.4` and keys need more).
const MIN_LENGTH = 6;
// Nor can a short string of letters, spaces and `_` hold anything (keys need 20 characters or
// a digit, labels a `:` or `=`, personal data a digit or an `@`): most keys and enum values.
const PLAIN_WORDS = /^[A-Za-z_ ]{0,19}$/;

// Base64 payloads (image and file data) are left as they are: nothing we detect can sit
// inside one (every detector needs a boundary a base64 run does not have), and scanning
// megabytes of them would be the whole cost of redaction.
const BASE64_MIN = 256;
const BASE64_RUN = /^[A-Za-z0-9+/=\r\n]+$/;
const DATA_URL_PAYLOAD = /;base64,[A-Za-z0-9+/=]{256,}/g;

function redactPlain(text: string, personal: boolean, counts: RedactionCounts): string {
  const t = redactSecretsInto(text, counts);
  return personal ? redactPersonalInto(t, counts) : t;
}

function redactString(text: string, personal: boolean, counts: RedactionCounts): string {
  if (text.length < MIN_LENGTH || (text.length < 20 && PLAIN_WORDS.test(text))) return text;
  if (text.length >= BASE64_MIN && BASE64_RUN.test(text)) return text;
  if (!text.includes(';base64,')) return redactPlain(text, personal, counts);
  // Redact around data URLs' payloads, never inside them.
  let out = '';
  let last = 0;
  DATA_URL_PAYLOAD.lastIndex = 0;
  for (let m = DATA_URL_PAYLOAD.exec(text); m !== null; m = DATA_URL_PAYLOAD.exec(text)) {
    out += redactPlain(text.slice(last, m.index), personal, counts) + m[0];
    last = m.index + m[0].length;
  }
  return out + redactPlain(text.slice(last), personal, counts);
}

/**
 * Redacts raw text (a prompt, a completion, a body that is not JSON): secrets always, personal
 * data too under `redacted`. Counts are per placeholder type (see types.ts).
 */
export function redactText(text: string, policy: RedactionPolicy): TextRedaction {
  const counts: RedactionCounts = {};
  return { text: redactString(text, policy === 'redacted', counts), counts };
}

// Keys whose value is a credential whatever it looks like, in any case, with or without `_`
// and `-`. Not `token` alone: OpenAI logprobs carry `{"token": "Hello"}`.
const PASSWORD_KEY = /^(?:(?:new|old|current)[_-]?)?pass(?:word|wd|phrase|wort)(?:[_-]?confirm(?:ation)?)?$/i;
const SECRET_KEY =
  /^(?:secret|client[_-]?secret|x?[_-]?api[_-]?(?:key|token)|(?:access|refresh|auth|id|session)[_-]?token|(?:aws[_-]?)?secret[_-]?(?:access[_-]?)?key|private[_-]?key|(?:proxy[_-]?)?authorization|(?:set[_-]?)?cookie|x[_-]?sightline[_-]?key)$/i;

function credentialKey(key: string): 'password' | 'secret' | null {
  if (key.length < 5 || key.length > 40) return null;
  return PASSWORD_KEY.test(key) ? 'password' : SECRET_KEY.test(key) ? 'secret' : null;
}

type JsonObject = { [key: string]: JsonValue };
type Container = JsonValue[] | JsonObject;
interface Frame {
  src: Container;
  dst: Container;
  depth: number;
}

/** Sets `dst[key]`, safely for `__proto__`; a key already taken gets a `#n` suffix. */
function put(dst: JsonObject, key: string, value: JsonValue): void {
  let k = key;
  if (Object.hasOwn(dst, k)) {
    let n = 2;
    while (Object.hasOwn(dst, `${key}#${n}`)) n++;
    k = `${key}#${n}`;
  }
  if (k === '__proto__') Object.defineProperty(dst, k, { value, enumerable: true, writable: true, configurable: true });
  else dst[k] = value;
}

/**
 * Redacts every string of a parsed JSON value, keys included, and returns a new value (the
 * input is not changed) with the counts. Numbers, booleans and null are kept, except under
 * a credential key (`"pin"` is not one; `"password": 1234` is).
 */
export function redactJson(value: JsonValue, policy: RedactionPolicy, options: RedactJsonOptions = {}): JsonRedaction {
  const personal = policy === 'redacted';
  const maxDepth = options.maxDepth ?? DEFAULT_MAX_DEPTH;
  const counts: RedactionCounts = {};
  const stack: Frame[] = [];

  const convert = (v: JsonValue, depth: number): JsonValue => {
    if (typeof v === 'string') return redactString(v, personal, counts);
    if (typeof v !== 'object' || v === null) return v;
    if (depth >= maxDepth) throw new RedactError('SL_REDACT_TOO_DEEP', `JSON nested deeper than ${maxDepth} levels`);
    const dst: Container = Array.isArray(v) ? new Array<JsonValue>(v.length) : {};
    stack.push({ src: v, dst, depth: depth + 1 });
    return dst;
  };

  const root = convert(value, 0);
  while (stack.length > 0) {
    const { src, dst, depth } = stack.pop() as Frame;
    if (Array.isArray(src)) {
      const out = dst as JsonValue[];
      for (let i = 0; i < src.length; i++) out[i] = convert(src[i] as JsonValue, depth);
      continue;
    }
    const out = dst as JsonObject;
    for (const key of Object.keys(src)) {
      const v = src[key] as JsonValue;
      const newKey = redactString(key, personal, counts);
      const credential = credentialKey(key);
      let newValue: JsonValue;
      if (credential !== null && (typeof v === 'number' || (typeof v === 'string' && v.trim() !== '' && !isPlaceholder(v)))) {
        // The whole value goes. A value that is one recognised token keeps its specific
        // placeholder (`"api_key": "sk-…"` → `[SECRET:openai]`); anything else gets the key's.
        const found: RedactionCounts = {};
        const r = typeof v === 'string' ? redactString(v, personal, found) : '';
        if (isPlaceholder(r)) {
          newValue = r;
          addCounts(counts, found);
        } else {
          newValue = note(counts, credential);
        }
      } else {
        newValue = convert(v, depth);
      }
      put(out, newKey, newValue);
    }
  }
  return { value: root, counts };
}

