/**
 * The exact cache at the gateway (issue 12): the `cache` stage looks a request up in memory
 * (@sightline/cache: every replica holds the shared entries it watched), a hit is answered
 * from there, and a miss's complete answer is stored for the next one.
 *
 * What makes two requests the same: team, dialect, path, resolved provider and model, stream
 * flag, the exact body bytes, and the Anthropic version headers (cacheKey). Only answers the
 * provider completed with a 200 are stored, streams only whole. `Cache-Control: no-cache`
 * skips the lookup, `no-store` the storing (RFC 9111 §5.2.1).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { cacheKey, type CachedResponse, type ResponseCache } from '@sightline/cache';
import type { Dialect } from '@sightline/core';
import { one } from './providers.js';

/** What a request's answer is collected into, to be stored once complete. */
export class CacheFill {
  readonly #chunks: Buffer[] = [];
  #bytes = 0;
  #tooLarge = false;

  constructor(
    readonly cache: ResponseCache,
    readonly key: string,
    readonly ttlMs: number,
    readonly maxBytes: number,
  ) {}

  /** Adds what was written to the client (a copy is not needed: chunks are not reused). */
  add(chunk: Buffer | string): void {
    if (this.#tooLarge) return;
    const b = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    this.#bytes += b.length;
    if (this.#bytes > this.maxBytes) {
      this.#tooLarge = true;
      this.#chunks.length = 0;
      return;
    }
    this.#chunks.push(b);
  }

  /** The answer is complete: stores it if it is a whole 200 within the bound. */
  done(status: number, contentType: string, stream: boolean): void {
    if (this.#tooLarge || status !== 200) return;
    const now = Date.now();
    const r: CachedResponse = {
      status,
      headers: { 'content-type': contentType },
      body: this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks, this.#bytes),
      stream,
      storedAtMs: now,
      expiresAtMs: now + this.ttlMs,
    };
    this.cache.put(this.key, r);
  }
}

export interface CacheDirectives {
  /** Skip the lookup (`no-cache`). */
  noCache: boolean;
  /** Do not store the answer (`no-store`). */
  noStore: boolean;
}

export function cacheDirectives(headers: IncomingHttpHeaders): CacheDirectives {
  const cc = one(headers['cache-control']);
  if (cc === undefined) return { noCache: false, noStore: false };
  const v = cc.toLowerCase();
  return { noCache: v.includes('no-cache'), noStore: v.includes('no-store') };
}

export function requestCacheKey(team: string, dialect: Dialect, path: string, provider: string, model: string, stream: boolean, body: Buffer, headers: IncomingHttpHeaders): string {
  const vary = dialect === 'anthropic' ? [one(headers['anthropic-version']) ?? '', one(headers['anthropic-beta']) ?? ''] : undefined;
  return cacheKey({ team, dialect, path, provider, model, stream, body, ...(vary === undefined ? {} : { vary }) });
}
