/**
 * OpenAI Responses request (`POST /v1/responses`) -> Anthropic Messages request.
 *
 * Field by field (Responses field -> what happens):
 *
 * | Responses field                       | Anthropic result / decision                                                      |
 * | ------------------------------------- | -------------------------------------------------------------------------------- |
 * | model                                 | replaced by `options.model` (the gateway picks the upstream model)               |
 * | instructions                          | first text of top-level `system`                                                 |
 * | input (string)                        | one user message                                                                 |
 * | input message system / developer      | hoisted into `system` after `instructions`, in order                             |
 * | input message user                    | user turn: input_text -> text, input_image -> image, input_file -> document      |
 * | input message assistant               | assistant turn: output_text / input_text / refusal -> text                       |
 * | input function_call                   | tool_use block {id: call_id, name, input: parsed arguments} in an assistant turn |
 * | input function_call_output            | tool_result block {tool_use_id: call_id, content} in a user turn                 |
 * | consecutive items of one role         | merged into one message (Anthropic needs alternation): several function_call     |
 * |                                       | items -> one assistant message with several tool_use blocks, and their outputs   |
 * |                                       | -> one user message with several tool_result blocks                              |
 * | input reasoning                       | dropped (see below)                                                              |
 * | input item_reference                  | unsupported_parameter (refers to state stored by OpenAI)                         |
 * | other input item types                | unsupported_parameter (hosted-tool calls and their outputs)                      |
 * | input_image image_url                 | data: URL (JPEG/PNG/GIF/WebP) -> base64 source, http(s) -> url source; detail dropped |
 * | input_image file_id                   | unsupported_parameter (OpenAI Files API)                                         |
 * | input_file file_data (PDF data URL)   | document with base64 PDF source (filename -> title); other types unsupported     |
 * | input_file file_url                   | document with url source                                                         |
 * | input_file file_id                    | unsupported_parameter                                                            |
 * | tools type function                   | {name, description, input_schema: parameters (type object added), strict if true} |
 * | tools of any other type               | unsupported_parameter (web_search, file_search, computer, mcp, custom, ...)      |
 * | tool_choice auto/none/required        | {type:auto} / {type:none} / {type:any}; auto and none dropped when no tools      |
 * | tool_choice {type:function, name}     | {type:tool, name}                                                                |
 * | tool_choice of any other type         | unsupported_parameter (allowed_tools, hosted tools, custom, mcp)                 |
 * | parallel_tool_calls: false            | tool_choice.disable_parallel_tool_use = true (auto when no tool_choice)         |
 * | max_output_tokens                     | max_tokens; absent -> DEFAULT_ANTHROPIC_MAX_TOKENS (Anthropic requires it)       |
 * | temperature                           | temperature; > 1 -> unsupported_parameter (Anthropic's range is 0..1)            |
 * | top_p                                 | top_p                                                                            |
 * | stream                                | stream                                                                           |
 * | text.format text                      | nothing                                                                          |
 * | text.format json_schema               | output_config.format {type:'json_schema', schema} (Anthropic structured outputs) |
 * | text.format json_object               | unsupported_parameter (no schema-less JSON mode)                                 |
 * | text.verbosity                        | 'medium' dropped; other values unsupported_parameter                             |
 * | reasoning.effort                      | 'none' dropped; other values unsupported_parameter (as reasoning_effort in chat: |
 * |                                       | no faithful mapping to a thinking budget)                                        |
 * | user (else safety_identifier)         | metadata.user_id                                                                 |
 * | top_logprobs > 0, include logprobs    | unsupported_parameter                                                            |
 * | previous_response_id, conversation    | unsupported_parameter: the provider keeps no state; send the whole conversation  |
 * | store: true                           | unsupported_parameter (see below)                                                |
 * | background: true                      | unsupported_parameter (needs stored state to poll)                               |
 * | prompt                                | unsupported_parameter (a template stored by OpenAI)                              |
 * | metadata, service_tier, truncation,   | dropped (platform features that do not change the completion; truncation 'auto' |
 * |   prompt_cache_*, max_tool_calls,     |   only acts on overflow, where Anthropic answers 400 instead; max_tool_calls      |
 * |   stream_options, other include values|   limits hosted tools, which are refused)                                        |
 * | any other field                       | dropped                                                                          |
 *
 * `store`: OpenAI's default is `store: true`, but clients rarely mean it (the official SDKs
 * leave it out; agents that replay their history send `store: false`). An absent `store` is
 * therefore accepted and answered as not stored (the response says `store: false`); only an
 * explicit `store: true`, which asks for something this provider cannot do, is refused.
 *
 * Reasoning items in `input` are dropped: this translation never enables Anthropic's
 * extended thinking (reasoning.effort is refused), and Anthropic only needs earlier thinking
 * blocks back when thinking is on. Their encrypted content, if any, is OpenAI's and would not
 * pass Anthropic's signature check anyway.
 *
 * Known approximations (as in the chat translation): system/developer messages in the
 * middle of the input are hoisted into `system`; a trailing assistant message becomes an
 * Anthropic prefill.
 */

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
  AnthropicImageBlockParam,
  AnthropicMessagesRequest,
  AnthropicTextBlockParam,
  AnthropicTool,
  AnthropicToolChoice,
  AnthropicToolResultBlockParam,
} from '../anthropic/types.js';
import { TranslationError } from '../errors.js';
import type { ResponsesRequest, ResponsesTool, ResponsesToolChoice } from './types.js';

export interface ResponsesRequestToAnthropicOptions {
  /** The upstream model name to send. */
  model: string;
  /** Overrides DEFAULT_ANTHROPIC_MAX_TOKENS (used when the request has no max_output_tokens). */
  defaultMaxTokens?: number;
}

/** A request that needs state the provider does not keep (answered with 400). */
function stateful(param: string, what: string): TranslationError {
  return new TranslationError(
    'unsupported_parameter',
    `${what} needs a provider that keeps responses; this model's provider (Anthropic Messages API) keeps no state, so send the whole conversation in input instead`,
    param,
  );
}

export function responsesRequestToAnthropic(req: ResponsesRequest, options: ResponsesRequestToAnthropicOptions): AnthropicMessagesRequest {
  if (!isObject(req)) throw invalid(null, 'request body must be a JSON object');
  rejectStateful(req);
  rejectUnsupported(req);

  const { system, turns } = translateInput(req);
  const out: AnthropicMessagesRequest = {
    model: options.model,
    max_tokens: maxTokens(req.max_output_tokens, options.defaultMaxTokens ?? DEFAULT_ANTHROPIC_MAX_TOKENS),
    messages: turns,
  };
  if (system !== undefined) out.system = system;

  if (req.temperature != null) {
    if (typeof req.temperature !== 'number') throw invalid('temperature', 'temperature must be a number');
    if (req.temperature > 1) {
      throw new TranslationError('unsupported_parameter', 'temperature above 1 has no equivalent in the Anthropic Messages API (range 0..1)', 'temperature');
    }
    out.temperature = req.temperature;
  }
  if (req.top_p != null) {
    if (typeof req.top_p !== 'number') throw invalid('top_p', 'top_p must be a number');
    out.top_p = req.top_p;
  }
  if (req.stream === true) out.stream = true;

  const userId = typeof req.user === 'string' && req.user !== '' ? req.user : req.safety_identifier;
  if (typeof userId === 'string' && userId !== '') out.metadata = { user_id: userId };

  let tools: AnthropicTool[] = [];
  if (req.tools != null) {
    if (!Array.isArray(req.tools)) throw invalid('tools', 'tools must be an array');
    tools = req.tools.map(translateTool);
    if (tools.length > 0) out.tools = tools;
  }
  const choice = toolChoice(req.tool_choice, req.parallel_tool_calls, tools.length > 0);
  if (choice !== undefined) out.tool_choice = choice;

  const format = isObject(req.text) ? req.text.format : undefined;
  if (isObject(format) && format.type === 'json_schema') {
    if (!isObject(format.schema)) throw invalid('text.format.schema', 'text.format json_schema needs a schema');
    out.output_config = { format: { type: 'json_schema', schema: format.schema } };
  }
  return out;
}

function rejectStateful(req: ResponsesRequest): void {
  if (req.previous_response_id != null && req.previous_response_id !== '') throw stateful('previous_response_id', 'previous_response_id');
  if (req.conversation != null) throw stateful('conversation', 'conversation');
  if (req.store === true) throw stateful('store', 'store: true');
  if (req.background === true) throw stateful('background', 'background: true');
  if (req.prompt != null) throw stateful('prompt', 'a stored prompt');
}

function rejectUnsupported(req: ResponsesRequest): void {
  if (req.top_logprobs != null && req.top_logprobs > 0) throw unsupported('top_logprobs', 'top_logprobs');
  if (req.include != null) {
    if (!Array.isArray(req.include)) throw invalid('include', 'include must be an array');
    const i = req.include.indexOf('message.output_text.logprobs');
    if (i >= 0) throw unsupported(`include[${i}]`, 'logprobs');
  }
  const reasoning = req.reasoning;
  if (reasoning != null) {
    if (!isObject(reasoning)) throw invalid('reasoning', 'reasoning must be an object');
    if (reasoning.effort != null && reasoning.effort !== 'none') throw unsupported('reasoning.effort', 'reasoning.effort');
  }
  const text = req.text;
  if (text != null) {
    if (!isObject(text)) throw invalid('text', 'text must be an object');
    if (text.verbosity != null && text.verbosity !== 'medium') throw unsupported('text.verbosity', 'text.verbosity');
    const format = text.format;
    if (format != null) {
      if (!isObject(format)) throw invalid('text.format', 'text.format must be an object');
      if (format.type === 'json_object') throw unsupported('text.format', 'text.format json_object');
      if (format.type !== 'text' && format.type !== 'json_schema') throw unsupported('text.format', `text.format ${String((format as { type: unknown }).type)}`);
    }
  }
}

function maxTokens(v: unknown, fallback: number): number {
  if (v == null) return fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw invalid('max_output_tokens', 'max_output_tokens must be a positive integer');
  return v;
}

// ---------------------------------------------------------------- tools

function translateTool(tool: ResponsesTool, i: number): AnthropicTool {
  if (!isObject(tool)) throw invalid(`tools[${i}]`, 'tool must be an object');
  if (tool.type !== 'function') throw unsupported(`tools[${i}].type`, `tool type ${String(tool.type)}`);
  return functionTool(tool, `tools[${i}]`);
}

function toolChoice(choice: ResponsesToolChoice | null | undefined, parallel: boolean | null | undefined, haveTools: boolean): AnthropicToolChoice | undefined {
  // Without tools there is nothing to choose from: Anthropic refuses a tool_choice then, and
  // auto/none (what clients send by default) mean the same as no tool_choice at all.
  const noParallel = parallel === false && haveTools;
  if (choice == null) return noParallel ? { type: 'auto', disable_parallel_tool_use: true } : undefined;
  let out: AnthropicToolChoice;
  if (choice === 'auto') {
    if (!haveTools) return undefined;
    out = { type: 'auto' };
  } else if (choice === 'none') {
    return haveTools ? { type: 'none' } : undefined;
  } else if (choice === 'required') {
    out = { type: 'any' };
  } else if (isObject(choice) && choice.type === 'function') {
    if (typeof choice.name !== 'string' || choice.name === '') throw invalid('tool_choice.name', 'tool_choice function needs a name');
    out = { type: 'tool', name: choice.name };
  } else if (isObject(choice) && typeof choice.type === 'string') {
    throw unsupported('tool_choice', `tool_choice ${choice.type}`);
  } else {
    throw invalid('tool_choice', 'tool_choice must be auto, none, required or a function choice');
  }
  if (!haveTools) throw invalid('tool_choice', 'tool_choice requires tools');
  if (noParallel) out.disable_parallel_tool_use = true;
  return out;
}

// ---------------------------------------------------------------- input

interface Translated {
  system: string | AnthropicTextBlockParam[] | undefined;
  turns: AnthropicMessagesRequest['messages'];
}

function translateInput(req: ResponsesRequest): Translated {
  const system: AnthropicTextBlockParam[] = [];
  if (req.instructions != null) {
    if (typeof req.instructions !== 'string') throw invalid('instructions', 'instructions must be a string');
    if (req.instructions !== '') system.push({ type: 'text', text: req.instructions });
  }
  const turns = new TurnBuilder();
  const input = req.input;
  if (typeof input === 'string') {
    if (input !== '') turns.add('user', [{ type: 'text', text: input }]);
  } else if (Array.isArray(input)) {
    for (let i = 0; i < input.length; i++) translateItem(input[i], `input[${i}]`, system, turns);
  } else {
    throw invalid('input', 'input must be a string or an array of input items');
  }
  if (turns.length === 0) throw invalid('input', 'input must contain at least one user or assistant message');
  return { system: systemField(system), turns: turns.messages() };
}

function translateItem(item: unknown, at: string, system: AnthropicTextBlockParam[], turns: TurnBuilder): void {
  if (!isObject(item)) throw invalid(at, 'input item must be an object');
  // The SDK's EasyInputMessage has no `type`: a role makes it a message.
  const type = item.type ?? (item.role !== undefined ? 'message' : undefined);
  switch (type) {
    case 'message':
      translateMessage(item, at, system, turns);
      return;
    case 'function_call': {
      const callId = item.call_id;
      if (typeof callId !== 'string' || callId === '') throw invalid(`${at}.call_id`, 'function_call needs a call_id');
      if (typeof item.name !== 'string' || item.name === '') throw invalid(`${at}.name`, 'function_call needs a name');
      turns.add('assistant', [{ type: 'tool_use', id: callId, name: item.name, input: parseArguments(item.arguments, `${at}.arguments`) }]);
      return;
    }
    case 'function_call_output': {
      const callId = item.call_id;
      if (typeof callId !== 'string' || callId === '') throw invalid(`${at}.call_id`, 'function_call_output needs a call_id');
      const block: AnthropicToolResultBlockParam = { type: 'tool_result', tool_use_id: callId };
      const output = item.output;
      if (typeof output === 'string') block.content = output;
      else if (Array.isArray(output)) block.content = inputParts(output, `${at}.output`);
      else throw invalid(`${at}.output`, 'function_call_output output must be a string or an array of content parts');
      turns.add('user', [block]);
      return;
    }
    case 'reasoning':
      // Dropped: see the module comment.
      return;
    case 'item_reference':
      throw stateful(at, 'an item_reference');
    default:
      throw unsupported(`${at}.type`, `input item type ${String(type)}`);
  }
}

function translateMessage(msg: Record<string, unknown>, at: string, system: AnthropicTextBlockParam[], turns: TurnBuilder): void {
  const content = msg.content;
  const cat = `${at}.content`;
  switch (msg.role) {
    case 'system':
    case 'developer':
      for (const text of texts(content, cat, ['input_text'])) if (text !== '') system.push({ type: 'text', text });
      return;
    case 'user':
      if (typeof content === 'string') turns.add('user', content === '' ? [] : [{ type: 'text', text: content }]);
      else if (Array.isArray(content)) turns.add('user', inputParts(content, cat));
      else throw invalid(cat, 'content must be a string or an array of content parts');
      return;
    case 'assistant': {
      const blocks: AnthropicContentBlockParam[] = [];
      for (const text of texts(content, cat, ['output_text', 'input_text', 'refusal'])) if (text !== '') blocks.push({ type: 'text', text });
      turns.add('assistant', blocks);
      return;
    }
    default:
      throw invalid(`${at}.role`, `unknown role ${String(msg.role)}`);
  }
}

/** The texts of a string-or-parts content whose parts may only be of the given text types. */
function texts(content: unknown, at: string, allowed: readonly string[]): string[] {
  if (typeof content === 'string') return [content];
  if (!Array.isArray(content)) throw invalid(at, 'content must be a string or an array of content parts');
  const out: string[] = [];
  for (let j = 0; j < content.length; j++) {
    const part: unknown = content[j];
    const pat = `${at}[${j}]`;
    if (!isObject(part)) throw invalid(pat, 'content part must be an object');
    if (typeof part.type !== 'string' || !allowed.includes(part.type)) {
      throw unsupported(`${pat}.type`, `content part ${String(part.type)} in this message role`);
    }
    const text = part.type === 'refusal' ? part.refusal : part.text;
    if (typeof text !== 'string') throw invalid(pat, `${part.type} part needs its text`);
    out.push(text);
  }
  return out;
}

type InputBlock = AnthropicTextBlockParam | AnthropicImageBlockParam | AnthropicDocumentBlockParam;

/** input_text / input_image / input_file parts (user messages and tool outputs). */
function inputParts(parts: unknown[], at: string): InputBlock[] {
  const out: InputBlock[] = [];
  for (let j = 0; j < parts.length; j++) {
    const part = parts[j];
    const pat = `${at}[${j}]`;
    if (!isObject(part)) throw invalid(pat, 'content part must be an object');
    switch (part.type) {
      case 'input_text':
        if (typeof part.text !== 'string') throw invalid(`${pat}.text`, 'input_text part needs text');
        if (part.text !== '') out.push({ type: 'text', text: part.text });
        break;
      case 'input_image':
        if (typeof part.image_url === 'string') out.push(imageBlock(part.image_url, `${pat}.image_url`));
        else if (part.file_id != null) throw unsupported(`${pat}.file_id`, 'an image given by file_id (OpenAI Files API)');
        else throw invalid(`${pat}.image_url`, 'input_image part needs an image_url');
        break;
      case 'input_file':
        if (typeof part.file_data === 'string') out.push(pdfBlock(part.file_data, part.filename, `${pat}.file_data`));
        else if (typeof part.file_url === 'string' && /^https?:\/\//.test(part.file_url)) {
          const doc: AnthropicDocumentBlockParam = { type: 'document', source: { type: 'url', url: part.file_url } };
          if (typeof part.filename === 'string' && part.filename !== '') doc.title = part.filename;
          out.push(doc);
        } else if (part.file_id != null) throw unsupported(`${pat}.file_id`, 'a file given by file_id (OpenAI Files API)');
        else throw invalid(pat, 'input_file part needs file_data or an http(s) file_url');
        break;
      default:
        throw unsupported(`${pat}.type`, `content part ${String(part.type)}`);
    }
  }
  return out;
}
