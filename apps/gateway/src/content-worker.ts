/**
 * Records made whole in a worker thread (issue 15): a 64 KiB prompt costs the capture path
 * hundreds of microseconds of scanning and serialising, and reading a stream's usage tens,
 * which on the serving thread would delay the requests queued behind them. The serving thread
 * copies the bytes into shared pages (job.ts) and posts a batch's jobs in one flat message;
 * the worker answers the records' bytes. If the worker dies, jobs fail and the capture makes
 * them itself (capture.ts); a new worker is started for later jobs.
 */
import { Worker } from 'node:worker_threads';
import { jobCount, type BatchCut, type ContentPreparer, type JobsMessage, type PreparedRecords } from '@sightline/capture';
import type { ContentJobAnswer, RecordJobsMessage } from './content-thread.js';

interface Waiting {
  resolve: (r: ContentJobAnswer) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

/** A batch the worker has not answered in time (it runs at nice 19 and got no CPU). */
class LateError extends Error {}

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

  constructor(
    readonly log: (msg: string) => void = () => {},
    /**
     * How long a batch may wait for the worker. It runs at the lowest priority (content-thread.ts),
     * so on a core kept busy by the serving thread it may get no CPU at all: past this, the
     * capture makes the batch itself, as before there was a worker, rather than let records
     * pile up. Its late answer is dropped.
     */
    readonly answerTimeoutMs = 1000,
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
    const w = new Worker(ENTRY);
    w.unref();
    w.on('message', (a: ContentJobAnswer) => {
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
    return this.#post((id): RecordJobsMessage => ({ id, jobs, maxBytes, keepBase64, cut })).then((a) => {
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
        if (this.#waiting.delete(id)) reject(new LateError('late'));
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

  async close(): Promise<void> {
    this.#closed = true;
    const w = this.#worker;
    this.#worker = null;
    if (w !== null) await w.terminate();
  }
}
