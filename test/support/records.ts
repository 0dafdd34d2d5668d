/**
 * Request records for tests: the one builder every test file uses, instead of a copy per
 * file. A record is what the gateway fills in while it serves a request
 * (packages/capture/src/record.ts); `batchOf` wraps records the way a gateway publishes
 * them (format v2, packages/core/src/wire.ts).
 */
import { RequestRecord, toWire, type ContentOptions } from '@sightline/capture';
import type { CaptureConfig } from '@sightline/config';
import { markToUnixNano, messageRecords, newSpanId, newTraceId, now, type CaptureBatchV2, type WireContent, type WireRecord } from '@sightline/core';

export interface RecordOptions {
  /** Per-instance request number. Default 7. */
  seq?: number;
  /** Monotonic mark (core/clock.ts) at which the request started. Default now(). */
  t0?: number;
  team?: string;
  /** Default `openai`. */
  provider?: string;
  /** A first attempt that failed with a 500 before the one that served (`upstream.retry`). */
  retried?: boolean;
  /** Token usage in the kept response body (OpenAI shape), so the ingester reads it. */
  usage?: { prompt: number; completion: number; cached?: number };
  /** Attribution the caller named (issue 11). */
  endUser?: string;
  sessionId?: string;
  /** Tags by name (`x-sightline-tag-<name>`). */
  tags?: Record<string, string>;
}

function base(o: RecordOptions): { r: RequestRecord; t: number } {
  const r = new RequestRecord();
  const t = o.t0 ?? now();
  r.seq = o.seq ?? 7;
  r.traceId = newTraceId();
  r.rootSpanId = newSpanId();
  r.team = o.team ?? 'search';
  r.t0 = t;
  r.endUser = o.endUser ?? '';
  r.sessionId = o.sessionId ?? '';
  if (o.tags !== undefined) {
    r.tagKeys = Object.keys(o.tags);
    r.tagValues = Object.values(o.tags);
  }
  return { r, t };
}

/**
 * A request served in full by provider `openai` for model `gpt-4o`: every stage reached,
 * on a reused connection (no `upstream.connect`) at the first attempt (no
 * `upstream.retry`), status 200, 150.05 ms long with 150 ms of it upstream. No response
 * body is kept: tests that need usage set `responseChunks`.
 */
export function servedRecord(o: RecordOptions = {}): RequestRecord {
  const { r, t } = base(o);
  r.tBody = t + 0.01;
  r.tParsed = t + 0.02;
  r.tAuth = t + 0.021;
  r.tRouted = t + 0.022;
  r.tBuilt = t + 0.03;
  r.tConnected = t + 0.5;
  r.tSent = t + 0.51;
  r.tFirstByte = t + 100;
  r.tLastByte = t + 150;
  r.tEnd = t + 150.01;
  r.tFirstWrite = t + 100.001;
  r.tFinish = t + 150.05;
  r.method = 'POST';
  r.route = '/v1/chat/completions';
  r.model = 'gpt-4o';
  r.upstreamModel = 'gpt-4o';
  r.provider = o.provider ?? 'openai';
  r.status = 200;
  r.upstreamStatus = 200;
  if (o.retried === true) {
    r.attempts = [{ provider: r.provider, model: 'gpt-4o', upstreamHost: 'http://x', start: t + 0.03, end: t + 0.4, status: 500, errorType: 'upstream_error', errorMessage: `provider ${r.provider} answered 500` }];
    r.tAttempt = t + 0.45;
  }
  if (o.usage !== undefined) {
    const u = o.usage;
    r.responseChunks = [Buffer.from(JSON.stringify({ model: 'gpt-4o', usage: { prompt_tokens: u.prompt, completion_tokens: u.completion, prompt_tokens_details: { cached_tokens: u.cached ?? 0 } } }))];
  }
  return r;
}

/**
 * A request the gateway refused with a 400 in `parse` (no provider involved): stages
 * `ingress.read`, `parse` (failed) and `egress.write`, 0.3 ms long.
 */
export function refusedRecord(o: RecordOptions = {}): RequestRecord {
  const { r, t } = base(o);
  r.tBody = t + 0.1;
  r.tEnd = t + 0.2;
  r.tFinish = t + 0.3;
  r.method = 'POST';
  r.route = '/v1/chat/completions';
  r.status = 400;
  r.errorType = 'invalid_request_error';
  r.errorMessage = 'messages: required';
  return r;
}

/** Nanoseconds since the Unix epoch, `agoMs` milliseconds ago, as a decimal string. */
export function unixNanoAgo(agoMs = 0): string {
  return ((BigInt(Date.now()) - BigInt(agoMs)) * 1_000_000n).toString();
}

/** Content as a gateway publishes it (wire.ts WireContent): policy `full`, sizes from the texts, nothing cut or replaced, unless given. */
export function contentOf(c: Partial<WireContent> & { request: string; response: string }): WireContent {
  return {
    policy: c.policy ?? 'full',
    request: c.request,
    requestBytes: c.requestBytes ?? Buffer.byteLength(c.request),
    requestTruncated: c.requestTruncated ?? false,
    response: c.response,
    responseBytes: c.responseBytes ?? Buffer.byteLength(c.response),
    responseTruncated: c.responseTruncated ?? false,
    redactions: c.redactions ?? {},
  };
}

/** The record as published, carrying `content` (the gateway's side of content is its own; tests set it here). */
export function withContent(r: RequestRecord, content: WireContent | null): WireRecord {
  return { ...toWire(r), content };
}

/** A record as the gateway publishes it (a v4 record, as bytes or text), read back into the WireRecord it stands for. */
export function wireOf(record: Uint8Array | string): WireRecord {
  const head = Buffer.from('{"v":4,"instance":"test","batch":"1","requests_count":1,"published_at_unix_nano":"0","origin_unix_nano":"0","records":[');
  const [w] = messageRecords(Buffer.concat([head, typeof record === 'string' ? Buffer.from(record) : record, Buffer.from(']}')]));
  if (w === undefined || w === null) throw new Error('not a v4 record');
  return w;
}

/** toWire(r, content) as a decoded record equals it: through JSON (undefined members dropped). */
export function wireJson(r: RequestRecord, content?: ContentOptions): WireRecord {
  return JSON.parse(JSON.stringify(toWire(r, content))) as WireRecord;
}

/**
 * A v2 bus message holding `records`, as gateway `instance` publishes it (its message id
 * is `${instance}/${batch}`). Marks are this process's, so the origin is this process's.
 * Records already published (withContent) go in as they are.
 */
export function batchOf(instance: string, batch: number, records: (RequestRecord | WireRecord)[], publishedAgoMs = 0): CaptureBatchV2 {
  return {
    v: 2,
    instance,
    batch: String(batch),
    requests_count: records.length,
    published_at_unix_nano: unixNanoAgo(publishedAgoMs),
    origin_unix_nano: markToUnixNano(0).toString(),
    records: records.map((r) => (r instanceof RequestRecord ? toWire(r) : r)),
  };
}

/** Capture settings for tests: the defaults of the file format, with small batches and timers. */
export function captureConfig(over: Partial<CaptureConfig> = {}): CaptureConfig {
  return {
    enabled: true,
    batchMaxRequests: 10,
    batchMaxBytes: 512 * 1024,
    flushIntervalMs: 5,
    queueMaxRequests: 100,
    maxInFlight: 2,
    publishTimeoutMs: 1000,
    spoolDir: null,
    spoolMaxBytes: 1024 ** 3,
    content: 'full',
    contentMaxBytes: 256 * 1024,
    contentKeepBase64: false,
    ...over,
  };
}
