/**
 * The exact response cache (issue 12 item 5): what an entry holds and what every
 * implementation offers. `get` is a synchronous lookup in this process's memory; `put`
 * stores in memory at once and shares in the background. See docs/cache.md.
 */

/** One cached answer. Entries are shared, not copied: neither side may modify one after handing it over. */
export interface CachedResponse {
  /** HTTP status to answer with (the gateway decides which statuses it caches). */
  readonly status: number;
  /**
   * Response headers to replay, as the caller chose them (e.g. `content-type`); never
   * hop-by-hop or per-request headers (`connection`, `date`, request and trace ids).
   */
  readonly headers: Readonly<Record<string, string>>;
  /** The JSON body, or the complete SSE byte stream of a stream (never half of one). */
  readonly body: Buffer;
  /** True when `body` is an SSE stream (`text/event-stream`). */
  readonly stream: boolean;
  /** Wall-clock milliseconds (Unix epoch) when the answer was stored. */
  readonly storedAtMs: number;
  /** Wall-clock milliseconds after which `get` no longer returns it. */
  readonly expiresAtMs: number;
}

export interface CacheStatus {
  source: 'nats' | 'memory';
  /**
   * NATS: connected, and the bucket's entries read into memory. False while NATS is away
   * (gets still answer from memory; puts are kept in memory but not shared). Memory: true.
   */
  synced: boolean;
  /** The last connection or bucket error, null once synced again. */
  error: string | null;
  /** Entries in this process's memory, their accounted bytes, and the bound on those bytes. */
  entries: number;
  bytes: number;
  maxBytes: number;
  /** The largest encoded entry accepted (NATS: never more than the server's max_payload). */
  maxEntryBytes: number;
  /** `get` calls that returned an entry / returned null (expired ones included). */
  hits: number;
  misses: number;
  /** Of the misses: entries found but past their expiry. */
  expired: number;
  /** `put` calls accepted into memory. */
  stored: number;
  /** Refused by `put`: the encoded entry is larger than `maxEntryBytes`. */
  oversize: number;
  /** Refused by `put`: malformed (bad key, status, times); and bucket entries that cannot be decoded. */
  invalid: number;
  /** Removed from memory by the byte bound (least recently used first). */
  evicted: number;
  /** NATS: entries written to the bucket. */
  published: number;
  /** NATS: accepted entries not written to the bucket (NATS unreachable, too many writes in flight, or the write failed). */
  dropped: number;
  /** NATS: expired entries this process deleted from the bucket. */
  purged: number;
}

export interface ResponseCache {
  /** Resolves once the shared entries are in memory, or the start timeout passed (see status()). */
  readonly ready: Promise<void>;
  /** The entry for `key` if present and `nowMs < expiresAtMs`; synchronous, no I/O. */
  get(key: string, nowMs: number): CachedResponse | null;
  /** Stores `r` under `key`: in memory now, shared in the background. Never throws, never waits. */
  put(key: string, r: CachedResponse): void;
  status(): CacheStatus;
  close(): Promise<void>;
}
