/**
 * Building blocks of an Anthropic Messages request, shared by the two translators that
 * produce one: OpenAI Chat Completions (openai/request.ts) and OpenAI Responses
 * (responses/request.ts). Internal: not exported from the package.
 */

import { TranslationError } from './errors.js';
import { isObject } from './json.js';
import type {
  AnthropicContentBlockParam,
  AnthropicDocumentBlockParam,
  AnthropicImageBlockParam,
  AnthropicImageMediaType,
  AnthropicInputSchema,
  AnthropicMessageParam,
  AnthropicTextBlockParam,
  AnthropicTool,
} from './anthropic/types.js';

/** Anthropic requires max_tokens; used when the client's request gives no output limit. */
export const DEFAULT_ANTHROPIC_MAX_TOKENS = 4096;

const IMAGE_MEDIA_TYPES: ReadonlySet<string> = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);

export function unsupported(param: string, what: string): TranslationError {
  return new TranslationError('unsupported_parameter', `${what} has no equivalent in the Anthropic Messages API`, param);
}

export function invalid(param: string | null, message: string): TranslationError {
  return new TranslationError('invalid_request', message, param);
}

interface DataUrl {
  mediaType: string;
  data: string;
}

/** Splits `data:<media type>[;params];base64,<data>` without a regex (data URLs can be megabytes). */
function parseBase64DataUrl(url: string, at: string): DataUrl {
  const comma = url.indexOf(',');
  if (comma < 0) throw invalid(at, 'malformed data URL');
  const header = url.slice(5, comma);
  const semi = header.indexOf(';');
  const mediaType = (semi < 0 ? header : header.slice(0, semi)).trim().toLowerCase();
  if (semi < 0 || !header.slice(semi + 1).split(';').some((p) => p.trim().toLowerCase() === 'base64')) {
    throw invalid(at, 'only base64 data URLs are supported');
  }
  return { mediaType, data: url.slice(comma + 1) };
}

/** An image URL (base64 `data:` URL of JPEG/PNG/GIF/WebP, or http(s)) as an image block. */
export function imageBlock(url: string, at: string): AnthropicImageBlockParam {
  if (url.startsWith('data:')) {
    const { mediaType, data } = parseBase64DataUrl(url, at);
    if (!IMAGE_MEDIA_TYPES.has(mediaType)) throw unsupported(at, `image type ${mediaType}`);
    return { type: 'image', source: { type: 'base64', media_type: mediaType as AnthropicImageMediaType, data } };
  }
  if (url.startsWith('https://') || url.startsWith('http://')) return { type: 'image', source: { type: 'url', url } };
  throw invalid(at, 'image url must be a data: URL or an http(s) URL');
}

/** A base64 PDF data URL as a document block; other file types are unsupported. */
export function pdfBlock(dataUrl: string, filename: unknown, at: string): AnthropicDocumentBlockParam {
  if (!dataUrl.startsWith('data:')) throw invalid(at, 'file_data must be a base64 data URL');
  const { mediaType, data } = parseBase64DataUrl(dataUrl, at);
  if (mediaType !== 'application/pdf') throw unsupported(at, `file type ${mediaType}`);
  const out: AnthropicDocumentBlockParam = { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data } };
  if (typeof filename === 'string' && filename !== '') out.title = filename;
  return out;
}

/** Tool-call arguments -> tool_use input. '' means no arguments; anything but a JSON object is an error. */
export function parseArguments(args: unknown, at: string): Record<string, unknown> {
  if (args === undefined || args === null || args === '') return {};
  if (typeof args !== 'string') throw new TranslationError('invalid_tool_arguments', 'tool call arguments must be a JSON string', at);
  let parsed: unknown;
  try {
    parsed = JSON.parse(args) as unknown;
  } catch {
    throw new TranslationError('invalid_tool_arguments', 'tool call arguments are not valid JSON', at);
  }
  if (!isObject(parsed)) throw new TranslationError('invalid_tool_arguments', 'tool call arguments must be a JSON object', at);
  return parsed;
}

/**
 * A function tool as an Anthropic custom tool. `at` is the JSON path of the object that
 * holds name/description/parameters/strict (`tools[0].function` for chat, `tools[0]` for
 * Responses). Absent parameters become an empty object schema; `strict` is sent only when true.
 */
export function functionTool(fn: Record<string, unknown>, at: string): AnthropicTool {
  if (typeof fn.name !== 'string' || fn.name === '') throw invalid(`${at}.name`, 'function tools need a name');
  const params = fn.parameters;
  let schema: AnthropicInputSchema;
  if (params == null) schema = { type: 'object', properties: {} };
  else {
    if (!isObject(params)) throw invalid(`${at}.parameters`, 'parameters must be a JSON Schema object');
    if (params.type !== undefined && params.type !== 'object') {
      throw invalid(`${at}.parameters.type`, 'function parameters must be a JSON Schema of type object');
    }
    schema = { ...params, type: 'object' };
  }
  const out: AnthropicTool = { name: fn.name, input_schema: schema };
  if (typeof fn.description === 'string' && fn.description !== '') out.description = fn.description;
  if (fn.strict === true) out.strict = true;
  return out;
}

/**
 * Collects Anthropic turns: consecutive blocks of one role are merged into one message,
 * because the Messages API needs user and assistant turns to alternate.
 */
export class TurnBuilder {
  readonly #turns: Array<{ role: 'user' | 'assistant'; content: AnthropicContentBlockParam[] }> = [];

  add(role: 'user' | 'assistant', blocks: AnthropicContentBlockParam[]): void {
    if (blocks.length === 0) return;
    const last = this.#turns[this.#turns.length - 1];
    if (last !== undefined && last.role === role) {
      for (const b of blocks) last.content.push(b);
    } else this.#turns.push({ role, content: blocks });
  }

  get length(): number {
    return this.#turns.length;
  }

  /** The messages; a lone plain text block is written as a string (equivalent, and what clients usually send). */
  messages(): AnthropicMessageParam[] {
    const out: AnthropicMessageParam[] = new Array<AnthropicMessageParam>(this.#turns.length);
    for (let i = 0; i < this.#turns.length; i++) {
      const t = this.#turns[i]!;
      const only = t.content.length === 1 ? t.content[0] : undefined;
      out[i] = { role: t.role, content: only !== undefined && only.type === 'text' ? only.text : t.content };
    }
    return out;
  }
}

/** The top-level `system` field: a string for one text, text blocks for several, absent for none. */
export function systemField(blocks: AnthropicTextBlockParam[]): string | AnthropicTextBlockParam[] | undefined {
  if (blocks.length === 1) return blocks[0]!.text;
  if (blocks.length > 1) return blocks;
  return undefined;
}
