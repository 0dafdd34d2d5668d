/**
 * OpenAI chat.completion JSON -> Anthropic Messages response.
 *
 * - choices[0] only (the Anthropic side never asks for n > 1).
 * - message.content -> one text block (omitted when empty); message.refusal -> a text
 *   block and stop_reason 'refusal'.
 * - tool_calls -> tool_use blocks with `input` parsed from `arguments`. Arguments that are
 *   not a JSON object become `{}` and are reported in `invalidToolArguments` (the answer
 *   still reaches the client; the gateway records the defect).
 * - legacy message.function_call -> a tool_use block with id `<response id>_fc`.
 * - finish_reason -> stop_reason via `openaiFinishReasonToAnthropic`; a 'stop' with tool
 *   calls present becomes 'tool_use' (some OpenAI-compatible servers say 'stop').
 * - usage: input_tokens = prompt_tokens - cached, cache_read_input_tokens = cached,
 *   cache_creation_input_tokens = 0, output_tokens = completion_tokens.
 */

import { asCount, asObject, asString, isObject, tryParseJson } from '../json.js';
import type { OpenAIChatCompletion, OpenAIFinishReason } from '../openai/types.js';
import type { AnthropicContentBlock, AnthropicMessage, AnthropicStopReason, AnthropicUsage } from './types.js';

export interface OpenAIResponseToAnthropicOptions {
  /** The `model` to report to the client. */
  responseModel: string;
}

export interface InvalidToolArguments {
  /** tool_use id. */
  id: string;
  name: string;
  /** The upstream `arguments` text (not parsed). */
  arguments: string;
}

export interface OpenAIResponseToAnthropicResult {
  message: AnthropicMessage;
  /** Tool calls whose arguments were not a JSON object and were sent as `{}`. */
  invalidToolArguments: InvalidToolArguments[];
}

/**
 * | OpenAI finish_reason      | Anthropic stop_reason |
 * | ------------------------- | --------------------- |
 * | stop                      | end_turn              |
 * | length                    | max_tokens            |
 * | tool_calls, function_call | tool_use              |
 * | content_filter            | refusal               |
 * | null / unknown            | end_turn              |
 */
export function openaiFinishReasonToAnthropic(reason: OpenAIFinishReason | string | null | undefined): AnthropicStopReason {
  switch (reason) {
    case 'length':
      return 'max_tokens';
    case 'tool_calls':
    case 'function_call':
      return 'tool_use';
    case 'content_filter':
      return 'refusal';
    default:
      return 'end_turn';
  }
}

/** Token counts as OpenAI reports them. */
export interface OpenAITokenCounts {
  prompt_tokens?: number | null;
  completion_tokens?: number | null;
  prompt_tokens_details?: { cached_tokens?: number | null } | null;
}

/** input_tokens = prompt - cached (Anthropic's input excludes cache reads), cache_read = cached. */
export function openaiUsageToAnthropic(u: OpenAITokenCounts): AnthropicUsage {
  const prompt = asCount(u.prompt_tokens) ?? 0;
  const details = asObject(u.prompt_tokens_details);
  const cached = Math.min(prompt, (details === null ? null : asCount(details.cached_tokens)) ?? 0);
  return {
    input_tokens: prompt - cached,
    output_tokens: asCount(u.completion_tokens) ?? 0,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cached,
  };
}

/** Parses tool-call arguments into a tool_use input; null when they are not a JSON object. */
export function parseToolArguments(args: string): Record<string, unknown> | null {
  if (args.trim() === '') return {};
  const v = tryParseJson(args);
  return isObject(v) ? v : null;
}

export function openaiResponseToAnthropic(res: OpenAIChatCompletion, options: OpenAIResponseToAnthropicOptions): OpenAIResponseToAnthropicResult {
  const id = isObject(res) ? (asString(res.id) ?? '') : '';
  const choices: unknown = isObject(res) ? res.choices : undefined;
  const choice = Array.isArray(choices) ? asObject(choices[0]) : null;
  const msg = choice === null ? null : asObject(choice.message);
  const content: AnthropicContentBlock[] = [];
  const invalidToolArguments: InvalidToolArguments[] = [];
  let refused = false;

  if (msg !== null) {
    const text = asString(msg.content);
    if (text !== null && text !== '') content.push({ type: 'text', text });
    const refusal = asString(msg.refusal);
    if (refusal !== null && refusal !== '') {
      content.push({ type: 'text', text: refusal });
      refused = true;
    }
    const addCall = (callId: string, name: string, args: unknown): void => {
      const raw = typeof args === 'string' ? args : '';
      const input = parseToolArguments(raw);
      if (input === null) invalidToolArguments.push({ id: callId, name, arguments: raw });
      content.push({ type: 'tool_use', id: callId, name, input: input ?? {} });
    };
    if (Array.isArray(msg.tool_calls)) {
      for (const tc of msg.tool_calls as unknown[]) {
        if (!isObject(tc)) continue;
        const fn = asObject(tc.function);
        if (fn === null) continue;
        addCall(asString(tc.id) ?? '', asString(fn.name) ?? '', fn.arguments);
      }
    }
    const fc = asObject(msg.function_call);
    if (fc !== null) addCall(`${id}_fc`, asString(fc.name) ?? '', fc.arguments);
  }

  const finish = choice === null ? null : asString(choice.finish_reason);
  let stop = openaiFinishReasonToAnthropic(finish);
  if (stop === 'end_turn') {
    if (content.some((b) => b.type === 'tool_use')) stop = 'tool_use';
    else if (refused) stop = 'refusal';
  }
  const usage = isObject(res) && isObject(res.usage) ? openaiUsageToAnthropic(res.usage) : openaiUsageToAnthropic({});
  const message: AnthropicMessage = {
    id,
    type: 'message',
    role: 'assistant',
    model: options.responseModel,
    content,
    stop_reason: stop,
    stop_sequence: null,
    usage,
  };
  return { message, invalidToolArguments };
}
