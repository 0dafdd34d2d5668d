/**
 * Request validation for the two dialects: only what the gateway relies on (model,
 * messages, stream flag, Anthropic's required max_tokens); everything else is the
 * provider's to judge. Failures are GatewayErrors with the offending parameter.
 */
import { GatewayError } from './errors.js';

function parseObject(raw: Buffer | undefined, hint: string): Record<string, unknown> {
  if (raw === undefined || raw.length === 0) throw new GatewayError('invalid_json', `The request body is empty; send a JSON object with ${hint}.`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch (e) {
    throw new GatewayError('invalid_json', `The request body is not valid JSON: ${(e as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new GatewayError('invalid_request', 'The request body must be a JSON object.');
  }
  return parsed as Record<string, unknown>;
}

function common(body: Record<string, unknown>): void {
  if (body.model === undefined) throw new GatewayError('invalid_request', 'Missing required parameter: `model`.', 'model');
  if (typeof body.model !== 'string' || body.model === '') throw new GatewayError('invalid_request', '`model` must be a non-empty string.', 'model');
  if (body.messages === undefined) throw new GatewayError('invalid_request', 'Missing required parameter: `messages`.', 'messages');
  if (!Array.isArray(body.messages)) throw new GatewayError('invalid_request', '`messages` must be an array.', 'messages');
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean') throw new GatewayError('invalid_request', '`stream` must be a boolean.', 'stream');
}

export function validateOpenAI(raw: Buffer | undefined): Record<string, unknown> {
  const body = parseObject(raw, '`model` and `messages`');
  common(body);
  return body;
}

export function validateAnthropic(raw: Buffer | undefined): Record<string, unknown> {
  const body = parseObject(raw, '`model`, `max_tokens` and `messages`');
  common(body);
  if (body.max_tokens === undefined) throw new GatewayError('invalid_request', 'max_tokens: Field required', 'max_tokens');
  if (typeof body.max_tokens !== 'number' || !Number.isInteger(body.max_tokens) || body.max_tokens < 1) {
    throw new GatewayError('invalid_request', 'max_tokens: must be a positive integer', 'max_tokens');
  }
  return body;
}
