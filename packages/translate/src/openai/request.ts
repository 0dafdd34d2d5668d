/**
 * OpenAI Chat Completions request -> Anthropic Messages request.
 *
 * Field by field (OpenAI field -> what happens):
 *
 * | OpenAI field                         | Anthropic result / decision                                                         |
 * | ------------------------------------ | ----------------------------------------------------------------------------------- |
 * | model                                | replaced by `options.model` (the gateway picks the upstream model)                  |
 * | messages[system/developer]           | hoisted to top-level `system` (string if one text, else text blocks), in order      |
 * | messages[user/assistant]             | `messages`; consecutive same-role messages merged (Anthropic needs alternation)     |
 * | messages[tool]                       | user message with `tool_result` blocks; consecutive results merged into one message |
 * | messages[function], function_call    | unsupported_parameter (deprecated functions API)                                    |
 * | messages[*].name                     | dropped (no equivalent; content is unchanged)                                       |
 * | content part text                    | text block (empty text parts are skipped)                                           |
 * | content part image_url               | image block: data: URL -> base64 source, http(s) URL -> url source; `detail` dropped |
 * | content part file (PDF file_data)    | document block with base64 PDF source; file_id or other types -> unsupported        |
 * | content part input_audio             | unsupported_parameter                                                               |
 * | assistant tool_calls                 | tool_use blocks; arguments JSON -> input ('' -> {}); not an object -> invalid_tool_arguments |
 * | assistant refusal / refusal parts    | text block                                                                          |
 * | tools (function)                     | {name, description, input_schema: parameters (type object added if absent), strict} |
 * | tools (custom)                       | unsupported_parameter                                                               |
 * | tool_choice auto/none/required/fn    | {type:auto} / {type:none} / {type:any} / {type:tool,name}                           |
 * | tool_choice allowed_tools / custom   | unsupported_parameter                                                               |
 * | parallel_tool_calls: false           | tool_choice.disable_parallel_tool_use = true (tool_choice auto when absent)        |
 * | stop (string / array)                | stop_sequences (array)                                                              |
 * | temperature                          | temperature; > 1 -> unsupported_parameter (Anthropic range is 0..1, no faithful scale) |
 * | top_p                                | top_p                                                                               |
 * | max_completion_tokens / max_tokens   | max_tokens (max_completion_tokens wins); absent -> DEFAULT_ANTHROPIC_MAX_TOKENS      |
 * | stream                               | stream                                                                              |
 * | stream_options                       | not forwarded: read by AnthropicStreamToOpenAI (include_usage)                      |
 * | user (else safety_identifier)        | metadata.user_id                                                                    |
 * | response_format text                 | nothing                                                                             |
 * | response_format json_schema          | output_config.format {type:'json_schema', schema}                                   |
 * | response_format json_object          | unsupported_parameter (no schema-less JSON mode)                                    |
 * | n > 1                                | unsupported_parameter (n = 1 accepted)                                              |
 * | logprobs: true, top_logprobs > 0     | unsupported_parameter                                                               |
 * | logit_bias (non-empty)               | unsupported_parameter                                                               |
 * | presence_penalty / frequency_penalty | non-zero -> unsupported_parameter; 0 dropped                                        |
 * | reasoning_effort                     | 'none' dropped; other values -> unsupported_parameter (no faithful thinking budget) |
 * | verbosity                            | 'medium' dropped; other values -> unsupported_parameter                            |
 * | modalities with audio, audio         | unsupported_parameter                                                               |
 * | web_search_options                   | unsupported_parameter                                                               |
 * | seed                                 | dropped (best-effort determinism only)                                              |
 * | prediction                           | dropped (a latency optimisation; output unchanged)                                  |
 * | store, metadata, service_tier,       | dropped (OpenAI platform features that do not change the completion)                |
 * |   prompt_cache_key/retention         |                                                                                     |
 * | any other field                      | dropped                                                                             |
 *
 * Known approximations: system/developer messages in the middle of the conversation are
 * hoisted into `system`; a trailing assistant message becomes an Anthropic prefill.
 */

import { TranslationError } from '../errors.js';
import { isObject } from '../json.js';
import {
  DEFAULT_ANTHROPIC_MAX_TOKENS,
  TurnBuilder,
  functionTool,
  imageBlock,
  invalid,
  parseArguments,
  pdfBlock,
  systemField,
  unsupported,
} from '../anthropic-input.js';
import type {
  AnthropicContentBlockParam,
  AnthropicDocumentBlockParam,
  AnthropicMessageParam,
  AnthropicMessagesRequest,
  AnthropicTextBlockParam,
  AnthropicTool,
  AnthropicToolChoice,
  AnthropicToolResultBlockParam,
} from '../anthropic/types.js';
import type { OpenAIChatRequest, OpenAIMessage, OpenAITextPart, OpenAITool, OpenAIToolChoice } from './types.js';

/** Anthropic requires max_tokens; used when the OpenAI request sets neither max_tokens nor max_completion_tokens. */
export { DEFAULT_ANTHROPIC_MAX_TOKENS };

export interface OpenAIRequestToAnthropicOptions {
  /** The upstream model name to send. */
  model: string;
  /** Overrides DEFAULT_ANTHROPIC_MAX_TOKENS. */
  defaultMaxTokens?: number;
}

export function openaiRequestToAnthropic(
  req: OpenAIChatRequest,
  options: OpenAIRequestToAnthropicOptions,
): AnthropicMessagesRequest {
  if (!isObject(req)) throw invalid(null, 'request body must be a JSON object');
  rejectUnsupported(req);

  const { system, messages } = translateMessages(req.messages);
  const out: AnthropicMessagesRequest = {
    model: options.model,
    max_tokens: maxTokens(req, options.defaultMaxTokens ?? DEFAULT_ANTHROPIC_MAX_TOKENS),
    messages,
  };
  if (system !== undefined) out.system = system;

  if (req.temperature != null) {
    if (typeof req.temperature !== 'number') throw invalid('temperature', 'temperature must be a number');
    if (req.temperature > 1) {
      throw new TranslationError('unsupported_parameter', 'temperature above 1 has no equivalent in the Anthropic Messages API (range 0..1)', 'temperature');
    }
    out.temperature = req.temperature;
  }
  if (req.top_p != null) out.top_p = req.top_p;

  const stop = stopSequences(req.stop);
  if (stop !== undefined) out.stop_sequences = stop;
  if (req.stream === true) out.stream = true;

  const userId = typeof req.user === 'string' && req.user !== '' ? req.user : req.safety_identifier;
  if (typeof userId === 'string' && userId !== '') out.metadata = { user_id: userId };

  if (req.tools !== undefined && req.tools !== null) {
    if (!Array.isArray(req.tools)) throw invalid('tools', 'tools must be an array');
    if (req.tools.length > 0) out.tools = req.tools.map(translateTool);
  }
  const choice = toolChoice(req.tool_choice, req.parallel_tool_calls);
  if (choice !== undefined) out.tool_choice = choice;

  const rf = req.response_format;
  if (rf != null && rf.type === 'json_schema') {
    const schema = isObject(rf.json_schema) ? rf.json_schema.schema : undefined;
    if (!isObject(schema)) throw invalid('response_format.json_schema.schema', 'response_format json_schema needs a schema');
    out.output_config = { format: { type: 'json_schema', schema } };
  }
  return out;
}

function rejectUnsupported(req: OpenAIChatRequest): void {
  if (req.n != null && req.n !== 1) throw unsupported('n', 'n other than 1');
  if (req.logprobs === true) throw unsupported('logprobs', 'logprobs');
  if (req.top_logprobs != null && req.top_logprobs > 0) throw unsupported('top_logprobs', 'top_logprobs');
  if (req.logit_bias != null && Object.keys(req.logit_bias).length > 0) throw unsupported('logit_bias', 'logit_bias');
  if (req.presence_penalty != null && req.presence_penalty !== 0) throw unsupported('presence_penalty', 'presence_penalty');
  if (req.frequency_penalty != null && req.frequency_penalty !== 0) throw unsupported('frequency_penalty', 'frequency_penalty');
  if (req.reasoning_effort != null && req.reasoning_effort !== 'none') throw unsupported('reasoning_effort', 'reasoning_effort');
  if (req.verbosity != null && req.verbosity !== 'medium') throw unsupported('verbosity', 'verbosity');
  if (Array.isArray(req.modalities) && req.modalities.includes('audio')) throw unsupported('modalities', 'audio output');
  if (req.audio != null) throw unsupported('audio', 'audio output');
  if (req.web_search_options != null) throw unsupported('web_search_options', 'web_search_options');
  if (req.functions != null) throw unsupported('functions', 'the deprecated functions parameter');
  if (req.function_call != null) throw unsupported('function_call', 'the deprecated function_call parameter');
  const rf = req.response_format;
  if (rf != null) {
    if (!isObject(rf)) throw invalid('response_format', 'response_format must be an object');
    if (rf.type === 'json_object') throw unsupported('response_format', 'response_format json_object');
    if (rf.type !== 'text' && rf.type !== 'json_schema') throw unsupported('response_format', `response_format ${String((rf as { type: unknown }).type)}`);
  }
}

function maxTokens(req: OpenAIChatRequest, fallback: number): number {
  const param = req.max_completion_tokens != null ? 'max_completion_tokens' : req.max_tokens != null ? 'max_tokens' : null;
  if (param === null) return fallback;
  const v = req[param];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw invalid(param, `${param} must be a positive integer`);
  return v;
}

function stopSequences(stop: OpenAIChatRequest['stop']): string[] | undefined {
  if (stop == null) return undefined;
  if (typeof stop === 'string') return stop === '' ? undefined : [stop];
  if (!Array.isArray(stop) || stop.some((s) => typeof s !== 'string')) throw invalid('stop', 'stop must be a string or an array of strings');
  return stop.length > 0 ? stop.slice() : undefined;
}

// ---------------------------------------------------------------- tools

function translateTool(tool: OpenAITool, i: number): AnthropicTool {
  if (!isObject(tool)) throw invalid(`tools[${i}]`, 'tool must be an object');
  if (tool.type !== 'function') throw unsupported(`tools[${i}].type`, `tool type ${String(tool.type)}`);
  const fn = tool.function;
  if (!isObject(fn)) throw invalid(`tools[${i}].function.name`, 'function tools need a name');
  return functionTool(fn, `tools[${i}].function`);
}

function toolChoice(choice: OpenAIToolChoice | undefined, parallel: boolean | undefined): AnthropicToolChoice | undefined {
  const noParallel = parallel === false;
  if (choice == null) return noParallel ? { type: 'auto', disable_parallel_tool_use: true } : undefined;
  let out: AnthropicToolChoice;
  if (choice === 'auto') out = { type: 'auto' };
  else if (choice === 'none') return { type: 'none' };
  else if (choice === 'required') out = { type: 'any' };
  else if (isObject(choice) && choice.type === 'function') {
    const name = isObject(choice.function) ? choice.function.name : undefined;
    if (typeof name !== 'string' || name === '') throw invalid('tool_choice.function.name', 'tool_choice function needs a name');
    out = { type: 'tool', name };
  } else if (isObject(choice) && (choice.type === 'allowed_tools' || choice.type === 'custom')) {
    throw unsupported('tool_choice', `tool_choice ${choice.type}`);
  } else {
    throw invalid('tool_choice', 'tool_choice must be auto, none, required or a function choice');
  }
  if (noParallel) out.disable_parallel_tool_use = true;
  return out;
}

// ---------------------------------------------------------------- messages

interface Translated {
  system: string | AnthropicTextBlockParam[] | undefined;
  messages: AnthropicMessageParam[];
}

function translateMessages(messages: OpenAIMessage[]): Translated {
  if (!Array.isArray(messages) || messages.length === 0) throw invalid('messages', 'messages must be a non-empty array');
  const system: AnthropicTextBlockParam[] = [];
  const turns = new TurnBuilder();
  const add = (role: 'user' | 'assistant', blocks: AnthropicContentBlockParam[]): void => turns.add(role, blocks);

  for (let i = 0; i < messages.length; i++) {
    const msg = messages[i];
    const at = `messages[${i}]`;
    if (!isObject(msg)) throw invalid(at, 'message must be an object');
    switch (msg.role) {
      case 'system':
      case 'developer':
        for (const text of textParts(msg.content, `${at}.content`)) if (text !== '') system.push({ type: 'text', text });
        break;
      case 'user':
        add('user', userBlocks(msg.content, `${at}.content`));
        break;
      case 'assistant': {
        if (msg.function_call != null) throw unsupported(`${at}.function_call`, 'the deprecated function_call');
        if (msg.audio != null) throw unsupported(`${at}.audio`, 'assistant audio');
        const blocks: AnthropicContentBlockParam[] = [];
        const content = msg.content;
        if (typeof content === 'string') {
          if (content !== '') blocks.push({ type: 'text', text: content });
        } else if (Array.isArray(content)) {
          for (let j = 0; j < content.length; j++) {
            const part = content[j];
            if (!isObject(part)) throw invalid(`${at}.content[${j}]`, 'content part must be an object');
            const text = part.type === 'text' ? part.text : part.type === 'refusal' ? part.refusal : undefined;
            if (typeof text !== 'string') throw unsupported(`${at}.content[${j}].type`, `assistant content part ${String(part.type)}`);
            if (text !== '') blocks.push({ type: 'text', text });
          }
        } else if (content != null) throw invalid(`${at}.content`, 'content must be a string, an array or null');
        if (typeof msg.refusal === 'string' && msg.refusal !== '') blocks.push({ type: 'text', text: msg.refusal });
        if (msg.tool_calls != null) {
          if (!Array.isArray(msg.tool_calls)) throw invalid(`${at}.tool_calls`, 'tool_calls must be an array');
          for (let j = 0; j < msg.tool_calls.length; j++) {
            const tc = msg.tool_calls[j];
            const tat = `${at}.tool_calls[${j}]`;
            if (!isObject(tc)) throw invalid(tat, 'tool call must be an object');
            if (tc.type !== 'function') throw unsupported(`${tat}.type`, `tool call type ${String(tc.type)}`);
            if (typeof tc.id !== 'string' || tc.id === '') throw invalid(`${tat}.id`, 'tool call needs an id');
            const fn = tc.function;
            if (!isObject(fn) || typeof fn.name !== 'string') throw invalid(`${tat}.function.name`, 'tool call needs a function name');
            blocks.push({ type: 'tool_use', id: tc.id, name: fn.name, input: parseArguments(fn.arguments, `${tat}.function.arguments`) });
          }
        }
        add('assistant', blocks);
        break;
      }
      case 'tool': {
        if (typeof msg.tool_call_id !== 'string' || msg.tool_call_id === '') throw invalid(`${at}.tool_call_id`, 'tool message needs tool_call_id');
        const block: AnthropicToolResultBlockParam = { type: 'tool_result', tool_use_id: msg.tool_call_id };
        if (typeof msg.content === 'string') block.content = msg.content;
        else {
          const texts = textParts(msg.content, `${at}.content`);
          block.content = texts.map((text): AnthropicTextBlockParam => ({ type: 'text', text }));
        }
        add('user', [block]);
        break;
      }
      case 'function':
        throw unsupported(`${at}.role`, 'the deprecated function role');
      default:
        throw invalid(`${at}.role`, `unknown role ${String((msg as { role: unknown }).role)}`);
    }
  }

  return { system: systemField(system), messages: turns.messages() };
}

/** Strings of a string-or-text-parts content (system, developer, tool). */
function textParts(content: string | OpenAITextPart[], at: string): string[] {
  if (typeof content === 'string') return [content];
  if (!Array.isArray(content)) throw invalid(at, 'content must be a string or an array of text parts');
  const out: string[] = [];
  for (let j = 0; j < content.length; j++) {
    const part = content[j];
    if (!isObject(part) || part.type !== 'text' || typeof part.text !== 'string') {
      throw unsupported(`${at}[${j}]`, 'a non-text content part in this message role');
    }
    out.push(part.text);
  }
  return out;
}

function userBlocks(content: OpenAIMessage['content'], at: string): AnthropicContentBlockParam[] {
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }];
  if (!Array.isArray(content)) throw invalid(at, 'content must be a string or an array of content parts');
  const out: AnthropicContentBlockParam[] = [];
  for (let j = 0; j < content.length; j++) {
    const part = content[j];
    const pat = `${at}[${j}]`;
    if (!isObject(part)) throw invalid(pat, 'content part must be an object');
    switch (part.type) {
      case 'text':
        if (typeof part.text !== 'string') throw invalid(`${pat}.text`, 'text part needs text');
        if (part.text !== '') out.push({ type: 'text', text: part.text });
        break;
      case 'image_url': {
        const url = isObject(part.image_url) ? part.image_url.url : undefined;
        if (typeof url !== 'string') throw invalid(`${pat}.image_url.url`, 'image_url part needs a url');
        out.push(imageBlock(url, `${pat}.image_url.url`));
        break;
      }
      case 'file':
        out.push(fileBlock(part.file, `${pat}.file`));
        break;
      case 'input_audio':
        throw unsupported(pat, 'audio input');
      default:
        throw unsupported(`${pat}.type`, `content part ${String((part as { type: unknown }).type)}`);
    }
  }
  return out;
}

function fileBlock(file: unknown, at: string): AnthropicDocumentBlockParam {
  if (!isObject(file)) throw invalid(at, 'file part needs a file object');
  if (typeof file.file_data !== 'string') throw unsupported(at, 'a file part without file_data (file_id)');
  return pdfBlock(file.file_data, file.filename, `${at}.file_data`);
}
