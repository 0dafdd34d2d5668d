/**
 * Anthropic Messages SSE events -> OpenAI chat.completion.chunk SSE text.
 *
 * | Anthropic event                               | OpenAI output                                                       |
 * | --------------------------------------------- | ------------------------------------------------------------------- |
 * | message_start                                 | chunk delta {role:'assistant', content:''}                          |
 * | content_block_start text (non-empty text)     | content chunk (usually nothing: the text comes as deltas)           |
 * | content_block_start tool_use                  | chunk tool_calls [{index:i, id, type:'function', function:{name, arguments:''}}] |
 * | content_block_delta text_delta                | chunk delta {content}                                               |
 * | content_block_delta input_json_delta          | chunk tool_calls [{index:i, function:{arguments}}] (empty pieces skipped) |
 * | thinking / signature / citations deltas       | nothing                                                             |
 * | content_block_stop, ping, unknown events      | nothing                                                             |
 * | message_delta                                 | chunk delta {} with the mapped finish_reason                        |
 * | message_stop                                  | usage chunk (choices: []) when include_usage, then `data: [DONE]`   |
 * | error                                         | `data: {"error":{...}}`, then the stream is over                    |
 *
 * `i` counts tool_use blocks from 0. Nothing is held back: every event's output is
 * returned by the `push` call that received it.
 *
 * If the upstream ends before message_delta (`end()` without a finish reason), an
 * OpenAI-style error event is emitted so the client does not mistake a cut stream for a
 * complete answer. If it ends after message_delta but before message_stop, the stream
 * is completed normally (usage chunk, [DONE]).
 */

import { TranslationError } from '../errors.js';
import { anthropicErrorToOpenAIBody } from '../errors-map.js';
import { asCount, asObject, asString, isObject, tryParseJson } from '../json.js';
import type { SseEvent } from '../sse.js';
import { anthropicStopReasonToOpenAI, anthropicUsageToOpenAI } from './response.js';
import type { OpenAIFinishReason, OpenAIUsage } from './types.js';

export interface AnthropicStreamToOpenAIOptions {
  /** The `model` to report to the client. */
  responseModel: string;
  /** Unix seconds for `created` (the same in every chunk). */
  created: number;
  /** The client asked for `stream_options.include_usage`: emit `usage: null` on chunks and the final usage chunk. */
  includeUsage: boolean;
}

const DONE = 'data: [DONE]\n\n';

function isBlockIndex(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < 1_000_000;
}

export class AnthropicStreamToOpenAI {
  readonly #model: string;
  readonly #created: number;
  readonly #includeUsage: boolean;
  /** `data: {"id":...,"object":...,"created":...,"model":...,` — built once per stream. */
  #head = '';
  /** `,"usage":null}\n\n` or `}\n\n`. */
  readonly #tail: string;
  #started = false;
  #done = false;
  #finish: OpenAIFinishReason | null = null;
  /** Anthropic block index -> OpenAI tool_calls index; -1 for non-tool blocks. */
  #toolIndexByBlock: number[] = [];
  #toolCount = 0;
  #input = 0;
  #cacheRead = 0;
  #cacheWrite = 0;
  #output = 0;
  #sawUsage = false;

  constructor(options: AnthropicStreamToOpenAIOptions) {
    this.#model = options.responseModel;
    this.#created = options.created;
    this.#includeUsage = options.includeUsage;
    this.#tail = options.includeUsage ? ',"usage":null}\n\n' : '}\n\n';
    this.#setId('');
  }

  /** Usage seen so far in OpenAI form (for capturing cancelled streams); null before message_start. */
  get usage(): OpenAIUsage | null {
    if (!this.#sawUsage) return null;
    return anthropicUsageToOpenAI({
      input_tokens: this.#input,
      output_tokens: this.#output,
      cache_read_input_tokens: this.#cacheRead,
      cache_creation_input_tokens: this.#cacheWrite,
    });
  }

  /** The finish_reason sent (or null if message_delta has not arrived). */
  get finishReason(): OpenAIFinishReason | null {
    return this.#finish;
  }

  /** True once [DONE] or an error was written; later events are ignored. */
  get done(): boolean {
    return this.#done;
  }

  /**
   * One upstream event in, the SSE text to write now out (possibly '').
   * Throws TranslationError `invalid_stream_event` when the event's data is not a JSON object.
   */
  push(ev: SseEvent): string {
    if (this.#done) return '';
    const parsed = tryParseJson(ev.data);
    if (!isObject(parsed)) {
      throw new TranslationError('invalid_stream_event', `upstream event ${ev.event ?? 'message'} is not a JSON object`);
    }
    const type = asString(parsed.type) ?? ev.event;
    switch (type) {
      case 'message_start':
        return this.#messageStart(asObject(parsed.message));
      case 'content_block_start':
        return this.#blockStart(parsed.index, asObject(parsed.content_block));
      case 'content_block_delta':
        return this.#blockDelta(parsed.index, asObject(parsed.delta));
      case 'message_delta':
        return this.#messageDelta(asObject(parsed.delta), asObject(parsed.usage));
      case 'message_stop':
        return this.#complete();
      case 'error': {
        this.#done = true;
        return 'data: ' + JSON.stringify(anthropicErrorToOpenAIBody(0, parsed)) + '\n\n';
      }
      default:
        // ping, content_block_stop, and event types added after this was written.
        return '';
    }
  }

  /** End of the upstream stream: completes a finished stream, or reports a cut one as an error. */
  end(): string {
    if (this.#done) return '';
    if (this.#finish !== null) return this.#complete();
    this.#done = true;
    const body = { error: { message: 'upstream stream ended before the message was complete', type: 'server_error', param: null, code: null } };
    return 'data: ' + JSON.stringify(body) + '\n\n';
  }

  #setId(id: string): void {
    this.#head =
      'data: {"id":' + JSON.stringify(id) + ',"object":"chat.completion.chunk","created":' + this.#created + ',"model":' + JSON.stringify(this.#model) + ',';
  }

  #chunk(delta: string, finish: OpenAIFinishReason | null): string {
    return this.#head + '"choices":[{"index":0,"delta":' + delta + ',"logprobs":null,"finish_reason":' + (finish === null ? 'null' : '"' + finish + '"') + '}]' + this.#tail;
  }

  #roleChunk(): string {
    this.#started = true;
    return this.#chunk('{"role":"assistant","content":""}', null);
  }

  #messageStart(message: Record<string, unknown> | null): string {
    if (message !== null) {
      const id = asString(message.id);
      if (id !== null) this.#setId(id);
      const u = asObject(message.usage);
      if (u !== null) this.#readUsage(u);
    }
    if (this.#started) return '';
    return this.#roleChunk();
  }

  #readUsage(u: Record<string, unknown>): void {
    const input = asCount(u.input_tokens);
    const read = asCount(u.cache_read_input_tokens);
    const write = asCount(u.cache_creation_input_tokens);
    const output = asCount(u.output_tokens);
    if (input !== null) this.#input = input;
    if (read !== null) this.#cacheRead = read;
    if (write !== null) this.#cacheWrite = write;
    if (output !== null) this.#output = output;
    this.#sawUsage = true;
  }

  /** Upstream without message_start (not per grammar, but harmless): open with the role chunk first. */
  #prefix(): string {
    return this.#started ? '' : this.#roleChunk();
  }

  #blockStart(index: unknown, block: Record<string, unknown> | null): string {
    if (block === null || !isBlockIndex(index)) return '';
    if (block.type === 'tool_use') {
      const toolIndex = this.#toolCount++;
      this.#toolIndexByBlock[index] = toolIndex;
      const id = asString(block.id) ?? '';
      const name = asString(block.name) ?? '';
      return this.#prefix() + this.#chunk(
        '{"tool_calls":[{"index":' + toolIndex + ',"id":' + JSON.stringify(id) + ',"type":"function","function":{"name":' + JSON.stringify(name) + ',"arguments":""}}]}',
        null,
      );
    }
    this.#toolIndexByBlock[index] = -1;
    if (block.type === 'text') {
      const text = asString(block.text);
      if (text !== null && text !== '') return this.#prefix() + this.#chunk('{"content":' + JSON.stringify(text) + '}', null);
    }
    return '';
  }

  #blockDelta(index: unknown, delta: Record<string, unknown> | null): string {
    if (delta === null) return '';
    if (delta.type === 'text_delta') {
      const text = asString(delta.text);
      if (text === null || text === '') return '';
      return this.#prefix() + this.#chunk('{"content":' + JSON.stringify(text) + '}', null);
    }
    if (delta.type === 'input_json_delta') {
      const piece = asString(delta.partial_json);
      if (piece === null || piece === '') return '';
      const toolIndex = isBlockIndex(index) ? this.#toolIndexByBlock[index] : undefined;
      if (toolIndex === undefined || toolIndex < 0) {
        throw new TranslationError('invalid_stream_event', `input_json_delta for content block ${String(index)}, which is not a tool_use block`);
      }
      return this.#chunk('{"tool_calls":[{"index":' + toolIndex + ',"function":{"arguments":' + JSON.stringify(piece) + '}}]}', null);
    }
    return '';
  }

  #messageDelta(delta: Record<string, unknown> | null, usage: Record<string, unknown> | null): string {
    if (usage !== null) this.#readUsage(usage);
    if (this.#finish !== null) return '';
    this.#finish = anthropicStopReasonToOpenAI(delta === null ? null : asString(delta.stop_reason));
    return this.#prefix() + this.#chunk('{}', this.#finish);
  }

  #complete(): string {
    this.#done = true;
    let out = '';
    if (this.#finish === null) {
      // message_stop without message_delta: still tell the client why it stopped.
      this.#finish = 'stop';
      out += this.#prefix() + this.#chunk('{}', this.#finish);
    }
    if (this.#includeUsage) {
      const usage = this.usage ?? anthropicUsageToOpenAI({});
      out += this.#head + '"choices":[],"usage":' + JSON.stringify(usage) + '}\n\n';
    }
    return out + DONE;
  }
}
