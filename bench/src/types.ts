/**
 * Messages between the orchestrator (main.ts) and the driver process (driver-process.ts), and
 * the shape of one measured block. Plain data only: they cross a process boundary as JSON.
 */
import type { StreamDialect } from './sse.js';

/**
 * How requests are issued in a block.
 * - sequential: one request at a time on one keep-alive connection.
 * - concurrent: `concurrency` closed-loop workers, each sending its next request when the
 *   previous one has finished.
 * - open: fixed arrival rate. Request i is due at start + i / rate whatever happened before
 *   it, and its latency is measured from that intended time, so a stalled server (or driver)
 *   shows up in the numbers instead of silently lowering the load (coordinated omission).
 */
export type DriverMode =
  | { kind: 'sequential'; requests: number }
  | { kind: 'concurrent'; concurrency: number; requests: number }
  | { kind: 'open'; rate: number; durationMs: number };

export interface RequestTemplate {
  /** `http://127.0.0.1:PORT`, loopback only. */
  origin: string;
  path: string;
  headers: Record<string, string>;
  body: string;
  /** Which first-token marker to look for; undefined for JSON responses. */
  stream?: StreamDialect;
  /**
   * Make every request's body new: the driver writes a run-wide sequence number over the
   * body's UNIQUE_MARKER (same length, so the body's size is unchanged), before the request's
   * clock starts. For exact-cache misses (issue 12).
   */
  unique?: boolean;
}

/** The placeholder a unique body carries; its 12 digits are overwritten per request. */
export const UNIQUE_MARKER = 'uniq-000000000000';

export interface BlockSpec {
  id: string;
  request: RequestTemplate;
  mode: DriverMode;
  /**
   * Requests sent before measuring, on the same pool: they re-open keep-alive connections
   * that went idle while other arms ran, so the block does not measure reconnects. Not
   * recorded, but counted in `attempted` (the mock sees them).
   */
  prewarm: number;
  /**
   * The prewarm also lasts at least this long (ms), so that after an idle pause (a capture
   * wait, another arm's block) the machine's cores and caches are busy again before measuring.
   */
  prewarmMs: number;
  /** Hard bound on the whole block, prewarm and drain included. */
  maxDurationMs: number;
  /** Per-request headers and body timeout. */
  timeoutMs: number;
  /** Keep-alive connections in the pool for this origin and mode. */
  connections: number;
}

export interface BlockResult {
  id: string;
  /** Every request the driver issued, prewarm included: what the mock should have seen. */
  attempted: number;
  /** Measured requests issued (excluding prewarm). */
  sent: number;
  /** Measured requests answered 2xx to the end (and, for streams, with a first token). */
  ok: number;
  /** Measured requests that failed: non-2xx, network error, timeout, stream without a token. */
  errors: number;
  /** Prewarm requests that failed (they count toward the arm's error rate too). */
  prewarmErrors: number;
  /** error kind → count: `status 404`, `network ECONNRESET`, `timeout`, `no token`, `not sent`. */
  errorKinds: Record<string, number>;
  /** Measured requests by HTTP status ("0": no response head: network error or timeout). */
  statusCounts: Record<string, number>;
  /** The first few failures with a body excerpt, for the report. */
  errorSamples: string[];
  /** From the first measured send to the last measured answer, ms. */
  elapsedMs: number;
  /** ok / elapsed. */
  rps: number;
  /** The block hit maxDurationMs before sending everything. */
  truncated: boolean;
  /** Open loop: the largest delay between a request's intended and actual send, µs. */
  maxSendLagUs: number;
  /** HDR histograms (µs) of successful requests, compressed base64. */
  hist: {
    total: string;
    ttfb: string;
    /** Streams only: time to the first content token. */
    ttft?: string;
    /** Streams only: per request, the largest gap between body reads after the first token. */
    gap?: string;
  };
}

export type ToDriver = { type: 'run'; seq: number; spec: BlockSpec } | { type: 'release'; seq: number; origin: string } | { type: 'exit' };

export type FromDriver =
  | { type: 'ready' }
  | { type: 'result'; seq: number; result: BlockResult }
  | { type: 'released'; seq: number }
  | { type: 'error'; seq: number; message: string };
