/**
 * The shared exact cache: entries in a NATS JetStream key-value bucket that every gateway
 * process watches into a bounded map in its own memory (issue 12 item 5, docs/cache.md).
 *
 * - Bucket `sightline-cache`, history 1, one entry per cache key; values are binary frames
 *   (frame.ts). The bucket is bounded in bytes and age, and discards its *oldest* entries when
 *   full: the KV default (discard new) would refuse every new answer once the bucket filled.
 * - `get` is a Map lookup: a hit cached by another replica costs no network call, and neither
 *   does a miss. Expiry (`expiresAtMs`) is checked on every `get`; expired entries are
 *   deleted from the bucket in the background, with the revision they were read at, so a
 *   newer answer stored meanwhile is never removed and replicas racing to delete the same
 *   entry write one marker.
 * - `put` stores in memory at once and publishes in the background, at most `maxInFlight`
 *   writes at a time; what cannot be published (NATS away, too many in flight, a failed
 *   write) is counted as dropped and stays in this process only. Encoding and publishing
 *   happen in a `setImmediate` after the put, batched, so the request that stored the answer
 *   pays only the map insert. A write is a plain publish to the bucket's subject with a reply
 *   subject of ours, and JetStream's acknowledgement arrives on one subscription for all
 *   writes: measured here, nats.js's `kv.put` spent ~100 µs of the caller's time per call (a
 *   request with its own timer and stack capture), a publish with a reply 5–15 µs.
 *
 * The watch is re-created on every reconnect instead of trusting nats.js's ordered consumer
 * to resume: measured against nats-server 2.9.10 with nats.js 2.29 (packages/directory,
 * nats.ts), after a server restart the ordered consumer only resets when its idle heartbeat
 * is missed twice (about 10 s). A fresh watch replays the bucket into the map: entries
 * already there are recognised by their times and length and not decoded again.
 */
import { performance } from 'node:perf_hooks';
import { createInbox, DiscardPolicy, KvWatchInclude, nanos, type KV, type KvEntry, type Msg, type NatsConnection, type QueuedIterator } from 'nats';
import { connectNats, natsServers } from '@sightline/bus';
import { Entries, slotBytes, type Slot } from './entries.js';
import { CacheError } from './errors.js';
import { decodeFrame, encodeFrame, frameExpiry, frameSize, valid } from './frame.js';
import { KEY_PATTERN } from './key.js';
import { DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRY_BYTES, DEFAULT_SWEEP_INTERVAL_MS, MiB, positive } from './options.js';
import type { CachedResponse, CacheStatus, ResponseCache } from './types.js';

export const CACHE_BUCKET = 'sightline-cache';
const STREAM = `KV_${CACHE_BUCKET}`;
/** The subject a KV put of `key` is published on (ADR-8; no JetStream domain or API prefix). */
const SUBJECT_PREFIX = `$KV.${CACHE_BUCKET}.`;

export interface NatsResponseCacheOptions {
  /** NATS_URL: comma-separated servers, credentials in the URL allowed (@sightline/bus `natsServers`). */
  url: string;
  /** Bytes of entries this process holds in memory (frame size + key + 256 each); least recently used go first. Default 64 MiB. */
  maxBytes?: number;
  /** Largest entry (its encoded frame) cached; never more than the server's max_payload (1 MiB unless configured). Default: that max_payload. */
  maxEntryBytes?: number;
  /** Bytes the bucket holds; when full, its oldest entries are dropped. Applied to the bucket at every connect. Default 256 MiB. */
  bucketMaxBytes?: number;
  /** Longest any entry stays in the bucket, whatever its expiry (the stream's max_age; it also clears delete markers). Default 24 h. */
  bucketMaxAgeMs?: number;
  /** Replicas of the bucket when this process creates it (a NATS cluster: 3). Default 1. */
  replicas?: number;
  /** How long `ready` waits for NATS before resolving with what is in memory (nothing). Default 2000 ms. */
  startTimeoutMs?: number;
  /** Bound of each NATS request (a write, a delete, the bucket's set-up). Default 2000 ms. */
  writeTimeoutMs?: number;
  /**
   * How long a write waits to be published with the writes after it, in ms; 0: at the next turn
   * of the event loop. Default 5. Each publish and its acknowledgement cost the serving thread a
   * socket write and a read, and NATS a wake-up: one per few misses instead of one per miss
   * halved a miss's cost in the bench (docs/cache.md). Other replicas see the entry that much later.
   */
  writeDelayMs?: number;
  /** Writes awaiting their acknowledgement at once (deletes have a bound of the same size); a put beyond it is not published (counted as dropped). Default 64. */
  maxInFlight?: number;
  /** How often expired entries are removed from memory and deleted from the bucket. Default 1000 ms. */
  sweepIntervalMs?: number;
  /** Connection name shown by the NATS server. Default `sightline-cache`. */
  name?: string;
  /** Where state changes (synced, disconnected, bucket limits changed) are reported. Default: nowhere. */
  log?: (message: string) => void;
}

/** Deletes remembered while they cannot be sent; beyond this the bucket's max_age clears them. */
const MAX_PURGE_QUEUE = 10_000;

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** A write waiting for JetStream's acknowledgement. */
interface Pending {
  key: string;
  slot: Slot;
  sentAtMs: number;
}

/** A write waiting for the next flush. */
interface Queued {
  key: string;
  slot: Slot;
  sized: ReturnType<typeof frameSize>;
}

const decoder = new TextDecoder();

/** The stream sequence (= the entry's revision) of a JetStream acknowledgement, or why there is none. */
function ackOf(m: Msg): number | string {
  if (m.data.length === 0) return m.headers?.description || `status ${m.headers?.code ?? 'unknown'}`; // e.g. 503, no responders: JetStream is not there
  try {
    const a = JSON.parse(decoder.decode(m.data)) as { seq?: unknown; error?: { description?: unknown } };
    if (a.error !== undefined) return String(a.error.description ?? 'JetStream error');
    return typeof a.seq === 'number' && a.seq > 0 ? a.seq : 'malformed acknowledgement';
  } catch {
    return 'malformed acknowledgement';
  }
}

export class NatsResponseCache implements ResponseCache {
  readonly ready: Promise<void>;
  #resolveReady!: () => void;
  readonly #opts: Required<Omit<NatsResponseCacheOptions, 'maxEntryBytes'>> & { maxEntryBytes: number | null };
  readonly #entries: Entries;
  /** The server's max_payload once connected. */
  #maxPayload = DEFAULT_MAX_ENTRY_BYTES;
  #synced = false;
  #error: string | null = null;
  #nc: NatsConnection | null = null;
  #kv: KV | null = null;
  #connected = false;
  #watch: QueuedIterator<KvEntry> | null = null;
  #closed = false;
  #wake: (() => void) | null = null;
  /** Counts disconnects and reconnects, so a watch created across one is known to be stale. */
  #epoch = 0;
  #backoff = 250;
  readonly #startTimer: NodeJS.Timeout;
  readonly #sweepTimer: NodeJS.Timeout;
  readonly #loop: Promise<void>;
  /** Expired entries to delete from the bucket: key → the revision they were read at. */
  readonly #purges = new Map<string, number>();
  /** Writes sent and not yet acknowledged, by reply token, in the order sent. */
  readonly #pending = new Map<string, Pending>();
  /** Writes accepted by `put`, published at the next flush. */
  #queue: Queued[] = [];
  #flushScheduled = false;
  readonly #flushNow = () => this.#flush();
  #inbox: string | null = null;
  #writeSeq = 0;
  #purgesInFlight = 0;
  #idle: (() => void) | null = null;
  #stored = 0;
  #oversize = 0;
  #invalid = 0;
  #published = 0;
  #dropped = 0;
  #purged = 0;
  #lastWriteError: string | null = null;

  constructor(opts: NatsResponseCacheOptions) {
    try {
      natsServers(opts.url); // a malformed URL list fails now, not in the background
    } catch (e) {
      throw new CacheError('SL_CACHE_OPTION', `url: ${message(e)}`, 'url', { cause: e });
    }
    this.#opts = {
      url: opts.url,
      maxBytes: positive('maxBytes', opts.maxBytes, DEFAULT_MAX_BYTES),
      maxEntryBytes: opts.maxEntryBytes === undefined ? null : positive('maxEntryBytes', opts.maxEntryBytes, 0),
      bucketMaxBytes: Math.floor(positive('bucketMaxBytes', opts.bucketMaxBytes, 256 * MiB)),
      bucketMaxAgeMs: positive('bucketMaxAgeMs', opts.bucketMaxAgeMs, 24 * 3600_000),
      replicas: positive('replicas', opts.replicas, 1),
      startTimeoutMs: positive('startTimeoutMs', opts.startTimeoutMs, 2000),
      writeTimeoutMs: positive('writeTimeoutMs', opts.writeTimeoutMs, 2000),
      maxInFlight: positive('maxInFlight', opts.maxInFlight, 64),
      writeDelayMs: opts.writeDelayMs === 0 ? 0 : positive('writeDelayMs', opts.writeDelayMs, 5),
      sweepIntervalMs: positive('sweepIntervalMs', opts.sweepIntervalMs, DEFAULT_SWEEP_INTERVAL_MS),
      name: opts.name ?? 'sightline-cache',
      log: opts.log ?? (() => {}),
    };
    this.#entries = new Entries(this.#opts.maxBytes, (key, slot) => this.#queuePurge(key, slot.revision));
    this.ready = new Promise((r) => (this.#resolveReady = r));
    this.#startTimer = setTimeout(() => {
      if (this.#synced || this.#closed) return;
      this.#opts.log(`cache: NATS not reachable within ${this.#opts.startTimeoutMs} ms (${this.#error ?? 'connecting'}); starting empty, answers cached now stay in this process until it is`);
      this.#resolveReady();
    }, this.#opts.startTimeoutMs);
    this.#sweepTimer = setInterval(() => this.#sweep(), this.#opts.sweepIntervalMs);
    this.#sweepTimer.unref();
    this.#loop = this.#run();
  }

  // ---- the request path: memory only -------------------------------------------------------

  get(key: string, nowMs: number): CachedResponse | null {
    return this.#entries.get(key, nowMs);
  }

  put(key: string, r: CachedResponse): void {
    if (this.#closed) return;
    if (!KEY_PATTERN.test(key) || !valid(r)) {
      this.#invalid++;
      return;
    }
    const sized = frameSize(r);
    if (sized.size > this.#maxEntryBytes()) {
      this.#oversize++;
      return;
    }
    const slot: Slot = { response: r, bytes: slotBytes(key, sized.size), revision: 0 };
    if (!this.#entries.set(key, slot)) {
      this.#oversize++; // larger than the whole memory bound
      return;
    }
    this.#stored++;
    this.#purges.delete(key);
    if (this.#kv === null || !this.#connected || this.#pending.size + this.#queue.length >= this.#opts.maxInFlight) {
      this.#dropped++;
      return;
    }
    this.#queue.push({ key, slot, sized });
    if (!this.#flushScheduled) {
      this.#flushScheduled = true;
      const delay = this.#opts.writeDelayMs;
      if (delay > 0) setTimeout(this.#flushNow, delay).unref();
      else setImmediate(this.#flushNow);
    } else if (this.#queue.length >= this.#opts.maxInFlight / 2) {
      // A burst: publish what is queued at the next turn rather than let the bound drop the rest.
      setImmediate(this.#flushNow);
    }
  }

  /** Encodes and publishes the queued writes (nats.js coalesces them into few socket writes). */
  #flush(): void {
    this.#flushScheduled = false;
    const queue = this.#queue;
    this.#queue = [];
    const nc = this.#nc;
    const inbox = this.#inbox;
    const sentAtMs = performance.now();
    for (const q of queue) {
      if (nc === null || inbox === null || !this.#connected) {
        this.#writeFailed('not connected to NATS');
        continue;
      }
      const token = String(++this.#writeSeq);
      try {
        nc.publish(SUBJECT_PREFIX + q.key, encodeFrame(q.slot.response, q.sized), { reply: `${inbox}.${token}` });
      } catch (e) {
        this.#writeFailed(message(e));
        continue;
      }
      this.#pending.set(token, { key: q.key, slot: q.slot, sentAtMs });
    }
  }

  status(): CacheStatus {
    const e = this.#entries;
    return {
      source: 'nats',
      synced: this.#synced,
      error: this.#error,
      entries: e.size,
      bytes: e.bytes,
      maxBytes: e.maxBytes,
      maxEntryBytes: this.#maxEntryBytes(),
      hits: e.hits,
      misses: e.misses,
      expired: e.expired,
      stored: this.#stored,
      oversize: this.#oversize,
      invalid: this.#invalid,
      evicted: e.evicted,
      published: this.#published,
      dropped: this.#dropped,
      purged: this.#purged,
    };
  }

  #maxEntryBytes(): number {
    return Math.min(this.#opts.maxEntryBytes ?? this.#maxPayload, this.#maxPayload);
  }

  /** JetStream's answer to one of our writes. */
  #acked(m: Msg): void {
    const inbox = this.#inbox;
    if (inbox === null || !m.subject.startsWith(inbox)) return;
    const token = m.subject.slice(inbox.length + 1);
    const w = this.#pending.get(token);
    if (w === undefined) return; // timed out already (and counted)
    this.#pending.delete(token);
    const ack = ackOf(m);
    if (typeof ack === 'number') {
      this.#published++;
      // The watch usually brought the echo first; if not, the revision is what a later delete needs.
      if (w.slot.revision === 0 && this.#entries.peek(w.key) === w.slot) w.slot.revision = ack;
    } else this.#writeFailed(ack);
    this.#settled();
  }

  #writeFailed(why: string): void {
    this.#dropped++;
    if (why !== this.#lastWriteError) this.#opts.log(`cache: a write to the bucket failed (${why}); the entry stays in this process only`);
    this.#lastWriteError = why;
  }

  /** Writes past the write timeout will not be acknowledged any more: counted as dropped. */
  #expireWrites(): void {
    const before = performance.now() - this.#opts.writeTimeoutMs;
    for (const [token, w] of this.#pending) {
      if (w.sentAtMs > before) break; // sent in order: the rest are younger
      this.#pending.delete(token);
      this.#writeFailed(`no acknowledgement within ${this.#opts.writeTimeoutMs} ms`);
    }
    this.#settled();
  }

  #settled(): void {
    if (this.#pending.size === 0 && this.#purgesInFlight === 0) this.#idle?.();
  }

  // ---- expiry: deletes from the bucket, in the background ----------------------------------

  #queuePurge(key: string, revision: number): void {
    // Revision 0: never seen in the bucket (a put not published or not echoed yet): nothing to delete.
    if (revision === 0 || this.#purges.size >= MAX_PURGE_QUEUE) return;
    const queued = this.#purges.get(key);
    if (queued === undefined || queued < revision) this.#purges.set(key, revision);
  }

  #sweep(): void {
    this.#expireWrites();
    this.#entries.sweep(Date.now(), (key, slot) => this.#queuePurge(key, slot.revision));
    const kv = this.#kv;
    if (kv === null || !this.#connected) return;
    for (const [key, revision] of this.#purges) {
      if (this.#purgesInFlight >= this.#opts.maxInFlight) break;
      this.#purges.delete(key);
      this.#purgesInFlight++;
      // previousSeq: only if the entry is still the expired one. A newer answer, or another
      // replica's delete, makes this fail with "wrong last sequence", which is the wanted outcome.
      kv.purge(key, { previousSeq: revision }).then(
        () => {
          this.#purged++;
          this.#purgesInFlight--;
          this.#settled();
        },
        () => {
          this.#purgesInFlight--;
          this.#settled();
        },
      );
    }
  }

  // ---- the watch ---------------------------------------------------------------------------

  /** Connects (retrying), opens the bucket and watches it; again after every disconnect. */
  async #run(): Promise<void> {
    while (!this.#closed) {
      let wait = this.#backoff;
      try {
        const nc = await this.#connection();
        if (!this.#connected) {
          wait = 60_000; // nats.js is reconnecting on its own: wait for its reconnect event
        } else {
          const kv = await this.#bucket(nc);
          this.#kv = kv;
          await this.#watchOnce(kv);
          // The watch ended: a disconnect (wait for the reconnect), a reconnect (watch again
          // now) or a connection closed for good (connect again after the backoff).
          wait = this.#nc === null ? this.#backoff : this.#connected ? 0 : 60_000;
          this.#backoff = 250;
        }
      } catch (e) {
        if (this.#closed) break;
        const m = message(e);
        if (m !== this.#error) this.#opts.log(`cache: ${m}; retrying`);
        this.#error = m;
        this.#backoff = Math.min(this.#backoff * 2, 2000);
      }
      if (this.#closed) break;
      if (wait > 0) {
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, wait);
          t.unref();
          this.#wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
        this.#wake = null;
      }
    }
  }

  async #connection(): Promise<NatsConnection> {
    if (this.#nc !== null) return this.#nc;
    const nc = await connectNats(this.#opts.url, this.#opts.name, { timeout: this.#opts.startTimeoutMs });
    if (this.#closed) {
      await nc.close();
      throw new Error('closed');
    }
    this.#nc = nc;
    this.#connected = true;
    this.#maxPayload = nc.info?.max_payload ?? DEFAULT_MAX_ENTRY_BYTES;
    // One subscription receives the acknowledgements of all our writes (resubscribed by nats.js after a reconnect).
    const inbox = createInbox();
    nc.subscribe(`${inbox}.*`, { callback: (err, m) => err === null && this.#acked(m) });
    this.#inbox = inbox;
    void this.#follow(nc);
    // A connection closed for good (not by us; reconnects are unlimited, so e.g. refused credentials): start over.
    void nc.closed().then(() => {
      if (this.#closed) return;
      this.#nc = null;
      this.#kv = null;
      this.#inbox = null;
      this.#connected = false;
      this.#synced = false;
      this.#watch?.stop();
      this.#wake?.();
    });
    return nc;
  }

  /** Connection events: a disconnect ends the watch (entries kept, not synced); a reconnect starts a new one. */
  async #follow(nc: NatsConnection): Promise<void> {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') {
        this.#epoch++;
        this.#connected = false;
        this.#synced = false;
        this.#error = `disconnected from NATS (${String(s.data)})`;
        this.#opts.log(`cache: ${this.#error}; answering from memory, new answers stay in this process`);
        this.#watch?.stop();
      } else if (s.type === 'reconnect') {
        this.#epoch++;
        this.#connected = true;
        this.#maxPayload = nc.info?.max_payload ?? this.#maxPayload;
        this.#backoff = 250;
        this.#watch?.stop();
        this.#wake?.();
      }
    }
  }

  /**
   * Opens (or creates) the bucket and makes its limits the configured ones: nats.js creates
   * KV buckets with discard "new" and leaves an existing stream's limits as they are.
   */
  async #bucket(nc: NatsConnection): Promise<KV> {
    const o = this.#opts;
    const kv = await nc.jetstream({ timeout: o.writeTimeoutMs }).views.kv(CACHE_BUCKET, { history: 1, max_bytes: o.bucketMaxBytes, ttl: o.bucketMaxAgeMs, replicas: o.replicas });
    const jsm = await nc.jetstreamManager({ timeout: o.writeTimeoutMs });
    const { config } = await jsm.streams.info(STREAM);
    const maxAge = nanos(o.bucketMaxAgeMs);
    if (config.discard !== DiscardPolicy.Old || config.max_bytes !== o.bucketMaxBytes || config.max_age !== maxAge || config.num_replicas !== o.replicas) {
      await jsm.streams.update(STREAM, { discard: DiscardPolicy.Old, max_bytes: o.bucketMaxBytes, max_age: maxAge, num_replicas: o.replicas });
      o.log(`cache: bucket ${CACHE_BUCKET} set to discard its oldest entries past ${o.bucketMaxBytes} bytes or ${o.bucketMaxAgeMs} ms (was discard ${config.discard}, ${config.max_bytes} bytes, ${config.max_age / 1e6} ms)`);
    }
    return kv;
  }

  async #watchOnce(kv: KV): Promise<void> {
    const epoch = this.#epoch;
    const status = await kv.status();
    // The last revision in the bucket now: memory is in step once it has been read (or once
    // the consumer has nothing pending, nats.js's own signal).
    const target = status.values === 0 ? 0 : status.streamInfo.state.last_seq;
    let live = target === 0;
    if (live) this.#caughtUp();
    // Every message of the stream rather than nats.js's default (the last per subject): with
    // history 1 they are the same entries, and nats-server 2.9.10 delivers a last-per-subject
    // consumer's messages in time that grows with the number of keys (packages/directory).
    const iter = await kv.watch({ include: KvWatchInclude.AllHistory });
    this.#watch = iter;
    // Created across a disconnect: its consumer may be gone with the server; the loop makes another.
    if (this.#closed || !this.#connected || epoch !== this.#epoch) iter.stop();
    for await (const e of iter) {
      this.#apply(e);
      if (!live && (e.revision >= target || e.delta === 0)) {
        live = true;
        this.#caughtUp();
      }
    }
    this.#watch = null;
    if (!this.#closed) this.#synced = false;
  }

  #caughtUp(): void {
    const was = this.#synced;
    this.#synced = true;
    this.#error = null;
    clearTimeout(this.#startTimer);
    this.#resolveReady();
    if (!was) this.#opts.log(`cache: synced with NATS (${this.#entries.size} entries in memory)`);
  }

  /** One change from the watch, applied to memory. */
  #apply(e: KvEntry): void {
    const key = e.key;
    const cur = this.#entries.peek(key);
    if (e.operation !== 'PUT') {
      // A delete of an older revision than ours is not about our entry (0: a put of ours not
      // yet echoed, which is written after this delete).
      if (cur !== undefined && cur.revision !== 0 && cur.revision < e.revision) this.#entries.delete(key);
      const queued = this.#purges.get(key);
      if (queued !== undefined && queued < e.revision) this.#purges.delete(key);
      return;
    }
    const t = frameExpiry(e.value);
    if (t === null) {
      this.#invalid++;
      return;
    }
    if (t.expiresAtMs <= Date.now()) {
      if (cur !== undefined && cur.response.storedAtMs <= t.storedAtMs) this.#entries.delete(key);
      this.#queuePurge(key, e.revision);
      return;
    }
    this.#purges.delete(key);
    if (cur !== undefined) {
      const r = cur.response;
      // Our own put coming back, or an entry already held (a replay after a reconnect): keep it, note the revision.
      if (r.storedAtMs === t.storedAtMs && r.expiresAtMs === t.expiresAtMs && r.body.length === t.bodyBytes) {
        cur.revision = e.revision;
        return;
      }
      // Two replicas cached the same request: either answer is right; keep the newer.
      if (r.storedAtMs > t.storedAtMs) return;
    }
    const r = decodeFrame(e.value);
    if (r === null) {
      this.#invalid++;
      return;
    }
    this.#entries.set(key, { response: r, bytes: slotBytes(key, e.value.length), revision: e.revision });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#startTimer);
    clearInterval(this.#sweepTimer);
    this.#resolveReady();
    // Writes accepted and deletes already sent get their answer (within the write timeout) before the connection goes.
    if (this.#queue.length > 0) this.#flush();
    if (this.#pending.size > 0 || this.#purgesInFlight > 0) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((r) => {
        this.#idle = r;
        timer = setTimeout(r, this.#opts.writeTimeoutMs);
      });
      clearTimeout(timer);
      this.#expireWrites();
    }
    this.#watch?.stop();
    this.#wake?.();
    await this.#nc?.close().catch(() => {});
    await this.#loop;
    this.#entries.clear();
  }
}
