/**
 * Usage and response model from a kept response body, read after the response was sent.
 * OpenAI (Chat Completions, Responses API, embeddings) and Anthropic shapes, JSON and SSE.
 * Tolerates a truncated middle (see RESPONSE_KEEP_BYTES): only whole events are read, and a
 * stream whose last event was kept only in part has its usage object found by its key.
 */
import { valueAfterKey } from '@sightline/core';

export interface Usage {
  responseModel: string;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** Usage numbers were present in the response. */
  found: boolean;
  /** Streams: content or tool-argument delta events seen (for a stream cut short before its usage). */
  deltas: number;
  /** The usage came in Anthropic's shape. */
  anthropic: boolean;
}

type Json = Record<string, unknown>;

/**
 * The usage of a request that spends no tokens although its answer may name some: reading a
 * stored response (`GET /v1/responses/{id}`, whose body repeats the usage of the request that
 * created it) or deleting one. Set as the record's usage before the response, so that
 * nothing is counted twice. Shared and frozen: nothing writes it.
 */
export const NO_USAGE: Usage = Object.freeze({ responseModel: '', inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, found: false, deltas: 0, anthropic: false });

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0;
}

function obj(v: unknown): Json | null {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Json) : null;
}

function applyUsage(u: Usage, usage: Json): void {
  // OpenAI: prompt/completion tokens, cached tokens in prompt_tokens_details. Embeddings
  // answer prompt_tokens and total_tokens only: no output.
  if ('prompt_tokens' in usage || 'completion_tokens' in usage) {
    u.inputTokens = num(usage.prompt_tokens);
    u.outputTokens = num(usage.completion_tokens);
    u.cacheReadTokens = num(obj(usage.prompt_tokens_details)?.cached_tokens);
    u.found = true;
    return;
  }
  // OpenAI Responses API: input/output tokens like Anthropic's names, but input includes the
  // cached tokens (input_tokens_details.cached_tokens), as chat's prompt_tokens does. Told
  // from Anthropic's usage by the fields Anthropic never sends.
  // https://platform.openai.com/docs/api-reference/responses/object#responses/object-usage
  if ('input_tokens_details' in usage || 'output_tokens_details' in usage || 'total_tokens' in usage) {
    u.inputTokens = num(usage.input_tokens);
    u.outputTokens = num(usage.output_tokens);
    u.cacheReadTokens = num(obj(usage.input_tokens_details)?.cached_tokens);
    u.found = true;
    return;
  }
  // Anthropic: message_start carries input tokens, message_delta the final output tokens.
  // Its input_tokens exclude cache reads and writes; they are added back at the end so
  // that input_tokens means the same for every provider (docs/schema.md).
  u.anthropic = true;
  if ('input_tokens' in usage) u.inputTokens = num(usage.input_tokens);
  if ('output_tokens' in usage) u.outputTokens = num(usage.output_tokens);
  if ('cache_read_input_tokens' in usage) u.cacheReadTokens = num(usage.cache_read_input_tokens);
  if ('cache_creation_input_tokens' in usage) u.cacheWriteTokens = num(usage.cache_creation_input_tokens);
  if ('input_tokens' in usage || 'output_tokens' in usage) u.found = true;
}

function applyEvent(u: Usage, ev: Json): void {
  if (u.responseModel === '' && typeof ev.model === 'string') u.responseModel = ev.model;
  // Responses API stream events carry the response object: `response.created` its model,
  // `response.completed` (or `.incomplete`, `.failed`) its usage.
  const response = obj(ev.response);
  if (response !== null) {
    if (u.responseModel === '' && typeof response.model === 'string') u.responseModel = response.model;
    const ru = obj(response.usage);
    if (ru !== null) applyUsage(u, ru);
  }
  const message = obj(ev.message);
  if (message !== null) {
    if (u.responseModel === '' && typeof message.model === 'string') u.responseModel = message.model;
    const mu = obj(message.usage);
    if (mu !== null) applyUsage(u, mu);
  }
  const usage = obj(ev.usage);
  if (usage !== null) applyUsage(u, usage);
}

export function extractUsage(chunks: readonly Buffer[] | null, stream: boolean): Usage {
  const u: Usage = { responseModel: '', inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, found: false, deltas: 0, anthropic: false };
  if (chunks === null || chunks.length === 0) return u;
  parseInto(u, chunks, stream);
  if (u.anthropic) u.inputTokens += u.cacheReadTokens + u.cacheWriteTokens;
  return u;
}

function parseInto(u: Usage, chunks: readonly Buffer[], stream: boolean): void {
  const buf = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  if (!stream) {
    jsonBody(u, buf);
    return;
  }
  // Only the events that can carry the model or a usage object are parsed; deltas are
  // counted from their text (a long stream is mostly deltas).
  for (const line of buf.toString('utf8').split('\n')) {
    if (!line.startsWith('data:')) continue;
    let from = 5;
    while (from < line.length && (line.charCodeAt(from) === 0x20 || line.charCodeAt(from) === 0x09)) from++;
    if (line.charCodeAt(from) !== 0x7b /* { */) continue; // [DONE], empty, not JSON
    const data = from === 5 ? line.slice(5) : line.slice(from);
    if ((u.responseModel === '' && data.includes('"model"')) || USAGE_OBJECT.test(data)) {
      try {
        const ev = obj(JSON.parse(data));
        if (ev !== null) applyEvent(u, ev);
      } catch {
        // A partial event at a truncation boundary.
      }
    }
    if (isDeltaText(data)) u.deltas++;
  }
  // A Responses API stream ends with `response.completed`, which repeats the whole output
  // before its usage: for a long answer that event may be longer than what was kept of the
  // stream, so its start (and `data:`) is gone. Its usage object, near the end, is still whole.
  if (!u.found) usageByKey(u, buf);
}

const USAGE_OBJECT = /"usage"\s*:\s*\{/;
const ANTHROPIC_DELTA = /"type"\s*:\s*"content_block_delta"/;
const OPENAI_CONTENT = /"content"\s*:\s*"[^"]/;
const OPENAI_TOOL_CALLS = /"tool_calls"\s*:\s*\[/;
const RESPONSES_DELTA = /"type"\s*:\s*"response\.(?:output_text|function_call_arguments)\.delta"/;

/** A content or tool-argument delta event, in either dialect (and the Responses API), from its JSON text. */
function isDeltaText(data: string): boolean {
  return ANTHROPIC_DELTA.test(data) || (data.includes('"delta"') && (OPENAI_CONTENT.test(data) || OPENAI_TOOL_CALLS.test(data) || RESPONSES_DELTA.test(data)));
}

const QUOTE_CHAR = 0x22;
const BACKSLASH = 0x5c;
const MODEL_KEY = Buffer.from('"model"');
const USAGE_KEY = Buffer.from('"usage"');

/** End (exclusive) of the JSON string starting at the quote at `at`, or -1. */
function stringEnd(buf: Buffer, at: number): number {
  for (let i = at + 1; i < buf.length; i++) {
    const c = buf[i];
    if (c === BACKSLASH) i++;
    else if (c === QUOTE_CHAR) return i + 1;
  }
  return -1;
}

/** End (exclusive) of the JSON object starting at the brace at `at`, or -1. */
function objectEnd(buf: Buffer, at: number): number {
  let depth = 0;
  for (let i = at; i < buf.length; i++) {
    const c = buf[i];
    if (c === QUOTE_CHAR) {
      const e = stringEnd(buf, i);
      if (e < 0) return -1;
      i = e - 1;
    } else if (c === 0x7b) depth++;
    else if (c === 0x7d && --depth === 0) return i + 1;
  }
  return -1;
}

/**
 * A JSON response body (either dialect): the model and the usage object, found by their
 * keys and parsed alone, instead of parsing a body of up to 64 KiB. Key names cannot occur
 * inside string values unescaped, so `"model"` and `"usage"` followed by a colon are keys.
 * Also reads the usage from a body whose middle was not kept (RESPONSE_KEEP_BYTES).
 */
function jsonBody(u: Usage, buf: Buffer): void {
  const m = buf.indexOf(MODEL_KEY);
  if (m >= 0) {
    const v = valueAfterKey(buf, m + MODEL_KEY.length);
    if (v >= 0 && buf[v] === QUOTE_CHAR) {
      const e = stringEnd(buf, v);
      if (e > 0) {
        try {
          const model: unknown = JSON.parse(buf.toString('utf8', v, e));
          if (typeof model === 'string') u.responseModel = model;
        } catch {
          // Not a JSON string after all.
        }
      }
    }
  }
  usageByKey(u, buf);
}

/** The last `"usage":{…}` object in the bytes, parsed alone (a whole one only). */
function usageByKey(u: Usage, buf: Buffer): void {
  const k = buf.lastIndexOf(USAGE_KEY);
  if (k < 0) return;
  const v = valueAfterKey(buf, k + USAGE_KEY.length);
  if (v < 0 || buf[v] !== 0x7b) return;
  const e = objectEnd(buf, v);
  if (e < 0) return;
  try {
    const usage = obj(JSON.parse(buf.toString('utf8', v, e)));
    if (usage !== null) applyUsage(u, usage);
  } catch {
    // Not JSON after all: no usage.
  }
}

const CONTENT = Buffer.from('"content":"');
const ARGS = Buffer.from('"arguments":"');
const TEXT_DELTA = Buffer.from('"text_delta"');
const JSON_DELTA = Buffer.from('"input_json_delta"');
const RESPONSES_TEXT_DELTA = Buffer.from('response.output_text.delta');
const RESPONSES_ARGS_DELTA = Buffer.from('response.function_call_arguments.delta');
const QUOTE = 0x22;

function hasNonEmpty(chunk: Buffer, needle: Buffer): boolean {
  let i = chunk.indexOf(needle);
  while (i !== -1) {
    const next = i + needle.length;
    if (next < chunk.length && chunk[next] !== QUOTE) return true;
    i = chunk.indexOf(needle, next);
  }
  return false;
}

/**
 * Whether a stream chunk carries the first token: a non-empty content or tool-argument
 * delta (OpenAI), a text/tool-input delta (Anthropic) or an output-text/function-argument
 * delta event (Responses API). Runs on the stream path only until the first token is found.
 */
export function hasTokenDelta(chunk: Buffer): boolean {
  return (
    hasNonEmpty(chunk, CONTENT) ||
    hasNonEmpty(chunk, ARGS) ||
    chunk.includes(TEXT_DELTA) ||
    chunk.includes(JSON_DELTA) ||
    chunk.includes(RESPONSES_TEXT_DELTA) ||
    chunk.includes(RESPONSES_ARGS_DELTA)
  );
}
