/**
 * Capture in a worker thread: the request thread only collects finished records and,
 * every few milliseconds, posts them to the worker, which builds the spans (the
 * OpenTelemetry SDK), serialises batches and publishes them to NATS or the spool —
 * the costly part of capture, about 75 µs of CPU per request, kept off the thread that
 * serves requests (pino's thread-stream isolation, for spans).
 *
 * Bounds: records posted and not yet taken by the worker are capped at the queue size;
 * beyond it the request thread drops and counts. The worker applies Capture's own bounds.
 */
import { Worker } from 'node:worker_threads';
import type { CaptureConfig } from '@sightline/config';
import type { CaptureStats } from './capture.js';
import type { RequestRecord } from './record.js';
import type { CaptureSink } from './sink.js';

export interface ThreadedCaptureOptions {
  instance: string;
  config: CaptureConfig;
  natsUrl: string;
  version?: string;
  onError?: (msg: string) => void;
}

/** Messages between the two threads. */
export type ToWorker = { type: 'records'; records: RequestRecord[] } | { type: 'close'; timeoutMs: number };
export type FromWorker =
  | { type: 'took'; n: number }
  | { type: 'stats'; stats: CaptureStats }
  | { type: 'error'; message: string }
  | { type: 'closed'; left: number; stats: CaptureStats };

/** Milliseconds between posts of collected records to the worker. */
const POST_INTERVAL_MS = 5;
/** Records per post, at most (a post is one structured clone). */
const POST_MAX = 128;

export class ThreadedCapture implements CaptureSink {
  readonly #worker: Worker;
  readonly #max: number;
  #pending: RequestRecord[] = [];
  #posted = 0;
  #timer: NodeJS.Timeout | null = null;
  #droppedHere = 0;
  #recordedHere = 0;
  #workerStats: CaptureStats = { recorded: 0, published: 0, publishedBatches: 0, publishFailures: 0, spooled: 0, replayed: 0, dropped: 0, refused: 0, queued: 0, spoolBatches: 0, spoolBytes: 0 };
  #closing: Promise<number> | null = null;
  #exited = false;

  constructor(opts: ThreadedCaptureOptions) {
    this.#max = opts.config.queueMaxRequests;
    const onError = opts.onError ?? (() => {});
    this.#worker = new Worker(new URL('./capture-worker-boot.mjs', import.meta.url), {
      workerData: { instance: opts.instance, config: opts.config, natsUrl: opts.natsUrl, version: opts.version ?? '0.1.0' },
      name: 'sightline-capture',
    });
    this.#worker.unref();
    this.#worker.on('message', (m: FromWorker) => {
      if (m.type === 'took') this.#posted -= m.n;
      else if (m.type === 'stats' || m.type === 'closed') this.#workerStats = m.stats;
      else if (m.type === 'error') onError(m.message);
    });
    this.#worker.on('error', (e) => onError(`capture worker failed: ${e.message}`));
    this.#worker.on('exit', () => {
      this.#exited = true;
    });
  }

  get stats(): CaptureStats {
    const w = this.#workerStats;
    return {
      ...w,
      recorded: this.#recordedHere,
      dropped: w.dropped + this.#droppedHere,
      queued: w.queued + this.#pending.length + this.#posted,
    };
  }

  record(rec: RequestRecord): void {
    this.#recordedHere++;
    if (this.#exited || this.#closing !== null || this.#pending.length + this.#posted >= this.#max) {
      this.#droppedHere++;
      return;
    }
    this.#pending.push(rec);
    if (this.#pending.length >= POST_MAX) this.#post();
    else if (this.#timer === null) {
      this.#timer = setTimeout(this.#onTimer, POST_INTERVAL_MS);
      this.#timer.unref();
    }
  }

  readonly #onTimer = (): void => {
    this.#timer = null;
    this.#post();
  };

  #post(): void {
    if (this.#timer !== null) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    if (this.#pending.length === 0) return;
    const records = this.#pending;
    this.#pending = [];
    this.#posted += records.length;
    const msg: ToWorker = { type: 'records', records };
    this.#worker.postMessage(msg);
  }

  close(timeoutMs: number): Promise<number> {
    this.#closing ??= new Promise<number>((resolve) => {
      this.#post();
      const timer = setTimeout(() => {
        void this.#worker.terminate();
        resolve(this.stats.queued);
      }, timeoutMs + 1_000);
      this.#worker.on('message', (m: FromWorker) => {
        if (m.type !== 'closed') return;
        clearTimeout(timer);
        void this.#worker.terminate().then(() => resolve(m.left));
      });
      const msg: ToWorker = { type: 'close', timeoutMs };
      this.#worker.postMessage(msg);
    });
    return this.#closing;
  }
}
