/**
 * The entries one process holds: a Map bounded in bytes, least recently used evicted first.
 * A Map iterates in insertion order, so "touch" is delete-and-set and the first key is the
 * least recently used — no list of our own to keep in step.
 */
import type { CachedResponse } from './types.js';

/**
 * Bytes accounted per entry beyond its frame (headers JSON and body): the key string, the
 * Map slot, the entry and Buffer objects. An estimate, so that many tiny entries still
 * count against the bound.
 */
export const ENTRY_OVERHEAD = 256;

export interface Slot {
  readonly response: CachedResponse;
  /** Accounted bytes: frame size + key + ENTRY_OVERHEAD. */
  readonly bytes: number;
  /** Bucket revision the entry came with; 0 while it is only in this process (a put not yet echoed by the watch). */
  revision: number;
}

export class Entries {
  readonly #map = new Map<string, Slot>();
  #bytes = 0;
  hits = 0;
  misses = 0;
  expired = 0;
  evicted = 0;

  constructor(
    readonly maxBytes: number,
    /** Told about each entry found expired by `get` (the NATS cache purges it from the bucket). */
    readonly onExpired: ((key: string, slot: Slot) => void) | null = null,
  ) {}

  get size(): number {
    return this.#map.size;
  }
  get bytes(): number {
    return this.#bytes;
  }

  get(key: string, nowMs: number): CachedResponse | null {
    const slot = this.#map.get(key);
    if (slot === undefined) {
      this.misses++;
      return null;
    }
    if (slot.response.expiresAtMs <= nowMs) {
      this.#remove(key, slot);
      this.expired++;
      this.misses++;
      this.onExpired?.(key, slot);
      return null;
    }
    this.#map.delete(key);
    this.#map.set(key, slot);
    this.hits++;
    return slot.response;
  }

  /** The slot without counting or touching it. */
  peek(key: string): Slot | undefined {
    return this.#map.get(key);
  }

  /** Inserts (replacing any entry for `key`) as the most recently used; false when the entry alone exceeds the bound. */
  set(key: string, slot: Slot): boolean {
    if (slot.bytes > this.maxBytes) return false;
    const old = this.#map.get(key);
    if (old !== undefined) this.#remove(key, old);
    this.#map.set(key, slot);
    this.#bytes += slot.bytes;
    if (this.#bytes > this.maxBytes) {
      for (const [k, s] of this.#map) {
        if (this.#bytes <= this.maxBytes) break;
        this.#remove(k, s);
        this.evicted++;
      }
    }
    return true;
  }

  delete(key: string): boolean {
    const slot = this.#map.get(key);
    if (slot === undefined) return false;
    this.#remove(key, slot);
    return true;
  }

  /** Removes every entry expired at `nowMs`, telling `each` about it. O(entries): run off the request path. */
  sweep(nowMs: number, each: ((key: string, slot: Slot) => void) | null): number {
    let n = 0;
    for (const [k, s] of this.#map) {
      if (s.response.expiresAtMs > nowMs) continue;
      this.#remove(k, s);
      n++;
      each?.(k, s);
    }
    return n;
  }

  clear(): void {
    this.#map.clear();
    this.#bytes = 0;
  }

  #remove(key: string, slot: Slot): void {
    this.#map.delete(key);
    this.#bytes -= slot.bytes;
  }
}

export function slotBytes(key: string, frameSize: number): number {
  return frameSize + key.length + ENTRY_OVERHEAD;
}
