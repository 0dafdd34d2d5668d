/**
 * Records made whole in a worker thread (issue 15): a 64 KiB prompt costs the capture path
 * hundreds of microseconds of scanning and serialising, and reading a stream's usage tens,
 * which on the serving thread would delay the requests queued behind them. The serving thread
 * copies the bytes into shared pages (job.ts) and posts a batch's jobs in one flat message,
 * with an answer area of shared memory; the worker writes the records' bytes there and marks it
 * done, and the serving thread polls the areas of the batches it waits for (every POLL_MS):
 * no message comes back, and with it no lock the worker holds while it wakes this thread
 * (job.ts, "The answer area"). Records that do not fit their area come back by message. If
 * the worker dies (or answers nothing for `stuckMs` while jobs wait), jobs fail and the capture makes them itself (capture.ts); a new
 * worker is started for later jobs. A worker that is only slow (no CPU) is waited for.
 */
import { Worker } from 'node:worker_threads';
import { answerAreaBytes, answerFromArea, jobCount, resetAnswerArea, type BatchCut, type ContentPreparer, type JobsMessage, type PreparedRecords } from '@sightline/capture';
import type { ContentJobAnswer, ContentThreadHello, RecordJobsMessage } from './content-thread.js';
import type { ThreadPolicy } from './thread-priority.js';

interface Waiting {
  resolve: (r: ContentJobAnswer) => void;
  reject: (e: Error) => void;
  /** performance.now() when it was posted. */
  posted: number;
  /** Where the worker answers (job.ts, "The answer area"), and for how many jobs. */
  area: SharedArrayBuffer;
  jobs: number;
}

/**
 * How often the areas of waiting batches are looked at. A batch waits up to the flush interval
 * (50 ms by default) before it is sent, so a few ms more are nothing; each look is an atomic
 * load per waiting batch.
 */
const POLL_MS = 2;

/** Answer areas are sized in powers of two from this, so that they can be reused. */
const AREA_MIN_BYTES = 64 * 1024;
/** Answer areas kept for reuse, in bytes: the areas of a few batches of 64 KiB prompts (1–2 MiB each). */
const AREAS_KEPT_BYTES = 8 * 1024 * 1024;

/**
 * Answer areas kept between batches. Reused rather than new: an area the thread is slow to
 * answer outlives the serving thread's young-generation collections, and new areas left for
 * the major collections held 129 MB more at 64 KiB prompts (loop rig, 2 December). Copying
 * the records out instead, so that the area could be reused at once, cost the serving thread
 * p90 2.8 ms, p99 15 ms a copy (fresh memory): the capture gives an area back when it no
 * longer needs its records (PreparedRecords.release).
 */
class AreaPool {
  readonly #free = new Map<number, SharedArrayBuffer[]>();
  #bytes = 0;
  /** Areas made (not taken from the pool). */
  made = 0;

  take(bytes: number): SharedArrayBuffer {
    let size = AREA_MIN_BYTES;
    while (size < bytes) size *= 2;
    const a = this.#free.get(size)?.pop();
    if (a === undefined) {
      this.made++;
      return new SharedArrayBuffer(size);
    }
    this.#bytes -= size;
    resetAnswerArea(a);
    return a;
  }

  /** An area the thread is done with. */
  give(a: SharedArrayBuffer): void {
    if (this.#bytes + a.byteLength > AREAS_KEPT_BYTES) return;
    let list = this.#free.get(a.byteLength);
    if (list === undefined) this.#free.set(a.byteLength, (list = []));
    list.push(a);
    this.#bytes += a.byteLength;
  }
}

/** Once a minute at most, the log says batches waited long for the thread. */
const LATE_LOG_MS = 60_000;

/** The worker's entry: the compiled .js, or under tsx a bootstrap that loads the .ts source. */
const ENTRY = new URL(import.meta.url.endsWith('.ts') ? './content-thread-dev.mjs' : './content-thread.js', import.meta.url);

export interface ContentWorkerOptions {
  /** A batch answered after this long counts as late (`late`, /metrics). Default 1 000 ms. */
  lateMs?: number;
  /**
   * With jobs waiting and no answer at all for this long, the thread is taken for stuck: it is
   * terminated, its jobs are made by the capture, and a new thread takes later ones. Starved of
   * CPU it still answers now and then; this is for a thread that never will. Default 60 000 ms.
   */
  stuckMs?: number;
}

export class ContentWorker implements ContentPreparer {
  #worker: Worker | null = null;
  #nextId = 0;
  readonly #waiting = new Map<number, Waiting>();
  #closed = false;
  /** Batches answered more than `lateMs` after they were posted (the thread got little CPU). */
  late = 0;
  #lateLogged = -Infinity;
  readonly #lateMs: number;
  readonly #stuckMs: number;
  /** When the thread last answered, or when it was given work while it had none. */
  #lastAnswer = 0;
  #watchdog: NodeJS.Timeout | null = null;
  #poller: NodeJS.Timeout | null = null;
  readonly #areas = new AreaPool();

  /** Answer areas made so far; the others were reused. */
  get areasMade(): number {
    return this.#areas.made;
  }
  /** Batches answered by message: their records did not fit the area (or the worker failed on them). */
  answeredByMessage = 0;
  /** The scheduling the thread got (thread-priority.ts); null until it said. */
  policy: ThreadPolicy | null = null;
  /** The thread's id (/proc/self/task), once it said; 0 where there is none. */
  tid = 0;

  /**
   * The thread runs at the lowest priority (content-thread.ts), so on a core kept busy by the
   * serving thread it may get no CPU until the load eases. Its batches wait for it (the capture
   * bounds how much: `preparingMaxBytes`), rather than being made on the serving thread when
   * late: that made every batch due in a busy turn of the loop at once.
   */
  constructor(
    readonly log: (msg: string) => void = () => {},
    opts: ContentWorkerOptions = {},
  ) {
    this.#lateMs = opts.lateMs ?? 1_000;
    this.#stuckMs = opts.stuckMs ?? 60_000;
  }

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
    w.on('message', (a: ContentJobAnswer | ContentThreadHello) => {
      if (this.#worker !== w) return;
      if ('hello' in a) {
        const first = this.policy === null;
        this.policy = a.hello.policy;
        this.tid = a.hello.tid;
        if (first && a.hello.policy !== 'idle' && process.platform === 'linux') {
          this.log(`content worker: the thread runs at ${a.hello.policy === 'nice' ? 'nice 19' : 'normal priority'}, not SCHED_IDLE (is util-linux's chrt installed?): on a busy core it can delay requests (docs/configuration.md, "The content thread's priority")`);
        }
        return;
      }
      const job = this.#waiting.get(a.id);
      if (job === undefined) return;
      this.answeredByMessage++;
      // The thread is done with the area (it answered by message when the records did not fit).
      this.#areas.give(job.area);
      this.#answered(a.id, job, a);
    });
    w.on('error', (e) => this.#fail(w, e));
    w.on('exit', (code) => this.#fail(w, new Error(`content worker exited with code ${code}`)));
    this.#worker = w;
    return w;
  }

  #answered(id: number, job: Waiting, a: ContentJobAnswer): void {
    this.#lastAnswer = performance.now();
    this.#waiting.delete(id);
    const waited = this.#lastAnswer - job.posted;
    if (waited > this.#lateMs) {
      this.late++;
      if (this.#lastAnswer - this.#lateLogged >= LATE_LOG_MS) {
        this.#lateLogged = this.#lastAnswer;
        this.log(`content worker: a batch waited ${Math.round(waited)} ms for the thread (the core is busy; ${this.late} such batches so far)`);
      }
    }
    if ('error' in a) {
      // A fault in the thread's code: the capture makes these records itself.
      this.log(`content worker: ${a.error}`);
      job.reject(new Error(`content worker: ${a.error}`));
    } else job.resolve(a);
  }

  /** Looks at the areas of the waiting batches; again in POLL_MS while any still wait. */
  #poll(): void {
    if (this.#poller !== null) return;
    this.#poller = setTimeout(() => {
      this.#poller = null;
      for (const [id, job] of this.#waiting) {
        const p = answerFromArea(job.area, job.jobs);
        // The thread answers in order: the batches after this one are not done either.
        if (p === null) break;
        this.#answered(id, job, { id, ...p });
      }
      if (this.#waiting.size > 0) this.#poll();
    }, POLL_MS);
    this.#poller.unref();
  }

  /** The thread `w` is gone or given up on: its jobs fail, and the capture makes them. */
  #fail(w: Worker, e: unknown): void {
    if (this.#worker !== w) return;
    this.#worker = null;
    const err = e instanceof Error ? e : new Error(`content worker stopped (${String(e)})`);
    if (!this.#closed) this.log(`content worker: ${err.message}; the serving thread prepares its ${this.#waiting.size} waiting batches, and a new thread later ones`);
    this.reclaim(err);
  }

  reclaim(err: Error = new Error('content worker: taken back')): void {
    const jobs = [...this.#waiting.values()];
    this.#waiting.clear();
    for (const job of jobs) job.reject(err);
  }

  /** Terminates a thread that has answered nothing for `stuckMs` while jobs waited. */
  #watch(): void {
    if (this.#watchdog !== null) return;
    this.#watchdog = setTimeout(() => {
      this.#watchdog = null;
      const w = this.#worker;
      if (this.#waiting.size === 0 || w === null) return;
      const idle = performance.now() - this.#lastAnswer;
      if (idle < this.#stuckMs) {
        this.#watch();
        return;
      }
      this.#fail(w, new Error(`content worker: no answer in ${Math.round(idle)} ms; terminated`));
      void w.terminate();
    }, Math.max(1, this.#stuckMs - (performance.now() - this.#lastAnswer)));
    this.#watchdog.unref();
  }

  prepareJobs(jobs: JobsMessage, maxBytes: number, keepBase64: boolean, cut: BatchCut): Promise<PreparedRecords> {
    const n = jobCount(jobs);
    const area = this.#areas.take(answerAreaBytes(jobs));
    return this.#post(area, n, (id): RecordJobsMessage => ({ id, jobs, maxBytes, keepBase64, cut, area })).then((a) => {
      if (!('spans' in a) || a.spans.length !== n * 2) throw new Error('content worker: unexpected answer');
      // A job the worker could not make (length −1) is made by the capture itself.
      if (a.buffer !== area) return { buffer: a.buffer, spans: a.spans, starts: a.starts };
      // The capture gives the area back once its records are gone. (Areas of batches given up
      // on are never reused: their thread may still write there.)
      let given = false;
      const release = (): void => {
        if (given) return;
        given = true;
        this.#areas.give(area);
      };
      return { buffer: area, spans: a.spans, starts: a.starts, release };
    });
  }

  /**
   * Nothing is moved (no transfer list): the jobs' pages are shared memory, so a worker that
   * fails with them (it exits, or cannot start) leaves the capture's fallback every byte to
   * read — no record is lost.
   */
  #post(area: SharedArrayBuffer, jobs: number, message: (id: number) => RecordJobsMessage): Promise<ContentJobAnswer> {
    if (this.#closed) return Promise.reject(new Error('content worker closed'));
    const w = this.#worker ?? this.#start();
    const id = ++this.#nextId;
    return new Promise((resolve, reject) => {
      const now = performance.now();
      // The stuck clock starts when the thread is given work while it has none.
      if (this.#waiting.size === 0) this.#lastAnswer = now;
      this.#waiting.set(id, { resolve, reject, posted: now, area, jobs });
      try {
        w.postMessage(message(id));
      } catch (e) {
        this.#waiting.delete(id);
        reject(e as Error);
        return;
      }
      this.#watch();
      this.#poll();
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#watchdog !== null) clearTimeout(this.#watchdog);
    if (this.#poller !== null) clearTimeout(this.#poller);
    this.#poller = null;
    const w = this.#worker;
    this.#worker = null;
    // Jobs still waiting are the capture's to make (it flushes before it closes this).
    this.reclaim(new Error('content worker closed'));
    if (w !== null) await w.terminate();
  }
}
