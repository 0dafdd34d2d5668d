/**
 * The answer to `POST /v1/messages/count_tokens` for a model whose route has no Anthropic
 * provider: OpenAI-API providers have no token-counting endpoint for Messages requests, so
 * the gateway answers with an estimate, flagged as one by the response header
 * `x-sightline-token-count: estimate` (docs/api.md, "POST /v1/messages/count_tokens").
 *
 * input_tokens = ceil(B / 4), at least 1, where B is the number of UTF-8 bytes of:
 * - `system`: a string, or the `text` of its text blocks;
 * - every message's `content`: a string, or of its blocks the `text` (text), the `thinking`
 *   (thinking), the `name` and the JSON text of the `input` (tool_use), and the `content` of a
 *   tool_result (a string, or the `text` of its text blocks);
 * - every tool's `name`, `description` and the JSON text of its `input_schema`.
 * Images, documents and any other blocks or fields count 0.
 *
 * Four bytes a token is the usual rule of thumb for English text with OpenAI's and Anthropic's
 * tokenisers; code, other languages and images are counted less well. Pure: no I/O.
 */

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function textBytes(v: unknown): number {
  return typeof v === 'string' ? Buffer.byteLength(v) : 0;
}

function jsonBytes(v: unknown): number {
  return v === undefined ? 0 : Buffer.byteLength(JSON.stringify(v));
}

/** A string, or the `text` of the text blocks of an array. */
function textsBytes(content: unknown): number {
  if (typeof content === 'string') return Buffer.byteLength(content);
  if (!Array.isArray(content)) return 0;
  let n = 0;
  for (const b of content) if (isObject(b) && b.type === 'text') n += textBytes(b.text);
  return n;
}

function blockBytes(b: unknown): number {
  if (!isObject(b)) return 0;
  switch (b.type) {
    case 'text':
      return textBytes(b.text);
    case 'thinking':
      return textBytes(b.thinking);
    case 'tool_use':
      return textBytes(b.name) + jsonBytes(b.input);
    case 'tool_result':
      return textsBytes(b.content);
    default:
      return 0;
  }
}

/** The estimated input tokens of a Messages request (see the module comment). */
export function estimateInputTokens(body: Json): number {
  let bytes = textsBytes(body.system);
  const messages = body.messages;
  if (Array.isArray(messages)) {
    for (const m of messages) {
      if (!isObject(m)) continue;
      const c = m.content;
      if (typeof c === 'string') bytes += Buffer.byteLength(c);
      else if (Array.isArray(c)) for (const b of c) bytes += blockBytes(b);
    }
  }
  const tools = body.tools;
  if (Array.isArray(tools)) {
    for (const t of tools) {
      if (!isObject(t)) continue;
      bytes += textBytes(t.name) + textBytes(t.description) + jsonBytes(t.input_schema);
    }
  }
  return Math.max(1, Math.ceil(bytes / 4));
}
