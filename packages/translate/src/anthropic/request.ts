/**
 * Anthropic Messages request -> OpenAI Chat Completions request.
 *
 * | Anthropic field                     | OpenAI result / decision                                                            |
 * | ----------------------------------- | ----------------------------------------------------------------------------------- |
 * | model                               | replaced by `options.model` (the gateway picks the upstream model)                  |
 * | system (string / text blocks)       | first message, role system (string if one text, else text parts); cache_control dropped |
 * | user text / image / document blocks | user message (string if one text, else parts)                                       |
 * | image source base64 / url           | image_url part with a data: URL / the URL                                           |
 * | document: base64 PDF                | file part {file_data: data URL, filename: title or 'document.pdf'}                  |
 * | document: plain text source         | text part (title and context dropped)                                               |
 * | document: url/content source, citations enabled | unsupported_parameter                                                   |
 * | user tool_result blocks             | tool messages (tool_use_id -> tool_call_id), placed before the rest of that user turn |
 * | tool_result image content           | unsupported_parameter (tool messages are text-only)                                 |
 * | tool_result is_error                | dropped (no equivalent; the content is kept)                                        |
 * | assistant text blocks               | assistant content, concatenated                                                     |
 * | assistant tool_use blocks           | tool_calls (arguments = JSON.stringify(input))                                      |
 * | thinking / redacted_thinking blocks | dropped (no way to send them back)                                                  |
 * | server-tool blocks, other blocks    | unsupported_parameter                                                               |
 * | tools (custom)                      | function tools {name, description, parameters: input_schema, strict}               |
 * | tools (server tools: web search...) | unsupported_parameter                                                               |
 * | tool_choice auto/any/tool/none      | 'auto' / 'required' / {type:'function',function:{name}} / 'none'                    |
 * | disable_parallel_tool_use: true     | parallel_tool_calls: false                                                          |
 * | stop_sequences                      | stop (array)                                                                        |
 * | max_tokens                          | max_tokens (kept as max_tokens: OpenAI-compatible servers accept it)                |
 * | temperature, top_p                  | same                                                                                |
 * | top_k                               | unsupported_parameter                                                               |
 * | stream: true                        | stream: true and ALWAYS stream_options {include_usage: true} (usage capture)        |
 * | metadata.user_id                    | user                                                                                |
 * | thinking enabled / adaptive         | unsupported_parameter ('disabled' is dropped)                                        |
 * | output_config.format json_schema    | response_format {type:'json_schema', json_schema:{name:'response', schema, strict:true}} |
 * | output_config.effort                | unsupported_parameter                                                               |
 * | container, mcp_servers, context_management | unsupported_parameter                                                        |
 * | service_tier, cache_control, any other field | dropped                                                                    |
 */

import { TranslationError } from '../errors.js';
import { isObject } from '../json.js';
import type {
  OpenAIAssistantMessage,
  OpenAIChatRequest,
  OpenAIFunctionTool,
  OpenAIMessage,
  OpenAITextPart,
  OpenAIToolCall,
  OpenAIToolChoice,
  OpenAIUserContentPart,
} from '../openai/types.js';
import type {
  AnthropicContentBlockParam,
  AnthropicMessageParam,
  AnthropicMessagesRequest,
  AnthropicServerTool,
  AnthropicTool,
  AnthropicToolChoice,
} from './types.js';

export interface AnthropicRequestToOpenAIOptions {
  /** The upstream model name to send. */
  model: string;
}

function unsupported(param: string, what: string): TranslationError {
  return new TranslationError('unsupported_parameter', `${what} has no equivalent in the OpenAI Chat Completions API`, param);
}

function invalid(param: string | null, message: string): TranslationError {
  return new TranslationError('invalid_request', message, param);
}

export function anthropicRequestToOpenAI(req: AnthropicMessagesRequest, options: AnthropicRequestToOpenAIOptions): OpenAIChatRequest {
  if (!isObject(req)) throw invalid(null, 'request body must be a JSON object');
  if (req.top_k != null) throw unsupported('top_k', 'top_k');
  if (req.thinking != null && isObject(req.thinking) && req.thinking.type !== 'disabled') throw unsupported('thinking', 'extended thinking');
  if (req.container != null) throw unsupported('container', 'container');
  if (req.mcp_servers != null && (!Array.isArray(req.mcp_servers) || req.mcp_servers.length > 0)) throw unsupported('mcp_servers', 'mcp_servers');
  if (req.context_management != null) throw unsupported('context_management', 'context_management');
  if (req.output_config?.effort != null) throw unsupported('output_config.effort', 'output_config.effort');

  const messages: OpenAIMessage[] = [];
  const system = systemMessage(req.system);
  if (system !== null) messages.push(system);
  if (!Array.isArray(req.messages) || req.messages.length === 0) throw invalid('messages', 'messages must be a non-empty array');
  for (let i = 0; i < req.messages.length; i++) translateMessage(req.messages[i], `messages[${i}]`, messages);

  const out: OpenAIChatRequest = { model: options.model, messages };
  if (req.max_tokens == null) throw invalid('max_tokens', 'max_tokens is required');
  if (typeof req.max_tokens !== 'number' || !Number.isInteger(req.max_tokens) || req.max_tokens < 1) {
    throw invalid('max_tokens', 'max_tokens must be a positive integer');
  }
  out.max_tokens = req.max_tokens;
  if (req.temperature != null) out.temperature = req.temperature;
  if (req.top_p != null) out.top_p = req.top_p;
  if (req.stop_sequences != null) {
    if (!Array.isArray(req.stop_sequences) || req.stop_sequences.some((s) => typeof s !== 'string')) {
      throw invalid('stop_sequences', 'stop_sequences must be an array of strings');
    }
    if (req.stop_sequences.length > 0) out.stop = req.stop_sequences.slice();
  }
  if (req.stream === true) {
    out.stream = true;
    out.stream_options = { include_usage: true };
  }
  const userId = req.metadata?.user_id;
  if (typeof userId === 'string' && userId !== '') out.user = userId;

  if (req.tools != null) {
    if (!Array.isArray(req.tools)) throw invalid('tools', 'tools must be an array');
    if (req.tools.length > 0) out.tools = req.tools.map(translateTool);
  }
  if (req.tool_choice != null) {
    const { choice, parallel } = toolChoice(req.tool_choice);
    out.tool_choice = choice;
    if (parallel === false) out.parallel_tool_calls = false;
  }
  const format = req.output_config?.format;
  if (format != null) {
    if (!isObject(format) || format.type !== 'json_schema' || !isObject(format.schema)) {
      throw invalid('output_config.format', 'output_config.format must be {type:"json_schema", schema}');
    }
    out.response_format = { type: 'json_schema', json_schema: { name: 'response', schema: format.schema, strict: true } };
  }
  return out;
}

function systemMessage(system: AnthropicMessagesRequest['system']): OpenAIMessage | null {
  if (system == null) return null;
  if (typeof system === 'string') return system === '' ? null : { role: 'system', content: system };
  if (!Array.isArray(system)) throw invalid('system', 'system must be a string or an array of text blocks');
  const parts: OpenAITextPart[] = [];
  for (let i = 0; i < system.length; i++) {
    const b = system[i];
    if (!isObject(b) || b.type !== 'text' || typeof b.text !== 'string') throw invalid(`system[${i}]`, 'system blocks must be text blocks');
    if (b.text !== '') parts.push({ type: 'text', text: b.text });
  }
  if (parts.length === 0) return null;
  return { role: 'system', content: parts.length === 1 ? parts[0]!.text : parts };
}

function translateMessage(msg: AnthropicMessageParam | undefined, at: string, out: OpenAIMessage[]): void {
  if (!isObject(msg)) throw invalid(at, 'message must be an object');
  const content = msg.content;
  if (msg.role === 'user') {
    if (typeof content === 'string') {
      out.push({ role: 'user', content });
      return;
    }
    if (!Array.isArray(content)) throw invalid(`${at}.content`, 'content must be a string or an array of blocks');
    const parts: OpenAIUserContentPart[] = [];
    for (let j = 0; j < content.length; j++) {
      const block = content[j];
      const bat = `${at}.content[${j}]`;
      if (!isObject(block)) throw invalid(bat, 'content block must be an object');
      if (block.type === 'tool_result') out.push(toolMessage(block, bat));
      else userPart(block, bat, parts);
    }
    if (parts.length > 0) {
      const only = parts.length === 1 ? parts[0] : undefined;
      out.push({ role: 'user', content: only !== undefined && only.type === 'text' ? only.text : parts });
    }
    return;
  }
  if (msg.role === 'assistant') {
    if (typeof content === 'string') {
      out.push({ role: 'assistant', content });
      return;
    }
    if (!Array.isArray(content)) throw invalid(`${at}.content`, 'content must be a string or an array of blocks');
    let text = '';
    let hasText = false;
    const calls: OpenAIToolCall[] = [];
    for (let j = 0; j < content.length; j++) {
      const block = content[j];
      const bat = `${at}.content[${j}]`;
      if (!isObject(block)) throw invalid(bat, 'content block must be an object');
      switch (block.type) {
        case 'text':
          if (typeof block.text !== 'string') throw invalid(`${bat}.text`, 'text block needs text');
          text += block.text;
          hasText = true;
          break;
        case 'tool_use':
          if (typeof block.id !== 'string' || typeof block.name !== 'string') throw invalid(bat, 'tool_use block needs id and name');
          calls.push({ id: block.id, type: 'function', function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) } });
          break;
        case 'thinking':
        case 'redacted_thinking':
          break;
        default:
          throw unsupported(`${bat}.type`, `assistant content block ${String((block as { type: unknown }).type)}`);
      }
    }
    const m: OpenAIAssistantMessage = { role: 'assistant', content: hasText || calls.length === 0 ? text : null };
    if (calls.length > 0) m.tool_calls = calls;
    out.push(m);
    return;
  }
  throw invalid(`${at}.role`, `unknown role ${String((msg as { role: unknown }).role)}`);
}

function userPart(block: AnthropicContentBlockParam, at: string, parts: OpenAIUserContentPart[]): void {
  switch (block.type) {
    case 'text':
      if (typeof block.text !== 'string') throw invalid(`${at}.text`, 'text block needs text');
      parts.push({ type: 'text', text: block.text });
      return;
    case 'image': {
      const src = block.source;
      if (isObject(src) && src.type === 'base64' && typeof src.data === 'string' && typeof src.media_type === 'string') {
        parts.push({ type: 'image_url', image_url: { url: `data:${src.media_type};base64,${src.data}` } });
      } else if (isObject(src) && src.type === 'url' && typeof src.url === 'string') {
        parts.push({ type: 'image_url', image_url: { url: src.url } });
      } else throw unsupported(`${at}.source`, 'this image source');
      return;
    }
    case 'document': {
      if (isObject(block.citations) && block.citations.enabled === true) throw unsupported(`${at}.citations`, 'document citations');
      const src = block.source;
      if (isObject(src) && src.type === 'base64' && src.media_type === 'application/pdf' && typeof src.data === 'string') {
        const filename = typeof block.title === 'string' && block.title !== '' ? block.title : 'document.pdf';
        parts.push({ type: 'file', file: { file_data: `data:application/pdf;base64,${src.data}`, filename } });
      } else if (isObject(src) && src.type === 'text' && typeof src.data === 'string') {
        parts.push({ type: 'text', text: src.data });
      } else throw unsupported(`${at}.source`, 'this document source');
      return;
    }
    default:
      throw unsupported(`${at}.type`, `user content block ${String(block.type)}`);
  }
}

function toolMessage(block: AnthropicContentBlockParam, at: string): OpenAIMessage {
  if (block.type !== 'tool_result') throw invalid(at, 'expected a tool_result block');
  if (typeof block.tool_use_id !== 'string' || block.tool_use_id === '') throw invalid(`${at}.tool_use_id`, 'tool_result needs tool_use_id');
  const c = block.content;
  if (c == null) return { role: 'tool', tool_call_id: block.tool_use_id, content: '' };
  if (typeof c === 'string') return { role: 'tool', tool_call_id: block.tool_use_id, content: c };
  if (!Array.isArray(c)) throw invalid(`${at}.content`, 'tool_result content must be a string or an array of blocks');
  const parts: OpenAITextPart[] = [];
  for (let k = 0; k < c.length; k++) {
    const b = c[k];
    if (isObject(b) && b.type === 'text' && typeof b.text === 'string') parts.push({ type: 'text', text: b.text });
    else if (isObject(b) && b.type === 'document' && isObject(b.source) && b.source.type === 'text' && typeof b.source.data === 'string') {
      parts.push({ type: 'text', text: b.source.data });
    } else throw unsupported(`${at}.content[${k}]`, 'non-text tool_result content');
  }
  return { role: 'tool', tool_call_id: block.tool_use_id, content: parts.length === 1 ? parts[0]!.text : parts };
}

function isCustomTool(tool: AnthropicTool | AnthropicServerTool): tool is AnthropicTool {
  return (tool.type == null || tool.type === 'custom') && isObject(tool.input_schema);
}

function translateTool(tool: AnthropicTool | AnthropicServerTool, i: number): OpenAIFunctionTool {
  if (!isObject(tool)) throw invalid(`tools[${i}]`, 'tool must be an object');
  if (!isCustomTool(tool)) throw unsupported(`tools[${i}]`, `server tool ${String(tool.type)}`);
  if (typeof tool.name !== 'string' || tool.name === '') throw invalid(`tools[${i}].name`, 'tool needs a name');
  const fn: OpenAIFunctionTool['function'] = { name: tool.name, parameters: tool.input_schema };
  if (typeof tool.description === 'string' && tool.description !== '') fn.description = tool.description;
  if (tool.strict === true) fn.strict = true;
  return { type: 'function', function: fn };
}

function toolChoice(choice: AnthropicToolChoice): { choice: OpenAIToolChoice; parallel: boolean | undefined } {
  if (!isObject(choice)) throw invalid('tool_choice', 'tool_choice must be an object');
  const parallel = 'disable_parallel_tool_use' in choice && choice.disable_parallel_tool_use === true ? false : undefined;
  switch (choice.type) {
    case 'auto':
      return { choice: 'auto', parallel };
    case 'any':
      return { choice: 'required', parallel };
    case 'none':
      return { choice: 'none', parallel: undefined };
    case 'tool':
      if (typeof choice.name !== 'string' || choice.name === '') throw invalid('tool_choice.name', 'tool_choice tool needs a name');
      return { choice: { type: 'function', function: { name: choice.name } }, parallel };
    default:
      throw invalid('tool_choice.type', `unknown tool_choice type ${String((choice as { type: unknown }).type)}`);
  }
}
