/**
 * Content rows (issue 11): what the ingester stores of a request's prompt and answer, in the
 * `content` table (migrations/006_content.sql, docs/schema.md), and the GenAI attributes the
 * root span carries.
 *
 * The gateway has already replaced secrets (WireContent); for policy `redacted` personal
 * data is replaced here, before anything is stored, by an injected function (RedactText —
 * `@sightline/redact`'s `redactPersonal` in the product). Redaction works on the JSON
 * strings of a body, one by one, so what it puts in never breaks the JSON around it and
 * everything else stays byte for byte as the client sent it. A streamed answer is assembled
 * first (assemble.ts) and redacted as one message, so a phone number split across two
 * deltas is still found.
 */
import type { Dialect, WireContent } from '@sightline/core';
import { assembleStream } from './assemble.js';
import { genAiContentAttributes, type GenAiContentAttributes } from './genai.js';
import { parseJson } from './json.js';

/**
 * Replaces what must not be stored in `text` by typed placeholders (`[EMAIL]`, …) and counts
 * the replacements by type. Must not throw; must return `text` unchanged when nothing matched.
 */
export type RedactText = (text: string) => { text: string; counts: Record<string, number> };

/** One row of `content`. */
export interface ContentRow {
  trace_id: string;
  span_id: string;
  team: string;
  key_id: string;
  start_time: number;
  start_time_unix_nano: string;
  model: string;
  route: string;
  dialect: string;
  stream: 0 | 1;
  policy: 'full' | 'redacted';
  /** The request body as the client sent it (text; cut at the capture bound). */
  request: string;
  /** The answer as the client received it: the JSON body, or a stream assembled (assemble.ts) as JSON. */
  response: string;
  request_bytes: number;
  response_bytes: number;
  request_truncated: 0 | 1;
  response_truncated: 0 | 1;
  /** 1: the stream did not reach its end event; the assembled answer is what had arrived. */
  response_partial: 0 | 1;
  /** Replacements by type (secrets in the gateway, personal data here), sorted by type. */
  redaction_keys: string[];
  redaction_counts: number[];
}

/** A request's content, ready to store, and its span attributes. */
export interface PreparedContent {
  request: string;
  response: string;
  responsePartial: boolean;
  redactions: Map<string, number>;
  attributes: GenAiContentAttributes;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * `text` with lone UTF-16 surrogates (a string cut inside a pair) replaced by U+FFFD: they
 * have no UTF-8 form, and JSON.stringify would send them as `\udXXX` escapes that a
 * ClickHouse String cannot hold as text.
 */
export function wellFormed(text: string): string {
  return text.replace(LONE_SURROGATE, '\uFFFD');
}

/** Whether `text` holds a lone surrogate (ClickHouse refuses the whole insert: the batch would never be written). */
export function hasLoneSurrogate(text: string): boolean {
  LONE_SURROGATE.lastIndex = 0;
  return LONE_SURROGATE.test(text);
}

function merge(into: Map<string, number>, counts: Record<string, number>): void {
  for (const k in counts) {
    const n = counts[k];
    if (typeof n === 'number' && n > 0) into.set(k, (into.get(k) ?? 0) + n);
  }
}

function changed(before: string, r: { text: string; counts: Record<string, number> }): boolean {
  return r.text !== before;
}

const BACKSLASH = 0x5c;
const QUOTE = 0x22;

/**
 * `text` with `redact` applied to every JSON string in it (keys and values), each string
 * decoded first and encoded again only when something was replaced, so the result is valid
 * JSON whenever `text` was, and otherwise byte-identical. Text that does not start as JSON
 * (an SSE text that could not be assembled, plain text) is redacted whole; a JSON text cut
 * inside a string has the cut string redacted raw. Numbers are not redacted.
 */
export function redactJsonStrings(text: string, redact: RedactText, counts: Map<string, number>): string {
  const head = text.trimStart();
  if (!head.startsWith('{') && !head.startsWith('[')) {
    const r = redact(text);
    merge(counts, r.counts);
    return r.text;
  }
  let out = '';
  let last = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const q = text.indexOf('"', i);
    if (q < 0) break;
    let j = q + 1;
    let escaped = false;
    while (j < n) {
      const ch = text.charCodeAt(j);
      if (ch === BACKSLASH) {
        escaped = true;
        j += 2;
        continue;
      }
      if (ch === QUOTE) break;
      j++;
    }
    if (j >= n) {
      // Cut inside this string (the capture bound): the rest is not JSON anyway.
      const tail = text.slice(q + 1);
      const r = redact(tail);
      merge(counts, r.counts);
      if (changed(tail, r)) {
        out += text.slice(last, q + 1) + r.text;
        last = n;
      }
      break;
    }
    const inner = text.slice(q + 1, j);
    let value = inner;
    if (escaped) {
      try {
        value = JSON.parse(text.slice(q, j + 1)) as string;
      } catch {
        value = inner;
      }
    }
    const r = redact(value);
    merge(counts, r.counts);
    if (changed(value, r)) {
      out += text.slice(last, q) + JSON.stringify(r.text);
      last = j + 1;
    }
    i = j + 1;
  }
  return last === 0 ? text : out + text.slice(last);
}

/**
 * What to store of record content `c` (a request of `dialect`, streamed or not) and its span
 * attributes. `redactPersonal` is applied when `c.policy` is `redacted`; the caller makes
 * sure there is one (without it, redacted content is not stored at all).
 */
export function prepareContent(dialect: Dialect, stream: boolean, c: WireContent, redactPersonal: RedactText | null): PreparedContent {
  let request = wellFormed(c.request);
  let response = wellFormed(c.response);
  let responsePartial = false;
  if (stream && response !== '') {
    const a = assembleStream(dialect, response);
    // No event at all (e.g. the gateway answered a stream request with a JSON error): kept as it came.
    if (a !== null) {
      response = JSON.stringify(a.message);
      responsePartial = a.partial;
    }
  }
  const redactions = new Map<string, number>();
  merge(redactions, c.redactions);
  if (c.policy === 'redacted') {
    if (redactPersonal === null) throw new Error('policy redacted needs a personal-data redactor');
    request = redactJsonStrings(request, redactPersonal, redactions);
    response = redactJsonStrings(response, redactPersonal, redactions);
  }
  const attributes = genAiContentAttributes(dialect, parseJson(request), parseJson(response));
  return { request, response, responsePartial, redactions, attributes };
}
