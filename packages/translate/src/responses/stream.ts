/**
 * Anthropic Messages SSE events -> OpenAI Responses SSE events.
 *
 * Every output event is `event: <type>\ndata: {"type":<type>,"sequence_number":n,...}\n\n`,
 * n counting the stream's events from 0. Output grammar:
 *
 *   response.created  response.in_progress
 *   ( response.output_item.added  <item events>  response.output_item.done )*
 *   response.completed | response.incomplete
 * or, on an upstream error or a cut stream, `error` (the stream is then over).
 *
 * | Anthropic input                     | Responses output                                                         |
 * | ----------------------------------- | ------------------------------------------------------------------------ |
 * | message_start                       | response.created + response.in_progress (status in_progress, no output)  |
 * | content_block_start text            | output_item.added (message, in_progress) + content_part.added (output_text) |
 * | text_delta                          | output_text.delta                                                        |
 * | content_block_start tool_use        | output_item.added (function_call {call_id: tool_use id, name, arguments: ''}) |
 * | input_json_delta                    | function_call_arguments.delta (empty pieces skipped)                     |
 * | content_block_start thinking        | output_item.added (reasoning) + reasoning_summary_part.added             |
 * | thinking_delta                      | reasoning_summary_text.delta                                             |
 * | content_block_stop                  | the block's closing events (held, see below): output_text.done +        |
 * |                                     | content_part.done, function_call_arguments.done, or                      |
 * |                                     | reasoning_summary_text.done + reasoning_summary_part.done; then          |
 * |                                     | output_item.done with the whole item                                     |
 * | message_delta                       | the held closing events (stop reason and usage recorded)                 |
 * | message_stop                        | response.completed or response.incomplete with the whole response        |
 * | error                               | `error` {code, message, param: null}, secrets scrubbed                   |
 * | signature / citations deltas,       | nothing                                                                  |
 * |   redacted_thinking and server-tool |                                                                          |
 * |   blocks, ping, unknown events      |                                                                          |
 *
 * Items, ids, statuses and usage are those of the JSON translation (response.ts), so the
 * final response object equals `anthropicResponseToResponses` of the same message, except
 * that function_call arguments are the JSON text as the provider streamed it (its spacing
 * may differ from JSON.stringify of the parsed input).
 *
 * Held back (the one documented exception to "every input produces its output now"): a
 * block's closing events wait for the next upstream event (content_block_start,
 * message_delta, message_stop), which Anthropic sends right after content_block_stop. The
 * last item's status depends on the stop reason (`incomplete` when the output was cut by
 * max_tokens), and the stop reason only arrives in message_delta. The closing events repeat
 * content already sent (the whole text or arguments); no new content is held.
 *
 * A tool call whose input had no input_json_delta pieces (a tool without parameters) gets
 * one function_call_arguments.delta `{}` before its done event, so deltas and done agree
 * with the JSON translation's `arguments: "{}"`.
 *
 * `end()` before message_delta (a cut upstream) writes an `error` event, so the client does
 * not mistake the cut stream for a complete answer; after message_delta it completes the
 * response normally.
 */

import { TranslationError } from '../errors.js';
import { anthropicErrorToOpenAIBody } from '../errors-map.js';
import { asCount, asObject, asString, isObject, tryParseJson } from '../json.js';
import type { SseEvent } from '../sse.js';
import type { AnthropicStopReason } from '../anthropic/types.js';
import type { AnthropicResponseToResponsesOptions } from './response.js';
import { ResponseIds, anthropicUsageToResponses, responseObject, responsesStatus } from './response.js';
import type { ResponsesItemStatus, ResponsesOutputItem, ResponsesStatus, ResponsesUsage } from './types.js';

export type AnthropicStreamToResponsesOptions = AnthropicResponseToResponsesOptions;

const TEXT = 1;
const TOOL = 2;
const THINKING = 3;

/** One Anthropic content block that became an output item. */
interface Block {
  kind: typeof TEXT | typeof TOOL | typeof THINKING;
  outputIndex: number;
  itemId: string;
  /** Text, thinking or argument JSON received so far. */
  text: string;
  callId: string;
  name: string;
  /** JSON of the item id and output index: `"item_id":"…","output_index":n`, built once. */
  head: string;
}

function isBlockIndex(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < 1_000_000;
}

export class AnthropicStreamToResponses {
  readonly #options: AnthropicStreamToResponsesOptions;
  #ids = new ResponseIds('');
  #seq = 0;
  #started = false;
  #done = false;
  /** Anthropic block index -> its output item; null for skipped blocks. */
  readonly #blocks = new Map<number, Block | null>();
  /** Output items whose output_item.done was written, in output order. */
  readonly #output: ResponsesOutputItem[] = [];
  /** Items added and not yet done (open, or stopped and held), in output order. */
  #unfinished: Block[] = [];
  #nextOutput = 0;
  #stop: AnthropicStopReason | string | null = null;
  #sawDelta = false;
  #input = 0;
  #cacheRead = 0;
  #cacheWrite = 0;
  #outputTokens = 0;
  #sawUsage = false;

  constructor(options: AnthropicStreamToResponsesOptions) {
    this.#options = options;
  }

  /** Usage seen so far in Responses form (for capturing cancelled streams); null before message_start. */
  get usage(): ResponsesUsage | null {
    if (!this.#sawUsage) return null;
    return anthropicUsageToResponses({
      input_tokens: this.#input,
      output_tokens: this.#outputTokens,
      cache_read_input_tokens: this.#cacheRead,
      cache_creation_input_tokens: this.#cacheWrite,
    });
  }

  /** The final status once message_delta arrived (null before). */
  get status(): ResponsesStatus | null {
    return this.#sawDelta ? responsesStatus(this.#stop).status : null;
  }

  /** The response id (`resp_…`), known once message_start arrived. */
  get responseId(): string {
    return this.#ids.response;
  }

  /** True once the final lifecycle event or an error was written; later events are ignored. */
  get done(): boolean {
    return this.#done;
  }

  /**
   * One upstream event in, the SSE text to write now out (possibly '').
   * Throws TranslationError `invalid_stream_event` when the event's data is not a JSON
   * object, or when input_json_delta arrives for a block that is not a tool_use block.
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
        return this.#start(asObject(parsed.message));
      case 'content_block_start':
        return this.#start(null) + this.#closeHeld() + this.#blockStart(parsed.index, asObject(parsed.content_block));
      case 'content_block_delta':
        return this.#blockDelta(parsed.index, asObject(parsed.delta));
      case 'content_block_stop':
        // Held: the block's closing events are written with the next event (module comment).
        return '';
      case 'message_delta':
        return this.#messageDelta(asObject(parsed.delta), asObject(parsed.usage));
      case 'message_stop':
        return this.#complete();
      case 'error': {
        const body = anthropicErrorToOpenAIBody(0, parsed).error;
        return this.#fail(body.code ?? body.type, body.message);
      }
      default:
        // ping, and event types added after this was written.
        return '';
    }
  }

  /** End of the upstream stream: completes a finished response, or reports a cut one as an error. */
  end(): string {
    if (this.#done) return '';
    if (this.#sawDelta) return this.#complete();
    return this.#fail('server_error', 'upstream stream ended before the response was complete');
  }

  // ---------------------------------------------------------------- writing

  #event(type: string, body: string): string {
    return 'event: ' + type + '\ndata: {"type":"' + type + '","sequence_number":' + this.#seq++ + ',' + body + '}\n\n';
  }

  #fail(code: string, message: string): string {
    this.#done = true;
    const out = this.#start(null);
    return out + this.#event('error', '"code":' + JSON.stringify(code) + ',"message":' + JSON.stringify(message) + ',"param":null');
  }

  #snapshot(status: ResponsesStatus, usage: ResponsesUsage | null): string {
    const outcome = responsesStatus(this.#stop);
    const incomplete = status === 'incomplete' ? outcome.incomplete_details : null;
    const output = status === 'in_progress' ? [] : this.#output;
    return '"response":' + JSON.stringify(responseObject(this.#ids.response, this.#options, status, incomplete, output, usage));
  }

  // ---------------------------------------------------------------- message

  #start(message: Record<string, unknown> | null): string {
    if (message !== null) {
      const u = asObject(message.usage);
      if (u !== null) this.#readUsage(u);
      if (!this.#started) this.#ids = new ResponseIds(asString(message.id) ?? '');
    }
    if (this.#started) return '';
    this.#started = true;
    return this.#event('response.created', this.#snapshot('in_progress', null)) + this.#event('response.in_progress', this.#snapshot('in_progress', null));
  }

  #readUsage(u: Record<string, unknown>): void {
    const input = asCount(u.input_tokens);
    const read = asCount(u.cache_read_input_tokens);
    const write = asCount(u.cache_creation_input_tokens);
    const output = asCount(u.output_tokens);
    if (input !== null) this.#input = input;
    if (read !== null) this.#cacheRead = read;
    if (write !== null) this.#cacheWrite = write;
    if (output !== null) this.#outputTokens = output;
    this.#sawUsage = true;
  }

  #messageDelta(delta: Record<string, unknown> | null, usage: Record<string, unknown> | null): string {
    if (usage !== null) this.#readUsage(usage);
    if (!this.#sawDelta) {
      this.#sawDelta = true;
      this.#stop = delta === null ? null : asString(delta.stop_reason);
    }
    return this.#start(null) + this.#closeHeld();
  }

  #complete(): string {
    this.#done = true;
    let out = this.#start(null) + this.#closeHeld();
    const { status } = responsesStatus(this.#stop);
    out += this.#event(status === 'completed' ? 'response.completed' : 'response.incomplete', this.#snapshot(status, this.usage ?? anthropicUsageToResponses({})));
    return out;
  }

  // ---------------------------------------------------------------- blocks

  #blockStart(index: unknown, cb: Record<string, unknown> | null): string {
    if (cb === null || !isBlockIndex(index)) return '';
    const kind = cb.type === 'text' ? TEXT : cb.type === 'tool_use' ? TOOL : cb.type === 'thinking' ? THINKING : 0;
    if (kind === 0) {
      this.#blocks.set(index, null); // redacted_thinking, server-tool blocks: skipped
      return '';
    }
    const outputIndex = this.#nextOutput++;
    const itemId = kind === TEXT ? this.#ids.message(outputIndex) : kind === TOOL ? this.#ids.functionCall(outputIndex) : this.#ids.reasoning(outputIndex);
    const block: Block = {
      kind,
      outputIndex,
      itemId,
      text: '',
      callId: kind === TOOL ? (asString(cb.id) ?? '') : '',
      name: kind === TOOL ? (asString(cb.name) ?? '') : '',
      head: '"item_id":' + JSON.stringify(itemId) + ',"output_index":' + outputIndex,
    };
    this.#blocks.set(index, block);
    this.#unfinished.push(block);
    const added = (item: ResponsesOutputItem): string =>
      this.#event('response.output_item.added', '"output_index":' + outputIndex + ',"item":' + JSON.stringify(item));
    let out: string;
    if (kind === TEXT) {
      out =
        added({ id: itemId, type: 'message', status: 'in_progress', role: 'assistant', content: [] }) +
        this.#event('response.content_part.added', block.head + ',"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}');
      const text = asString(cb.text);
      if (text !== null && text !== '') out += this.#text(block, text);
    } else if (kind === TOOL) {
      out = added({ id: itemId, type: 'function_call', status: 'in_progress', arguments: '', call_id: block.callId, name: block.name });
      // Streams start tool_use with `input: {}` and send the input as deltas; a non-empty
      // input here (not Anthropic's behaviour) is passed on as the first piece.
      if (isObject(cb.input) && Object.keys(cb.input).length > 0) out += this.#args(block, JSON.stringify(cb.input));
    } else {
      out =
        added({ id: itemId, type: 'reasoning', summary: [] }) +
        this.#event('response.reasoning_summary_part.added', block.head + ',"summary_index":0,"part":{"type":"summary_text","text":""}');
      const thinking = asString(cb.thinking);
      if (thinking !== null && thinking !== '') out += this.#thinking(block, thinking);
    }
    return out;
  }

  #blockDelta(index: unknown, delta: Record<string, unknown> | null): string {
    if (delta === null) return '';
    const block = isBlockIndex(index) ? this.#blocks.get(index) : undefined;
    switch (delta.type) {
      case 'text_delta': {
        const text = asString(delta.text);
        if (text === null || text === '' || block == null || block.kind !== TEXT) return '';
        return this.#text(block, text);
      }
      case 'input_json_delta': {
        const piece = asString(delta.partial_json);
        if (piece === null || piece === '') return '';
        if (block == null || block.kind !== TOOL) {
          throw new TranslationError('invalid_stream_event', `input_json_delta for content block ${String(index)}, which is not a tool_use block`);
        }
        return this.#args(block, piece);
      }
      case 'thinking_delta': {
        const thinking = asString(delta.thinking);
        if (thinking === null || thinking === '' || block == null || block.kind !== THINKING) return '';
        return this.#thinking(block, thinking);
      }
      default:
        // signature_delta, citations_delta: nothing to pass on.
        return '';
    }
  }

  #text(block: Block, text: string): string {
    block.text += text;
    return this.#event('response.output_text.delta', block.head + ',"content_index":0,"delta":' + JSON.stringify(text) + ',"logprobs":[]');
  }

  #args(block: Block, piece: string): string {
    block.text += piece;
    return this.#event('response.function_call_arguments.delta', block.head + ',"delta":' + JSON.stringify(piece));
  }

  #thinking(block: Block, text: string): string {
    block.text += text;
    return this.#event('response.reasoning_summary_text.delta', block.head + ',"summary_index":0,"delta":' + JSON.stringify(text));
  }

  /**
   * Closing events of every unfinished item. Before the stop reason is known they are all
   * complete; after it, the last one is `incomplete` when the response is.
   */
  #closeHeld(): string {
    if (this.#unfinished.length === 0) return '';
    const blocks = this.#unfinished;
    this.#unfinished = [];
    const incomplete = this.#sawDelta && responsesStatus(this.#stop).status === 'incomplete';
    let out = '';
    for (let i = 0; i < blocks.length; i++) out += this.#close(blocks[i]!, incomplete && i === blocks.length - 1 ? 'incomplete' : 'completed');
    return out;
  }

  #close(block: Block, status: ResponsesItemStatus): string {
    let out = '';
    let item: ResponsesOutputItem;
    if (block.kind === TEXT) {
      const part = { type: 'output_text' as const, annotations: [], logprobs: [], text: block.text };
      const partJson = JSON.stringify(part);
      out +=
        this.#event('response.output_text.done', block.head + ',"content_index":0,"text":' + JSON.stringify(block.text) + ',"logprobs":[]') +
        this.#event('response.content_part.done', block.head + ',"content_index":0,"part":' + partJson);
      item = { id: block.itemId, type: 'message', status, role: 'assistant', content: [part] };
    } else if (block.kind === TOOL) {
      if (block.text === '') out += this.#args(block, '{}');
      out += this.#event('response.function_call_arguments.done', block.head + ',"arguments":' + JSON.stringify(block.text));
      item = { id: block.itemId, type: 'function_call', status, arguments: block.text, call_id: block.callId, name: block.name };
    } else {
      const part = { type: 'summary_text' as const, text: block.text };
      out +=
        this.#event('response.reasoning_summary_text.done', block.head + ',"summary_index":0,"text":' + JSON.stringify(block.text)) +
        this.#event('response.reasoning_summary_part.done', block.head + ',"summary_index":0,"part":' + JSON.stringify(part));
      item = { id: block.itemId, type: 'reasoning', summary: [part] };
    }
    this.#output.push(item);
    return out + this.#event('response.output_item.done', '"output_index":' + block.outputIndex + ',"item":' + JSON.stringify(item));
  }
}
