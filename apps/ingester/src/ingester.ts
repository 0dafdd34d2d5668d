/**
 * The ingester: pulls capture batches from the bus, builds each request's row and
 * OpenTelemetry spans from the records the gateways published (@sightline/spans),
 * writes them to ClickHouse, and acknowledges them only after ClickHouse confirmed the
 * write. On a write failure the messages are given back (nak with backoff) and retried;
 * rows are keyed so that a batch written twice (redelivery after a crash between write
 * and ack) collapses to one (ReplacingMergeTree, see migrations/ and docs/schema.md).
 */
import type { BusConsumer, BusMessage } from '@sightline/bus';
import { decodeBatch, SpanBuilder, type ContentRow, type DecodedBatch, type RedactText } from '@sightline/spans';
import { StoreError, type Store } from '@sightline/store';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { Rollup } from './rollup.js';
import type { OtlpExport } from './otlp.js';
import { unixNanoNow, type IngestBatchRow, type RequestRow, type SpanRow } from '@sightline/core';

export interface IngesterOptions {
  consumer: BusConsumer;
  store: Store;
  /** Name of this ingester in `ingest_batches`. */
  name?: string;
  /** Messages (batches) written per ClickHouse insert, at most. Default 64. */
  maxMessages?: number;
  /** Milliseconds a fetch waits for messages. Default 1 000. */
  fetchWaitMs?: number;
  /**
   * Fetched message sets being built and written at once. With 2, the next set is fetched
   * and its spans built while ClickHouse writes the previous one. Default 2.
   */
  writesInFlight?: number;
  /**
   * Deliveries after which a message ClickHouse keeps refusing goes to the dead-letter
   * subject. Only refusals count (ClickHouse answered that the data is bad); while
   * ClickHouse is unreachable, messages wait however long it takes. Default 5.
   */
  maxDeliveries?: number;
  /** Recomputes the per-minute rollup for the minutes each write touched; null: none. */
  rollup?: Rollup | null;
  /**
   * Lag observations kept until the next /metrics scrape takes them, at most; past it they
   * are dropped and counted (`lagObservationsDropped`), so an ingester nobody scrapes
   * keeps bounded memory. Default 10 000.
   */
  maxLagObservations?: number;
  /**
   * Replaces personal data in the content of teams with policy `redacted` before it is
   * stored (`@sightline/redact`'s `redactPersonal`). null (the default): such content is
   * withheld — not stored at all — and counted in `contentWithheld`.
   */
  redactPersonal?: RedactText | null;
  /**
   * Also exports the spans it builds over OTLP (otlp.ts), after their batch is written and
   * acknowledged; null (the default): no export. The caller closes it after `stop()`.
   */
  otlp?: OtlpExport | null;
  log?: (msg: string) => void;
}

export interface IngesterStats {
  /** Bus messages written and acknowledged. */
  batches: number;
  requests: number;
  spans: number;
  /** Content rows written (issue 11). */
  content: number;
  /**
   * Requests whose content was not stored: policy `redacted` without a personal-data
   * redactor, or content that could not be prepared (DecodedBatch.contentWithheld).
   */
  contentWithheld: number;
  /** Inserts that failed and were retried. */
  writeFailures: number;
  /** Messages moved to the dead-letter subject (not capture batches, or refused by ClickHouse). */
  deadLettered: number;
  /** Publish-to-written lag of the last written batch, in milliseconds. */
  lastLagMs: number;
  /** Lag observations dropped because `lagObservations` was full (nobody scraped /metrics). */
  lagObservationsDropped: number;
  /**
   * Messages received again after an earlier delivery was not acknowledged: an ingester
   * that died or timed out holding them, or a write that failed and gave them back.
   */
  redelivered: number;
  /**
   * Messages this ingester gave back itself (nak) to be delivered again: after a failed write
   * and when dead-lettering failed; a message counts once per nak. Redeliveries beyond it
   * (summed over the ingesters) were given back by none: messages an ingester held when it
   * stopped or died, or deliveries and acknowledgements lost until the ack wait ran out.
   */
  givenBack: number;
}

interface Parsed {
  m: BusMessage;
  batch: DecodedBatch;
  /** The spans built for `batch` as the SDK made them, for OTLP export; empty without it. */
  otel: ReadableSpan[];
}

const NO_SPANS: ReadableSpan[] = [];

export class Ingester {
  readonly #consumer: BusConsumer;
  readonly #store: Store;
  readonly #name: string;
  readonly #max: number;
  readonly #wait: number;
  readonly #inFlight: number;
  readonly #maxDeliveries: number;
  readonly #rollup: Rollup | null;
  readonly #log: (msg: string) => void;
  readonly #builder: SpanBuilder;
  readonly #otlp: OtlpExport | null;
  readonly #redactPersonal: RedactText | null;
  #warnedWithheld = false;
  #running = false;
  #loop: Promise<void> | null = null;
  #backoff = 0;
  /** Backoff sleeps in progress (one per set being written, and the fetch loop's): stop() ends them. */
  readonly #sleeping = new Set<() => void>();
  readonly stats: IngesterStats = { batches: 0, requests: 0, spans: 0, content: 0, contentWithheld: 0, writeFailures: 0, deadLettered: 0, lastLagMs: 0, lagObservationsDropped: 0, redelivered: 0, givenBack: 0 };
  /** Publish-to-write lag of recent batches (milliseconds), taken by the metrics histogram. */
  readonly lagObservations: number[] = [];
  readonly #maxLagObservations: number;

  constructor(opts: IngesterOptions) {
    this.#consumer = opts.consumer;
    this.#store = opts.store;
    this.#name = opts.name ?? 'ingester';
    this.#max = opts.maxMessages ?? 64;
    this.#wait = opts.fetchWaitMs ?? 1_000;
    this.#inFlight = Math.max(1, opts.writesInFlight ?? 2);
    this.#maxDeliveries = opts.maxDeliveries ?? 5;
    this.#rollup = opts.rollup ?? null;
    this.#log = opts.log ?? (() => {});
    this.#maxLagObservations = opts.maxLagObservations ?? 10_000;
    this.#redactPersonal = opts.redactPersonal ?? null;
    this.#otlp = opts.otlp ?? null;
    this.#builder = new SpanBuilder(this.#otlp === null ? {} : { spanProcessors: [this.#otlp.holder], resource: this.#otlp.resource });
  }

  /** The OTLP export, when there is one (its counters are in /metrics). */
  get otlp(): OtlpExport | null {
    return this.#otlp;
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#loop = this.#run();
  }

  /** ClickHouse inserts the store sent once more at once, the connection having broken under them. */
  get insertsResent(): number {
    return this.#store.insertsResent ?? 0;
  }

  /** Stops after the batch in hand is written (or given back). */
  async stop(): Promise<void> {
    this.#running = false;
    for (const wake of [...this.#sleeping]) wake();
    await this.#loop;
    if (this.#rollup !== null) {
      this.#rollup.stop();
      await this.#rollup.flush().catch(() => {});
    }
  }

  async #run(): Promise<void> {
    // Each message is acknowledged after its own write, so sets written side by side keep
    // the at-least-once guarantee; the tables collapse what a crash makes written twice.
    const writing = new Set<Promise<void>>();
    while (this.#running) {
      if (writing.size >= this.#inFlight) {
        await Promise.race(writing);
        continue;
      }
      let msgs: BusMessage[];
      try {
        msgs = await this.#consumer.fetch(this.#max, this.#wait);
      } catch (e) {
        this.#log(`fetch failed: ${(e as Error).message}`);
        await this.#sleep(this.#nextBackoff());
        continue;
      }
      if (msgs.length === 0) continue;
      for (const m of msgs) if (m.deliveries > 1) this.stats.redelivered++;
      const p: Promise<void> = this.#process(msgs)
        .catch((e: unknown) => this.#log(`processing failed: ${(e as Error).message}`))
        .finally(() => writing.delete(p));
      writing.add(p);
    }
    await Promise.all(writing);
  }

  async #process(msgs: BusMessage[]): Promise<void> {
    const good: Parsed[] = [];
    for (const m of msgs) {
      // decodeBatch is synchronous: the spans the holder took in are this message's alone.
      try {
        const batch = decodeBatch(m.data, this.#builder, { redactPersonal: this.#redactPersonal });
        good.push({ m, batch, otel: this.#otlp?.take() ?? NO_SPANS });
      } catch (e) {
        this.#otlp?.take();
        await this.#deadLetter(m, `not a capture batch: ${(e as Error).message}`);
      }
    }
    if (good.length === 0) return;
    const err = await this.#write(good);
    if (err === null) {
      this.#backoff = 0;
      await this.#acked(good);
      // Stored and acknowledged: only now do the spans go to the OTLP backend, through a
      // bounded queue that never waits (otlp.ts).
      if (this.#otlp !== null) for (const p of good) this.#otlp.offer(p.otel);
      return;
    }
    this.stats.writeFailures++;
    if (err.rejected && good.length > 1) {
      // One bad batch must not hold back the others: write them one by one.
      for (const p of good) await this.#process([p.m]);
      return;
    }
    if (err.rejected && good.length === 1 && good[0]!.m.deliveries >= this.#maxDeliveries) {
      await this.#deadLetter(good[0]!.m, `ClickHouse refused the batch ${good[0]!.m.deliveries} times: ${err.message}`);
      return;
    }
    const delay = this.#nextBackoff();
    this.#log(`write of ${good.length} batches failed, retrying in ${Math.round(delay)} ms: ${err.message.split('\n')[0]}`);
    for (const p of good) this.#giveBack(p.m, delay);
    await this.#sleep(delay);
  }

  /**
   * Inserts spans, then content, then requests, then the batch ledger: a visible request
   * has its spans and its content.
   */
  async #write(good: Parsed[]): Promise<StoreError | null> {
    const requests: RequestRow[] = [];
    const spans: SpanRow[] = [];
    const content: ContentRow[] = [];
    let withheld = 0;
    const ledger: IngestBatchRow[] = [];
    const written = unixNanoNow();
    const writtenS = Number(written / 1_000_000_000n);
    for (const { batch } of good) {
      for (const r of batch.requests) requests.push(r);
      for (const s of batch.spans) spans.push(s);
      for (const c of batch.content) content.push(c);
      withheld += batch.contentWithheld;
      ledger.push({
        instance: batch.instance,
        batch: batch.batch,
        ingester: this.#name,
        published_at_unix_nano: batch.published_at_unix_nano || '0',
        written_at_unix_nano: written.toString(),
        written_at: writtenS,
        requests: batch.requests.length,
        spans: batch.spans.length,
      });
    }
    try {
      await this.#store.insert('spans', spans);
      await this.#store.insert('content', content);
      await this.#store.insert('requests', requests);
      await this.#store.insert('ingest_batches', ledger);
    } catch (e) {
      return e instanceof StoreError ? e : new StoreError('SL_STORE_INSERT', (e as Error).message, { cause: e });
    }
    const nowNs = unixNanoNow();
    for (const row of ledger) {
      const pub = BigInt(row.published_at_unix_nano);
      if (pub > 0n) {
        const lag = Number(nowNs - pub) / 1e6;
        this.stats.lastLagMs = lag;
        if (this.lagObservations.length < this.#maxLagObservations) this.lagObservations.push(lag);
        else this.stats.lagObservationsDropped++;
      }
    }
    this.stats.requests += requests.length;
    this.stats.spans += spans.length;
    this.stats.content += content.length;
    if (withheld > 0) {
      this.stats.contentWithheld += withheld;
      if (!this.#warnedWithheld) {
        this.#warnedWithheld = true;
        this.#log(`content of ${withheld} requests withheld (policy redacted without a personal-data redactor, or content that could not be prepared); counted in sightline_ingest_content_withheld_total`);
      }
    }
    if (this.#rollup !== null) {
      const minutes = new Set<number>();
      // Spans too: a stage span counts in the minute it started, which a long request's
      // later stages may not share with the request (rollup.ts).
      for (const r of requests) minutes.add(r.start_time - (r.start_time % 60));
      for (const s of spans) minutes.add(s.start_time - (s.start_time % 60));
      this.#rollup.touch(minutes);
    }
    return null;
  }

  async #acked(good: Parsed[]): Promise<void> {
    for (const { m } of good) {
      try {
        await m.ack();
      } catch (e) {
        // Not acknowledged: the batch comes back and is written again, which the table
        // engines collapse (docs/schema.md). Nothing is lost.
        this.#log(`ack of ${m.msgId} failed: ${(e as Error).message}`);
      }
    }
    this.stats.batches += good.length;
  }

  async #deadLetter(m: BusMessage, reason: string): Promise<void> {
    try {
      await this.#consumer.deadLetter(m, reason);
      this.stats.deadLettered++;
      this.#log(`message ${m.msgId} moved to the dead-letter subject: ${reason.split('\n')[0]}`);
    } catch (e) {
      // Not moved and not acknowledged: it will be delivered again and we try again.
      this.#log(`dead-lettering ${m.msgId} failed: ${(e as Error).message}`);
      this.#giveBack(m, this.#nextBackoff());
    }
  }

  /** Every nak this ingester makes goes through here, so `givenBack` counts each message given back. */
  #giveBack(m: BusMessage, delayMs: number): void {
    m.nak(delayMs);
    this.stats.givenBack++;
  }

  #nextBackoff(): number {
    this.#backoff = Math.min(10_000, this.#backoff === 0 ? 200 : this.#backoff * 2);
    return this.#backoff * (0.5 + Math.random() / 2);
  }

  #sleep(ms: number): Promise<void> {
    if (!this.#running) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        this.#sleeping.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.#sleeping.add(wake);
    });
  }
}
