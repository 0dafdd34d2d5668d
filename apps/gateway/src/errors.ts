/**
 * Gateway errors: one class per failure, stable codes, and the one place where a
 * failure becomes an HTTP status and a body in the client's dialect.
 *
 * OpenAI: {"error":{"message","type","param","code"}}
 *   (https://platform.openai.com/docs/guides/error-codes)
 * Anthropic: {"type":"error","error":{"type","message"}}
 *   (https://docs.anthropic.com/en/api/errors)
 */
import type { StageName } from '@sightline/core';
import type { Dialect } from '@sightline/core';

export type GatewayErrorCode =
  | 'invalid_json'
  | 'invalid_request'
  | 'invalid_api_key'
  | 'permission_denied'
  | 'rate_limited'
  | 'budget_exceeded'
  | 'body_too_large'
  | 'unsupported_media_type'
  | 'model_not_found'
  | 'unsupported_route'
  | 'route_not_found'
  | 'upstream_unreachable'
  | 'upstream_timeout'
  | 'upstream_error'
  | 'upstream_rate_limited'
  | 'no_healthy_target'
  | 'translation_failed'
  | 'client_closed'
  | 'shutting_down'
  | 'internal_error';

interface ErrorKind {
  status: number;
  /** OpenAI `error.type`. */
  openai: string;
  /** Anthropic `error.type`. */
  anthropic: string;
  /** Stage a request is in when this failure happens (for the failed span). */
  stage: StageName | null;
  /** OpenAI `error.code`, when it is not the GatewayErrorCode itself. */
  openaiCode?: string;
}

const KINDS: Record<GatewayErrorCode, ErrorKind> = {
  invalid_json: { status: 400, openai: 'invalid_request_error', anthropic: 'invalid_request_error', stage: 'parse' },
  invalid_request: { status: 400, openai: 'invalid_request_error', anthropic: 'invalid_request_error', stage: 'parse' },
  // A missing, unknown, revoked or expired Sightline key; the SDKs raise AuthenticationError.
  invalid_api_key: { status: 401, openai: 'invalid_request_error', anthropic: 'authentication_error', stage: 'auth' },
  // A key without the `gateway` scope, or asking for a model outside its globs; the SDKs raise PermissionDeniedError.
  permission_denied: { status: 403, openai: 'invalid_request_error', anthropic: 'permission_error', stage: 'auth' },
  // Over a rate limit of the key or its team (docs/governance.md): OpenAI's own 429 shape.
  rate_limited: { status: 429, openai: 'requests', anthropic: 'rate_limit_error', stage: 'limits', openaiCode: 'rate_limit_exceeded' },
  // A budget spent: OpenAI answers `insufficient_quota` (a 429 the SDKs raise as RateLimitError).
  budget_exceeded: { status: 429, openai: 'insufficient_quota', anthropic: 'rate_limit_error', stage: 'budget', openaiCode: 'insufficient_quota' },
  body_too_large: { status: 413, openai: 'invalid_request_error', anthropic: 'request_too_large', stage: 'ingress.read' },
  unsupported_media_type: { status: 415, openai: 'invalid_request_error', anthropic: 'invalid_request_error', stage: 'ingress.read' },
  model_not_found: { status: 404, openai: 'invalid_request_error', anthropic: 'not_found_error', stage: 'route' },
  // The model's route has no provider that serves this endpoint (embeddings, stored responses: OpenAI-API providers only).
  unsupported_route: { status: 400, openai: 'invalid_request_error', anthropic: 'invalid_request_error', stage: 'route' },
  route_not_found: { status: 404, openai: 'invalid_request_error', anthropic: 'not_found_error', stage: null },
  upstream_unreachable: { status: 502, openai: 'api_error', anthropic: 'api_error', stage: 'upstream.connect' },
  upstream_timeout: { status: 504, openai: 'api_error', anthropic: 'api_error', stage: 'upstream.wait' },
  upstream_error: { status: 502, openai: 'api_error', anthropic: 'api_error', stage: 'upstream.stream' },
  upstream_rate_limited: { status: 429, openai: 'rate_limit_error', anthropic: 'rate_limit_error', stage: 'upstream.wait' },
  no_healthy_target: { status: 503, openai: 'api_error', anthropic: 'overloaded_error', stage: 'route' },
  translation_failed: { status: 400, openai: 'invalid_request_error', anthropic: 'invalid_request_error', stage: 'translate.request' },
  client_closed: { status: 499, openai: 'api_error', anthropic: 'api_error', stage: null },
  // A request that came on an open connection after the gateway began to shut down; the SDKs retry a 503.
  shutting_down: { status: 503, openai: 'api_error', anthropic: 'overloaded_error', stage: null },
  internal_error: { status: 500, openai: 'api_error', anthropic: 'api_error', stage: null },
};

export interface GatewayErrorOptions {
  cause?: unknown;
  /** The stage the request failed in, when it is not the code's usual one (KINDS). */
  stage?: StageName;
  /** Machine-readable particulars, sent as `error.sightline` (limits: scope, limit, reset). */
  details?: Record<string, unknown>;
  /** Milliseconds after which a retry may succeed: sent as `retry-after` (seconds). */
  retryAfterMs?: number;
}

export class GatewayError extends Error {
  readonly status: number;
  readonly #stage: StageName | null;
  readonly details: Record<string, unknown> | null;
  readonly retryAfterMs: number | null;
  constructor(
    readonly code: GatewayErrorCode,
    message: string,
    readonly param: string | null = null,
    options?: GatewayErrorOptions,
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GatewayError';
    this.status = KINDS[code].status;
    this.#stage = options?.stage ?? KINDS[code].stage;
    this.details = options?.details ?? null;
    this.retryAfterMs = options?.retryAfterMs ?? null;
  }

  get stage(): StageName | null {
    return this.#stage;
  }
}

/** The response body for an error, in the client's dialect. */
export function errorBody(err: GatewayError, dialect: Dialect): string {
  const k = KINDS[err.code];
  if (dialect === 'anthropic') {
    // Anthropic error bodies have no `param`; name it in the message instead.
    const message = err.param !== null && !err.message.includes(err.param) ? `${err.param}: ${err.message}` : err.message;
    return JSON.stringify({ type: 'error', error: err.details === null ? { type: k.anthropic, message } : { type: k.anthropic, message, sightline: err.details } });
  }
  const code = k.openaiCode ?? err.code;
  return JSON.stringify({ error: err.details === null ? { message: err.message, type: k.openai, param: err.param, code } : { message: err.message, type: k.openai, param: err.param, code, sightline: err.details } });
}

/** Headers an error answer carries besides its content type: `retry-after` when a retry may succeed later. */
export function errorHeaders(err: GatewayError): Record<string, string> | null {
  if (err.retryAfterMs === null) return null;
  return { 'retry-after': String(Math.max(1, Math.ceil(err.retryAfterMs / 1000))) };
}

/**
 * The last event of a stream that fails after it started, in the client's dialect: the
 * status line is gone, so the error travels as an event the official SDKs raise.
 * Anthropic: an `error` event (https://docs.anthropic.com/en/api/messages-streaming#error-events).
 * OpenAI: a `data:` line holding `{"error":{…}}`, which the openai SDKs raise as an APIError.
 * OpenAI Responses API (`responsesApi`): an `error` event.
 */
export function streamErrorEvent(err: GatewayError, dialect: Dialect, responsesApi = false): string {
  const k = KINDS[err.code];
  // Responses API streams are typed events; theirs is `error` with the code at the top
  // (https://platform.openai.com/docs/api-reference/responses-streaming/error), which the
  // openai SDKs raise as an APIError. No sequence number: the gateway did not count the events.
  if (responsesApi) return `event: error\ndata: ${JSON.stringify({ type: 'error', code: err.code, message: err.message, param: err.param })}\n\n`;
  if (dialect === 'anthropic') return `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: k.anthropic, message: err.message } })}\n\n`;
  return `data: ${JSON.stringify({ error: { message: err.message, type: k.openai, param: err.param, code: err.code } })}\n\n`;
}
