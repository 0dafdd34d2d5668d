/**
 * The load driver: issues one block of requests with undici 7 and measures each one in
 * microseconds into HDR histograms.
 *
 * It runs in its own process (driver-process.ts, forked by the orchestrator) so that neither the
 * orchestrator's bookkeeping nor any server under test shares its event loop.
 *
 * Why undici's dispatch API rather than `request()` or fetch: a handler object gets a callback
 * at the response head and at every body read, with no stream or promise per chunk, so the
 * timestamps are taken where the bytes arrive (time to first byte, first token, inter-chunk
 * gaps) and the driver's own cost per request stays small next to the ~100 µs it measures.
 *
 * Per request it records: status, time to first byte (response head), time to first token
 * (streams: first non-empty content delta, see sse.ts), total time (to the last body byte) and,
 * for streams, the largest gap between two body reads after the first token. Failures
 * (non-2xx, network errors, timeouts, streams without a token) are counted by kind and kept
 * out of the latency histograms.
 */
import { performance } from 'node:perf_hooks';
import { Client } from 'undici';
import type { Dispatcher } from 'undici';
import type { Histogram } from 'hdr-histogram-js';
import { FirstTokenScanner } from './sse.js';
import { encode, newHistogram, recordUs } from './histogram.js';
import { uniqueBodies } from './unique.js';
import type { BlockResult, BlockSpec, RequestTemplate } from './types.js';

/** Failures kept verbatim for the report, per block. */
const MAX_ERROR_SAMPLES = 5;
/** Bytes of an error body kept in a sample. */
const MAX_ERROR_BODY = 300;
/**
 * Open loop: the most requests the driver keeps in flight. 5,000 req/s against a 1,500 ms mock
 * is 7,500, so the cap is reached when a proxy adds more than 300 ms; past it a due request is
 * counted as `not sent` instead of opening yet more sockets (every process here has at most
 * 20,000 descriptors, and a proxy needs two per request in flight).
 */
export const OPEN_LOOP_MAX_IN_FLIGHT = 9_000;

interface Outcome {
  ok: boolean;
  /** HTTP status, 0 when no response head arrived. */
  status: number;
  /** Error kind when !ok. */
  kind: string;
  sample: string;
  totalUs: number;
  ttfbUs: number;
  ttftUs: number;
  gapUs: number;
}

/**
 * One request's exchange with the server. Timestamps are `performance.now()` ms; `start` is
 * the actual send time, or the intended one in open-loop mode.
 */
class Exchange implements Dispatcher.DispatchHandler {
  private status = 0;
  private tHead = 0;
  private tToken = 0;
  private tLast = 0;
  private maxGap = 0;
  private errorBody: Buffer[] | null = null;
  private errorBytes = 0;
  private settled = false;
  private readonly scanner: FirstTokenScanner | null;

  constructor(
    private readonly start: number,
    template: RequestTemplate,
    private readonly done: (o: Outcome) => void,
  ) {
    this.scanner = template.stream === undefined ? null : new FirstTokenScanner(template.stream);
  }

  onRequestStart(): void {}

  onResponseStart(_c: Dispatcher.DispatchController, statusCode: number): void {
    this.tHead = performance.now();
    this.status = statusCode;
    if (statusCode < 200 || statusCode >= 300) this.errorBody = [];
  }

  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    const t = performance.now();
    if (this.errorBody !== null) {
      if (this.errorBytes < MAX_ERROR_BODY) {
        this.errorBody.push(chunk);
        this.errorBytes += chunk.length;
      }
      return;
    }
    if (this.scanner === null) return;
    if (this.tToken !== 0) {
      // Gaps are counted from the first token on: the wait for the first token is TTFT's.
      const gap = t - this.tLast;
      if (gap > this.maxGap) this.maxGap = gap;
      this.tLast = t;
    } else if (this.scanner.push(chunk)) {
      this.tToken = t;
      this.tLast = t;
    }
  }

  onResponseEnd(): void {
    const t = performance.now();
    if (this.errorBody !== null) {
      const body = Buffer.concat(this.errorBody).toString('utf8').slice(0, MAX_ERROR_BODY);
      this.finish({ ok: false, status: this.status, kind: `status ${this.status}`, sample: `status ${this.status}: ${body}`, totalUs: 0, ttfbUs: 0, ttftUs: 0, gapUs: 0 });
      return;
    }
    if (this.scanner !== null && this.tToken === 0) {
      this.finish({ ok: false, status: this.status, kind: 'no token', sample: `status ${this.status} but no content token in the stream`, totalUs: 0, ttfbUs: 0, ttftUs: 0, gapUs: 0 });
      return;
    }
    const us = (x: number): number => (x - this.start) * 1000;
    this.finish({
      ok: true,
      status: this.status,
      kind: '',
      sample: '',
      totalUs: us(t),
      ttfbUs: us(this.tHead),
      ttftUs: this.tToken === 0 ? 0 : us(this.tToken),
      gapUs: this.maxGap * 1000,
    });
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    const code = (err as Error & { code?: unknown }).code;
    const timeout = code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT';
    const kind = timeout ? 'timeout' : `network ${typeof code === 'string' ? code : err.name}`;
    this.finish({ ok: false, status: this.status, kind, sample: `${kind}: ${err.message}`, totalUs: 0, ttfbUs: 0, ttftUs: 0, gapUs: 0 });
  }

  private finish(o: Outcome): void {
    // undici calls exactly one terminal callback, but a handler must never count twice.
    if (this.settled) return;
    this.settled = true;
    this.done(o);
  }
}

/**
 * Keep-alive connections to one origin: one undici Client (one socket, no pipelining) per
 * connection, handed out from a free list.
 *
 * Why not undici's Pool: Pool.dispatch looks for a free client by walking its client list
 * (lib/dispatcher/pool.js kGetDispatcher), twice per request, so with the ladder's 7,500 busy
 * connections every request costs a walk over thousands of clients and the driver, not the
 * server, becomes the bottleneck. A free list makes acquiring a connection O(1); when every
 * connection is busy, requests wait in FIFO order (their latency still counts from the
 * intended send time).
 */
export class ConnectionPool {
  private readonly idle: Client[] = [];
  private readonly all: Client[] = [];
  private readonly waiting: ((c: Client) => void)[] = [];
  private head = 0;

  constructor(
    readonly origin: string,
    readonly max: number,
    private readonly timeoutMs: number,
  ) {}

  /** Calls `use` with a connection now, or as soon as one is released. */
  acquire(use: (c: Client) => void): void {
    const c = this.idle.pop();
    if (c !== undefined) {
      use(c);
      return;
    }
    if (this.all.length < this.max) {
      const fresh = new Client(this.origin, {
        pipelining: 1,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
        // Arms take turns: keep idle connections for the whole run unless the server says less.
        keepAliveTimeout: 120_000,
        keepAliveMaxTimeout: 600_000,
        connectTimeout: 10_000,
      });
      this.all.push(fresh);
      use(fresh);
      return;
    }
    this.waiting.push(use);
  }

  /**
   * Returns a connection. Handing it to a waiting request happens in a microtask, never
   * synchronously: release() runs inside undici's callbacks, and a failed connect errors every
   * request of the client in a loop that asserts the client is empty afterwards, so a request
   * dispatched from within that loop would trip undici's assertion.
   */
  release(c: Client): void {
    if (this.head < this.waiting.length) {
      const next = this.waiting[this.head];
      this.waiting[this.head] = noop;
      this.head++;
      if (this.head === this.waiting.length) {
        this.waiting.length = 0;
        this.head = 0;
      }
      queueMicrotask(() => next?.(c));
      return;
    }
    this.idle.push(c);
  }

  get size(): number {
    return this.all.length;
  }

  async destroy(): Promise<void> {
    this.idle.length = 0;
    this.waiting.length = 0;
    this.head = 0;
    const all = this.all.splice(0);
    await Promise.all(all.map((c) => c.destroy()));
  }
}

function noop(): void {}

/** Connection pools, one per origin and size, kept across blocks so connections stay warm. */
const pools = new Map<string, ConnectionPool>();

function poolFor(origin: string, connections: number, timeoutMs: number): ConnectionPool {
  const key = `${origin}|${connections}|${timeoutMs}`;
  let pool = pools.get(key);
  if (pool === undefined) {
    pool = new ConnectionPool(origin, connections, timeoutMs);
    pools.set(key, pool);
  }
  return pool;
}

/** Closes (destroys) every pool to `origin`, e.g. after an open-loop step's thousands of sockets. */
export async function releaseOrigin(origin: string): Promise<void> {
  const closing: Promise<void>[] = [];
  for (const [key, pool] of pools) {
    if (key.startsWith(`${origin}|`)) {
      pools.delete(key);
      closing.push(pool.destroy());
    }
  }
  await Promise.all(closing);
}

export async function closeAll(): Promise<void> {
  const all = [...pools.values()];
  pools.clear();
  await Promise.all(all.map((p) => p.destroy()));
}

/** Counters and histograms of one block. */
class Tally {
  readonly total: Histogram = newHistogram();
  readonly ttfb: Histogram = newHistogram();
  readonly ttft: Histogram | null;
  readonly gap: Histogram | null;
  attempted = 0;
  sent = 0;
  ok = 0;
  errors = 0;
  prewarmErrors = 0;
  readonly errorKinds: Record<string, number> = {};
  readonly errorSamples: string[] = [];
  /** Measured requests by HTTP status ("0": no response). */
  readonly statusCounts: Record<string, number> = {};
  firstSend = 0;
  lastDone = 0;
  maxSendLagUs = 0;
  /** Set once the block is over: answers that straggle in after it are ignored. */
  sealed = false;

  constructor(stream: boolean) {
    this.ttft = stream ? newHistogram() : null;
    this.gap = stream ? newHistogram() : null;
  }

  fail(kind: string, sample: string): void {
    this.errors++;
    this.errorKinds[kind] = (this.errorKinds[kind] ?? 0) + 1;
    if (this.errorSamples.length < MAX_ERROR_SAMPLES) this.errorSamples.push(sample);
  }

  record(o: Outcome): void {
    if (this.sealed) return;
    this.lastDone = performance.now();
    this.statusCounts[o.status] = (this.statusCounts[o.status] ?? 0) + 1;
    if (!o.ok) {
      this.fail(o.kind, o.sample);
      return;
    }
    this.ok++;
    recordUs(this.total, o.totalUs);
    recordUs(this.ttfb, o.ttfbUs);
    if (this.ttft !== null) recordUs(this.ttft, o.ttftUs);
    if (this.gap !== null) recordUs(this.gap, o.gapUs);
  }

  result(id: string, truncated: boolean): BlockResult {
    this.sealed = true;
    const elapsedMs = this.lastDone > this.firstSend ? this.lastDone - this.firstSend : 0;
    const hist: BlockResult['hist'] = { total: encode(this.total), ttfb: encode(this.ttfb) };
    if (this.ttft !== null) hist.ttft = encode(this.ttft);
    if (this.gap !== null) hist.gap = encode(this.gap);
    for (const h of [this.total, this.ttfb, this.ttft, this.gap]) h?.destroy();
    return {
      id,
      attempted: this.attempted,
      sent: this.sent,
      ok: this.ok,
      errors: this.errors,
      prewarmErrors: this.prewarmErrors,
      errorKinds: this.errorKinds,
      statusCounts: this.statusCounts,
      errorSamples: this.errorSamples,
      elapsedMs: Math.round(elapsedMs),
      rps: elapsedMs > 0 ? Math.round((this.ok / elapsedMs) * 1000) : 0,
      truncated,
      maxSendLagUs: Math.round(this.maxSendLagUs),
      hist,
    };
  }
}

/** Sends one request on a pooled connection; resolves with its outcome (never rejects). */
function send(pool: ConnectionPool, opts: Dispatcher.DispatchOptions, template: RequestTemplate, start: number): Promise<Outcome> {
  return new Promise<Outcome>((resolve) => {
    pool.acquire((client) => {
      const handler = new Exchange(start, template, (o) => {
        // The connection is free again once the response is complete (or failed).
        pool.release(client);
        resolve(o);
      });
      try {
        client.dispatch(opts, handler);
      } catch (err) {
        pool.release(client);
        const message = err instanceof Error ? err.message : String(err);
        resolve({ ok: false, status: 0, kind: 'network dispatch', sample: `dispatch: ${message}`, totalUs: 0, ttfbUs: 0, ttftUs: 0, gapUs: 0 });
      }
    });
  });
}

/** Runs one block; bounded by its request count and by `maxDurationMs`. */
export async function runBlock(spec: BlockSpec): Promise<BlockResult> {
  const { request, mode } = spec;
  const pool = poolFor(request.origin, spec.connections, spec.timeoutMs);
  // The body is built once per block and the same Buffer is sent every time.
  const body = Buffer.from(request.body);
  const headers = { ...request.headers, 'content-length': String(body.length) };
  const opts: Dispatcher.DispatchOptions = { path: request.path, method: 'POST', headers, body, blocking: true };
  // Unique bodies are made before a request's clock starts, so their copy is not measured.
  const fresh = request.unique === true ? uniqueBodies(body) : null;
  const nextReq = (): Dispatcher.DispatchOptions => (fresh === null ? opts : { ...opts, body: fresh() });
  const tally = new Tally(request.stream !== undefined);
  const blockStart = performance.now();
  const deadline = blockStart + spec.maxDurationMs;

  // Prewarm: closed loop at the pool's width, unmeasured.
  {
    const width = Math.max(1, Math.min(spec.connections, 64));
    let left = spec.prewarm;
    const until = performance.now() + spec.prewarmMs;
    const worker = async (): Promise<void> => {
      while ((left > 0 || performance.now() < until) && performance.now() < deadline) {
        left--;
        tally.attempted++;
        const req = nextReq();
        const o = await send(pool, req, request, performance.now());
        if (!o.ok) {
          tally.prewarmErrors++;
          if (tally.errorSamples.length < MAX_ERROR_SAMPLES) tally.errorSamples.push(`prewarm ${o.sample}`);
        }
      }
    };
    await Promise.all(Array.from({ length: width }, worker));
  }

  let truncated = false;
  tally.firstSend = performance.now();
  tally.lastDone = tally.firstSend;

  if (mode.kind === 'sequential' || mode.kind === 'concurrent') {
    const width = mode.kind === 'sequential' ? 1 : mode.concurrency;
    let left = mode.requests;
    const worker = async (): Promise<void> => {
      while (left > 0) {
        if (performance.now() >= deadline) {
          truncated = true;
          return;
        }
        left--;
        tally.attempted++;
        tally.sent++;
        const req = nextReq();
        const start = performance.now();
        tally.record(await send(pool, req, request, start));
      }
    };
    await Promise.all(Array.from({ length: width }, worker));
    return tally.result(spec.id, truncated);
  }

  // Open loop. Request i is due at t0 + i * interval; a timer wakes the sender at the next due
  // time (Node timers have ~1 ms resolution, so a few requests may go out per wake-up) and it
  // sends everything that is due. Latency is measured from the due time, not the send time.
  const interval = 1000 / mode.rate;
  const total = Math.max(1, Math.round((mode.rate * mode.durationMs) / 1000));
  const t0 = performance.now() + 5;
  tally.firstSend = t0;
  let next = 0;
  let inFlight = 0;
  let finished = 0;
  let wake: (() => void) | null = null;
  const onDone = (o: Outcome): void => {
    inFlight--;
    finished++;
    tally.record(o);
    if (finished === total && wake !== null) wake();
  };
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const now = performance.now();
      if (now >= deadline) {
        truncated = true;
        resolve();
        return;
      }
      while (next < total) {
        const due = t0 + next * interval;
        if (due > now) break;
        next++;
        tally.sent++;
        const lag = (now - due) * 1000;
        if (lag > tally.maxSendLagUs) tally.maxSendLagUs = lag;
        if (inFlight >= OPEN_LOOP_MAX_IN_FLIGHT) {
          // Counted as a failed request, but never issued: not in `attempted`.
          finished++;
          tally.lastDone = now;
          tally.fail('not sent', `not sent: ${OPEN_LOOP_MAX_IN_FLIGHT} requests already in flight`);
          continue;
        }
        tally.attempted++;
        inFlight++;
        void send(pool, nextReq(), request, due).then(onDone);
      }
      if (next >= total) {
        resolve();
        return;
      }
      setTimeout(tick, Math.max(0, t0 + next * interval - performance.now()));
    };
    setTimeout(tick, Math.max(0, t0 - performance.now()));
  });
  // Drain: wait for every answer, bounded by the block's deadline.
  if (finished < total && !truncated) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, Math.max(0, deadline - performance.now()));
      wake = (): void => {
        clearTimeout(timer);
        resolve();
      };
      if (finished >= total) wake();
    });
  }
  if (finished < next) {
    // Still unanswered at the deadline: count them as timeouts and drop their sockets so
    // they cannot answer into the next block.
    truncated = true;
    tally.sealed = true;
    const missing = next - finished;
    for (let i = 0; i < missing; i++) tally.fail('timeout', `timeout: no answer before the block deadline (${spec.maxDurationMs} ms)`);
    await releaseOrigin(request.origin);
  }
  if (next < total) {
    // The deadline stopped the sender: the rest were never sent; they count as failures.
    for (let i = next; i < total; i++) {
      tally.sent++;
      tally.fail('not sent', 'not sent: block deadline reached');
    }
  }
  return tally.result(spec.id, truncated);
}
