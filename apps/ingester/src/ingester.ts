/**
 * The ingester: pulls capture batches from the bus, writes them to ClickHouse, and
 * acknowledges them only after ClickHouse confirmed the write. On a write failure the
 * messages are given back (nak with backoff) and retried; rows are keyed so that a
 * batch written twice (redelivery after a crash between write and ack) collapses to
 * one (ReplacingMergeTree, see migrations/ and docs/schema.md).
 */
import type { BusConsumer, BusMessage } from '@sightline/bus';
import type { Store } from '@sightline/store';
import { unixNanoNow, type CaptureBatch, type RequestRow, type SpanRow } from '@sightline/core';

export interface IngesterOptions {
  consumer: BusConsumer;
  store: Store;
  /** Messages (batches) written per ClickHouse insert, at most. Default 64. */
  maxMessages?: number;
  /** Milliseconds a fetch waits for messages. Default 1 000. */
  fetchWaitMs?: number;
  log?: (msg: string) => void;
}

export interface IngesterStats {
  /** Bus messages written and acknowledged. */
  batches: number;
  requests: number;
  spans: number;
  /** Inserts that failed and were retried. */
  writeFailures: number;
  /** Messages that were not capture batches (acknowledged and counted, not written). */
  invalid: number;
  /** Publish-to-written lag of the last written batch, in milliseconds. */
  lastLagMs: number;
}

export class Ingester {
  readonly #consumer: BusConsumer;
  readonly #store: Store;
  readonly #max: number;
  readonly #wait: number;
  readonly #log: (msg: string) => void;
  #running = false;
  #loop: Promise<void> | null = null;
  #backoff = 0;
  #sleepTimer: NodeJS.Timeout | null = null;
  #wake: (() => void) | null = null;
  readonly stats: IngesterStats = { batches: 0, requests: 0, spans: 0, writeFailures: 0, invalid: 0, lastLagMs: 0 };

  constructor(opts: IngesterOptions) {
    this.#consumer = opts.consumer;
    this.#store = opts.store;
    this.#max = opts.maxMessages ?? 64;
    this.#wait = opts.fetchWaitMs ?? 1_000;
    this.#log = opts.log ?? (() => {});
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#loop = this.#run();
  }

  /** Stops after the batch in hand is written (or given back). */
  async stop(): Promise<void> {
    this.#running = false;
    if (this.#sleepTimer !== null) clearTimeout(this.#sleepTimer);
    this.#wake?.();
    await this.#loop;
  }

  async #run(): Promise<void> {
    while (this.#running) {
      let msgs: BusMessage[];
      try {
        msgs = await this.#consumer.fetch(this.#max, this.#wait);
      } catch (e) {
        this.#log(`fetch failed: ${(e as Error).message}`);
        await this.#sleep(this.#nextBackoff());
        continue;
      }
      if (msgs.length === 0) continue;
      await this.#process(msgs);
    }
  }

  async #process(msgs: BusMessage[]): Promise<void> {
    const requests: RequestRow[] = [];
    const spans: SpanRow[] = [];
    const good: BusMessage[] = [];
    let oldestPublish = 0n;
    for (const m of msgs) {
      let batch: CaptureBatch;
      try {
        batch = JSON.parse(Buffer.from(m.data).toString('utf8')) as CaptureBatch;
        if (batch.v !== 1 || !Array.isArray(batch.requests) || !Array.isArray(batch.spans)) throw new Error('not a v1 capture batch');
      } catch (e) {
        this.stats.invalid++;
        this.#log(`message ${m.msgId} is not a capture batch (${(e as Error).message}); acknowledged and skipped`);
        await m.ack().catch(() => {});
        continue;
      }
      for (const r of batch.requests) requests.push(r);
      for (const s of batch.spans) spans.push(s);
      const pub = BigInt(batch.published_at_unix_nano || '0');
      if (oldestPublish === 0n || (pub > 0n && pub < oldestPublish)) oldestPublish = pub;
      good.push(m);
    }
    if (good.length === 0) return;
    try {
      // Spans first: a request row that is visible has its spans visible too.
      await this.#store.insert('spans', spans);
      await this.#store.insert('requests', requests);
    } catch (e) {
      this.stats.writeFailures++;
      const delay = this.#nextBackoff();
      this.#log(`write of ${good.length} batches failed, retrying in ${Math.round(delay)} ms: ${(e as Error).message}`);
      for (const m of good) m.nak(delay);
      await this.#sleep(delay);
      return;
    }
    this.#backoff = 0;
    if (oldestPublish > 0n) this.stats.lastLagMs = Number(unixNanoNow() - oldestPublish) / 1e6;
    for (const m of good) {
      try {
        await m.ack();
      } catch (e) {
        // Not acknowledged: the batch comes back and is written again, which the
        // table engines collapse. Nothing is lost.
        this.#log(`ack of ${m.msgId} failed: ${(e as Error).message}`);
      }
    }
    this.stats.batches += good.length;
    this.stats.requests += requests.length;
    this.stats.spans += spans.length;
  }

  #nextBackoff(): number {
    this.#backoff = Math.min(10_000, this.#backoff === 0 ? 200 : this.#backoff * 2);
    return this.#backoff * (0.5 + Math.random() / 2);
  }

  #sleep(ms: number): Promise<void> {
    if (!this.#running) return Promise.resolve();
    return new Promise((resolve) => {
      this.#wake = resolve;
      this.#sleepTimer = setTimeout(resolve, ms);
    });
  }
}
