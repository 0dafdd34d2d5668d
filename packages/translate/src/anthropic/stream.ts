/**
 * OpenAI chat.completion.chunk SSE events -> Anthropic Messages SSE text.
 *
 * Output grammar (each event `event: <type>\ndata: <json>\n\n`):
 *   message_start
 *   ( content_block_start  content_block_delta*  content_block_stop )*
 *   message_delta  message_stop
 * or, on an upstream error, `error` (the stream is then over).
 *
 * | OpenAI input                                | Anthropic output                                                      |
 * | ------------------------------------------- | --------------------------------------------------------------------- |
 * | first chunk                                 | message_start (usage.input_tokens 0 unless the chunk carries usage)   |
 * | delta.content / delta.refusal (non-empty)   | text block opened lazily (closing any open block), text_delta         |
 * | delta.tool_calls, new index                 | close the open block; content_block_start tool_use {id, name, input:{}} |
 * | delta.tool_calls arguments piece            | input_json_delta {partial_json}                                       |
 * | finish_reason                               | content_block_stop for the open block (stop_reason recorded)          |
 * | usage chunk (choices: []) after finish      | message_delta {stop_reason, usage} + message_stop                     |
 * | data: [DONE]                                | message_delta + message_stop, unless already sent                     |
 * | {"error": {...}}                            | event: error                                                          |
 * | delta.role, reasoning fields, other choices | nothing                                                               |
 *
 * Held back (documented exceptions to "every input produces its output now"):
 * 1. message_delta + message_stop. OpenAI sends finish_reason in one chunk and the usage
 *    chunk (choices: []) after it, while Anthropic puts stop_reason and usage in the same
 *    message_delta. So after finish_reason only content_block_stop is written, and
 *    message_delta + message_stop are written when the usage chunk or `[DONE]` arrives,
 *    whichever is first (immediately when the finish chunk itself carries usage). This is
 *    metadata only: no content is held.
 * 2. A tool call whose first delta has no function name (not OpenAI's behaviour, seen in
 *    some compatible servers): content_block_start needs the name, so that call's argument
 *    pieces are kept until the name arrives (or until finish, then sent with name '').
 *
 * Stop reason: finish_reason mapped by openaiFinishReasonToAnthropic, except that 'stop'
 * after tool calls becomes 'tool_use' and 'stop' after refusal text becomes 'refusal'.
 *
 * Tool-call deltas must arrive one call after another (as OpenAI sends them): arguments
 * for a call whose block was already closed cannot be expressed in the Anthropic grammar
 * and raise TranslationError `invalid_stream_event`.
 *
 * `end()` without finish_reason (cut upstream) writes an `error` event (api_error) so the
 * client does not mistake the cut stream for a complete answer.
 */

import { TranslationError } from '../errors.js';
import { openaiErrorToAnthropicBody } from '../errors-map.js';
import { asCount, asObject, asString, isObject, tryParseJson } from '../json.js';
import type { SseEvent } from '../sse.js';
import { openaiFinishReasonToAnthropic } from './response.js';
import type { AnthropicStopReason, AnthropicUsage } from './types.js';

export interface OpenAIStreamToAnthropicOptions {
  /** The `model` to report to the client. */
  responseModel: string;
}

interface ToolState {
  /** Anthropic content block index; -1 while the block has not been started. */
  block: number;
  id: string;
  name: string;
  /** Argument pieces received before the block could start (held-back case 2). */
  pending: string;
}

const NONE = 0;
const TEXT = 1;
const TOOL = 2;

export class OpenAIStreamToAnthropic {
  readonly #model: string;
  #id = '';
  #started = false;
  #done = false;
  /** NONE / TEXT / TOOL: the kind of the open content block. */
  #open = NONE;
  #openIndex = -1;
  /** OpenAI tool_calls index of the open tool block. */
  #openTool = -1;
  #nextBlock = 0;
  #tools = new Map<number, ToolState>();
  /** Synthetic keys for tool-call deltas without `index`. */
  #nextSyntheticKey = -2;
  #finish: string | null = null;
  #sawFinish = false;
  #sawTool = false;
  #sawRefusal = false;
  #prompt = 0;
  #cached = 0;
  #completion = 0;
  #haveUsage = false;

  constructor(options: OpenAIStreamToAnthropicOptions) {
    this.#model = options.responseModel;
  }

  /** Usage seen so far in Anthropic form (for capturing cancelled streams); null before any usage arrived. */
  get usage(): AnthropicUsage | null {
    if (!this.#haveUsage) return null;
    return {
      input_tokens: this.#prompt - this.#cached,
      output_tokens: this.#completion,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: this.#cached,
    };
  }

  /** The stop_reason, once finish_reason arrived (null before). */
  get stopReason(): AnthropicStopReason | null {
    return this.#sawFinish ? this.#stopReason() : null;
  }

  /** True once message_stop or an error was written; later events are ignored. */
  get done(): boolean {
    return this.#done;
  }

  /**
   * One upstream event in, the SSE text to write now out (possibly '').
   * Throws TranslationError `invalid_stream_event` for data that is neither `[DONE]` nor a
   * JSON object, and for interleaved tool-call deltas (see the module comment).
   */
  push(ev: SseEvent): string {
    if (this.#done) return '';
    const data = ev.data;
    if (data === '[DONE]') return this.#start(null) + this.#complete();
    const chunk = tryParseJson(data);
    if (!isObject(chunk)) throw new TranslationError('invalid_stream_event', 'upstream chunk is not a JSON object');
    if (chunk.error != null) {
      this.#done = true;
      return 'event: error\ndata: ' + JSON.stringify(openaiErrorToAnthropicBody(0, chunk)) + '\n\n';
    }
    let out = this.#start(chunk);
    const choices = chunk.choices;
    if (Array.isArray(choices)) {
      for (const c of choices as unknown[]) {
        if (!isObject(c) || (c.index !== undefined && c.index !== 0)) continue; // n = 1: only choice 0
        const delta = asObject(c.delta);
        if (delta !== null) out += this.#delta(delta);
        const finish = asString(c.finish_reason);
        if (finish !== null && !this.#sawFinish) {
          out += this.#flushPendingTools() + this.#closeBlock();
          this.#finish = finish;
          this.#sawFinish = true;
        }
        break;
      }
    }
    const usage = asObject(chunk.usage);
    if (usage !== null) {
      this.#readUsage(usage);
      if (this.#sawFinish) out += this.#complete();
    }
    return out;
  }

  /** End of the upstream stream: completes a finished message, or reports a cut stream as an error. */
  end(): string {
    if (this.#done) return '';
    if (this.#sawFinish) return this.#complete();
    this.#done = true;
    const body = { type: 'error', error: { type: 'api_error', message: 'upstream stream ended before the message was complete' } };
    return this.#start(null) + 'event: error\ndata: ' + JSON.stringify(body) + '\n\n';
  }

  #stopReason(): AnthropicStopReason {
    const mapped = openaiFinishReasonToAnthropic(this.#finish);
    if (mapped === 'end_turn') {
      if (this.#sawTool) return 'tool_use';
      if (this.#sawRefusal) return 'refusal';
    }
    return mapped;
  }

  #readUsage(u: Record<string, unknown>): void {
    const prompt = asCount(u.prompt_tokens);
    const completion = asCount(u.completion_tokens);
    const details = asObject(u.prompt_tokens_details);
    const cached = details === null ? null : asCount(details.cached_tokens);
    if (prompt !== null) this.#prompt = prompt;
    if (completion !== null) this.#completion = completion;
    if (cached !== null) this.#cached = cached;
    if (this.#cached > this.#prompt) this.#cached = this.#prompt;
    this.#haveUsage = true;
  }

  #start(chunk: Record<string, unknown> | null): string {
    if (this.#started) return '';
    this.#started = true;
    if (chunk !== null) {
      this.#id = asString(chunk.id) ?? '';
      const u = asObject(chunk.usage);
      if (u !== null) this.#readUsage(u);
    }
    const message = {
      id: this.#id,
      type: 'message',
      role: 'assistant',
      model: this.#model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: this.#prompt - this.#cached,
        output_tokens: 0,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: this.#cached,
      },
    };
    return 'event: message_start\ndata: {"type":"message_start","message":' + JSON.stringify(message) + '}\n\n';
  }

  #delta(delta: Record<string, unknown>): string {
    let out = '';
    const content = asString(delta.content);
    if (content !== null && content !== '') out += this.#text(content);
    const refusal = asString(delta.refusal);
    if (refusal !== null && refusal !== '') {
      this.#sawRefusal = true;
      out += this.#text(refusal);
    }
    const calls = delta.tool_calls;
    if (Array.isArray(calls)) {
      for (const tc of calls as unknown[]) if (isObject(tc)) out += this.#toolDelta(tc);
    }
    return out;
  }

  #text(text: string): string {
    let out = '';
    if (this.#open !== TEXT) {
      out += this.#closeBlock();
      this.#open = TEXT;
      this.#openIndex = this.#nextBlock++;
      out += 'event: content_block_start\ndata: {"type":"content_block_start","index":' + this.#openIndex + ',"content_block":{"type":"text","text":""}}\n\n';
    }
    return out + 'event: content_block_delta\ndata: {"type":"content_block_delta","index":' + this.#openIndex + ',"delta":{"type":"text_delta","text":' + JSON.stringify(text) + '}}\n\n';
  }

  #toolDelta(tc: Record<string, unknown>): string {
    const fn = asObject(tc.function);
    const id = asString(tc.id);
    const name = fn === null ? null : asString(fn.name);
    const args = (fn === null ? null : asString(fn.arguments)) ?? '';
    let key: number;
    if (typeof tc.index === 'number') key = tc.index;
    else if (id !== null && id !== '' && !(this.#open === TOOL && this.#tools.get(this.#openTool)?.id === id)) key = this.#nextSyntheticKey--;
    else key = this.#openTool;

    let t = this.#tools.get(key);
    if (t === undefined) {
      t = { block: -1, id: id ?? '', name: name ?? '', pending: '' };
      this.#tools.set(key, t);
    } else if (t.block < 0) {
      if (t.id === '' && id !== null) t.id = id;
      if (t.name === '' && name !== null) t.name = name;
    }
    let out = '';
    if (t.block < 0) {
      if (t.name === '') {
        t.pending += args; // held-back case 2: no name yet
        return '';
      }
      out += this.#startTool(key, t);
    }
    if (args !== '') {
      if (this.#open !== TOOL || this.#openTool !== key) {
        throw new TranslationError('invalid_stream_event', `arguments for tool call ${key} arrived after its block was closed (interleaved tool calls)`);
      }
      out += this.#argsDelta(args);
    }
    return out;
  }

  #startTool(key: number, t: ToolState): string {
    let out = this.#closeBlock();
    this.#sawTool = true;
    t.block = this.#nextBlock++;
    this.#open = TOOL;
    this.#openIndex = t.block;
    this.#openTool = key;
    if (t.id === '') t.id = `toolu_${this.#id}_${t.block}`;
    out +=
      'event: content_block_start\ndata: {"type":"content_block_start","index":' + t.block +
      ',"content_block":{"type":"tool_use","id":' + JSON.stringify(t.id) + ',"name":' + JSON.stringify(t.name) + ',"input":{}}}\n\n';
    if (t.pending !== '') {
      out += this.#argsDelta(t.pending);
      t.pending = '';
    }
    return out;
  }

  #argsDelta(piece: string): string {
    return 'event: content_block_delta\ndata: {"type":"content_block_delta","index":' + this.#openIndex + ',"delta":{"type":"input_json_delta","partial_json":' + JSON.stringify(piece) + '}}\n\n';
  }

  /** Tool calls that never got a name: start them now (name '') so no argument is lost. */
  #flushPendingTools(): string {
    let out = '';
    for (const [key, t] of this.#tools) if (t.block < 0) out += this.#startTool(key, t);
    return out;
  }

  #closeBlock(): string {
    if (this.#open === NONE) return '';
    const index = this.#openIndex;
    this.#open = NONE;
    this.#openIndex = -1;
    this.#openTool = -1;
    return 'event: content_block_stop\ndata: {"type":"content_block_stop","index":' + index + '}\n\n';
  }

  #complete(): string {
    this.#done = true;
    const out = this.#flushPendingTools() + this.#closeBlock();
    const usage: Record<string, number> = { output_tokens: this.#completion };
    if (this.#haveUsage) {
      usage.input_tokens = this.#prompt - this.#cached;
      usage.cache_read_input_tokens = this.#cached;
    }
    const delta = { type: 'message_delta', delta: { stop_reason: this.#stopReason(), stop_sequence: null }, usage };
    return out + 'event: message_delta\ndata: ' + JSON.stringify(delta) + '\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n';
  }
}
