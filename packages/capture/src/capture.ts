/**
 * The capture hand-off: finished request records in, published span batches out.
 *
 * `record()` is the only call on the request side and is O(1): it appends the record to
 * a bounded queue. Spans are built later, a batch at a time, on a timer that is
 * `unref()`'d, and batches are published with a message id and a bound on publishes in
 * flight, each with a timeout. A batch whose publish fails is kept and retried with
 * backoff; JetStream's dedup makes a retry of a publish that did land harmless.
 * When the queue is full, new records are dropped and counted (`dropped`).
 * (Modelled on OpenTelemetry's BatchSpanProcessor bounds and counters.)
 */
import { unixNanoNow, type CaptureBatch } from '@sightline/core';
import type { BusPublisher } from '@sightline/bus';
import type { CaptureConfig } from '@sightline/config';
import type { RequestRecord } from './record.js';
import { SpanBuilder } from './spans.js';

export interface CaptureStats {
  /** Records handed to capture. */
  recorded: number;
  /** Requests in batches JetStream acknowledged. */
  published: number;
  /** Batches JetStream acknowledged. */
  publishedBatches: number;
  /** Publish attempts that failed or timed out (each is retried). */
  publishFailures: number;
  /** Records dropped because the queue was full. */
  dropped: number;
  /** Records waiting: not yet built, or built and not yet acknowledged. */
  queued: number;
}

interface OutBatch {
  id: string;
  data: Uint8Array;
  requests: number;
  attempts: number;
}

export interface CaptureOptions {
  instance: string;
  config: CaptureConfig;
  publisher: BusPublisher;
  version?: string;
  /** Called when building or publishing fails, for logging. Capture never throws into requests. */
  onError?: (err: unknown) => void;
}

export class Capture {
  readonly #cfg: CaptureConfig;
  readonly #publisher: BusPublisher;
  readonly #builder: SpanBuilder;
  readonly #instance: string;
  readonly #onError: (err: unknown) => void;
  #pending: RequestRecord[] = [];
  readonly #outbox: OutBatch[] = [];
  #outboxRequests = 0;
  #inFlight = 0;
  #batchSeq = 0;
  #timer: NodeJS.Timeout | null = null;
  #retryTimer: NodeJS.Timeout | null = null;
  #retryDelay = 0;
  #closed = false;
  #idleWaiters: (() => void)[] = [];

  readonly stats: CaptureStats = { recorded: 0, published: 0, publishedBatches: 0, publishFailures: 0, dropped: 0, queued: 0 };

  constructor(opts: CaptureOptions) {
    this.#cfg = opts.config;
    this.#publisher = opts.publisher;
    this.#instance = opts.instance;
    this.#builder = new SpanBuilder({ instance: opts.instance, version: opts.version });
    this.#onError = opts.onError ?? (() => {});
  }

  /** Hands a finished request to capture. Never throws, never waits. */
  record(rec: RequestRecord): void {
    this.stats.recorded++;
    if (this.#pending.length + this.#outboxRequests >= this.#cfg.queueMaxRequests) {
      this.stats.dropped++;
      return;
    }
    this.#pending.push(rec);
    this.stats.queued++;
    if (this.#pending.length >= this.#cfg.batchMaxRequests) {
      if (this.#timer !== null) clearTimeout(this.#timer);
      this.#timer = setTimeout(this.#onTimer, 0);
      this.#timer.unref();
    } else if (this.#timer === null) {
      this.#timer = setTimeout(this.#onTimer, this.#cfg.flushIntervalMs);
      this.#timer.unref();
    }
  }

  readonly #onTimer = (): void => {
    this.#timer = null;
    this.#buildBatches();
    this.#pump();
  };

  #buildBatches(): void {
    while (this.#pending.length > 0) {
      const recs = this.#pending.length <= this.#cfg.batchMaxRequests ? this.#pending : this.#pending.slice(0, this.#cfg.batchMaxRequests);
      this.#pending = recs === this.#pending ? [] : this.#pending.slice(recs.length);
      const batch: CaptureBatch = {
        v: 1,
        instance: this.#instance,
        batch: String(++this.#batchSeq),
        published_at_unix_nano: '',
        requests: [],
        spans: [],
      };
      for (const r of recs) {
        try {
          const built = this.#builder.build(r);
          batch.requests.push(built.request);
          for (const s of built.spans) batch.spans.push(s);
        } catch (e) {
          // A record that cannot be built is counted as dropped rather than blocking the batch.
          this.stats.dropped++;
          this.stats.queued--;
          this.#onError(e);
        }
      }
      if (batch.requests.length === 0) continue;
      batch.published_at_unix_nano = unixNanoNow().toString();
      this.#outbox.push({
        id: `${this.#instance}/${batch.batch}`,
        data: Buffer.from(JSON.stringify(batch)),
        requests: batch.requests.length,
        attempts: 0,
      });
      this.#outboxRequests += batch.requests.length;
    }
  }

  #pump(): void {
    if (this.#retryTimer !== null) return;
    while (this.#inFlight < this.#cfg.maxInFlight && this.#outbox.length > 0) {
      const b = this.#outbox.shift()!;
      this.#inFlight++;
      b.attempts++;
      this.#publisher.publish(b.data, b.id, this.#cfg.publishTimeoutMs).then(
        () => {
          this.#inFlight--;
          this.#outboxRequests -= b.requests;
          this.stats.published += b.requests;
          this.stats.publishedBatches++;
          this.stats.queued -= b.requests;
          this.#retryDelay = 0;
          this.#pump();
          this.#checkIdle();
        },
        (err: unknown) => {
          this.#inFlight--;
          this.stats.publishFailures++;
          this.#outbox.unshift(b);
          if (b.attempts === 1) this.#onError(err);
          this.#scheduleRetry();
          this.#checkIdle();
        },
      );
    }
  }

  #scheduleRetry(): void {
    if (this.#retryTimer !== null || this.#closed) return;
    // Exponential backoff from 100 ms to 5 s, with jitter so replicas do not retry in step.
    this.#retryDelay = Math.min(5_000, this.#retryDelay === 0 ? 100 : this.#retryDelay * 2);
    const delay = this.#retryDelay * (0.5 + Math.random() / 2);
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = null;
      this.#pump();
    }, delay);
    this.#retryTimer.unref();
  }

  #checkIdle(): void {
    if (this.#inFlight === 0 && (this.#outbox.length === 0 || this.#closed)) {
      const ws = this.#idleWaiters;
      this.#idleWaiters = [];
      for (const w of ws) w();
    }
  }

  /**
   * Builds and publishes everything queued, resolving when all of it was acknowledged or
   * the deadline passed. Returns the number of requests still unpublished.
   */
  async flush(timeoutMs: number): Promise<number> {
    if (this.#timer !== null) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    this.#buildBatches();
    const deadline = Date.now() + timeoutMs;
    while (this.#outbox.length > 0 || this.#inFlight > 0) {
      if (this.#retryTimer !== null && this.#inFlight === 0) {
        clearTimeout(this.#retryTimer);
        this.#retryTimer = null;
      }
      this.#pump();
      const left = deadline - Date.now();
      if (left <= 0) break;
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, Math.min(left, 200));
        const waiters = this.#idleWaiters;
        function done() {
          clearTimeout(t);
          const i = waiters.indexOf(done);
          if (i >= 0) waiters.splice(i, 1);
          resolve();
        }
        waiters.push(done);
      });
    }
    return this.#pending.length + this.#outboxRequests;
  }

  /** Flushes within the deadline, then stops timers. */
  async close(timeoutMs: number): Promise<number> {
    const left = await this.flush(timeoutMs);
    this.#closed = true;
    if (this.#retryTimer !== null) clearTimeout(this.#retryTimer);
    return left;
  }
}
