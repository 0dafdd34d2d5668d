/**
 * Usage and response model from a kept response body, read after the response was sent.
 * Both OpenAI and Anthropic shapes, JSON and SSE. Tolerates a truncated middle (see
 * RESPONSE_KEEP_BYTES): only whole events are read.
 */

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

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0;
}

function obj(v: unknown): Json | null {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Json) : null;
}

function applyUsage(u: Usage, usage: Json): void {
  // OpenAI: prompt/completion tokens, cached tokens in prompt_tokens_details.
  if ('prompt_tokens' in usage || 'completion_tokens' in usage) {
    u.inputTokens = num(usage.prompt_tokens);
    u.outputTokens = num(usage.completion_tokens);
    u.cacheReadTokens = num(obj(usage.prompt_tokens_details)?.cached_tokens);
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
  const text = Buffer.concat(chunks).toString('utf8');
  if (!stream) {
    try {
      const body = obj(JSON.parse(text));
      if (body !== null) applyEvent(u, body);
    } catch {
      // Not JSON (an upstream HTML error page, a truncated body): no usage.
    }
    return;
  }
  for (const line of text.split('\n')) {
    if (!line.startsWith('data:')) continue;
    const data = line.slice(5).trim();
    if (data === '' || data === '[DONE]' || data[0] !== '{') continue;
    try {
      const ev = obj(JSON.parse(data));
      if (ev !== null) {
        applyEvent(u, ev);
        if (isDelta(ev)) u.deltas++;
      }
    } catch {
      // A partial event at a truncation boundary.
    }
  }
}

/** A content or tool-argument delta, in either dialect. */
function isDelta(ev: Json): boolean {
  if (ev.type === 'content_block_delta') return true;
  const choices = ev.choices;
  if (!Array.isArray(choices)) return false;
  const delta = obj(obj(choices[0])?.delta);
  if (delta === null) return false;
  return (typeof delta.content === 'string' && delta.content !== '') || Array.isArray(delta.tool_calls);
}

const CONTENT = Buffer.from('"content":"');
const ARGS = Buffer.from('"arguments":"');
const TEXT_DELTA = Buffer.from('"text_delta"');
const JSON_DELTA = Buffer.from('"input_json_delta"');
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
 * delta (OpenAI) or a text/tool-input delta (Anthropic). Runs on the stream path only
 * until the first token is found.
 */
export function hasTokenDelta(chunk: Buffer): boolean {
  return hasNonEmpty(chunk, CONTENT) || hasNonEmpty(chunk, ARGS) || chunk.includes(TEXT_DELTA) || chunk.includes(JSON_DELTA);
}
