/**
 * Request validation for every client API: only what the gateway relies on (model,
 * messages or input, stream flag, Anthropic's required max_tokens, a bounded nesting
 * depth); everything else is the provider's (or the translator's) to judge. Failures are
 * GatewayErrors with the offending parameter.
 */
import { GatewayError } from './errors.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;

/**
 * Whether JSON text nests objects and arrays deeper than `limit`. One pass over the bytes,
 * skipping strings; run before parsing so that no later step (translation, re-encoding,
 * content capture) recurses through input deeper than the limit: V8's JSON.stringify
 * overflows the stack a few thousand levels down.
 */
export function nestedDeeperThan(raw: Buffer, limit: number): boolean {
  let depth = 0;
  const n = raw.length;
  for (let i = 0; i < n; i++) {
    const c = raw[i]!;
    if (c === QUOTE) {
      // Skip the string (most of a request's bytes) with memchr: its end is the next quote
      // preceded by an even number of backslashes.
      let j = raw.indexOf(QUOTE, i + 1);
      while (j !== -1) {
        let k = j - 1;
        while (raw[k] === BACKSLASH) k--;
        if ((j - 1 - k) % 2 === 0) break;
        j = raw.indexOf(QUOTE, j + 1);
      }
      if (j === -1) return false; // unterminated: JSON.parse will refuse it
      i = j;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > limit) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}

/**
 * The parser's complaint without the body: V8's messages quote the bytes around the fault
 * (`Unexpected token 's', "{"k": sk-…" is not valid JSON`), which may hold a secret and
 * would be stored with the failed span. Only the position is kept, when V8 gives one.
 */
function jsonErrorMessage(e: unknown): string {
  const m = /at position (\d+)/.exec(e instanceof Error ? e.message : '');
  return m === null ? 'The request body is not valid JSON.' : `The request body is not valid JSON (at byte ${m[1]}).`;
}

function parseObject(raw: Buffer | undefined, hint: string, depthLimit: number): Record<string, unknown> {
  if (raw === undefined || raw.length === 0) throw new GatewayError('invalid_json', `The request body is empty; send a JSON object with ${hint}.`);
  if (nestedDeeperThan(raw, depthLimit)) throw new GatewayError('invalid_request', `The request body is nested deeper than ${depthLimit} levels of objects and arrays.`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch (e) {
    throw new GatewayError('invalid_json', jsonErrorMessage(e));
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new GatewayError('invalid_request', 'The request body must be a JSON object.');
  }
  return parsed as Record<string, unknown>;
}

function model(body: Record<string, unknown>): void {
  if (body.model === undefined) throw new GatewayError('invalid_request', 'Missing required parameter: `model`.', 'model');
  if (typeof body.model !== 'string' || body.model === '') throw new GatewayError('invalid_request', '`model` must be a non-empty string.', 'model');
}

function stream(body: Record<string, unknown>): void {
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean') throw new GatewayError('invalid_request', '`stream` must be a boolean.', 'stream');
}

function common(body: Record<string, unknown>): void {
  model(body);
  if (body.messages === undefined) throw new GatewayError('invalid_request', 'Missing required parameter: `messages`.', 'messages');
  if (!Array.isArray(body.messages)) throw new GatewayError('invalid_request', '`messages` must be an array.', 'messages');
  stream(body);
}

export function validateOpenAI(raw: Buffer | undefined, depthLimit: number): Record<string, unknown> {
  const body = parseObject(raw, '`model` and `messages`', depthLimit);
  common(body);
  return body;
}

export function validateAnthropic(raw: Buffer | undefined, depthLimit: number): Record<string, unknown> {
  const body = parseObject(raw, '`model`, `max_tokens` and `messages`', depthLimit);
  common(body);
  if (body.max_tokens === undefined) throw new GatewayError('invalid_request', 'max_tokens: Field required', 'max_tokens');
  if (typeof body.max_tokens !== 'number' || !Number.isInteger(body.max_tokens) || body.max_tokens < 1) {
    throw new GatewayError('invalid_request', 'max_tokens: must be a positive integer', 'max_tokens');
  }
  return body;
}

/**
 * `POST /v1/responses`: a model (the gateway routes by it; a stored prompt's own model is not
 * looked up) and, when present, an `input` string or array of items.
 */
export function validateResponses(raw: Buffer | undefined, depthLimit: number): Record<string, unknown> {
  const body = parseObject(raw, '`model` and `input`', depthLimit);
  model(body);
  const input = body.input;
  if (input !== undefined && input !== null && typeof input !== 'string' && !Array.isArray(input)) {
    throw new GatewayError('invalid_request', '`input` must be a string or an array of input items.', 'input');
  }
  stream(body);
  return body;
}

/** `POST /v1/embeddings`: a model and an input (a string, an array of strings, a token array or an array of token arrays: the provider judges which). */
export function validateEmbeddings(raw: Buffer | undefined, depthLimit: number): Record<string, unknown> {
  const body = parseObject(raw, '`model` and `input`', depthLimit);
  model(body);
  if (body.input === undefined || body.input === null) throw new GatewayError('invalid_request', 'Missing required parameter: `input`.', 'input');
  if (typeof body.input !== 'string' && !Array.isArray(body.input)) throw new GatewayError('invalid_request', '`input` must be a string or an array.', 'input');
  return body;
}

/** `POST /v1/messages/count_tokens`: as a Messages request, without `max_tokens`. */
export function validateCountTokens(raw: Buffer | undefined, depthLimit: number): Record<string, unknown> {
  const body = parseObject(raw, '`model` and `messages`', depthLimit);
  common(body);
  return body;
}
