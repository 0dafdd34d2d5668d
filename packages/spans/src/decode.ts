/**
 * Reading capture messages (@sightline/core wire.ts) in the ingester: checks each v4, v3 or v2
 * record's shape (a v3 or v4 record read into the WireRecord it stands for), builds its request row and spans (spans.ts), and passes v1 messages'
 * prebuilt rows through. Anything that is not a well-formed batch is a BadBatchError,
 * which the ingester dead-letters.
 */
import type { CaptureBatchV1, RequestRow, SpanRow, WireContent, WireRecord } from '@sightline/core';
import { CaptureMessageError, STAGES, readCaptureMessage, wireRecordOfV3 } from '@sightline/core';
import { BadBatchError } from './errors.js';
import type { SpanBuilder } from './spans.js';
import { hasLoneSurrogate, prepareContent, wellFormed, type ContentRow, type PreparedContent, type RedactText } from './content.js';

/** A bus message read back: its rows, ready for ClickHouse. */
export interface DecodedBatch {
  v: 1 | 2 | 3 | 4;
  instance: string;
  batch: string;
  published_at_unix_nano: string;
  requests: RequestRow[];
  spans: SpanRow[];
  /** One row per record that carried content (issue 11). */
  content: ContentRow[];
  /**
   * Records whose content was not stored: policy `redacted` without a personal-data
   * redactor, or content that could not be prepared. Never stored unredacted; the request
   * and its spans are written all the same.
   */
  contentWithheld: number;
}

export interface DecodeOptions {
  /**
   * Replaces personal data in content of policy `redacted` (`@sightline/redact`'s
   * `redactPersonal`). null (the default): such content is withheld, never stored as it came.
   */
  redactPersonal?: RedactText | null;
}

const NUMBER_FIELDS = [
  'seq', 't0', 'tBody', 'tParsed', 'tAuth', 'tLimits', 'tRouted', 'tCache', 'tBudget', 'tBuilt', 'tAttempt', 'tConnected', 'tSent', 'tFirstByte', 'tFirstToken', 'tLastByte', 'tEnd', 'tFirstWrite', 'tFinish',
  'status', 'upstreamStatus', 'requestBytes', 'responseBytes', 'inputTokens', 'outputTokens', 'cacheReadTokens', 'cacheWriteTokens',
] as const;
const STRING_FIELDS = [
  'traceId', 'parentSpanId', 'rootSpanId', 'method', 'route', 'dialect', 'model', 'upstreamModel', 'provider', 'upstreamHost', 'team', 'keyId', 'endUser', 'sessionId', 'errorType', 'errorMessage', 'responseModel',
] as const;
const BOOLEAN_FIELDS = ['newConnection', 'partial', 'stream', 'aborted', 'usageFound', 'cacheHit'] as const;
const ATTEMPT_NUMBERS = ['start', 'end', 'status'] as const;
const ATTEMPT_STRINGS = ['provider', 'model', 'upstreamHost', 'errorType', 'errorMessage'] as const;
const STAGE_SET: ReadonlySet<string> = new Set(STAGES);
const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;

/** Checks that a parsed value has a WireRecord's shape; throws BadBatchError naming the first bad field. */
export function checkWireRecord(x: unknown, i: number): WireRecord {
  // Records from gateways of earlier versions: no key, no attribution, no content.
  if (typeof x === 'object' && x !== null) {
    const o = x as Partial<WireRecord>;
    o.keyId ??= '';
    o.endUser ??= '';
    o.sessionId ??= '';
    o.tagKeys ??= [];
    o.tagValues ??= [];
    o.content ??= null;
    o.tLimits ??= -1;
    o.tCache ??= -1;
    o.tBudget ??= -1;
    o.cacheHit ??= false;
  }
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
  const tk = o.tagKeys;
  const tv = o.tagValues;
  if (!Array.isArray(tk) || !Array.isArray(tv) || tk.length !== tv.length || !tk.every((t) => typeof t === 'string') || !tv.every((t) => typeof t === 'string')) bad('tagKeys and tagValues are not two string lists of one length');
  if (o.content !== null) {
    const c = o.content as Record<string, unknown>;
    if (typeof c !== 'object' || Array.isArray(c)) bad('content is not an object');
    if (c.policy !== 'full' && c.policy !== 'redacted') bad('content.policy is not full or redacted');
    for (const k of ['request', 'response'] as const) if (typeof c[k] !== 'string') bad(`content.${k} is not a string`);
    for (const k of ['requestBytes', 'responseBytes'] as const) if (typeof c[k] !== 'number' || !Number.isFinite(c[k])) bad(`content.${k} is not a finite number`);
    for (const k of ['requestTruncated', 'responseTruncated'] as const) if (typeof c[k] !== 'boolean') bad(`content.${k} is not a boolean`);
    const rd = c.redactions;
    if (typeof rd !== 'object' || rd === null || Array.isArray(rd) || !Object.values(rd).every((n) => typeof n === 'number')) bad('content.redactions is not a map of counts');
  }
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
 * Reads a bus message (v1 to v4) into rows; for v2 to v4, builds each record's request row and
 * spans with `builder`. Throws BadBatchError for anything that is not a well-formed batch.
 */
export function decodeBatch(data: Uint8Array, builder: SpanBuilder, opts: DecodeOptions = {}): DecodedBatch {
  const redact = opts.redactPersonal ?? null;
  let parsed: unknown;
  try {
    parsed = readCaptureMessage(data);
  } catch (e) {
    throw new BadBatchError(e instanceof CaptureMessageError ? e.message : `not readable: ${(e as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null) throw new BadBatchError('not a JSON object');
  const b = parsed as Record<string, unknown>;
  if (typeof b.instance !== 'string' || typeof b.batch !== 'string') throw new BadBatchError('instance and batch must be strings');
  const published = typeof b.published_at_unix_nano === 'string' && DECIMAL.test(b.published_at_unix_nano) ? b.published_at_unix_nano : '0';
  if (b.v === 1) {
    const v1 = b as unknown as CaptureBatchV1;
    if (!Array.isArray(v1.requests) || !Array.isArray(v1.spans)) throw new BadBatchError('a v1 batch needs requests and spans arrays');
    return { v: 1, instance: v1.instance, batch: v1.batch, published_at_unix_nano: published, requests: v1.requests, spans: v1.spans, content: [], contentWithheld: 0 };
  }
  if (b.v !== 2 && b.v !== 3 && b.v !== 4) throw new BadBatchError(`unknown capture batch version ${JSON.stringify(b.v)}`);
  // v4 is read into v3's shape (readCaptureMessage).
  const v3 = b.v !== 2;
  if (typeof b.origin_unix_nano !== 'string' || !DECIMAL.test(b.origin_unix_nano)) throw new BadBatchError('origin_unix_nano must be a decimal string');
  if (!Array.isArray(b.records)) throw new BadBatchError(`a v${b.v} batch needs a records array`);
  const origin = BigInt(b.origin_unix_nano);
  const requests: RequestRow[] = [];
  const spans: SpanRow[] = [];
  const content: ContentRow[] = [];
  let contentWithheld = 0;
  const records = b.records as unknown[];
  for (let i = 0; i < records.length; i++) {
    const x = v3 ? wireRecordOfV3(records[i]) : records[i];
    if (x === null && v3) throw new BadBatchError(`record ${i}: not a v3 record (an s list of 20 strings, n the base64 of 23 doubles, an integer f)`);
    let w = checkWireRecord(x, i);
    // Attribution comes from the client's body and headers: a lone surrogate there (a JSON
    // `\ud800` escape) would make ClickHouse refuse the whole batch.
    if (hasLoneSurrogate(w.endUser) || hasLoneSurrogate(w.sessionId) || w.tagValues.some(hasLoneSurrogate) || w.tagKeys.some(hasLoneSurrogate)) {
      w = { ...w, endUser: wellFormed(w.endUser), sessionId: wellFormed(w.sessionId), tagKeys: w.tagKeys.map(wellFormed), tagValues: w.tagValues.map(wellFormed) };
    }
    const c = w.content;
    let prepared: PreparedContent | null = null;
    if (c !== null) {
      if (c.policy === 'redacted' && redact === null) {
        contentWithheld++;
      } else {
        try {
          prepared = prepareContent(w.dialect, w.stream, c, redact);
        } catch {
          // A bug in preparing content must not lose the request: its content is withheld.
          contentWithheld++;
        }
      }
      // Attribution is personal data too (an end user id is often an e-mail address).
      if (c.policy === 'redacted') w = redactAttribution(w, redact);
    }
    const built = builder.build(w, b.instance, origin, prepared?.attributes ?? null);
    requests.push(built.request);
    for (const s of built.spans) spans.push(s);
    if (c !== null && prepared !== null) content.push(contentRow(w, c, prepared, built.request));
  }
  return { v: b.v as 2 | 3 | 4, instance: b.instance, batch: b.batch, published_at_unix_nano: published, requests, spans, content, contentWithheld };
}

/** The record with personal data replaced in its end user, session and tag values (all of them, when there is no redactor). */
function redactAttribution(w: WireRecord, redact: RedactText | null): WireRecord {
  const one = (s: string): string => {
    if (s === '') return s;
    try {
      if (redact !== null) return redact(s).text;
    } catch {
      // Fall through: withheld rather than stored as it came.
    }
    return '[REDACTED]';
  };
  return { ...w, endUser: one(w.endUser), sessionId: one(w.sessionId), tagValues: w.tagValues.map(one) };
}

function contentRow(w: WireRecord, c: WireContent, p: PreparedContent, r: RequestRow): ContentRow {
  const keys = [...p.redactions.keys()].sort();
  return {
    trace_id: r.trace_id,
    span_id: r.span_id,
    team: r.team,
    key_id: r.key_id,
    start_time: r.start_time,
    start_time_unix_nano: r.start_time_unix_nano,
    model: w.model,
    route: w.route,
    dialect: w.dialect,
    stream: w.stream ? 1 : 0,
    policy: c.policy,
    request: p.request,
    response: p.response,
    request_bytes: c.requestBytes,
    response_bytes: c.responseBytes,
    request_truncated: c.requestTruncated ? 1 : 0,
    response_truncated: c.responseTruncated ? 1 : 0,
    response_partial: p.responsePartial ? 1 : 0,
    redaction_keys: keys,
    redaction_counts: keys.map((k) => p.redactions.get(k)!),
  };
}
