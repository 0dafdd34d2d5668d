/**
 * Anthropic Messages JSON response -> OpenAI Responses response object.
 *
 * Output items, one per Anthropic content block, in order:
 *
 * | Anthropic block               | Responses output item                                                      |
 * | ----------------------------- | -------------------------------------------------------------------------- |
 * | text                          | message {role: assistant, content: [output_text {text, annotations: []}]}  |
 * | tool_use                      | function_call {call_id: tool_use id, name, arguments: JSON text of input}  |
 * | thinking                      | reasoning {summary: [summary_text {text: thinking}]}                       |
 * | redacted_thinking, server-tool blocks | nothing (no readable content; server tools are never requested)    |
 *
 * Claude 4 models return summarised thinking, hence `summary` rather than raw reasoning
 * `content`; the signature is not passed on (reasoning items are not sent back to Anthropic,
 * see request.ts).
 *
 * Ids are derived from the Anthropic message id (`msg_X`): the response is `resp_X`, its
 * items `msg_X_<i>`, `fc_X_<i>` and `rs_X_<i>` (i = output index), so the same upstream answer
 * gets the same ids in JSON and in a stream. A function_call's `call_id` is the tool_use id,
 * which the client sends back in function_call_output and request.ts turns into tool_use_id.
 *
 * Status, by `responsesStatus`:
 *
 * | Anthropic stop_reason                    | status     | incomplete_details             |
 * | ---------------------------------------- | ---------- | ------------------------------ |
 * | end_turn, stop_sequence, tool_use,       | completed  | null                           |
 * |   pause_turn, null / unknown             |            |                                |
 * | max_tokens, model_context_window_exceeded| incomplete | {reason: 'max_output_tokens'}  |
 * | refusal                                  | incomplete | {reason: 'content_filter'}     |
 *
 * Items are `completed`, except that the last one is `incomplete` in an incomplete response
 * (it is the one that was cut).
 *
 * Usage (`anthropicUsageToResponses`), as in the chat translation: input_tokens = input +
 * cache reads + cache writes (OpenAI counts cached tokens as input, Anthropic does not);
 * input_tokens_details.cached_tokens = cache reads, cache_write_tokens = cache writes;
 * output_tokens = output (thinking included: Anthropic does not count it apart, so
 * reasoning_tokens is 0); total = input + output.
 *
 * The response object also repeats the request's settings (instructions, tools,
 * tool_choice, temperature, ...), as OpenAI's does; `store` is false (nothing is kept).
 */

import { asCount, isObject } from '../json.js';
import type { AnthropicMessage, AnthropicStopReason } from '../anthropic/types.js';
import type { AnthropicTokenCounts } from '../openai/response.js';
import type {
  ResponsesIncompleteDetails,
  ResponsesOutputItem,
  ResponsesReasoningEffort,
  ResponsesRequest,
  ResponsesResponse,
  ResponsesStatus,
  ResponsesTextConfig,
  ResponsesUsage,
} from './types.js';

export interface AnthropicResponseToResponsesOptions {
  /** The `model` to report to the client. */
  responseModel: string;
  /** Unix seconds for `created_at`; the caller passes "now" (this package reads no clock). */
  createdAt: number;
  /** The client's request, whose settings the response object repeats. Defaults are reported without it. */
  request?: ResponsesRequest;
}

export interface ResponsesOutcome {
  status: Extract<ResponsesStatus, 'completed' | 'incomplete'>;
  incomplete_details: ResponsesIncompleteDetails | null;
}

/** Anthropic stop_reason -> Responses status and incomplete_details (table in the module comment). */
export function responsesStatus(reason: AnthropicStopReason | string | null | undefined): ResponsesOutcome {
  switch (reason) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
    case 'refusal':
      return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
    default:
      return { status: 'completed', incomplete_details: null };
  }
}

/** Anthropic token counts -> Responses usage (see the module comment). */
export function anthropicUsageToResponses(u: AnthropicTokenCounts): ResponsesUsage {
  const input = asCount(u.input_tokens) ?? 0;
  const cacheRead = asCount(u.cache_read_input_tokens) ?? 0;
  const cacheWrite = asCount(u.cache_creation_input_tokens) ?? 0;
  const output = asCount(u.output_tokens) ?? 0;
  const total = input + cacheRead + cacheWrite;
  return {
    input_tokens: total,
    input_tokens_details: { cached_tokens: cacheRead, cache_write_tokens: cacheWrite },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: total + output,
  };
}

/** Ids of one response, derived from the Anthropic message id. Internal (shared with stream.ts). */
export class ResponseIds {
  readonly #base: string;
  readonly response: string;

  constructor(anthropicId: string) {
    this.#base = anthropicId.startsWith('msg_') ? anthropicId.slice(4) : anthropicId;
    this.response = 'resp_' + this.#base;
  }

  message(outputIndex: number): string {
    return `msg_${this.#base}_${outputIndex}`;
  }

  functionCall(outputIndex: number): string {
    return `fc_${this.#base}_${outputIndex}`;
  }

  reasoning(outputIndex: number): string {
    return `rs_${this.#base}_${outputIndex}`;
  }
}

const DEFAULT_TEXT: ResponsesTextConfig = { format: { type: 'text' } };

/**
 * The response object around `output`: id, status and the request's settings, in OpenAI's
 * field order. Internal (shared with stream.ts, which writes it three times per stream).
 */
export function responseObject(
  id: string,
  options: AnthropicResponseToResponsesOptions,
  status: ResponsesStatus,
  incomplete: ResponsesIncompleteDetails | null,
  output: ResponsesOutputItem[],
  usage: ResponsesUsage | null,
): ResponsesResponse {
  const req: Partial<ResponsesRequest> = isObject(options.request) ? options.request : {};
  const num = (v: unknown, fallback: number): number => (typeof v === 'number' ? v : fallback);
  return {
    id,
    object: 'response',
    created_at: options.createdAt,
    status,
    background: false,
    error: null,
    incomplete_details: incomplete,
    instructions: typeof req.instructions === 'string' ? req.instructions : null,
    max_output_tokens: typeof req.max_output_tokens === 'number' ? req.max_output_tokens : null,
    model: options.responseModel,
    output,
    parallel_tool_calls: req.parallel_tool_calls !== false,
    previous_response_id: null,
    reasoning: { effort: isObject(req.reasoning) && typeof req.reasoning.effort === 'string' ? (req.reasoning.effort as ResponsesReasoningEffort) : null, summary: null },
    store: false,
    temperature: num(req.temperature, 1),
    text: isObject(req.text) ? { ...DEFAULT_TEXT, ...req.text } : DEFAULT_TEXT,
    tool_choice: req.tool_choice ?? 'auto',
    tools: Array.isArray(req.tools) ? req.tools : [],
    top_p: num(req.top_p, 1),
    truncation: req.truncation === 'auto' ? 'auto' : 'disabled',
    usage,
    user: typeof req.user === 'string' ? req.user : null,
    metadata: isObject(req.metadata) ? req.metadata : {},
  };
}

export function anthropicResponseToResponses(res: AnthropicMessage, options: AnthropicResponseToResponsesOptions): ResponsesResponse {
  const ids = new ResponseIds(isObject(res) && typeof res.id === 'string' ? res.id : '');
  const output: ResponsesOutputItem[] = [];
  const content: unknown = isObject(res) ? res.content : undefined;
  if (Array.isArray(content)) {
    for (const block of content as unknown[]) {
      if (!isObject(block)) continue;
      const i = output.length;
      if (block.type === 'text' && typeof block.text === 'string') {
        output.push({
          id: ids.message(i),
          type: 'message',
          status: 'completed',
          role: 'assistant',
          content: [{ type: 'output_text', annotations: [], logprobs: [], text: block.text }],
        });
      } else if (block.type === 'tool_use' && typeof block.id === 'string' && typeof block.name === 'string') {
        output.push({
          id: ids.functionCall(i),
          type: 'function_call',
          status: 'completed',
          arguments: JSON.stringify(block.input ?? {}),
          call_id: block.id,
          name: block.name,
        });
      } else if (block.type === 'thinking' && typeof block.thinking === 'string') {
        output.push({ id: ids.reasoning(i), type: 'reasoning', summary: [{ type: 'summary_text', text: block.thinking }] });
      }
      // redacted_thinking, server_tool_use, *_tool_result: nothing readable to pass on.
    }
  }
  const outcome = responsesStatus(isObject(res) ? (res.stop_reason as string | null) : null);
  const last = output[output.length - 1];
  if (outcome.status === 'incomplete' && last !== undefined && last.type !== 'reasoning') last.status = 'incomplete';
  const usage = anthropicUsageToResponses(isObject(res) && isObject(res.usage) ? res.usage : {});
  return responseObject(ids.response, options, outcome.status, outcome.incomplete_details, output, usage);
}
