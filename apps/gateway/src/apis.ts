/**
 * The client APIs the gateway serves under `/v1/` (docs/api.md, "Gateway"): which request a
 * handler is serving decides how it is validated, which providers can take it, where it goes
 * upstream and how its answer comes back.
 */
import type { Dialect } from '@sightline/core';

/**
 * - `chat`: `POST /v1/chat/completions`
 * - `messages`: `POST /v1/messages`
 * - `responses`: `POST /v1/responses` (OpenAI Responses API)
 * - `response`: `GET` and `DELETE /v1/responses/{id}` (a stored response)
 * - `embeddings`: `POST /v1/embeddings`
 * - `count_tokens`: `POST /v1/messages/count_tokens`
 */
export type ClientApi = 'chat' | 'messages' | 'responses' | 'response' | 'embeddings' | 'count_tokens';

/** The dialect a client of this API speaks: its errors are shaped in it. */
export function dialectOfApi(api: ClientApi): Dialect {
  return api === 'messages' || api === 'count_tokens' ? 'anthropic' : 'openai';
}

/** Whether a request of this API generates output tokens (so an output bound applies to it). */
export function generates(api: ClientApi): boolean {
  return api === 'chat' || api === 'messages' || api === 'responses';
}

/**
 * Whether a request of this API may spend money: a budget reserves its upper-bound cost.
 * Token counting and reading or deleting a stored response are free at the providers.
 */
export function spends(api: ClientApi): boolean {
  return api !== 'count_tokens' && api !== 'response';
}
