/**
 * Stream assembly (issue 11): the SSE text a client received, in its dialect, becomes the one
 * message a non-streamed request would have answered — text concatenated, tool calls with
 * their full arguments, the finish reason and the usage — so the `content` table holds an
 * answer, not a list of chunks, and the same SQL reads streamed and non-streamed answers.
 *
 * Pure: no I/O, no clock; the ingester calls it off the request path. Built for bad input:
 * the text may be cut anywhere (the capture bound, a client that left, a provider that
 * failed), events may not be JSON, tool arguments may not be JSON. Nothing here throws on
 * any input; what cannot be read is skipped and counted.
 *
 * Shapes (docs/schema.md, "Assembled streams"):
 * - OpenAI Chat Completions chunks → `{"id","object":"chat.completion","created","model",
 *   "choices":[{"index","message":{"role","content","refusal"?,"reasoning_content"?,
 *   "tool_calls"?:[{"id","type","function":{"name","arguments"}}]},"finish_reason"}],
 *   "usage"}` — the Chat Completions response body. `arguments` is the concatenated string
 *   as streamed (OpenAI's own type: a string, valid JSON or not).
 * - Anthropic Messages events → `{"id","type":"message","role":"assistant","model",
 *   "content":[…blocks],"stop_reason","stop_sequence","usage"}` — the Messages response
 *   body; `text` and `thinking` deltas concatenated, a `tool_use` block's `input` the parsed
 *   `input_json_delta`s, or the raw concatenated string when it is not valid JSON (cut, or
 *   a provider that sent bad JSON).
 * Both: an `error` key holds the error a stream ended with (OpenAI `{"error":…}` data, an
 * Anthropic `error` event), when one arrived.
 */
import { SseParser, type SseEvent } from '@sightline/translate';
import type { Dialect } from '@sightline/core';
import { index, isObject, parseJson, str, type Json, type JsonObject } from './json.js';

/** The result of assembling one stream. */
export interface Assembled<M> {
  /** The assembled message (shapes in the module comment). */
  message: M;
  /**
   * The stream did not reach its end: no `data: [DONE]` and not every choice finished
   * (OpenAI), no `message_stop` (Anthropic). The message holds what had arrived.
   */
  partial: boolean;
  /** Events read as JSON objects. */
  events: number;
  /** Events skipped: data that is not a JSON object. */
  skipped: number;
}

export interface AssembledToolCall {
  id: string;
  type: string;
  function: { name: string; arguments: string };
}

export interface AssembledOpenAIMessage {
  role: string;
  /** null when the model answered with tool calls only (as in a non-streamed response). */
  content: string | null;
  refusal?: string;
  /** Reasoning text some OpenAI-compatible providers stream (`delta.reasoning_content`). */
  reasoning_content?: string;
  tool_calls?: AssembledToolCall[];
  /** The legacy `function_call` delta. */
  function_call?: { name: string; arguments: string };
}

export interface AssembledOpenAIChoice {
  index: number;
  message: AssembledOpenAIMessage;
  finish_reason: string | null;
}

export interface AssembledOpenAI {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: AssembledOpenAIChoice[];
  usage: JsonObject | null;
  error?: Json;
}

export interface AssembledAnthropic {
  [key: string]: Json | undefined;
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: JsonObject[];
  stop_reason: string | null;
  stop_sequence: string | null;
  usage: JsonObject | null;
  error?: Json;
}

/** Every event of an SSE text; an unterminated last line is dropped (it was cut). */
export function sseEvents(text: string): SseEvent[] {
  const bytes = Buffer.from(text, 'utf8');
  // The text is already bounded (the capture bound); one event may be all of it.
  const parser = new SseParser({ maxEventBytes: bytes.length + 1 });
  const out = parser.push(bytes);
  for (const e of parser.end()) out.push(e);
  return out;
}

interface ToolAcc {
  id: string;
  type: string;
  name: string;
  args: string;
}

interface ChoiceAcc {
  role: string;
  content: string;
  hasContent: boolean;
  refusal: string | null;
  reasoning: string | null;
  tools: Map<number, ToolAcc>;
  fn: { name: string; args: string } | null;
  finish: string | null;
}

function byIndex<T>(m: Map<number, T>): T[] {
  return [...m.entries()].sort((a, b) => a[0] - b[0]).map((e) => e[1]);
}

/** OpenAI Chat Completions chunks → one `chat.completion`; null when no event was read. */
export function assembleOpenAIStream(sse: string): Assembled<AssembledOpenAI> | null {
  let id = '';
  let model = '';
  let created = 0;
  let usage: JsonObject | null = null;
  let error: Json | undefined;
  let done = false;
  let events = 0;
  let skipped = 0;
  const choices = new Map<number, ChoiceAcc>();
  for (const ev of sseEvents(sse)) {
    if (ev.data === '[DONE]') {
      done = true;
      continue;
    }
    const d = parseJson(ev.data);
    if (!isObject(d)) {
      skipped++;
      continue;
    }
    events++;
    if (d.error !== undefined && d.error !== null && d.choices === undefined) {
      error = d.error;
      continue;
    }
    if (id === '' && typeof d.id === 'string') id = d.id;
    if (model === '' && typeof d.model === 'string') model = d.model;
    if (created === 0 && typeof d.created === 'number') created = d.created;
    if (isObject(d.usage)) usage = d.usage;
    if (!Array.isArray(d.choices)) continue;
    for (const c of d.choices) {
      if (!isObject(c)) continue;
      const i = index(c.index, 0);
      let acc = choices.get(i);
      if (acc === undefined) {
        acc = { role: '', content: '', hasContent: false, refusal: null, reasoning: null, tools: new Map(), fn: null, finish: null };
        choices.set(i, acc);
      }
      const delta = c.delta;
      if (isObject(delta)) {
        const role = str(delta.role);
        if (role !== null && role !== '') acc.role = role;
        const text = str(delta.content);
        if (text !== null) {
          acc.content += text;
          acc.hasContent = true;
        }
        const refusal = str(delta.refusal);
        if (refusal !== null) acc.refusal = (acc.refusal ?? '') + refusal;
        const reasoning = str(delta.reasoning_content);
        if (reasoning !== null) acc.reasoning = (acc.reasoning ?? '') + reasoning;
        if (Array.isArray(delta.tool_calls)) {
          for (const tc of delta.tool_calls) {
            if (!isObject(tc)) continue;
            const ti = index(tc.index, acc.tools.size);
            let t = acc.tools.get(ti);
            if (t === undefined) {
              t = { id: '', type: 'function', name: '', args: '' };
              acc.tools.set(ti, t);
            }
            const tid = str(tc.id);
            if (tid !== null && tid !== '' && t.id === '') t.id = tid;
            const type = str(tc.type);
            if (type !== null && type !== '') t.type = type;
            if (isObject(tc.function)) {
              // The name comes whole in the first delta; later deltas repeat it or omit it.
              const name = str(tc.function.name);
              if (name !== null && t.name === '') t.name = name;
              const args = str(tc.function.arguments);
              if (args !== null) t.args += args;
            }
          }
        }
        if (isObject(delta.function_call)) {
          acc.fn ??= { name: '', args: '' };
          const name = str(delta.function_call.name);
          if (name !== null && acc.fn.name === '') acc.fn.name = name;
          const args = str(delta.function_call.arguments);
          if (args !== null) acc.fn.args += args;
        }
      }
      const finish = str(c.finish_reason);
      if (finish !== null) acc.finish = finish;
    }
  }
  if (events === 0 && !done) return null;
  const out: AssembledOpenAIChoice[] = [];
  for (const [i, acc] of [...choices.entries()].sort((a, b) => a[0] - b[0])) {
    const message: AssembledOpenAIMessage = {
      role: acc.role === '' ? 'assistant' : acc.role,
      content: acc.hasContent && (acc.content !== '' || (acc.tools.size === 0 && acc.fn === null && acc.refusal === null)) ? acc.content : null,
    };
    if (acc.refusal !== null) message.refusal = acc.refusal;
    if (acc.reasoning !== null) message.reasoning_content = acc.reasoning;
    if (acc.tools.size > 0) message.tool_calls = byIndex(acc.tools).map((t) => ({ id: t.id, type: t.type, function: { name: t.name, arguments: t.args } }));
    if (acc.fn !== null) message.function_call = { name: acc.fn.name, arguments: acc.fn.args };
    out.push({ index: i, message, finish_reason: acc.finish });
  }
  const message: AssembledOpenAI = { id, object: 'chat.completion', created, model, choices: out, usage };
  if (error !== undefined) message.error = error;
  // Some OpenAI-compatible providers end without [DONE]: every choice finished counts as the end.
  const finished = out.length > 0 && out.every((c) => c.finish_reason !== null);
  return { message, partial: !(done || finished), events, skipped };
}

interface BlockAcc {
  block: JsonObject;
  /** Concatenated `input_json_delta`s of a tool block. */
  json: string;
}

/** Anthropic Messages events → one `message`; null when no event was read. */
export function assembleAnthropicStream(sse: string): Assembled<AssembledAnthropic> | null {
  let start: JsonObject = {};
  const blocks = new Map<number, BlockAcc>();
  let stopReason: string | null = null;
  let stopSequence: string | null = null;
  let usage: JsonObject | null = null;
  let error: Json | undefined;
  let done = false;
  let events = 0;
  let skipped = 0;
  for (const ev of sseEvents(sse)) {
    const d = parseJson(ev.data);
    if (!isObject(d)) {
      skipped++;
      continue;
    }
    events++;
    const type = str(d.type) ?? ev.event;
    switch (type) {
      case 'message_start':
        if (isObject(d.message)) {
          start = d.message;
          if (isObject(start.usage)) usage = { ...start.usage };
          stopReason = str(start.stop_reason);
          stopSequence = str(start.stop_sequence);
        }
        break;
      case 'content_block_start':
        if (isObject(d.content_block)) blocks.set(index(d.index, blocks.size), { block: { ...d.content_block }, json: '' });
        break;
      case 'content_block_delta': {
        const b = blocks.get(index(d.index, -1));
        const delta = d.delta;
        if (b === undefined || !isObject(delta)) break;
        applyDelta(b, delta);
        break;
      }
      case 'message_delta':
        if (isObject(d.delta)) {
          const sr = str(d.delta.stop_reason);
          if (sr !== null) stopReason = sr;
          const ss = str(d.delta.stop_sequence);
          if (ss !== null) stopSequence = ss;
        }
        // message_delta usage is cumulative: later counts replace earlier ones.
        if (isObject(d.usage)) usage = { ...(usage ?? {}), ...d.usage };
        break;
      case 'message_stop':
        done = true;
        break;
      case 'error':
        error = d.error ?? d;
        break;
      default:
        // ping, content_block_stop and event types added later carry nothing to keep.
        break;
    }
  }
  if (events === 0) return null;
  const content: JsonObject[] = [];
  for (const b of byIndex(blocks)) {
    if (b.json !== '') {
      const parsed = parseJson(b.json);
      b.block.input = parsed === undefined ? b.json : parsed;
    }
    content.push(b.block);
  }
  const message: AssembledAnthropic = {
    ...start,
    id: str(start.id) ?? '',
    type: 'message',
    role: 'assistant',
    model: str(start.model) ?? '',
    content,
    stop_reason: stopReason,
    stop_sequence: stopSequence,
    usage,
  };
  if (error !== undefined) message.error = error;
  return { message, partial: !done, events, skipped };
}

function applyDelta(b: BlockAcc, delta: JsonObject): void {
  const block = b.block;
  switch (delta.type) {
    case 'text_delta': {
      const t = str(delta.text);
      if (t !== null) block.text = (str(block.text) ?? '') + t;
      break;
    }
    case 'input_json_delta': {
      const t = str(delta.partial_json);
      if (t !== null) b.json += t;
      break;
    }
    case 'thinking_delta': {
      const t = str(delta.thinking);
      if (t !== null) block.thinking = (str(block.thinking) ?? '') + t;
      break;
    }
    case 'signature_delta': {
      const t = str(delta.signature);
      if (t !== null) block.signature = (str(block.signature) ?? '') + t;
      break;
    }
    case 'citations_delta':
      if (delta.citation !== undefined) {
        const list = Array.isArray(block.citations) ? block.citations : [];
        list.push(delta.citation);
        block.citations = list;
      }
      break;
    default:
      break;
  }
}

/** The stream of `dialect` assembled; null when the text held no event (e.g. a JSON error body). */
export function assembleStream(dialect: Dialect, sse: string): Assembled<AssembledOpenAI> | Assembled<AssembledAnthropic> | null {
  return dialect === 'anthropic' ? assembleAnthropicStream(sse) : assembleOpenAIStream(sse);
}
