/**
 * The capture hand-off: finished request records in, published record batches out.
 *
 * `record()` is the only call on the request side, made once the response is over: it
 * serialises the record (wire.ts: fields, marks and the usage read from the response; the
 * ingester builds the spans) into a bounded queue. With a content preparer (the gateway's
 * worker thread) only the record's fields are serialised here, and its usage and content
 * are made from copies in the worker, a batch's records in one flat message (job.ts, issue 15). Batches are cut on a timer that is
 * `unref()`'d and published with a message id and a bound on publishes in flight, each with
 * a timeout (modelled on OpenTelemetry's BatchSpanProcessor bounds and counters).
 *
 * When NATS is slow or unreachable — a publish failed, or the client reports it is
 * disconnected — batches go to the disk spool instead (spool.ts) and are replayed from
 * it, oldest first, once publishing works again; while the spool holds anything, new
 * batches join its end, so replay keeps arrival order. Only when the spool is full (or
 * there is none) do batches wait in memory, and only when memory is full too are
 * records dropped; every drop is counted.
 */
import { markToUnixNano, unixNanoNow } from '@sightline/core';
import type { BusPublisher } from '@sightline/bus';
import type { CaptureConfig } from '@sightline/config';
import type { RequestRecord } from './record.js';
import { batchHead, recordUsage, usageMembers, wireHead } from './wire.js';
import { contentOf, contentWire, type ContentOptions, type ContentPreparer } from './content.js';
import { BATCH_HEAD_ROOM, RECORD_GAP_BYTES, BatchCutter, JobBatch, PagePool, jobsOf, partsBuffer, preparedViews, prepareJob, recordParts, recordPartsOf, recordsBytes } from './job.js';
import { Spool, type SpoolEntry } from './spool.js';
import type { CaptureSink, CaptureStats } from './sink.js';

interface OutBatch {
  id: string;
  data: Uint8Array;
  requests: number;
  /** The preparer's buffer it lies in (#inPlace), when that buffer is to be given back (#lent). */
  lent?: ArrayBufferLike;
}

export interface CaptureOptions {
  instance: string;
  config: CaptureConfig;
  publisher: BusPublisher;
  /** Directory of the disk spool; null: no spool (batches wait in memory). */
  spoolDir?: string | null;
  /** Bytes the spool may hold. Default 1 GiB. */
  spoolMaxBytes?: number;
  /** Called when serialising, publishing or spooling fails, for logging. Capture never throws into requests. */
  onError?: (err: unknown) => void;
  /** How content is made ready to travel (content.ts); absent: no content is captured. */
  content?: ContentOptions;
  /**
   * Where content is prepared off this thread (a worker thread); absent: in this thread, when
   * the record is handed over. Preparing content costs ~5–10 µs per KiB (secret scan, decode,
   * JSON): kept off the serving thread, it cannot hold up the requests behind it (issue 15).
   */
  contentPreparer?: ContentPreparer;
  /**
   * Bytes of jobs the preparer may hold unanswered (DEFAULT_PREPARING_MAX_BYTES). Past it,
   * records are made in this thread as they are handed over, instead of waiting behind the
   * others, so a preparer that gets no CPU (a saturated core) holds bounded memory.
   */
  preparingMaxBytes?: number;
}

/**
 * 4 MiB: about 60 requests of 64 KiB prompts, 3,000 of 1 KiB. The content thread runs at nice
 * 19 and on a saturated core gets almost no CPU until the load eases; its batches wait for it
 * up to this bound, and past it the serving thread makes the records handed over, one by one
 * as requests end (as with no thread), so capture stays current and memory bounded. Before, a
 * batch it left unanswered for 1 s was made on the
 * serving thread: under sustained load many came due in the same turn of the event loop, and
 * making them stalled it for 0.4 to 1.9 s (64 KiB prompts, loop rig, 1 December). 64 MiB held
 * thousands of requests back for seconds under the same load, with no better tail.
 */
export const DEFAULT_PREPARING_MAX_BYTES = 4 * 1024 * 1024;

/**
 * The largest serialised record: under NATS's default max_payload (1 MiB) with room for the
 * batch header. A record past it (content escaped to many times its size) is serialised again
 * with its content cut harder, then without content: the request itself is never lost to it.
 */
const MAX_RECORD_BYTES = 960 * 1024;

/** Whether a publish error says the message can never be accepted (not a passing fault). */
function refusedForGood(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown };
  return e.code === 'MAX_PAYLOAD_EXCEEDED' || /max(imum)?[ _]payload/i.test(String(e.message ?? ''));
}

/** While publishing fails, how long a flush waits between tries. */
const FLUSH_RETRY_MS = 50;

const COMMA = Buffer.from(',');
const BATCH_END = Buffer.from(']}');

/** Unix time of this process's monotonic origin: every batch carries it (wire.ts). */
const ORIGIN_UNIX_NANO = markToUnixNano(0);

/** Requests in a batch, read from its bytes without parsing it (for counters). */
function requestsIn(data: Uint8Array): number {
  const m = /"requests_count":(\d+)/.exec(Buffer.from(data.buffer, data.byteOffset, Math.min(data.length, 256)).toString('latin1'));
  return m === null ? 0 : Number(m[1]);
}

export class Capture implements CaptureSink {
  readonly #cfg: CaptureConfig;
  readonly #publisher: BusPublisher;
  readonly #instance: string;
  readonly #onError: (err: unknown) => void;
  readonly #spool: Spool | null;
  readonly #content: ContentOptions | undefined;
  readonly #preparer: ContentPreparer | undefined;
  /** Records waiting for their usage and content: held in #jobs, or at the preparer. */
  #preparing = 0;
  /** Bytes of the jobs at the preparer, not answered yet. */
  #preparingBytes = 0;
  readonly #preparingMaxBytes: number;
  /** Shared pages for the jobs' bytes, reused from batch to batch. */
  readonly #pages = new PagePool();
  /** Records handed over since the last flush: their fields and jobs (job.ts), sent to the preparer together. */
  #jobs = new JobBatch(this.#pages);
  /**
   * Finished records as UTF-8 JSON, not yet in a batch. Bytes, not strings: a batch is then a
   * memcpy of its records (Buffer.concat), where joining and encoding a few hundred KiB of
   * strings held the serving thread for milliseconds on every flush (issue 15).
   */
  #pending: Uint8Array[] = [];
  /** Their bytes, with one separator each. */
  #pendingBytes = 0;
  /** Buffers of the preparer's answers: the offsets of records with free room before them for a batch header (#inPlace). */
  readonly #roomy = new WeakMap<ArrayBufferLike, Set<number>>();
  /**
   * The preparer's buffers to give back for reuse (its answer areas): how many of their records
   * are still needed (not yet copied into a batch, or in a batch not yet gone), and how to give
   * them back. Only with a publisher that `releasesData`.
   */
  readonly #lent = new Map<ArrayBufferLike, { records: number; release: () => void }>();
  readonly #maxBytes: number;
  readonly #outbox: OutBatch[] = [];
  #outboxRequests = 0;
  #inFlight = 0;
  /** Spool entries being published now (not to be picked again). */
  readonly #replaying = new Set<SpoolEntry>();
  /** Spool appends not yet finished. */
  #appending = 0;
  /** Set after a failed publish; cleared by the next success. New batches go to the spool meanwhile. */
  #failing = false;
  #batchSeq = 0;
  #timer: NodeJS.Timeout | null = null;
  #retryTimer: NodeJS.Timeout | null = null;
  /** Set after a publish until the next turn of the event loop, which pumps again (one batch per turn). */
  #pumpSoon: NodeJS.Immediate | null = null;
  #retryDelay = 0;
  #closed = false;
  #idleWaiters: (() => void)[] = [];

  readonly stats: CaptureStats = {
    recorded: 0, published: 0, publishedBatches: 0, publishFailures: 0, spooled: 0, replayed: 0, dropped: 0, refused: 0, queued: 0, spoolBatches: 0, spoolBytes: 0, contentMadeHere: 0, contentMadeHereRequests: 0,
  };

  constructor(opts: CaptureOptions) {
    this.#cfg = opts.config;
    this.#maxBytes = opts.config.batchMaxBytes;
    this.#publisher = opts.publisher;
    this.#instance = opts.instance;
    this.#onError = opts.onError ?? (() => {});
    this.#content = opts.content;
    this.#preparer = opts.contentPreparer;
    this.#preparingMaxBytes = opts.preparingMaxBytes ?? DEFAULT_PREPARING_MAX_BYTES;
    this.#spool = opts.spoolDir === undefined || opts.spoolDir === null ? null : new Spool(opts.spoolDir, opts.spoolMaxBytes ?? 1024 ** 3);
    this.#syncSpoolStats();
    // Batches left by an earlier run are replayed as soon as publishing works.
    if (this.#spool !== null && this.#spool.count > 0) this.#schedulePump(0);
  }

  /**
   * Hands a finished request to capture. Never throws, never waits. The record is
   * serialised here, once the response is over (~7 µs: wire.ts), and not kept: holding
   * records (and their response bytes) until a timer fires would carry them past young-
   * generation collections, and serialising them in bulk would hold up the requests that
   * arrive meanwhile.
   */
  #serialise(rec: RequestRecord): Buffer {
    const content = this.#content;
    // The v4 record standing for toWire(rec, content) (core wire.ts), written part by part
    // (contentWire: a one-byte prompt is not widened beside a two-byte answer).
    const head = `${wireHead(rec)},${usageMembers(recordUsage(rec))},"content":`;
    if (content !== undefined) {
      for (const maxBytes of [content.maxBytes, content.maxBytes / 4, content.maxBytes / 16]) {
        const c = contentOf(rec, maxBytes === content.maxBytes ? content : { ...content, maxBytes: Math.floor(maxBytes) });
        const r = recordPartsOf(head, c === null ? null : contentWire(c));
        if (r.bytes <= MAX_RECORD_BYTES) return partsBuffer(r.parts, r.bytes);
      }
    }
    const r = recordPartsOf(head, null);
    return partsBuffer(r.parts, r.bytes);
  }

  record(rec: RequestRecord): void {
    this.stats.recorded++;
    if (this.#pending.length + this.#outboxRequests + this.#preparing >= this.#cfg.queueMaxRequests) {
      this.stats.dropped++;
      return;
    }
    const content = this.#content;
    // The preparer already holds its bound of unanswered jobs (a core kept busy leaves its
    // nice-19 thread no CPU): this record is made here and now, as with no preparer. Its
    // cost lands on this request's end, one record at a time, not on a flush: a whole flush
    // made at once was up to 60 records of about 1 ms each with 64 KiB prompts (loop rig,
    // 2 December).
    if (content !== undefined && this.#preparer !== undefined && !this.#overBound()) {
      // Issue 15: here only the record's fields and copies of its bytes; its head, usage and
      // content are made in the worker, for the whole batch in one message when the batch is due.
      try {
        this.#jobs.add(rec, content.maxBytes);
      } catch (e) {
        this.stats.dropped++;
        this.#onError(e);
        return;
      }
      this.#preparing++;
      this.#schedule(this.#jobs.length + this.#pending.length, this.#jobs.bytes + this.#pendingBytes);
      return;
    }
    let data: Buffer;
    try {
      data = this.#serialise(rec);
    } catch (e) {
      // A record that cannot be serialised is counted as dropped; capture never throws into requests.
      this.stats.dropped++;
      this.#onError(e);
      return;
    }
    if (this.#preparer !== undefined && content !== undefined) this.stats.contentMadeHereRequests++;
    this.#enqueue(data);
    this.#schedule(this.#pending.length + this.#jobs.length, this.#pendingBytes + this.#jobs.bytes);
  }

  /**
   * Whether the jobs at the preparer and those waiting for the next flush have reached
   * `preparingMaxBytes` while the preparer holds some unanswered: records are then made here
   * as they are handed over (record), so the preparer never holds much more than the bound.
   */
  #overBound(): boolean {
    return this.#preparingBytes > 0 && this.#preparingBytes + this.#jobs.bytes >= this.#preparingMaxBytes;
  }

  /** Queues a serialised record. */
  #enqueue(data: Uint8Array): void {
    this.#pending.push(data);
    this.#pendingBytes += data.length + 1;
    this.stats.queued++;
  }

  /** Arms the flush timer: at once when a batch is full, else after the flush interval. */
  #schedule(requests: number, bytes: number): void {
    if (requests >= this.#cfg.batchMaxRequests || bytes >= this.#maxBytes) {
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
    this.#sendJobs();
    this.#buildBatches();
    this.#pump();
  };

  /**
   * Sends the records handed over since the last flush to the preparer, in one message; their
   * batch is built when the answer comes. If the preparer fails, they are prepared here rather
   * than lost. (Past `preparingMaxBytes` records do not reach #jobs: record makes them here.)
   */
  #sendJobs(): void {
    const batch = this.#jobs;
    const n = batch.length;
    if (n === 0) return;
    this.#jobs = new JobBatch(this.#pages);
    const content = this.#content!;
    const message = batch.message();
    const bytes = batch.bytes;
    const cut = { maxBytes: this.#maxBytes, maxRequests: this.#cfg.batchMaxRequests };
    const done = (records: readonly (Uint8Array | null)[]): void => {
      this.#preparing -= n;
      this.#preparingBytes -= bytes;
      let here: ReturnType<typeof jobsOf> | null = null;
      if (records.length === 0) {
        // Made here, the whole batch: laid out as the thread lays it out (one buffer, room for
        // the batch headers), so it is published without a copy. A job that fails here too is
        // tried once more alone below, and counted if it fails again.
        this.stats.contentMadeHere++;
        this.stats.contentMadeHereRequests += n;
        try {
          here = jobsOf(message);
          const p = recordsBytes(here.heads, here.jobs, content.maxBytes, content.keepBase64, content.redactSecrets, cut, message.estimate);
          records = preparedViews(p);
          if (p.starts.length > 0) this.#roomy.set(p.buffer, new Set(p.starts));
        } catch (e) {
          this.#onError(e);
        }
      }
      for (let i = 0; i < n; i++) {
        let data = records[i] ?? null;
        if (data === null) {
          try {
            here ??= jobsOf(message);
            const r = recordParts(here.heads[i]!, prepareJob(here.jobs[i]!, content.maxBytes, content.keepBase64, content.redactSecrets));
            data = partsBuffer(r.parts, r.bytes);
          } catch (e) {
            this.stats.dropped++;
            this.#onError(e);
            continue;
          }
        }
        this.#enqueue(data);
      }
      // Every record is made: the pages can take the next batch's bytes.
      batch.release();
      // The flush these records were due in has come: batch and publish them now (records
      // handed over since have their own timer).
      this.#buildBatches();
      this.#pump();
    };
    // The bound is kept as records are handed over (#overBound): these jobs were taken while
    // under it, so they go to the preparer, the last one past it included.
    this.#preparingBytes += bytes;
    this.#preparer!.prepareJobs(message, content.maxBytes, content.keepBase64, cut).then((p) => {
      let records: (Uint8Array | null)[];
      try {
        records = preparedViews(p);
        if (p.starts.length > 0) this.#roomy.set(p.buffer, new Set(p.starts));
      } catch (e) {
        this.#onError(e);
        records = [];
      }
      if (p.release !== undefined && this.#publisher.releasesData === true) {
        let held = 0;
        for (const r of records) if (r !== null) held++;
        if (held === 0) p.release();
        else this.#lent.set(p.buffer, { records: held, release: p.release });
      }
      done(records);
    }, () => {
      // The preparer could not (it logs why; counted in contentMadeHere): prepare them here
      // rather than lose them.
      done([]);
    });
  }

  /** Whether new batches must go to the spool to stay behind older ones, or because NATS is away. */
  #spoolFirst(): boolean {
    if (this.#spool === null) return false;
    if (this.#spool.count > 0 || this.#appending > 0 || this.#failing) return true;
    return this.#publisher.isConnected?.() === false;
  }

  /**
   * Cuts the pending records into batches. A batch ends when it holds `batchMaxRequests`
   * requests or when the next record would take it past `batchMaxBytes` (NATS refuses
   * messages over its max_payload, 1 MiB by default).
   */
  #buildBatches(): void {
    const recs = this.#pending;
    if (recs.length === 0) return;
    this.#pending = [];
    this.#pendingBytes = 0;
    // The same rule as the content worker's layout (job.ts), so its room is where the cuts are.
    const cutter = new BatchCutter(this.#maxBytes, this.#cfg.batchMaxRequests);
    let from = 0;
    for (let i = 0; i < recs.length; i++) {
      if (cutter.add(recs[i]!.length)) {
        this.#finishBatch(recs, from, i);
        from = i;
      }
    }
    this.#finishBatch(recs, from, recs.length);
  }

  #finishBatch(recs: Uint8Array[], from: number, to: number): void {
    const n = to - from;
    const seq = String(++this.#batchSeq);
    // The header carries requests_count first so counters can read it without parsing (requestsIn).
    const head = Buffer.from(`${batchHead(this.#instance, seq, n, unixNanoNow(), ORIGIN_UNIX_NANO)},"records":[`);
    let data = this.#inPlace(recs, from, to, head);
    let lent: ArrayBufferLike | undefined;
    if (data === null) {
      const parts: Uint8Array[] = [head];
      let length = head.length + BATCH_END.length;
      for (let i = from; i < to; i++) {
        if (i > from) parts.push(COMMA);
        parts.push(recs[i]!);
        length += recs[i]!.length + (i > from ? 1 : 0);
      }
      parts.push(BATCH_END);
      data = Buffer.concat(parts, length);
      // Copied: these records' buffers are not needed for them any more.
      if (this.#lent.size > 0) for (let i = from; i < to; i++) this.#giveBack(recs[i]!.buffer, 1);
    } else if (this.#lent.has(data.buffer)) lent = data.buffer;
    const out: OutBatch = { id: `${this.#instance}/${seq}`, data, requests: n, lent };
    if (this.#spoolFirst()) this.#toSpool(out);
    else {
      this.#outbox.push(out);
      this.#outboxRequests += out.requests;
    }
  }

  /**
   * The batch written around its records where they lie, without a copy, when they are
   * consecutive records of one preparer answer and the first has free room before it
   * (recordsBytes, job.ts): the header goes into that room, `]}` into the gap after the last
   * (the gaps between them are `, `). Null otherwise: the batch is then copied together.
   */
  #inPlace(recs: readonly Uint8Array[], from: number, to: number, head: Uint8Array): Uint8Array | null {
    const first = recs[from]!;
    const buffer = first.buffer;
    const starts = this.#roomy.get(buffer);
    if (starts === undefined || !starts.has(first.byteOffset) || head.length > BATCH_HEAD_ROOM) return null;
    let end = first.byteOffset + first.length;
    for (let i = from + 1; i < to; i++) {
      const r = recs[i]!;
      if (r.buffer !== buffer || r.byteOffset !== end + RECORD_GAP_BYTES) return null;
      end = r.byteOffset + r.length;
    }
    if (end + BATCH_END.length > buffer.byteLength) return null;
    // Its room is taken: no other batch may write there.
    starts.delete(first.byteOffset);
    const bytes = new Uint8Array(buffer);
    const start = first.byteOffset - head.length;
    bytes.set(head, start);
    bytes.set(BATCH_END, end);
    return new Uint8Array(buffer, start, end + BATCH_END.length - start);
  }

  /** `records` records of a lent buffer are not needed any more: after the last, it is given back. */
  #giveBack(buffer: ArrayBufferLike, records: number): void {
    const l = this.#lent.get(buffer);
    if (l === undefined) return;
    l.records -= records;
    if (l.records > 0) return;
    this.#lent.delete(buffer);
    l.release();
  }

  /** A batch is published, spooled or dropped: its bytes are not needed any more. */
  #gone(b: OutBatch): void {
    if (b.lent !== undefined) this.#giveBack(b.lent, b.requests);
  }

  /**
   * A publish of the batch failed: the client may still hold its bytes (queued to be sent on
   * reconnection), so its buffer is never given back; the garbage collector frees it.
   */
  #keep(b: OutBatch): void {
    if (b.lent === undefined) return;
    this.#lent.delete(b.lent);
    b.lent = undefined;
  }

  /** Writes a batch to the spool; if the spool is full, it waits in memory, or is dropped when memory is full too. */
  #toSpool(b: OutBatch): void {
    const spool = this.#spool!;
    this.#appending++;
    spool.append(b.id, b.data).then(
      (ok) => {
        this.#appending--;
        if (ok) {
          this.stats.spooled += b.requests;
          this.stats.queued -= b.requests;
          this.#gone(b);
        } else if (this.#pending.length + this.#outboxRequests + b.requests <= this.#cfg.queueMaxRequests) {
          this.#outbox.push(b);
          this.#outboxRequests += b.requests;
        } else {
          this.stats.dropped += b.requests;
          this.stats.queued -= b.requests;
          this.#gone(b);
        }
        this.#syncSpoolStats();
        this.#pump();
        this.#checkIdle();
      },
      (err: unknown) => {
        this.#appending--;
        this.#onError(err);
        this.#outbox.push(b);
        this.#outboxRequests += b.requests;
        this.#pump();
      },
    );
  }

  #syncSpoolStats(): void {
    this.stats.spoolBatches = this.#spool?.count ?? 0;
    this.stats.spoolBytes = this.#spool?.bytes ?? 0;
  }

  #pump(): void {
    if (this.#retryTimer !== null || this.#closed) return;
    const spool = this.#spool;
    // While publishing fails, batches waiting in memory are safer on disk, behind the older ones.
    // (Only what fits: a full spool leaves batches in memory rather than bouncing them.)
    if (spool !== null && this.#failing) {
      while (this.#outbox.length > 0 && spool.fits(this.#outbox[0]!.data.length + 256)) {
        const b = this.#outbox.shift()!;
        this.#outboxRequests -= b.requests;
        this.#toSpool(b);
      }
    }
    // The spool first, oldest first, one batch at a time so that replay keeps arrival order
    // (a batch is read from disk, then published, then the next).
    if (spool !== null && spool.count > 0 && this.#replaying.size === 0) {
      const e = spool.oldest(1)[0];
      if (e !== undefined && this.#inFlight < this.#cfg.maxInFlight) this.#replay(e);
    }
    const limit = this.#failing ? 1 : this.#cfg.maxInFlight;
    if (this.#inFlight >= limit || this.#outbox.length === 0) return;
    // One batch per turn of the event loop: a publish holds the serving thread for its socket
    // write (p50 ~0.1 ms, p90 ~0.2 ms and up to ms for 512 KiB in the loop rig), and a request
    // whose upstream answer or next bytes arrived meanwhile is served between two of them. So
    // the next batch waits for the next turn, also when this one is acknowledged in this turn.
    if (this.#pumpSoon === null) this.#publishOutbox(this.#outbox.shift()!);
    this.#pumpSoon ??= setImmediate(() => {
      this.#pumpSoon = null;
      this.#pump();
    });
  }

  #publishOutbox(b: OutBatch): void {
    this.#inFlight++;
    this.#publisher.publish(b.data, b.id, this.#cfg.publishTimeoutMs).then(
      () => {
        this.#inFlight--;
        this.#outboxRequests -= b.requests;
        this.stats.published += b.requests;
        this.stats.publishedBatches++;
        this.stats.queued -= b.requests;
        this.#gone(b);
        this.#succeeded();
      },
      (err: unknown) => {
        this.#inFlight--;
        this.#outboxRequests -= b.requests;
        this.#keep(b);
        if (refusedForGood(err)) {
          this.#refused(b.requests, err);
          return;
        }
        this.#publishFailed(err);
        if (this.#spool !== null) this.#toSpool(b);
        else {
          this.#outbox.unshift(b);
          this.#outboxRequests += b.requests;
        }
        this.#checkIdle();
      },
    );
  }

  #replay(e: SpoolEntry): void {
    const spool = this.#spool!;
    this.#inFlight++;
    this.#replaying.add(e);
    spool
      .read(e)
      .then(async ({ msgId, data }) => {
        await this.#publisher.publish(data, msgId, this.#cfg.publishTimeoutMs);
        await spool.remove(e);
        const n = requestsIn(data);
        this.stats.replayed += n;
        this.stats.published += n;
        this.stats.publishedBatches++;
      })
      .then(
        () => {
          this.#inFlight--;
          this.#replaying.delete(e);
          this.#syncSpoolStats();
          this.#succeeded();
        },
        async (err: unknown) => {
          this.#inFlight--;
          this.#replaying.delete(e);
          if (refusedForGood(err)) {
            // Retrying cannot help, and it must not hold back the batches behind it.
            await spool.remove(e).catch(() => {});
            this.#syncSpoolStats();
            this.#refused(0, err);
            return;
          }
          this.#publishFailed(err);
          this.#checkIdle();
        },
      );
  }

  /** A batch NATS will never take (too large for its max_payload): dropped and counted. */
  #refused(requests: number, err: unknown): void {
    this.stats.refused++;
    this.stats.dropped += requests;
    this.stats.queued -= requests;
    this.#onError(new Error(`NATS refused a capture batch for good, dropped: ${err instanceof Error ? err.message : String(err)}`));
    this.#pump();
    this.#checkIdle();
  }

  #succeeded(): void {
    this.#failing = false;
    this.#retryDelay = 0;
    this.#pump();
    this.#checkIdle();
  }

  #publishFailed(err: unknown): void {
    this.stats.publishFailures++;
    if (!this.#failing) this.#onError(err);
    this.#failing = true;
    // Exponential backoff from 100 ms to 5 s, with jitter so replicas do not retry in step.
    this.#retryDelay = Math.min(5_000, this.#retryDelay === 0 ? 100 : this.#retryDelay * 2);
    this.#schedulePump(this.#retryDelay * (0.5 + Math.random() / 2));
  }

  #schedulePump(delay: number): void {
    if (this.#retryTimer !== null || this.#closed) return;
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = null;
      this.#pump();
    }, delay);
    this.#retryTimer.unref();
  }

  #checkIdle(): void {
    if (this.#inFlight === 0 && this.#appending === 0) {
      const ws = this.#idleWaiters;
      this.#idleWaiters = [];
      for (const w of ws) w();
    }
  }

  /**
   * Builds and publishes everything queued, resolving when all of it was acknowledged or
   * spooled, or the deadline passed. Returns the number of requests neither published nor
   * spooled.
   */
  async flush(timeoutMs: number): Promise<number> {
    if (this.#timer !== null) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    const deadline = Date.now() + timeoutMs;
    this.#sendJobs();
    // Records whose content is being prepared come back; those the preparer has not answered
    // by half the deadline (it may get no CPU on a busy core) are taken back and made here.
    const reclaimAt = Date.now() + timeoutMs / 2;
    while (this.#preparing > 0 && Date.now() < deadline) {
      if (Date.now() >= reclaimAt) this.#preparer?.reclaim();
      await new Promise((r) => setTimeout(r, 5));
    }
    this.#buildBatches();
    for (;;) {
      const busy = this.#outbox.length > 0 || this.#inFlight > 0 || this.#appending > 0 || (this.#spool !== null && this.#spool.count > 0 && !this.#failing);
      if (!busy) break;
      if (this.#retryTimer !== null && this.#inFlight === 0) {
        clearTimeout(this.#retryTimer);
        this.#retryTimer = null;
      }
      this.#pump();
      const left = deadline - Date.now();
      if (left <= 0) break;
      // While publishing fails, the next try waits FLUSH_RETRY_MS: a publisher that fails at
      // once (not connected) resolved the idle wait below in a microtask, so the loop retried
      // tens of thousands of times a second until the deadline, and no timer of the process
      // ran meanwhile.
      if (this.#failing) {
        await new Promise((r) => setTimeout(r, Math.min(left, FLUSH_RETRY_MS)));
        continue;
      }
      // With a spool, what cannot be published now is safe once it is on disk.
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, Math.min(left, 100));
        const waiters = this.#idleWaiters;
        function done() {
          clearTimeout(t);
          const i = waiters.indexOf(done);
          if (i >= 0) waiters.splice(i, 1);
          resolve();
        }
        waiters.push(done);
      });
      if (this.#spool !== null && this.#failing && this.#outbox.length === 0 && this.#appending === 0 && this.#inFlight <= 1) break;
    }
    return this.#pending.length + this.#outboxRequests + this.#preparing;
  }

  /** Flushes within the deadline, then stops timers. Returns requests neither published nor spooled. */
  async close(timeoutMs: number): Promise<number> {
    const left = await this.flush(timeoutMs);
    this.#closed = true;
    if (this.#retryTimer !== null) clearTimeout(this.#retryTimer);
    if (this.#pumpSoon !== null) clearImmediate(this.#pumpSoon);
    this.#pumpSoon = null;
    return left;
  }
}
