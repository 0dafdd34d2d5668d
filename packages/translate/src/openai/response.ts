/**
 * Anthropic Messages JSON response -> OpenAI chat.completion.
 *
 * - text blocks are concatenated into `message.content` (null when there is no text but
 *   there are tool calls, as OpenAI does); thinking, redacted_thinking and server-tool
 *   blocks are dropped.
 * - tool_use blocks -> `message.tool_calls` (id kept, arguments = JSON.stringify(input)).
 * - stop_reason -> finish_reason via `anthropicStopReasonToOpenAI`.
 * - usage via `anthropicUsageToOpenAI` (cache reads and writes count as prompt tokens).
 */

import { asCount, isObject } from '../json.js';
import type { AnthropicMessage, AnthropicStopReason } from '../anthropic/types.js';
import type { OpenAIChatCompletion, OpenAIFinishReason, OpenAIToolCall, OpenAIUsage } from './types.js';

export interface AnthropicResponseToOpenAIOptions {
  /** The `model` to report to the client (usually the name the client asked for). */
  responseModel: string;
  /** Unix seconds for `created`; the caller passes "now" (this package reads no clock). */
  created: number;
}

/**
 * | Anthropic stop_reason          | OpenAI finish_reason |
 * | ------------------------------ | -------------------- |
 * | end_turn, stop_sequence        | stop                 |
 * | max_tokens                     | length               |
 * | model_context_window_exceeded  | length               |
 * | tool_use                       | tool_calls           |
 * | refusal                        | content_filter       |
 * | pause_turn                     | stop                 |
 * | null / unknown                 | stop                 |
 */
export function anthropicStopReasonToOpenAI(reason: AnthropicStopReason | string | null | undefined): OpenAIFinishReason {
  switch (reason) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'refusal':
      return 'content_filter';
    default:
      return 'stop';
  }
}

/** Token counts as Anthropic reports them (cache fields may be absent or null). */
export interface AnthropicTokenCounts {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
}

/**
 * prompt_tokens = input + cache_read + cache_creation (Anthropic's input_tokens excludes
 * both cache kinds, OpenAI's prompt_tokens includes cached tokens);
 * completion_tokens = output; prompt_tokens_details.cached_tokens = cache_read.
 */
export function anthropicUsageToOpenAI(u: AnthropicTokenCounts): OpenAIUsage {
  const input = asCount(u.input_tokens) ?? 0;
  const cacheRead = asCount(u.cache_read_input_tokens) ?? 0;
  const cacheWrite = asCount(u.cache_creation_input_tokens) ?? 0;
  const output = asCount(u.output_tokens) ?? 0;
  const prompt = input + cacheRead + cacheWrite;
  return {
    prompt_tokens: prompt,
    completion_tokens: output,
    total_tokens: prompt + output,
    prompt_tokens_details: { cached_tokens: cacheRead },
  };
}

export function anthropicResponseToOpenAI(res: AnthropicMessage, options: AnthropicResponseToOpenAIOptions): OpenAIChatCompletion {
  let text = '';
  let hasText = false;
  const toolCalls: OpenAIToolCall[] = [];
  const content: unknown = isObject(res) ? res.content : undefined;
  if (Array.isArray(content)) {
    for (const block of content as unknown[]) {
      if (!isObject(block)) continue;
      if (block.type === 'text' && typeof block.text === 'string') {
        text += block.text;
        hasText = true;
      } else if (block.type === 'tool_use' && typeof block.id === 'string' && typeof block.name === 'string') {
        toolCalls.push({
          id: block.id,
          type: 'function',
          function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) },
        });
      }
      // thinking, redacted_thinking, server_tool_use, *_tool_result: no OpenAI equivalent.
    }
  }
  const message: OpenAIChatCompletion['choices'][number]['message'] = {
    role: 'assistant',
    content: hasText || toolCalls.length === 0 ? text : null,
    refusal: null,
  };
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  const out: OpenAIChatCompletion = {
    id: typeof res.id === 'string' ? res.id : '',
    object: 'chat.completion',
    created: options.created,
    model: options.responseModel,
    choices: [{ index: 0, message, finish_reason: anthropicStopReasonToOpenAI(res.stop_reason), logprobs: null }],
  };
  if (isObject(res.usage)) out.usage = anthropicUsageToOpenAI(res.usage);
  return out;
}
