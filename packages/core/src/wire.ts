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

/**
 * What a team keeps of its prompts and completions (issue 11): `full` (secrets replaced),
 * `redacted` (secrets and personal data replaced before storage), `none` (no content leaves
 * the gateway: metadata and timings only).
 */
export type ContentPolicy = 'full' | 'redacted' | 'none';
export const CONTENT_POLICIES: readonly ContentPolicy[] = ['full', 'redacted', 'none'];

/**
 * A request's content as it travels (never for policy `none`). Secrets are already
 * replaced in the gateway, so neither the bus nor the gateway's spool holds them in clear;
 * personal data (policy `redacted`) is replaced by the ingester before storage.
 */
export interface WireContent {
  policy: 'full' | 'redacted';
  /**
   * The request body as the client sent it, as UTF-8 text (invalid bytes become U+FFFD),
   * long base64 strings (images, audio, files) replaced by `[base64 <media type> <n> bytes]`,
   * cut at the capture bound.
   */
  request: string;
  /** Bytes of the body as received (before any replacement or cut). */
  requestBytes: number;
  requestTruncated: boolean;
  /**
   * What the client received: the JSON body, or for a stream the SSE text in the client's
   * dialect (the ingester assembles it into one message), cut at the capture bound.
   */
  response: string;
  responseBytes: number;
  responseTruncated: boolean;
  /** Secrets the gateway replaced, by placeholder type (`openai`, `jwt`, …). */
  redactions: Record<string, number>;
}

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
  /** End of the rate-limit check; -1: no limits applied to the request (stage absent). */
  tLimits: number;
  tRouted: number;
  /** End of the cache lookup; -1: the route has no cache (stage absent). */
  tCache: number;
  /** End of the budget reservation; -1: no budget applied (stage absent). */
  tBudget: number;
  /** The response came from the cache: no upstream stages. */
  cacheHit: boolean;
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
  /**
   * Attribution (issue 11): the end user the caller names (OpenAI `user` or
   * `safety_identifier`, Anthropic `metadata.user_id`), the session (`x-sightline-session-id`)
   * and tags (`x-sightline-tag-<name>: <value>`, names lower-case). '' / [] when absent;
   * absent in records of earlier versions (read as empty).
   */
  endUser: string;
  sessionId: string;
  tagKeys: string[];
  tagValues: string[];
  /** The request's content; null for policy `none`, and in records of earlier versions. */
  content: WireContent | null;
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
