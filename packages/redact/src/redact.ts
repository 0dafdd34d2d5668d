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

// Keys repeat in every body (`role`, `content`, `tool_calls`, …): the keys found to need
// nothing under either policy (no redaction, not a credential key) are remembered, so a known
// key costs one lookup. Bounded; cleared when full. A memo only: results do not depend on it.
const PLAIN_KEYS = new Set<string>();
const PLAIN_KEYS_MAX = 4096;

function isPlainKey(key: string): boolean {
  if (PLAIN_KEYS.has(key)) return true;
  const scratch: RedactionCounts = {};
  if (credentialKey(key) !== null || redactString(key, true, scratch) !== key) return false;
  if (PLAIN_KEYS.size >= PLAIN_KEYS_MAX) PLAIN_KEYS.clear();
  PLAIN_KEYS.add(key);
  return true;
}

type JsonObject = { [key: string]: JsonValue };
type Container = JsonValue[] | JsonObject;

/** One container being walked: its children are visited in order, `i` is the next one. */
interface Frame {
  src: Container;
  /** The object's keys; null for an array. */
  keys: string[] | null;
  i: number;
  /** The copy, made when the first child changes; until then the source stands for itself. */
  out: Container | null;
  /** Whether a key of `out` was renamed, so later keys may collide. */
  renamed: boolean;
  depth: number;
}

/** Sets `dst[key]`, safely for `__proto__`; a key already taken gets a `#n` suffix. */
function put(dst: JsonObject, key: string, value: JsonValue, mayCollide: boolean): void {
  let k = key;
  if (mayCollide && Object.hasOwn(dst, k)) {
    let n = 2;
    while (Object.hasOwn(dst, `${key}#${n}`)) n++;
    k = `${key}#${n}`;
  }
  if (k === '__proto__') Object.defineProperty(dst, k, { value, enumerable: true, writable: true, configurable: true });
  else dst[k] = value;
}

/**
 * Redacts every string of a parsed JSON value, keys included, and returns the value with the
 * counts. Copy on write: the input is never changed, containers with a change are copied, and
 * unchanged subtrees (and the whole input, when nothing changed) are returned as they are, so
 * do not mutate the result in place. Numbers, booleans and null are kept, except under a
 * credential key (`"pin"` is not one; `"password": 1234` is).
 */
export function redactJson(value: JsonValue, policy: RedactionPolicy, options: RedactJsonOptions = {}): JsonRedaction {
  const personal = policy === 'redacted';
  const maxDepth = options.maxDepth ?? DEFAULT_MAX_DEPTH;
  const counts: RedactionCounts = {};
  if (typeof value === 'string') return { value: redactString(value, personal, counts), counts };
  if (typeof value !== 'object' || value === null) return { value, counts };

  const frame = (src: Container, depth: number): Frame => {
    if (depth > maxDepth) throw new RedactError('SL_REDACT_TOO_DEEP', `JSON nested deeper than ${maxDepth} levels`);
    return { src, keys: Array.isArray(src) ? null : Object.keys(src), i: 0, out: null, renamed: false, depth };
  };

  /** Records child `f.i` as `v` under `key`, copying the container at its first change. */
  const deliver = (f: Frame, v: JsonValue, key: string): void => {
    if (f.keys === null) {
      const src = f.src as JsonValue[];
      if (f.out === null) {
        if (v === src[f.i]) return;
        f.out = src.slice(0, f.i);
      }
      (f.out as JsonValue[])[f.i] = v;
      return;
    }
    const src = f.src as JsonObject;
    const original = f.keys[f.i] as string;
    if (f.out === null) {
      if (v === src[original] && key === original) return;
      const copy: JsonObject = {};
      for (let j = 0; j < f.i; j++) {
        const k = f.keys[j] as string;
        put(copy, k, src[k] as JsonValue, false);
      }
      f.out = copy;
    }
    if (key !== original) f.renamed = true;
    put(f.out as JsonObject, key, v, f.renamed);
  };

  const stack: Frame[] = [frame(value, 1)];
  let returned: JsonValue = null;
  let hasReturned = false;
  while (stack.length > 0) {
    const f = stack[stack.length - 1] as Frame;
    if (hasReturned) {
      // The child container at f.i is done: `returned` is it, copied or not.
      deliver(f, returned, f.keys === null ? '' : redactKey(f.keys[f.i] as string));
      hasReturned = false;
      f.i++;
    }
    const n = f.keys === null ? (f.src as JsonValue[]).length : f.keys.length;
    let descended = false;
    for (; f.i < n; f.i++) {
      const key = f.keys === null ? '' : (f.keys[f.i] as string);
      const v = (f.keys === null ? (f.src as JsonValue[])[f.i] : (f.src as JsonObject)[key]) as JsonValue;
      const plainKey = f.keys === null || isPlainKey(key);
      const credential = plainKey ? undefined : credentialValue(key, v);
      if (credential !== undefined) {
        deliver(f, credential, redactString(key, personal, counts));
      } else if (typeof v === 'object' && v !== null) {
        stack.push(frame(v, f.depth + 1));
        descended = true;
        break;
      } else {
        deliver(f, typeof v === 'string' ? redactString(v, personal, counts) : v, plainKey ? key : redactString(key, personal, counts));
      }
    }
    if (descended) continue;
    stack.pop();
    returned = f.out ?? f.src;
    hasReturned = true;
  }
  return { value: returned, counts };

  function redactKey(key: string): string {
    return isPlainKey(key) ? key : redactString(key, personal, counts);
  }

  /**
   * The replacement of a value under a credential key, or undefined when the key is not one or
   * the value is not a string or number with something in it. The whole value goes: a value that
   * is one recognised token keeps its placeholder (`"api_key": "sk-…"` → `[SECRET:openai]`),
   * anything else gets the key's (`[PASSWORD]`, `[SECRET]`).
   */
  function credentialValue(key: string, v: JsonValue): JsonValue | undefined {
    const credential = credentialKey(key);
    if (credential === null) return undefined;
    if (!(typeof v === 'number' || (typeof v === 'string' && v.trim() !== '' && !isPlaceholder(v)))) return undefined;
    const found: RedactionCounts = {};
    const r = typeof v === 'string' ? redactString(v, personal, found) : '';
    if (isPlaceholder(r)) {
      addCounts(counts, found);
      return r;
    }
    return note(counts, credential);
  }
}
