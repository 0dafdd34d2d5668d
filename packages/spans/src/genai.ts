/**
 * A request's content as OpenTelemetry GenAI semantic-convention attributes (issue 11), for
 * the root span: `gen_ai.input.messages`, `gen_ai.output.messages`,
 * `gen_ai.system_instructions` and `gen_ai.tool.definitions`, each a JSON string in the
 * shapes of the convention's JSON schemas
 * (https://github.com/open-telemetry/semantic-conventions-genai, model/gen-ai/
 * gen-ai-input-messages.json, gen-ai-output-messages.json, gen-ai-system-instructions.json,
 * gen-ai-tool-definitions.json; "When recorded on spans, it MAY be recorded as a JSON
 * string"), and `gen_ai.response.finish_reasons`.
 *
 * Mapping (both dialects):
 * - text → `{"type":"text","content"}`; a tool call → `{"type":"tool_call","id","name",
 *   "arguments"}` (arguments parsed when they are JSON, else the raw string); a tool result →
 *   `{"type":"tool_call_response","id","response"}`; thinking / reasoning →
 *   `{"type":"reasoning","content"}`; an image by URL → `{"type":"uri","modality":"image",
 *   "uri"}`; any other part is passed on as it came (the schema's GenericPart: it keeps its
 *   own `type`). Base64 data was already replaced by the gateway with a placeholder.
 * - OpenAI system and developer messages stay in `gen_ai.input.messages` (the convention:
 *   instructions that are part of the chat history go there); Anthropic's separate `system`
 *   is `gen_ai.system_instructions`.
 * - Finish reasons as the convention names them: `stop`, `length`, `content_filter`,
 *   `tool_call`, `error` (a stream that ended without one); others as the provider said.
 *   Output messages keep `finish_reason` (required by the conventions up to v1.41, deprecated
 *   since in favour of `gen_ai.response.finish_reasons`, which is set as well).
 *
 * Pure; input is untrusted JSON (possibly the prefix of a cut body, then not parsed at all).
 */
import type { Dialect } from '@sightline/core';
import { isObject, parseJson, str, type Json, type JsonObject } from './json.js';

/** Root span attributes that carry content: on the span, never in a `spans` row (content lives in `content`). */
export const CONTENT_ATTRIBUTES: ReadonlySet<string> = new Set([
  'gen_ai.input.messages',
  'gen_ai.output.messages',
  'gen_ai.system_instructions',
  'gen_ai.tool.definitions',
]);

export interface GenAiContentAttributes {
  'gen_ai.input.messages'?: string;
  'gen_ai.output.messages'?: string;
  'gen_ai.system_instructions'?: string;
  'gen_ai.tool.definitions'?: string;
  'gen_ai.response.finish_reasons'?: string[];
}

type Part = JsonObject;

function text(content: string): Part {
  return { type: 'text', content };
}

/** Tool arguments as the convention wants them: parsed JSON, or the raw string when not JSON. */
function args(v: Json | undefined): Json {
  if (typeof v !== 'string') return v ?? null;
  const parsed = parseJson(v);
  return parsed === undefined ? v : parsed;
}

function imageUri(url: string | null): Part | null {
  return url !== null && /^https?:\/\//i.test(url) ? { type: 'uri', modality: 'image', uri: url } : null;
}

// --- OpenAI Chat Completions ---------------------------------------------------------------

function openaiPart(p: Json): Part {
  if (typeof p === 'string') return text(p);
  if (!isObject(p)) return { type: 'unknown', value: p };
  switch (p.type) {
    case 'text':
      return text(str(p.text) ?? '');
    case 'image_url':
      return imageUri(isObject(p.image_url) ? str(p.image_url.url) : null) ?? { ...p };
    default:
      return { ...p, type: str(p.type) ?? 'unknown' };
  }
}

function openaiContent(c: Json | undefined): Part[] {
  if (typeof c === 'string') return c === '' ? [] : [text(c)];
  if (Array.isArray(c)) return c.map(openaiPart);
  return [];
}

function openaiToolCalls(calls: Json | undefined, parts: Part[]): void {
  if (!Array.isArray(calls)) return;
  for (const tc of calls) {
    if (!isObject(tc)) continue;
    const fn = isObject(tc.function) ? tc.function : isObject(tc.custom) ? tc.custom : {};
    parts.push({ type: 'tool_call', id: str(tc.id) ?? '', name: str(fn.name) ?? '', arguments: args(fn.arguments ?? fn.input) });
  }
}

function openaiInput(messages: Json[]): JsonObject[] {
  const out: JsonObject[] = [];
  for (const m of messages) {
    if (!isObject(m)) continue;
    const role = str(m.role) ?? 'user';
    let parts: Part[];
    if (role === 'tool' || role === 'function') {
      parts = [{ type: 'tool_call_response', id: str(m.tool_call_id) ?? str(m.name) ?? '', response: m.content ?? null }];
    } else {
      parts = openaiContent(m.content);
      if (typeof m.refusal === 'string') parts.push({ type: 'refusal', content: m.refusal });
      openaiToolCalls(m.tool_calls, parts);
      if (isObject(m.function_call)) parts.push({ type: 'tool_call', id: '', name: str(m.function_call.name) ?? '', arguments: args(m.function_call.arguments) });
    }
    const msg: JsonObject = { role, parts };
    const name = str(m.name);
    if (name !== null && role !== 'function') msg.name = name;
    out.push(msg);
  }
  return out;
}

function openaiTools(tools: Json | undefined, functions: Json | undefined): JsonObject[] {
  const out: JsonObject[] = [];
  if (Array.isArray(tools)) {
    for (const t of tools) {
      if (!isObject(t)) continue;
      const type = str(t.type) ?? 'function';
      const def = isObject(t.function) ? t.function : isObject(t.custom) ? t.custom : t;
      const d: JsonObject = { type, name: str(def.name) ?? type };
      if (typeof def.description === 'string') d.description = def.description;
      if (def.parameters !== undefined) d.parameters = def.parameters;
      out.push(d);
    }
  }
  // The legacy `functions` list.
  if (Array.isArray(functions)) {
    for (const f of functions) {
      if (!isObject(f)) continue;
      const d: JsonObject = { type: 'function', name: str(f.name) ?? '' };
      if (typeof f.description === 'string') d.description = f.description;
      if (f.parameters !== undefined) d.parameters = f.parameters;
      out.push(d);
    }
  }
  return out;
}

const OPENAI_FINISH: Readonly<Record<string, string>> = { tool_calls: 'tool_call', function_call: 'tool_call' };

function openaiOutput(body: JsonObject): { messages: JsonObject[]; reasons: string[] } | null {
  if (!Array.isArray(body.choices)) return null;
  const messages: JsonObject[] = [];
  const reasons: string[] = [];
  for (const c of body.choices) {
    if (!isObject(c)) continue;
    const m = isObject(c.message) ? c.message : {};
    const parts = openaiContent(m.content);
    if (typeof m.reasoning_content === 'string') parts.unshift({ type: 'reasoning', content: m.reasoning_content });
    if (typeof m.refusal === 'string') parts.push({ type: 'refusal', content: m.refusal });
    openaiToolCalls(m.tool_calls, parts);
    if (isObject(m.function_call)) parts.push({ type: 'tool_call', id: '', name: str(m.function_call.name) ?? '', arguments: args(m.function_call.arguments) });
    const raw = str(c.finish_reason);
    const reason = raw === null ? 'error' : (OPENAI_FINISH[raw] ?? raw);
    reasons.push(reason);
    messages.push({ role: str(m.role) ?? 'assistant', parts, finish_reason: reason });
  }
  return { messages, reasons };
}

// --- Anthropic Messages --------------------------------------------------------------------

function anthropicBlock(b: Json): Part {
  if (typeof b === 'string') return text(b);
  if (!isObject(b)) return { type: 'unknown', value: b };
  switch (b.type) {
    case 'text':
      return text(str(b.text) ?? '');
    case 'tool_use':
      return { type: 'tool_call', id: str(b.id) ?? '', name: str(b.name) ?? '', arguments: args(b.input) };
    case 'tool_result':
      return { type: 'tool_call_response', id: str(b.tool_use_id) ?? '', response: b.content ?? null };
    case 'thinking':
      return { type: 'reasoning', content: str(b.thinking) ?? '' };
    case 'image':
      return imageUri(isObject(b.source) && b.source.type === 'url' ? str(b.source.url) : null) ?? { ...b };
    default:
      return { ...b, type: str(b.type) ?? 'unknown' };
  }
}

function anthropicContent(c: Json | undefined): Part[] {
  if (typeof c === 'string') return c === '' ? [] : [text(c)];
  if (Array.isArray(c)) return c.map(anthropicBlock);
  return [];
}

function anthropicTools(tools: Json | undefined): JsonObject[] {
  const out: JsonObject[] = [];
  if (!Array.isArray(tools)) return out;
  for (const t of tools) {
    if (!isObject(t)) continue;
    // A tool with an input schema is the caller's function; others are server tools (web_search_…).
    const type = t.input_schema !== undefined ? 'function' : (str(t.type) ?? 'function');
    const d: JsonObject = { type, name: str(t.name) ?? type };
    if (typeof t.description === 'string') d.description = t.description;
    if (t.input_schema !== undefined) d.parameters = t.input_schema;
    out.push(d);
  }
  return out;
}

const ANTHROPIC_FINISH: Readonly<Record<string, string>> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  max_tokens: 'length',
  tool_use: 'tool_call',
  refusal: 'content_filter',
};

function anthropicOutput(body: JsonObject): { messages: JsonObject[]; reasons: string[] } | null {
  if (!Array.isArray(body.content)) return null;
  const raw = str(body.stop_reason);
  const reason = raw === null ? 'error' : (ANTHROPIC_FINISH[raw] ?? raw);
  return { messages: [{ role: str(body.role) ?? 'assistant', parts: anthropicContent(body.content), finish_reason: reason }], reasons: [reason] };
}

// --- Both ----------------------------------------------------------------------------------

/**
 * The content attributes of one request: from its body (`request`, parsed JSON or undefined
 * when it is not JSON, e.g. cut at the capture bound) and its answer (`response`: the JSON
 * body, or the assembled stream).
 */
export function genAiContentAttributes(dialect: Dialect, request: Json | undefined, response: Json | undefined): GenAiContentAttributes {
  const a: GenAiContentAttributes = {};
  if (isObject(request)) {
    if (Array.isArray(request.messages)) {
      a['gen_ai.input.messages'] = JSON.stringify(dialect === 'anthropic' ? anthropicInput(request.messages) : openaiInput(request.messages));
    }
    if (dialect === 'anthropic' && request.system !== undefined && request.system !== null) {
      const parts = anthropicContent(request.system);
      if (parts.length > 0) a['gen_ai.system_instructions'] = JSON.stringify(parts);
    }
    const tools = dialect === 'anthropic' ? anthropicTools(request.tools) : openaiTools(request.tools, request.functions);
    if (tools.length > 0) a['gen_ai.tool.definitions'] = JSON.stringify(tools);
  }
  if (isObject(response)) {
    const out = dialect === 'anthropic' ? anthropicOutput(response) : openaiOutput(response);
    if (out !== null) {
      a['gen_ai.output.messages'] = JSON.stringify(out.messages);
      if (out.reasons.length > 0) a['gen_ai.response.finish_reasons'] = out.reasons;
    }
  }
  return a;
}

function anthropicInput(messages: Json[]): JsonObject[] {
  const out: JsonObject[] = [];
  for (const m of messages) {
    if (!isObject(m)) continue;
    out.push({ role: str(m.role) ?? 'user', parts: anthropicContent(m.content) });
  }
  return out;
}
