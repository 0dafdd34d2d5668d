/** Fixtures shared by the cache tests. */
import { cacheKey, type CachedResponse } from '@sightline/cache';

export function keyOf(team: string, body: Buffer, stream = false): string {
  return cacheKey({ team, dialect: 'openai', path: '/v1/chat/completions', provider: 'openai', model: 'gpt-4o-mini', stream, body });
}

export function response(body: Buffer, opts: { stream?: boolean; storedAtMs?: number; ttlMs?: number } = {}): CachedResponse {
  const stream = opts.stream ?? false;
  const storedAtMs = opts.storedAtMs ?? Date.now();
  return { status: 200, headers: { 'content-type': stream ? 'text/event-stream' : 'application/json' }, body, stream, storedAtMs, expiresAtMs: storedAtMs + (opts.ttlMs ?? 600_000) };
}

/** A complete SSE stream of `events` chunks with multibyte text (é, €, 😀), as an OpenAI stream ends. */
export function sse(events: number): Buffer {
  let s = '';
  for (let i = 0; i < events; i++) s += `data: {"choices":[{"delta":{"content":"é€😀 ${i}"}}]}\n\n`;
  return Buffer.from(s + 'data: [DONE]\n\n');
}
