/**
 * Same-dialect OpenAI streams: the gateway may add `stream_options.include_usage` to the
 * upstream request so it can always capture usage, although the client did not ask. The
 * upstream then sends one extra chunk, after the finish_reason chunk and before [DONE]:
 *
 *   data: {"id":...,"object":"chat.completion.chunk",...,"choices":[],"usage":{...}}
 *
 * These pure functions let the caller add the option, recognise that chunk (to drop it),
 * and read usage from it. (Chunks before it carry `"usage": null`; the client, which did
 * not ask for usage, ignores that field, so they can pass through unchanged.)
 */

import { isObject, tryParseJson } from './json.js';
import type { SseEvent } from './sse.js';
import type { OpenAIChatRequest, OpenAIUsage } from './openai/types.js';

// Cheap pre-filter so ordinary content chunks are not JSON-parsed twice.
const EMPTY_CHOICES = /"choices"\s*:\s*\[\s*\]/;

/** Whether the client itself asked for usage in the stream. */
export function clientRequestedUsage(req: Pick<OpenAIChatRequest, 'stream_options'>): boolean {
  return isObject(req.stream_options) && req.stream_options.include_usage === true;
}

/**
 * The request to send upstream for a streaming call: `stream_options.include_usage` set.
 * `added` is true when the client did not ask, i.e. when the caller must drop the usage
 * chunk (see `usageOnlyChunk`). The input is not modified. Non-streaming requests are
 * returned as they are.
 */
export function withStreamUsage<T extends Pick<OpenAIChatRequest, 'stream' | 'stream_options'>>(req: T): { request: T; added: boolean } {
  if (req.stream !== true || clientRequestedUsage(req)) return { request: req, added: false };
  const options = isObject(req.stream_options) ? req.stream_options : {};
  return { request: { ...req, stream_options: { ...options, include_usage: true } }, added: true };
}

const INCLUDE_USAGE = Buffer.from('"stream_options":{"include_usage":true},');

/**
 * The same request as bytes, with `"stream_options":{"include_usage":true}` as its first
 * member: for a streaming request body that is a JSON object with at least one member and
 * no `stream_options` key (the caller checks both on the parsed body), without
 * re-serialising it. Returns null when the bytes do not start with an object.
 */
export function withStreamUsageBytes(raw: Buffer): Buffer | null {
  let i = 0;
  while (i < raw.length && (raw[i] === 0x20 || raw[i] === 0x09 || raw[i] === 0x0a || raw[i] === 0x0d)) i++;
  if (raw[i] !== 0x7b /* { */) return null;
  return Buffer.concat([raw.subarray(0, i + 1), INCLUDE_USAGE, raw.subarray(i + 1)]);
}

/**
 * If `ev` is the usage-only chunk (`choices` an empty array and `usage` an object), its
 * usage; otherwise null. One JSON parse at most, and only for candidate chunks.
 */
export function usageOnlyChunk(ev: SseEvent): OpenAIUsage | null {
  const data = ev.data;
  if (data.length === 0 || data.charCodeAt(0) !== 0x7b /* { */ || !EMPTY_CHOICES.test(data)) return null;
  const chunk = tryParseJson(data);
  if (!isObject(chunk)) return null;
  const choices = chunk.choices;
  if (!Array.isArray(choices) || choices.length !== 0 || !isObject(chunk.usage)) return null;
  return readUsage(chunk.usage);
}

/** Whether `ev` is the usage-only chunk (to drop it when the client did not ask for usage). */
export function isUsageOnlyChunk(ev: SseEvent): boolean {
  return usageOnlyChunk(ev) !== null;
}

function count(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0;
}

function readUsage(u: Record<string, unknown>): OpenAIUsage {
  const prompt = count(u.prompt_tokens);
  const completion = count(u.completion_tokens);
  const out: OpenAIUsage = {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: typeof u.total_tokens === 'number' ? count(u.total_tokens) : prompt + completion,
  };
  if (isObject(u.prompt_tokens_details)) out.prompt_tokens_details = { cached_tokens: count(u.prompt_tokens_details.cached_tokens) };
  if (isObject(u.completion_tokens_details)) {
    out.completion_tokens_details = { reasoning_tokens: count(u.completion_tokens_details.reasoning_tokens) };
  }
  return out;
}
