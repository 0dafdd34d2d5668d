/**
 * What travels on the bus: finished request records, not spans.
 *
 * The gateway's share of capture is to copy a finished RequestRecord's marks and fields
 * into a plain object, read the token usage from the kept response tail, and serialise
 * it: ~7 µs and ~850 bytes per request. The ingester turns each record into the request
 * row and the OpenTelemetry spans (spans.ts) before writing them. Building the spans in
 * the gateway cost ~28 µs plus ~18 µs of JSON and ~6 KB per request on the core that
 * serves requests (docs/benchmarks.md); the ingester is off the request path and scales
 * out on the durable consumer.
 *
 * Message format v2 (one bus message, JSON):
 *   {"v":2,"instance":…,"batch":"17","requests_count":N,"published_at_unix_nano":"…",
 *    "origin_unix_nano":"…","records":[WireRecord, …]}
 * `origin_unix_nano` is the Unix time of the gateway process's monotonic origin: a mark m
 * (milliseconds) is at origin + round(m·10⁶) ns. v1 messages (prebuilt rows, written by
 * earlier versions and possibly still in a gateway's disk spool) are still read.
 */
import type { CaptureBatchV1, RequestRow, SpanRow, StageName } from '@sightline/core';
import { STAGES } from '@sightline/core';
import type { AttemptInfo, Dialect, RequestRecord } from './record.js';
import { extractUsage } from './usage.js';
import type { SpanBuilder } from './spans.js';

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

/** The record to publish for a finished request: its fields, and the usage read from its response. */
export function toWire(r: RequestRecord): WireRecord {
  const u = extractUsage(r.responseChunks, r.stream);
  // A stream cut short counts what was seen: at least one output token per delta received.
  if (r.partial && r.stream && u.deltas > u.outputTokens) u.outputTokens = u.deltas;
  return {
    seq: r.seq,
    traceId: r.traceId,
    parentSpanId: r.parentSpanId,
    rootSpanId: r.rootSpanId,
    t0: r.t0,
    tBody: r.tBody,
    tParsed: r.tParsed,
    tAuth: r.tAuth,
    tRouted: r.tRouted,
    tBuilt: r.tBuilt,
    tAttempt: r.tAttempt,
    tConnected: r.tConnected,
    tSent: r.tSent,
    tFirstByte: r.tFirstByte,
    tFirstToken: r.tFirstToken,
    tLastByte: r.tLastByte,
    tEnd: r.tEnd,
    tFirstWrite: r.tFirstWrite,
    tFinish: r.tFinish,
    newConnection: r.newConnection,
    failedStage: r.failedStage,
    attempts: r.attempts,
    partial: r.partial,
    method: r.method,
    route: r.route,
    dialect: r.dialect,
    model: r.model,
    upstreamModel: r.upstreamModel,
    provider: r.provider,
    upstreamHost: r.upstreamHost,
    team: r.team,
    stream: r.stream,
    status: r.status,
    upstreamStatus: r.upstreamStatus,
    errorType: r.errorType,
    errorMessage: r.errorMessage,
    aborted: r.aborted,
    requestBytes: r.requestBytes,
    responseBytes: r.responseBytes,
    responseModel: u.responseModel,
    inputTokens: u.inputTokens,
    outputTokens: u.outputTokens,
    cacheReadTokens: u.cacheReadTokens,
    cacheWriteTokens: u.cacheWriteTokens,
    usageFound: u.found || u.outputTokens > 0,
  };
}

/** The header of a v2 message, up to (not including) its records. */
export function batchHead(instance: string, batch: string, requests: number, publishedAtUnixNano: bigint, originUnixNano: bigint): string {
  return `{"v":2,"instance":${JSON.stringify(instance)},"batch":${JSON.stringify(batch)},"requests_count":${requests},"published_at_unix_nano":"${publishedAtUnixNano}","origin_unix_nano":"${originUnixNano}"`;
}

/** A bus message read back: its rows, ready for ClickHouse. */
export interface DecodedBatch {
  v: 1 | 2;
  instance: string;
  batch: string;
  published_at_unix_nano: string;
  requests: RequestRow[];
  spans: SpanRow[];
}

/** Why a message cannot be written: the ingester dead-letters it with this message. */
export class BadBatchError extends Error {
  override name = 'BadBatchError';
}

const NUMBER_FIELDS = [
  'seq', 't0', 'tBody', 'tParsed', 'tAuth', 'tRouted', 'tBuilt', 'tAttempt', 'tConnected', 'tSent', 'tFirstByte', 'tFirstToken', 'tLastByte', 'tEnd', 'tFirstWrite', 'tFinish',
  'status', 'upstreamStatus', 'requestBytes', 'responseBytes', 'inputTokens', 'outputTokens', 'cacheReadTokens', 'cacheWriteTokens',
] as const;
const STRING_FIELDS = [
  'traceId', 'parentSpanId', 'rootSpanId', 'method', 'route', 'dialect', 'model', 'upstreamModel', 'provider', 'upstreamHost', 'team', 'errorType', 'errorMessage', 'responseModel',
] as const;
const BOOLEAN_FIELDS = ['newConnection', 'partial', 'stream', 'aborted', 'usageFound'] as const;
const ATTEMPT_NUMBERS = ['start', 'end', 'status'] as const;
const ATTEMPT_STRINGS = ['provider', 'model', 'upstreamHost', 'errorType', 'errorMessage'] as const;
const STAGE_SET: ReadonlySet<string> = new Set(STAGES);
const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;

/** Checks that a parsed value has a WireRecord's shape; throws BadBatchError naming the first bad field. */
export function checkWireRecord(x: unknown, i: number): WireRecord {
  const bad = (what: string): never => {
    throw new BadBatchError(`record ${i}: ${what}`);
  };
  if (typeof x !== 'object' || x === null || Array.isArray(x)) return bad('not an object');
  const o = x as Record<string, unknown>;
  for (const k of NUMBER_FIELDS) if (typeof o[k] !== 'number' || !Number.isFinite(o[k])) bad(`${k} is not a finite number`);
  for (const k of STRING_FIELDS) if (typeof o[k] !== 'string') bad(`${k} is not a string`);
  for (const k of BOOLEAN_FIELDS) if (typeof o[k] !== 'boolean') bad(`${k} is not a boolean`);
  if (!HEX32.test(o.traceId as string)) bad('traceId is not 32 lowercase hex digits');
  if (!HEX16.test(o.rootSpanId as string)) bad('rootSpanId is not 16 lowercase hex digits');
  if (o.parentSpanId !== '' && !HEX16.test(o.parentSpanId as string)) bad('parentSpanId is not 16 lowercase hex digits');
  if (o.failedStage !== null && !STAGE_SET.has(o.failedStage as string)) bad('failedStage is not a stage name');
  if (o.attempts !== null) {
    if (!Array.isArray(o.attempts)) return bad('attempts is not an array');
    for (const a of o.attempts as unknown[]) {
      if (typeof a !== 'object' || a === null) bad('an attempt is not an object');
      const ao = a as Record<string, unknown>;
      for (const k of ATTEMPT_NUMBERS) if (typeof ao[k] !== 'number' || !Number.isFinite(ao[k])) bad(`attempt ${k} is not a finite number`);
      for (const k of ATTEMPT_STRINGS) if (typeof ao[k] !== 'string') bad(`attempt ${k} is not a string`);
    }
  }
  return o as unknown as WireRecord;
}

const DECIMAL = /^\d{1,20}$/;

/**
 * Reads a bus message (v1 or v2) into rows; for v2, builds each record's request row and
 * spans with `builder`. Throws BadBatchError for anything that is not a well-formed batch.
 */
export function decodeBatch(data: Uint8Array, builder: SpanBuilder): DecodedBatch {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8'));
  } catch (e) {
    throw new BadBatchError(`not JSON: ${(e as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null) throw new BadBatchError('not a JSON object');
  const b = parsed as Record<string, unknown>;
  if (typeof b.instance !== 'string' || typeof b.batch !== 'string') throw new BadBatchError('instance and batch must be strings');
  const published = typeof b.published_at_unix_nano === 'string' && DECIMAL.test(b.published_at_unix_nano) ? b.published_at_unix_nano : '0';
  if (b.v === 1) {
    const v1 = b as unknown as CaptureBatchV1;
    if (!Array.isArray(v1.requests) || !Array.isArray(v1.spans)) throw new BadBatchError('a v1 batch needs requests and spans arrays');
    return { v: 1, instance: v1.instance, batch: v1.batch, published_at_unix_nano: published, requests: v1.requests, spans: v1.spans };
  }
  if (b.v !== 2) throw new BadBatchError(`unknown capture batch version ${JSON.stringify(b.v)}`);
  if (typeof b.origin_unix_nano !== 'string' || !DECIMAL.test(b.origin_unix_nano)) throw new BadBatchError('origin_unix_nano must be a decimal string');
  if (!Array.isArray(b.records)) throw new BadBatchError('a v2 batch needs a records array');
  const origin = BigInt(b.origin_unix_nano);
  const requests: RequestRow[] = [];
  const spans: SpanRow[] = [];
  const records = b.records as unknown[];
  for (let i = 0; i < records.length; i++) {
    const w = checkWireRecord(records[i], i);
    const built = builder.build(w, b.instance, origin);
    requests.push(built.request);
    for (const s of built.spans) spans.push(s);
  }
  return { v: 2, instance: b.instance, batch: b.batch, published_at_unix_nano: published, requests, spans };
}
