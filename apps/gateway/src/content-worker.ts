/**
 * Records made whole in a worker thread (issue 15): a 64 KiB prompt costs the capture path
 * hundreds of microseconds of scanning and serialising, and reading a stream's usage tens,
 * which on the serving thread would delay the requests queued behind them. The serving thread
 * copies the bytes into shared pages (job.ts) and posts a batch's jobs in one flat message;
 * the worker answers the records' bytes. If the worker dies, jobs fail and the capture makes
 * them itself (capture.ts); a new worker is started for later jobs.
 *
 * The same thread publishes the batches (ThreadPublisher), on a NATS connection of its own.
 */
import { Worker } from 'node:worker_threads';
import type { BusPublisher } from '@sightline/bus';
import { jobCount, type BatchCut, type ContentPreparer, type JobsMessage, type PreparedRecords } from '@sightline/capture';
import type { CloseMessage, ContentBus, ContentJobAnswer, ContentThreadData, PublishAnswer, PublishMessage, RecordJobsMessage } from './content-thread.js';

interface Waiting {
  resolve: (r: ContentJobAnswer) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

interface Publishing {
  /** The thread's answer, or null when it will not come (the thread failed or is gone). */
  settle: (a: PublishAnswer | null) => void;
  timer: NodeJS.Timeout;
}

/** A batch the worker has not answered in time (it runs at nice 19 and got no CPU). */
class LateError extends Error {}

/**
 * After the thread left a batch or a publish unanswered past its timeout, publishes skip it for
 * this long: on a core kept busy it gets ~1.5 % of the CPU, and each publish waiting a second
 * for it would hold up capture (at most `capture.max_in_flight` publishes are under way).
 */
const STARVED_MS = 5_000;

/** Once a minute at most, the log says the serving thread made late batches itself. */
const LATE_LOG_MS = 60_000;

/** The worker's entry: the compiled .js, or under tsx a bootstrap that loads the .ts source. */
const ENTRY = new URL(import.meta.url.endsWith('.ts') ? './content-thread-dev.mjs' : './content-thread.js', import.meta.url);

export class ContentWorker implements ContentPreparer {
  #worker: Worker | null = null;
  #nextId = 0;
  readonly #waiting = new Map<number, Waiting>();
  #closed = false;
  /** Batches the worker did not answer in time, made by the capture in the serving thread. */
  late = 0;
  #lateLogged = -Infinity;
  /** Until when publishes skip the thread (STARVED_MS). */
  #starvedUntil = -Infinity;
  readonly #publishing = new Map<number, Publishing>();
  /** Shared with the thread (ContentThreadData.shared): [0] the last publish it took up, [1] the last id given up. */
  readonly #shared = new Int32Array(new SharedArrayBuffer(8));
  /** Batches the thread published, and those the serving thread published in its stead. */
  readonly publishes = { thread: 0, servingThread: 0 };

  constructor(
    readonly log: (msg: string) => void = () => {},
    /**
     * How long a batch may wait for the worker. It runs at the lowest priority (content-thread.ts),
     * so on a core kept busy by the serving thread it may get no CPU at all: past this, the
     * capture makes the batch itself, as before there was a worker, rather than let records
     * pile up. Its late answer is dropped.
     */
    readonly answerTimeoutMs = 1000,
    /** The NATS server and stream the thread publishes to; null: it does not publish. */
    readonly bus: ContentBus | null = null,
  ) {}

  /**
   * Starts the thread now rather than at the first job: its start (loading modules; seconds
   * under tsx on a busy machine) then does not hold up the first batches.
   */
  warm(): void {
    if (!this.#closed && this.#worker === null) this.#start();
  }

  get pending(): number {
    return this.#waiting.size;
  }

  #start(): Worker {
    // The worker inherits this process's flags (`--import tsx` in development).
    Atomics.store(this.#shared, 0, 0);
    const w = new Worker(ENTRY, { workerData: { bus: this.bus, shared: this.#shared.buffer as SharedArrayBuffer } satisfies ContentThreadData });
    w.unref();
    w.on('message', (a: ContentJobAnswer | PublishAnswer | { id: number; closed: true }) => {
      if ('published' in a) {
        const p = this.#publishing.get(a.id);
        if (p === undefined) return;
        this.#publishing.delete(a.id);
        clearTimeout(p.timer);
        p.settle(a);
        return;
      }
      if ('closed' in a) {
        this.#closing?.();
        return;
      }
      const job = this.#waiting.get(a.id);
      if (job === undefined) return;
      this.#waiting.delete(a.id);
      clearTimeout(job.timer);
      if ('error' in a) job.reject(new Error(`content worker: ${a.error}`));
      else job.resolve(a);
    });
    const fail = (e: unknown): void => {
      if (this.#worker === w) this.#worker = null;
      const err = e instanceof Error ? e : new Error(`content worker stopped (${String(e)})`);
      if (!this.#closed) this.log(`content worker: ${err.message}; preparing content in the serving thread until it is back`);
      for (const job of this.#waiting.values()) {
        clearTimeout(job.timer);
        job.reject(err);
      }
      this.#waiting.clear();
      // Publishes it took up may or may not be stored: the serving thread publishes them again
      // under the same message ids, which JetStream stores once.
      const publishing = [...this.#publishing.values()];
      this.#publishing.clear();
      for (const p of publishing) {
        clearTimeout(p.timer);
        p.settle(null);
      }
      this.#closing?.();
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`content worker exited with code ${code}`)));
    this.#worker = w;
    return w;
  }

  prepareJobs(jobs: JobsMessage, maxBytes: number, keepBase64: boolean, cut: BatchCut): Promise<PreparedRecords> {
    const n = jobCount(jobs);
    const late = (e: unknown): PreparedRecords => {
      if (!(e instanceof LateError)) throw e;
      // Every job null: the capture makes them all (capture.ts), as it does those the worker fails.
      this.late++;
      const t = Date.now();
      if (t - this.#lateLogged >= LATE_LOG_MS) {
        this.#lateLogged = t;
        this.log(`content worker: no answer in ${this.answerTimeoutMs} ms (the core is busy); the serving thread makes such batches itself (${this.late} so far)`);
      }
      return { buffer: new ArrayBuffer(0), spans: new Int32Array(n * 2).fill(-1), starts: new Int32Array(0) };
    };
    return this.#post((id): RecordJobsMessage => ({ type: 'jobs', id, jobs, maxBytes, keepBase64, cut })).then((a) => {
      if (!('spans' in a) || a.spans.length !== n * 2) throw new Error('content worker: unexpected answer');
      // A job the worker could not make (length −1) is made by the capture itself.
      return { buffer: a.buffer, spans: a.spans, starts: a.starts };
    }, late);
  }

  /**
   * Nothing is moved (no transfer list): the jobs' pages are shared memory, so a worker that
   * fails with them (it exits, or cannot start) leaves the capture's fallback every byte to
   * read — no record is lost.
   */
  #post(message: (id: number) => RecordJobsMessage): Promise<ContentJobAnswer> {
    if (this.#closed) return Promise.reject(new Error('content worker closed'));
    const w = this.#worker ?? this.#start();
    const id = ++this.#nextId;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        if (!this.#waiting.delete(id)) return;
        this.#gaveUp(id);
        reject(new LateError('late'));
      }, this.answerTimeoutMs);
      timer.unref();
      this.#waiting.set(id, { resolve, reject, timer });
      try {
        w.postMessage(message(id));
      } catch (e) {
        clearTimeout(timer);
        this.#waiting.delete(id);
        reject(e as Error);
      }
    });
  }

  /**
   * Publishes a batch from the thread, on its connection (`bus`), under `msgId`. The serving
   * thread's `fallback` publishes it instead when the thread cannot: no bus, the thread not
   * connected to NATS, not started, gone, or starved (no answer within answerTimeoutMs; it
   * runs at nice 19). A batch the thread took up and then did not answer for (it died, or
   * outlived its publish timeout) is published again by the fallback under the same msgId:
   * JetStream stores it once (the stream's duplicate window, 2 minutes). A publish error from
   * NATS itself (timeout, refused) is the caller's, as from any publisher.
   */
  publish(data: Uint8Array, msgId: string, timeoutMs: number, fallback: BusPublisher): Promise<void> {
    const viaServingThread = (): Promise<void> => {
      this.publishes.servingThread++;
      return fallback.publish(data, msgId, timeoutMs);
    };
    if (this.bus === null || this.#closed || Date.now() < this.#starvedUntil) return viaServingThread();
    let w: Worker;
    try {
      w = this.#worker ?? this.#start();
    } catch {
      return viaServingThread();
    }
    // Shared memory travels without a copy, and stays the serving thread's to spool or publish.
    // Batches of the worker's records are (recordsBytes); others are copied once.
    const shared = data.buffer instanceof SharedArrayBuffer ? data : sharedCopy(data);
    return new Promise<void>((resolve, reject) => {
      const id = ++this.#nextId;
      const fallbackNow = (): void => {
        viaServingThread().then(resolve, reject);
      };
      const onTimeout = (): void => {
        if (!this.#publishing.has(id)) return;
        if (Atomics.load(this.#shared, 0) >= id) {
          // Taken up and under way: its answer comes by the publish timeout (then once more, with margin).
          const p = this.#publishing.get(id)!;
          p.timer = setTimeout(() => {
            if (this.#publishing.delete(id)) fallbackNow();
          }, timeoutMs + this.answerTimeoutMs);
          p.timer.unref();
          return;
        }
        this.#publishing.delete(id);
        this.#gaveUp(id);
        fallbackNow();
      };
      const timer = setTimeout(onTimeout, this.answerTimeoutMs);
      timer.unref();
      this.#publishing.set(id, {
        timer,
        settle: (a) => {
          if (a === null || (!a.published && a.retry)) fallbackNow();
          else if (a.published) {
            this.publishes.thread++;
            resolve();
          } else reject(Object.assign(new Error(a.error), a.code === '' ? {} : { code: a.code }));
        },
      });
      try {
        w.postMessage({ type: 'publish', id, data: shared, msgId, timeoutMs } satisfies PublishMessage);
      } catch {
        clearTimeout(timer);
        this.#publishing.delete(id);
        fallbackNow();
      }
    });
  }

  /**
   * The thread left message `id` unanswered past its timeout: it is starved of CPU. The thread
   * skips what is still queued up to `id` (made by the serving thread meanwhile), and for
   * STARVED_MS nothing more is sent to it.
   */
  #gaveUp(id: number): void {
    if (id > Atomics.load(this.#shared, 1)) Atomics.store(this.#shared, 1, id);
    this.#starvedUntil = Date.now() + STARVED_MS;
  }

  /**
   * True for STARVED_MS after the thread left a message unanswered past its timeout: capture
   * then makes each record on the serving thread as it comes (capture.ts), and publishes there
   * too, rather than wait a second for each batch and make it all at once.
   */
  get starved(): boolean {
    return Date.now() < this.#starvedUntil;
  }

  #closing: (() => void) | null = null;

  async close(): Promise<void> {
    this.#closed = true;
    const w = this.#worker;
    this.#worker = null;
    if (w === null) return;
    // Its NATS connection drained first (at most 2 s), then the thread stopped.
    if (this.bus !== null) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 2_000);
        this.#closing = () => {
          clearTimeout(timer);
          resolve();
        };
        try {
          w.postMessage({ type: 'close', id: ++this.#nextId } satisfies CloseMessage);
        } catch {
          resolve();
        }
      });
      this.#closing = null;
    }
    await w.terminate();
  }
}

/** A copy of `data` in shared memory. */
function sharedCopy(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(new SharedArrayBuffer(data.length));
  out.set(data);
  return out;
}

/**
 * The capture's publisher when the content thread publishes: each batch goes through the
 * thread, with `servingThread` (the gateway's own NATS publisher) as its fallback and as the
 * judge of whether NATS is up (capture spools at once while it is not).
 */
export class ThreadPublisher implements BusPublisher {
  constructor(
    readonly worker: ContentWorker,
    readonly servingThread: BusPublisher,
  ) {}

  publish(data: Uint8Array, msgId: string, timeoutMs: number): Promise<void> {
    return this.worker.publish(data, msgId, timeoutMs, this.servingThread);
  }

  isConnected(): boolean {
    return this.servingThread.isConnected?.() ?? true;
  }

  close(): Promise<void> {
    return this.servingThread.close();
  }
}
