/**
 * Upstream error bodies from one dialect -> error bodies in the other. The HTTP status is
 * preserved; only the body changes. Bodies may be anything (parsed JSON, raw text, bytes,
 * an HTML page): the message is taken where found, truncated, and scrubbed of anything
 * that looks like a credential.
 *
 * Error types:
 *
 * | HTTP status | OpenAI type           | Anthropic type        |
 * | ----------- | --------------------- | --------------------- |
 * | 400, 422    | invalid_request_error | invalid_request_error |
 * | 401         | authentication_error  | authentication_error  |
 * | 403         | permission_error      | permission_error      |
 * | 404         | not_found_error       | not_found_error       |
 * | 413         | invalid_request_error | request_too_large     |
 * | 429         | rate_limit_error      | rate_limit_error      |
 * | 503, 529    | server_error          | overloaded_error      |
 * | other 5xx   | server_error          | api_error             |
 *
 * OpenAI -> Anthropic decides by status (OpenAI-compatible servers disagree on types),
 * falling back to the body's type. Anthropic -> OpenAI decides by the Anthropic type
 * (it is reliable), falling back to the status.
 */

import type { TranslationError } from './errors.js';
import { asObject, asString, isObject, tryParseJson } from './json.js';
import type { AnthropicErrorBody, AnthropicErrorType } from './anthropic/types.js';
import type { OpenAIErrorBody, OpenAIErrorType } from './openai/types.js';

export interface MappedError {
  status: number;
  /** JSON text, ready to send. */
  body: string;
}

/** Longest upstream message copied into a translated error. */
export const MAX_ERROR_MESSAGE_LENGTH = 1000;

export const REDACTED = '[redacted]';

// Credential shapes: OpenAI/Anthropic keys (also masked "sk-proj-****abcd"), bearer tokens,
// AWS access key ids, Google API keys, GitHub and Slack tokens, JWTs.
const SECRET = new RegExp(
  [
    'sk-[A-Za-z0-9_*-]{8,}',
    '\\bBearer\\s+[A-Za-z0-9._~+/=-]{8,}',
    '\\bAKIA[0-9A-Z]{16}\\b',
    '\\bAIza[0-9A-Za-z_-]{30,}',
    '\\bgh[pousr]_[A-Za-z0-9]{20,}',
    '\\bgithub_pat_[A-Za-z0-9_]{20,}',
    '\\bxox[abprs]-[A-Za-z0-9-]{10,}',
    '\\beyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{8,}',
  ].join('|'),
  'g',
);
// `api_key: xyz`, `"x-api-key": "xyz"`, `apikey=xyz`: keep the label, drop the value.
const LABELLED_SECRET = /((?:api[_-]?key|access[_-]?token|secret|password)["']?\s*[:=]\s*["']?)[A-Za-z0-9._~+/=-]{6,}/gi;

/** Replaces anything that looks like a credential with `[redacted]`. */
export function scrubSecrets(text: string): string {
  return text.replace(SECRET, REDACTED).replace(LABELLED_SECRET, '$1' + REDACTED);
}

interface UpstreamError {
  message: string | null;
  type: string | null;
  code: string | null;
  param: string | null;
}

/** Reads message/type/code/param from either dialect's error shape, or from plain text. */
function readUpstreamError(body: unknown): UpstreamError {
  let value: unknown = body;
  if (value instanceof Uint8Array) value = Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('utf8');
  if (typeof value === 'string') {
    const parsed = tryParseJson(value);
    if (parsed === undefined || !isObject(parsed)) {
      const text = value.trim();
      return { message: text === '' ? null : text, type: null, code: null, param: null };
    }
    value = parsed;
  }
  const top = asObject(value);
  if (top === null) return { message: null, type: null, code: null, param: null };
  const err = asObject(top.error);
  if (err !== null) {
    const code = err.code;
    return {
      message: asString(err.message),
      type: asString(err.type),
      code: typeof code === 'number' ? String(code) : asString(code),
      param: asString(err.param),
    };
  }
  // {"error": "text"}, {"message": "..."}, {"detail": "..."} (common in OpenAI-compatible servers).
  const message = asString(top.error) ?? asString(top.message) ?? asString(top.detail);
  return { message, type: asString(top.type), code: null, param: null };
}

function cleanMessage(message: string | null, status: number): string {
  if (message === null || message === '') return status > 0 ? `upstream error (HTTP ${status})` : 'upstream error';
  const cut = message.length > MAX_ERROR_MESSAGE_LENGTH ? message.slice(0, MAX_ERROR_MESSAGE_LENGTH) + '…' : message;
  return scrubSecrets(cut);
}

const ANTHROPIC_TYPES: ReadonlySet<string> = new Set<AnthropicErrorType>([
  'invalid_request_error',
  'authentication_error',
  'permission_error',
  'not_found_error',
  'request_too_large',
  'rate_limit_error',
  'api_error',
  'overloaded_error',
]);

function anthropicTypeForStatus(status: number): AnthropicErrorType | null {
  switch (status) {
    case 400:
    case 422:
      return 'invalid_request_error';
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 503:
    case 529:
      return 'overloaded_error';
    default:
      return status >= 500 && status <= 599 ? 'api_error' : null;
  }
}

/** OpenAI error type (+ status) -> Anthropic error type. Status wins when it is decisive. */
export function openaiErrorTypeToAnthropic(type: string | null, status: number): AnthropicErrorType {
  const byStatus = anthropicTypeForStatus(status);
  if (byStatus !== null) return byStatus;
  switch (type) {
    case 'invalid_request_error':
    case 'authentication_error':
    case 'permission_error':
    case 'not_found_error':
    case 'rate_limit_error':
      return type;
    case 'insufficient_quota':
    case 'tokens':
    case 'requests':
      return 'rate_limit_error';
    case 'server_error':
    case 'api_error':
      return 'api_error';
    default:
      if (type !== null && ANTHROPIC_TYPES.has(type)) return type as AnthropicErrorType;
      return status >= 400 && status < 500 ? 'invalid_request_error' : 'api_error';
  }
}

/** Anthropic error type (+ status) -> OpenAI error type. The Anthropic type wins. */
export function anthropicErrorTypeToOpenAI(type: string | null, status: number): OpenAIErrorType {
  switch (type) {
    case 'invalid_request_error':
    case 'authentication_error':
    case 'permission_error':
    case 'not_found_error':
    case 'rate_limit_error':
      return type;
    case 'request_too_large':
      return 'invalid_request_error';
    case 'api_error':
    case 'overloaded_error':
      return 'server_error';
  }
  const byStatus = anthropicTypeForStatus(status);
  if (byStatus === null) return status >= 400 && status < 500 ? 'invalid_request_error' : 'server_error';
  return anthropicErrorTypeToOpenAI(byStatus, 0);
}

/** The OpenAI error body for an upstream Anthropic error (object form, for stream events). */
export function anthropicErrorToOpenAIBody(status: number, body: unknown): OpenAIErrorBody {
  const up = readUpstreamError(body);
  const type = anthropicErrorTypeToOpenAI(up.type, status);
  const code = up.type === 'overloaded_error' || up.type === 'request_too_large' ? up.type : null;
  return { error: { message: cleanMessage(up.message, status), type, param: null, code } };
}

/** The Anthropic error body for an upstream OpenAI error (object form, for stream events). */
export function openaiErrorToAnthropicBody(status: number, body: unknown): AnthropicErrorBody {
  const up = readUpstreamError(body);
  let message = cleanMessage(up.message, status);
  if (up.param !== null && up.param !== '') message = `${scrubSecrets(up.param)}: ${message}`;
  return { type: 'error', error: { type: openaiErrorTypeToAnthropic(up.type, status), message } };
}

export function anthropicErrorToOpenAI(status: number, body: unknown): MappedError {
  return { status, body: JSON.stringify(anthropicErrorToOpenAIBody(status, body)) };
}

export function openaiErrorToAnthropic(status: number, body: unknown): MappedError {
  return { status, body: JSON.stringify(openaiErrorToAnthropicBody(status, body)) };
}

/** A TranslationError as the HTTP 400 an OpenAI client expects (`code` = the TranslationError code). */
export function translationErrorToOpenAI(err: TranslationError): MappedError {
  const body: OpenAIErrorBody = {
    error: { message: scrubSecrets(err.message), type: 'invalid_request_error', param: err.param, code: err.code },
  };
  return { status: 400, body: JSON.stringify(body) };
}

/** A TranslationError as the HTTP 400 an Anthropic client expects (param prefixed to the message). */
export function translationErrorToAnthropic(err: TranslationError): MappedError {
  const message = scrubSecrets(err.param === null ? err.message : `${err.param}: ${err.message}`);
  const body: AnthropicErrorBody = { type: 'error', error: { type: 'invalid_request_error', message } };
  return { status: 400, body: JSON.stringify(body) };
}
