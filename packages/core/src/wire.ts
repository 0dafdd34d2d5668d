/**
 * The capture message format: what travels on the bus from gateways to ingesters. Both
 * sides import it from here; the gateway encodes it (capture/src/wire.ts) and the
 * ingester decodes it and builds spans from it (spans/src/decode.ts).
 *
 * What travels are finished request records, not spans. The gateway's share of capture
 * is to copy a finished request's marks and fields into a plain object, read the token
 * usage from the kept response tail, and serialise it: ~7 µs and ~850 bytes per request.
 * The ingester turns each record into the request row and the OpenTelemetry spans before
 * writing them. Building the spans in the gateway cost ~28 µs plus ~18 µs of JSON and
 * ~6 KB per request on the core that serves requests (docs/benchmarks.md); the ingester
 * is off the request path and scales out on the durable consumer.
 *
 * Message format v2 (one bus message, JSON):
 *   {"v":2,"instance":…,"batch":"17","requests_count":N,"published_at_unix_nano":"…",
 *    "origin_unix_nano":"…","records":[WireRecord, …]}
 * `origin_unix_nano` is the Unix time of the gateway process's monotonic origin: a mark m
 * (milliseconds) is at origin + round(m·10⁶) ns. v1 messages (prebuilt rows, rows.ts
 * CaptureBatchV1, written by earlier versions and possibly still in a gateway's disk
 * spool) are still read.
 */
import type { StageName } from './rows.js';

/** The API a client speaks to the gateway (and a provider speaks upstream). */
export type Dialect = 'openai' | 'anthropic';

/** One upstream attempt that did not become the response (retried or fallen back from). */
export interface AttemptInfo {
  provider: string;
  model: string;
  upstreamHost: string;
  start: number;
  end: number;
  /** Provider status, 0 when none arrived. */
  status: number;
  errorType: string;
  errorMessage: string;
}

/** A finished request as the gateway publishes it. Marks are monotonic milliseconds; 0 = not reached. */
export interface WireRecord {
  seq: number;
  traceId: string;
  parentSpanId: string;
  rootSpanId: string;
  t0: number;
  tBody: number;
  tParsed: number;
  tAuth: number;
  tRouted: number;
  tBuilt: number;
  tAttempt: number;
  tConnected: number;
  tSent: number;
  tFirstByte: number;
  tFirstToken: number;
  tLastByte: number;
  tEnd: number;
  tFirstWrite: number;
  tFinish: number;
  newConnection: boolean;
  failedStage: StageName | null;
  attempts: AttemptInfo[] | null;
  partial: boolean;
  method: string;
  route: string;
  dialect: Dialect;
  model: string;
  upstreamModel: string;
  provider: string;
  upstreamHost: string;
  team: string;
  /** The caller's Sightline key id (`key_…`); '' when authentication is off. Absent in records before v0.2: read as ''. */
  keyId: string;
  stream: boolean;
  status: number;
  upstreamStatus: number;
  errorType: string;
  errorMessage: string;
  aborted: boolean;
  requestBytes: number;
  responseBytes: number;
  // Read from the kept response body in the gateway (the body itself does not travel).
  responseModel: string;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** Token counts were present in the response (or counted from a cut stream's deltas). */
  usageFound: boolean;
}

/** A bus message of format v2, parsed. */
export interface CaptureBatchV2 {
  v: 2;
  instance: string;
  /** Per-instance batch number; with `instance` it is the message id (dedup key). */
  batch: string;
  /** Number of requests, first after the ids so counters can read it without parsing. */
  requests_count: number;
  published_at_unix_nano: string;
  origin_unix_nano: string;
  records: WireRecord[];
}
