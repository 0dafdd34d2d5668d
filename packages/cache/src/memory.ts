/**
 * The cache of the embedded mode (`npm start` without NATS): the same entries, bounds and
 * counters as the NATS cache, in this process only.
 */
import { Entries, slotBytes } from './entries.js';
import { frameSize, valid } from './frame.js';
import { KEY_PATTERN } from './key.js';
import { DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRY_BYTES, DEFAULT_SWEEP_INTERVAL_MS, positive } from './options.js';
import type { CachedResponse, CacheStatus, ResponseCache } from './types.js';

export interface MemoryResponseCacheOptions {
  /** Bytes of entries held (frame size + key + 256 each); least recently used go first. Default 64 MiB. */
  maxBytes?: number;
  /** Largest entry (its encoded frame) accepted. Default 1 MiB, NATS's default max_payload, as in the NATS cache. */
  maxEntryBytes?: number;
  /** How often expired entries are removed from memory (a `get` never returns one anyway). Default 1000 ms. */
  sweepIntervalMs?: number;
}

export class MemoryResponseCache implements ResponseCache {
  readonly ready: Promise<void> = Promise.resolve();
  readonly #entries: Entries;
  readonly #maxEntryBytes: number;
  readonly #sweep: NodeJS.Timeout;
  #stored = 0;
  #oversize = 0;
  #invalid = 0;

  constructor(opts: MemoryResponseCacheOptions = {}) {
    this.#entries = new Entries(positive('maxBytes', opts.maxBytes, DEFAULT_MAX_BYTES));
    this.#maxEntryBytes = positive('maxEntryBytes', opts.maxEntryBytes, DEFAULT_MAX_ENTRY_BYTES);
    this.#sweep = setInterval(() => this.#entries.sweep(Date.now(), null), positive('sweepIntervalMs', opts.sweepIntervalMs, DEFAULT_SWEEP_INTERVAL_MS));
    this.#sweep.unref();
  }

  get(key: string, nowMs: number): CachedResponse | null {
    return this.#entries.get(key, nowMs);
  }

  put(key: string, r: CachedResponse): void {
    if (!KEY_PATTERN.test(key) || !valid(r)) {
      this.#invalid++;
      return;
    }
    const { size } = frameSize(r);
    if (size > this.#maxEntryBytes) {
      this.#oversize++;
      return;
    }
    if (this.#entries.set(key, { response: r, bytes: slotBytes(key, size), revision: 0 })) this.#stored++;
    else this.#oversize++;
  }

  status(): CacheStatus {
    const e = this.#entries;
    return {
      source: 'memory',
      synced: true,
      error: null,
      entries: e.size,
      bytes: e.bytes,
      maxBytes: e.maxBytes,
      maxEntryBytes: this.#maxEntryBytes,
      hits: e.hits,
      misses: e.misses,
      expired: e.expired,
      stored: this.#stored,
      oversize: this.#oversize,
      invalid: this.#invalid,
      evicted: e.evicted,
      published: 0,
      dropped: 0,
      purged: 0,
    };
  }

  async close(): Promise<void> {
    clearInterval(this.#sweep);
    this.#entries.clear();
  }
}
