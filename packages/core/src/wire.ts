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
 * Message format v3 (one bus message, JSON), written since 3 December 2026:
 *   {"v":3,"instance":…,"batch":"17","requests_count":N,"published_at_unix_nano":"…",
 *    "origin_unix_nano":"…","records":[RecordV3, …]}
 * A RecordV3 carries a WireRecord's fields by position rather than by name (RECORD_V3 below):
 * its strings as one JSON array, its 23 numbers (the marks among them) as the base64 of their
 * IEEE 754 doubles, its five flags as one integer, then the usage and the content as in v2.
 * Writing 19 fractional marks as decimal text was a third of a record's cost in the gateway
 * (issue 15); the doubles travel bit for bit instead. `wireRecordOfV3` reads one back into a
 * WireRecord.
 *
 * Message format v4, written since 3 December 2026 (later): the same envelope and records as
 * v3, but a record's content texts travel as raw UTF-8 bytes after the record instead of inside it
 * as escaped JSON strings. Each record is its v3 JSON with `content.request` and
 * `content.response` given as the byte lengths of the two texts, then a newline, then the request
 * text's bytes and the response text's bytes (none when `content` is null):
 *   {"v":4,…,"records":[<record JSON>\n<request bytes><response bytes>,<record JSON>\n…]}
 * with `,` or `, ` between records.
 * JSON text never holds a raw newline, so the first newline after a record's start ends its
 * JSON. Escaping a prompt into JSON (its quotes, its non-ASCII) was about 60 % of the content's
 * cost in the gateway's content thread (issue 15; docs/benchmarks.md); the bytes are now written
 * as they are, and read back with one UTF-8 decode each. A v4 message is not JSON: read it with
 * `readCaptureMessage`, which gives it the shape of a parsed v3 message (`v` 4). An ingester
 * must read v4 before any gateway writes it: upgrade ingesters first.
 *
 * Format v3, still read (gateways of earlier versions, their disk spools).
 *
 * Format v2, still read (gateways of earlier versions, their disk spools): the same envelope
 * with `"v":2` and `"records":[WireRecord, …]`, each field by name.
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

/** A bus message of format v4 as readCaptureMessage reads it: a v3 message with `v` 4. */
export interface CaptureBatchV4 extends Omit<CaptureBatchV3, 'v'> {
  v: 4;
}

/** A bus message of format v3, parsed: its records are RecordV3 (read them with wireRecordOfV3). */
export interface CaptureBatchV3 {
  v: 3;
  instance: string;
  batch: string;
  requests_count: number;
  published_at_unix_nano: string;
  origin_unix_nano: string;
  records: unknown[];
}

/**
 * The positions of a v3 record (format v3 above):
 *   {"s":[…strings…],"n":"<base64 of 23 little-endian doubles>","f":<flags>,
 *    "responseModel":…,"inputTokens":…,"outputTokens":…,"cacheReadTokens":…,
 *    "cacheWriteTokens":…,"usageFound":…,"content":…}
 * `s` holds the fields of `strings` in order (failedStage may be null, attempts null or a list,
 * tagKeys and tagValues null or lists of strings), `n` those of `numbers`, and `f` has bit i set
 * when the field `flags[i]` is true.
 */
export const RECORD_V3 = {
  strings: [
    'traceId', 'parentSpanId', 'rootSpanId', 'failedStage', 'attempts', 'method', 'route', 'dialect', 'model', 'upstreamModel', 'provider',
    'upstreamHost', 'team', 'keyId', 'errorType', 'errorMessage', 'endUser', 'sessionId', 'tagKeys', 'tagValues',
  ],
  numbers: [
    'seq', 't0', 'tBody', 'tParsed', 'tAuth', 'tLimits', 'tCache', 'tBudget', 'tRouted', 'tBuilt', 'tAttempt', 'tConnected', 'tSent', 'tFirstByte',
    'tFirstToken', 'tLastByte', 'tEnd', 'tFirstWrite', 'tFinish', 'status', 'upstreamStatus', 'requestBytes', 'responseBytes',
  ],
  flags: ['cacheHit', 'newConnection', 'partial', 'stream', 'aborted'],
} as const;

/** Bytes of a v3 record's numbers before base64: 23 doubles. */
export const RECORD_V3_NUMBER_BYTES = RECORD_V3.numbers.length * 8;

/**
 * A v3 record (parsed JSON) as the v2 WireRecord it stands for: the same fields by name, the
 * usage and content members as they came. Null when it does not have a v3 record's shape (an
 * `s` list of 20, `n` the base64 of 184 bytes, an integer `f`); the types of the fields it
 * gives are for the caller to check (spans/decode.ts checkWireRecord).
 */
export function wireRecordOfV3(x: unknown): unknown {
  if (typeof x !== 'object' || x === null || Array.isArray(x)) return null;
  const r = x as { s?: unknown; n?: unknown; f?: unknown } & Record<string, unknown>;
  const s = r.s;
  const n = r.n;
  const f = r.f;
  if (!Array.isArray(s) || s.length !== RECORD_V3.strings.length || typeof n !== 'string' || typeof f !== 'number' || !Number.isInteger(f)) return null;
  const b = Buffer.from(n, 'base64');
  if (b.length !== RECORD_V3_NUMBER_BYTES) return null;
  // One object literal in toWire's order, not fields added one by one: a record of 50 fields
  // built key by key is slower to build and to read (the span builder reads every field).
  return {
    seq: b.readDoubleLE(0),
    traceId: s[0],
    parentSpanId: s[1],
    rootSpanId: s[2],
    t0: b.readDoubleLE(8),
    tBody: b.readDoubleLE(16),
    tParsed: b.readDoubleLE(24),
    tAuth: b.readDoubleLE(32),
    tLimits: b.readDoubleLE(40),
    tCache: b.readDoubleLE(48),
    tBudget: b.readDoubleLE(56),
    cacheHit: (f & 1) !== 0,
    tRouted: b.readDoubleLE(64),
    tBuilt: b.readDoubleLE(72),
    tAttempt: b.readDoubleLE(80),
    tConnected: b.readDoubleLE(88),
    tSent: b.readDoubleLE(96),
    tFirstByte: b.readDoubleLE(104),
    tFirstToken: b.readDoubleLE(112),
    tLastByte: b.readDoubleLE(120),
    tEnd: b.readDoubleLE(128),
    tFirstWrite: b.readDoubleLE(136),
    tFinish: b.readDoubleLE(144),
    newConnection: (f & 2) !== 0,
    failedStage: s[3],
    attempts: s[4],
    partial: (f & 4) !== 0,
    method: s[5],
    route: s[6],
    dialect: s[7],
    model: s[8],
    upstreamModel: s[9],
    provider: s[10],
    upstreamHost: s[11],
    team: s[12],
    keyId: s[13],
    stream: (f & 8) !== 0,
    status: b.readDoubleLE(152),
    upstreamStatus: b.readDoubleLE(160),
    errorType: s[14],
    errorMessage: s[15],
    aborted: (f & 16) !== 0,
    requestBytes: b.readDoubleLE(168),
    responseBytes: b.readDoubleLE(176),
    endUser: s[16],
    sessionId: s[17],
    // As v2 writes them: no tags is [] (the gateway holds null for none).
    tagKeys: s[18] ?? [],
    tagValues: s[19] ?? [],
    responseModel: r.responseModel,
    inputTokens: r.inputTokens,
    outputTokens: r.outputTokens,
    cacheReadTokens: r.cacheReadTokens,
    cacheWriteTokens: r.cacheWriteTokens,
    usageFound: r.usageFound,
    content: r.content,
  };
}

/** The records of a parsed v2, v3 or v4 batch, as WireRecords (v3 and v4 read with wireRecordOfV3; not checked). */
export function batchRecords(b: CaptureBatchV2 | CaptureBatchV3 | CaptureBatchV4): WireRecord[] {
  return b.v === 2 ? b.records : (b.records.map(wireRecordOfV3) as WireRecord[]);
}

/** A bus message that is not a capture message of a known format, and why. */
export class CaptureMessageError extends Error {
  override readonly name = 'CaptureMessageError';
}

const V4_START = Buffer.from('{"v":4,');
const RECORDS_START = Buffer.from(',"records":[');
const NEWLINE = 0x0a;
/** The texts a v4 record's content carries after it, in this order. */
const V4_TEXTS = ['request', 'response'] as const;

/**
 * A bus message of any format, parsed: v1 to v3 are JSON; a v4 message's records are read one
 * by one, each record's texts put back into its content as strings, so that it has the shape of
 * a parsed v3 message (with `v` 4). What the object holds is for the caller to check (spans
 * decode.ts). Throws CaptureMessageError when the bytes are neither JSON nor a v4 message.
 */
export function readCaptureMessage(data: Uint8Array): unknown {
  const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (buf.length < V4_START.length || buf.compare(V4_START, 0, V4_START.length, 0, V4_START.length) !== 0) {
    try {
      return JSON.parse(buf.toString('utf8'));
    } catch (e) {
      throw new CaptureMessageError(`not JSON: ${(e as Error).message}`);
    }
  }
  // The header's strings are JSON-escaped: the first `,"records":[` ends it.
  const h = buf.indexOf(RECORDS_START);
  if (h === -1) throw new CaptureMessageError('a v4 message needs a records list');
  let head: Record<string, unknown>;
  try {
    head = JSON.parse(`${buf.toString('utf8', 0, h)}}`) as Record<string, unknown>;
  } catch (e) {
    throw new CaptureMessageError(`v4 header is not JSON: ${(e as Error).message}`);
  }
  const records: unknown[] = [];
  let at = h + RECORDS_START.length;
  // An empty list (no gateway writes one, but it is well-formed).
  if (buf.length === at + 2 && buf[at] === 0x5d && buf[at + 1] === 0x7d) return { ...head, records };
  for (;;) {
    const i = records.length;
    const nl = buf.indexOf(NEWLINE, at);
    if (nl === -1) throw new CaptureMessageError(`record ${i}: no newline after its JSON`);
    let r: unknown;
    try {
      r = JSON.parse(buf.toString('utf8', at, nl));
    } catch (e) {
      throw new CaptureMessageError(`record ${i}: not JSON: ${(e as Error).message}`);
    }
    at = nl + 1;
    const c = typeof r === 'object' && r !== null ? (r as { content?: unknown }).content : undefined;
    if (typeof c === 'object' && c !== null) {
      const content = c as Record<string, unknown>;
      for (const k of V4_TEXTS) {
        const n = content[k];
        if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0 || at + n > buf.length) throw new CaptureMessageError(`record ${i}: content.${k} is not a length of the bytes that follow`);
        content[k] = buf.toString('utf8', at, at + n);
        at += n;
      }
    }
    records.push(r);
    // Between records `,` (a batch copied together) or `, ` (one written in place, capture.ts).
    if (buf[at] === 0x2c) {
      at += buf[at + 1] === 0x20 ? 2 : 1;
      continue;
    }
    if (buf[at] === 0x5d && buf[at + 1] === 0x7d && at + 2 === buf.length) break;
    throw new CaptureMessageError(`record ${i}: not followed by \`,\` or the message's end`);
  }
  return { ...head, records };
}

/** The records of a bus message of format v2, v3 or v4, as WireRecords (not checked; tests and tools). */
export function messageRecords(data: Uint8Array): WireRecord[] {
  return batchRecords(readCaptureMessage(data) as CaptureBatchV2 | CaptureBatchV3 | CaptureBatchV4);
}
