/**
 * Turns a finished request (a WireRecord, @sightline/core wire.ts) into OpenTelemetry
 * spans and a request row, in the ingester, off the request path. A record's spans are
 * planned once (SpanPlan: ids, kinds, status, attributes, HrTime, as in the OTel data model,
 * with the GenAI semantic conventions,
 * https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/); the `spans` rows are
 * made from the plans, and, for span processors (an OTLP exporter), the same plans become
 * spans of @opentelemetry/sdk-trace-base. Rows were made from the SDK's spans before: that
 * was a fifth of the ingester's CPU (issue 15), and the spans are only needed where they
 * are exported. The tests check that the rows and the SDK's spans agree field by field. The
 * gateway never loads this package, nor the SDK: it publishes records, not spans
 * (test/layout.test.ts checks).
 *
 * Stage spans partition the request: each starts where the previous one ended, from the
 * request's first mark to its last, so they add up to its total exactly.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type HrTime, type Tracer } from '@opentelemetry/api';
import {
  AlwaysOnSampler,
  BasicTracerProvider,
  RandomIdGenerator,
  type IdGenerator,
  type SpanProcessor,
  type TracerConfig,
} from '@opentelemetry/sdk-trace-base';
import { ATTEMPT_SPAN, markDiffNs, markToUnixNano, type RequestRow, type SpanRow, type StageName, type WireRecord } from '@sightline/core';
import { toWire, type RequestRecord } from '@sightline/capture';
import { CONTENT_ATTRIBUTES, type GenAiContentAttributes } from './genai.js';

/**
 * Longest attribute value in a `spans` row. Content attributes are whole on the span (the
 * capture bound limits them) and never in a row; other values are short, this is a backstop.
 */
const ROW_ATTRIBUTE_MAX_CHARS = 4096;

/** Unix time of this process's monotonic origin. */
const LOCAL_ORIGIN_NS = markToUnixNano(0);

/** 32 bits of `x`, mixed (the MurmurHash3 finaliser). */
function mix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

const hex8 = (n: number): string => n.toString(16).padStart(8, '0');

/**
 * The id of the `k`-th child span of a root span (k from 1): derived from the root's id, so
 * that building a record twice — a batch redelivered after an ingester crash — gives the
 * same ids, which ReplacingMergeTree then collapses (issue 10). Random-looking, never the
 * root's id, never zero.
 */
export function childSpanId(rootSpanId: string, k: number): string {
  return childIds(rootSpanId)(k);
}

/** childSpanId for one root, its id's two halves parsed once: the ids of its children by k. */
function childIds(rootSpanId: string): (k: number) => string {
  const hi = parseInt(rootSpanId.slice(0, 8), 16);
  const lo = parseInt(rootSpanId.slice(8, 16), 16);
  const idOf = (k: number): string => {
    const a = mix32(hi ^ Math.imul(k, 0x9e3779b1));
    const b = mix32(lo ^ a ^ Math.imul(k, 0x7feb352d));
    const id = hex8(a) + hex8(b);
    return id === rootSpanId || id === '0000000000000000' ? idOf(k + 0x10000) : id;
  };
  return idOf;
}

/**
 * Gives the SDK the ids a record's plans already have (SpanBuilder sets them before each
 * span it starts): the trace id and span id the client received, and the children's
 * derived ones (childSpanId).
 */
class PlannedIds implements IdGenerator {
  nextTraceId = '';
  nextSpanId = '';
  generateTraceId(): string {
    return this.nextTraceId;
  }
  generateSpanId(): string {
    return this.nextSpanId;
  }
}

/**
 * One span of a record as planned: what its `spans` row is made of, and what an SDK span
 * is started with when span processors want them.
 */
interface SpanPlan {
  name: string;
  kind: SpanKind;
  spanId: string;
  start: HrTime;
  end: HrTime;
  /** null: none. */
  attributes: Attributes | null;
  /** The status message when the status is ERROR; null: UNSET. */
  error: string | null;
}

/** Attributes a span keeps at most, as the SDK is configured (spanLimits): later ones are dropped. */
const ATTRIBUTE_COUNT_LIMIT = 128;

/**
 * The Unix time of a gateway process's monotonic origin, split so that marks become
 * HrTime with number arithmetic only (no BigInt per span; nanosecond counts stay below 2^53).
 */
class Origin {
  readonly s: number;
  readonly rem: number;
  constructor(readonly ns: bigint) {
    this.s = Number(ns / 1_000_000_000n);
    this.rem = Number(ns % 1_000_000_000n);
  }
  hr(mark: number): HrTime {
    const ns = this.rem + Math.round(mark * 1e6);
    const s = Math.floor(ns / 1e9);
    return [this.s + s, ns - s * 1e9];
  }
}

/** Decimal nanoseconds of an HrTime, without BigInt. */
function hrToNsString(t: HrTime): string {
  if (t[0] === 0) return String(t[1]);
  const frac = String(t[1]);
  return `${t[0]}${'000000000'.slice(frac.length)}${frac}`;
}

/** The marks stage intervals are made of (a RequestRecord or a WireRecord). */
export type StageMarks = Pick<
  WireRecord,
  't0' | 'tBody' | 'tParsed' | 'tAuth' | 'tLimits' | 'tRouted' | 'tCache' | 'tBudget' | 'tBuilt' | 'tAttempt' | 'tConnected' | 'tSent' | 'tFirstByte' | 'tLastByte' | 'tEnd' | 'tFinish' | 'newConnection' | 'failedStage' | 'cacheHit'
>;

interface StageMark {
  name: StageName;
  end: (r: StageMarks) => number;
  /** Skipped for a response served from the cache (nothing went upstream). */
  upstreamSide?: true;
}

/** Stage order and the mark at which each one ends. */
const STAGE_MARKS: readonly StageMark[] = [
  { name: 'ingress.read', end: (r) => r.tBody },
  { name: 'parse', end: (r) => r.tParsed },
  { name: 'auth', end: (r) => r.tAuth },
  // Controls (issue 12): -1 when the control does not apply to the request.
  { name: 'limits', end: (r) => r.tLimits },
  { name: 'route', end: (r) => r.tRouted },
  { name: 'cache', end: (r) => r.tCache },
  { name: 'budget', end: (r) => r.tBudget, upstreamSide: true },
  { name: 'translate.request', end: (r) => r.tBuilt, upstreamSide: true },
  { name: 'upstream.retry', end: (r) => (r.tAttempt > 0 ? r.tAttempt : -1), upstreamSide: true },
  { name: 'upstream.connect', end: (r) => (r.newConnection ? r.tConnected : -1), upstreamSide: true },
  { name: 'upstream.send', end: (r) => r.tSent, upstreamSide: true },
  { name: 'upstream.wait', end: (r) => r.tFirstByte, upstreamSide: true },
  { name: 'upstream.stream', end: (r) => r.tLastByte, upstreamSide: true },
  { name: 'translate.response', end: (r) => r.tEnd, upstreamSide: true },
  { name: 'egress.write', end: (r) => r.tFinish },
];

export interface StageInterval {
  name: StageName;
  start: number;
  end: number;
  failed: boolean;
}

/**
 * The stage intervals of a request, in order, covering [t0, tFinish] without gaps or
 * overlap. A stage whose end mark was never reached (the request failed or was aborted
 * in it) is closed at the next mark that was reached and flagged `failed`.
 */
export function stageIntervals(r: StageMarks): StageInterval[] {
  const out: StageInterval[] = [];
  let prev = r.t0;
  let pending: StageName | null = null;
  for (const s of STAGE_MARKS) {
    if (r.cacheHit && s.upstreamSide === true) continue;
    const end = s.end(r);
    if (end < 0) continue; // optional stage that did not happen
    if (end === 0 || end < prev) {
      pending ??= r.failedStage ?? s.name;
      continue;
    }
    const name: StageName = pending ?? s.name;
    out.push({ name, start: prev, end, failed: pending !== null || r.failedStage === s.name });
    pending = null;
    prev = end;
  }
  return out;
}

function attemptAttrs(n: number, provider: string, model: string, host: string, status: number, errorType: string): Attributes {
  const a: Attributes = { 'sightline.attempt': n, 'gen_ai.provider.name': provider, 'gen_ai.request.model': model, 'server.address': host };
  if (status > 0) a['http.response.status_code'] = status;
  if (errorType !== '') a['error.type'] = errorType;
  return a;
}

export interface BuiltRequest {
  request: RequestRow;
  spans: SpanRow[];
}

export interface SpanBuilderOptions {
  /** Version reported as the instrumentation scope version. */
  version?: string;
  /**
   * Further processors that receive every span built, as the OpenTelemetry SDK made it (an
   * exporter's processor, a test's in-memory exporter): with the content attributes, which
   * the `spans` rows leave out. Default none.
   */
  spanProcessors?: SpanProcessor[];
  /**
   * The resource the spans carry (`service.name` and the like), for processors that export
   * them; the `spans` rows do not use it. Default: the SDK's default resource.
   */
  resource?: TracerConfig['resource'];
}

export class SpanBuilder {
  readonly #ids = new PlannedIds();
  readonly #random = new RandomIdGenerator();
  /** The SDK's tracer, only when span processors want spans (an OTLP exporter, a test's exporter). */
  readonly #tracer: Tracer | null = null;
  #origin: Origin | null = null;

  constructor(opts: SpanBuilderOptions = {}) {
    if (opts.spanProcessors === undefined || opts.spanProcessors.length === 0) return;
    const provider = new BasicTracerProvider({
      // Capture is complete by design: an incoming `sampled=0` does not turn it off.
      sampler: new AlwaysOnSampler(),
      idGenerator: this.#ids,
      spanProcessors: opts.spanProcessors,
      ...(opts.resource === undefined ? {} : { resource: opts.resource }),
      // No value length limit on the span: the content attributes are bounded by the capture
      // bound already, and rows cut values themselves (ROW_ATTRIBUTE_MAX_CHARS). Room for
      // the caller's tags (bounded in number by the gateway) beside ~25 of our own.
      spanLimits: { attributeCountLimit: ATTRIBUTE_COUNT_LIMIT },
    });
    this.#tracer = provider.getTracer('sightline-gateway', opts.version ?? '0.1.0');
  }

  /**
   * The request row and spans of a record made in this process (tools and tests): the
   * record goes through the same encoding the gateway publishes (toWire).
   */
  buildRecord(r: RequestRecord, instance: string): BuiltRequest {
    return this.build(toWire(r), instance, LOCAL_ORIGIN_NS);
  }

  /**
   * The request row and spans of one finished request from gateway `instance`, whose
   * monotonic origin is at Unix nanosecond `originNs` (the batch's `origin_unix_nano`).
   * `content`: the GenAI content attributes of the root span (content.ts), if any; they are
   * on the span and never in its row.
   */
  build(r: WireRecord, instance: string, originNs: bigint, content: GenAiContentAttributes | null = null): BuiltRequest {
    let origin = this.#origin;
    if (origin === null || origin.ns !== originNs) origin = this.#origin = new Origin(originNs);
    const hr = (mark: number): HrTime => origin.hr(mark);
    const stages = stageIntervals(r);
    const totalNs = markDiffNs(r.t0, r.tFinish);
    let upstreamNs = 0;
    for (const s of stages) {
      if (s.name === 'upstream.wait' || s.name === 'upstream.stream') upstreamNs += markDiffNs(s.start, s.end);
    }

    // The ids the client already received (the trace id in a header, the root's span id
    // upstream in `traceparent`); random ones only for a record without them (none from a gateway).
    const traceId = r.traceId !== '' ? r.traceId : this.#random.generateTraceId();
    const rootId = r.rootSpanId !== '' ? r.rootSpanId : this.#random.generateSpanId();
    const childId = childIds(rootId);
    let child = 0;
    const nextId = (): string => childId(++child);
    const operation = 'chat';
    const rootAttrs: Attributes = {
      'gen_ai.operation.name': operation,
      'gen_ai.provider.name': r.provider,
      'gen_ai.request.model': r.model,
      'http.request.method': r.method,
      'http.route': r.route,
      'http.response.status_code': r.status,
      'sightline.dialect': r.dialect,
      'sightline.stream': r.stream,
      'sightline.team': r.team,
      'sightline.key_id': r.keyId,
      'sightline.seq': r.seq,
      'sightline.gateway_ns': totalNs - upstreamNs,
      'sightline.upstream_ns': upstreamNs,
    };
    if (r.upstreamHost !== '') rootAttrs['server.address'] = r.upstreamHost;
    if (r.responseModel !== '') rootAttrs['gen_ai.response.model'] = r.responseModel;
    if (r.usageFound) {
      rootAttrs['gen_ai.usage.input_tokens'] = r.inputTokens;
      rootAttrs['gen_ai.usage.output_tokens'] = r.outputTokens;
    }
    if (r.errorType !== '') rootAttrs['error.type'] = r.errorType;
    if (r.aborted) rootAttrs['sightline.aborted'] = true;
    if (r.tCache >= 0) rootAttrs['sightline.cache'] = r.cacheHit ? 'hit' : 'miss';
    if (r.partial) rootAttrs['sightline.usage.partial'] = true;
    if (r.attempts !== null) rootAttrs['sightline.attempts'] = r.attempts.length + 1;
    // Attribution (issue 11): the end user the caller named (enduser.id, "unique identifier
    // of an end user in the system", https://opentelemetry.io/docs/specs/semconv/registry/attributes/enduser/),
    // the session as the GenAI conversation ("session, thread"), and the caller's tags.
    if (r.endUser !== '') rootAttrs['enduser.id'] = r.endUser;
    if (r.sessionId !== '') rootAttrs['gen_ai.conversation.id'] = r.sessionId;
    for (let i = 0; i < r.tagKeys.length; i++) rootAttrs[`sightline.tag.${r.tagKeys[i]!}`] = r.tagValues[i] ?? '';
    if (content !== null) {
      for (const k in content) {
        const v = content[k as keyof GenAiContentAttributes];
        if (v !== undefined) rootAttrs[k] = v;
      }
    }

    const failure = r.aborted ? 'client aborted' : r.errorMessage;
    const plans: SpanPlan[] = [];
    for (const s of stages) {
      const isUpstream = s.name.startsWith('upstream.');
      plans.push({ name: s.name, kind: isUpstream ? SpanKind.CLIENT : SpanKind.INTERNAL, spanId: nextId(), start: hr(s.start), end: hr(s.end), attributes: null, error: s.failed ? failure : null });
    }
    // One span per upstream attempt, beside the stages: the failed ones first, then the final one.
    let n = 0;
    if (r.attempts !== null) {
      for (const a of r.attempts) {
        plans.push({ name: ATTEMPT_SPAN, kind: SpanKind.CLIENT, spanId: nextId(), start: hr(a.start), end: hr(a.end), attributes: attemptAttrs(++n, a.provider, a.model, a.upstreamHost, a.status, a.errorType), error: a.errorMessage });
      }
    }
    const finalStart = r.tAttempt > 0 ? r.tAttempt : r.tBuilt;
    if (finalStart > 0 && r.provider !== '') {
      const end = r.tLastByte > 0 ? r.tLastByte : r.tEnd > 0 ? r.tEnd : r.tFinish;
      const failed = r.upstreamStatus >= 500 || (r.upstreamStatus === 0 && r.errorType !== '');
      plans.push({
        name: ATTEMPT_SPAN, kind: SpanKind.CLIENT, spanId: nextId(), start: hr(finalStart), end: hr(Math.max(end, finalStart)),
        attributes: attemptAttrs(++n, r.provider, r.upstreamModel, r.upstreamHost, r.upstreamStatus, r.tFirstByte === 0 ? r.errorType : ''), error: failed ? r.errorMessage : null,
      });
    }
    // The root last, as the SDK ends it (its rows have always come in the order spans end).
    const root: SpanPlan = { name: `${operation} ${r.model === '' ? 'unknown' : r.model}`, kind: SpanKind.SERVER, spanId: rootId, start: hr(r.t0), end: hr(r.tFinish), attributes: rootAttrs, error: r.status >= 500 || r.aborted ? failure : null };
    if (this.#tracer !== null) this.#startSpans(this.#tracer, traceId, r.parentSpanId, root, plans);

    const spans: SpanRow[] = [];
    for (const p of plans) spans.push(row(p, traceId, rootId, r, instance));
    spans.push(row(root, traceId, r.parentSpanId, r, instance));
    const start = hr(r.t0);
    const request: RequestRow = {
      trace_id: traceId,
      span_id: rootId,
      instance,
      seq: String(r.seq),
      start_time: start[0],
      start_time_unix_nano: hrToNsString(start),
      method: r.method,
      route: r.route,
      dialect: r.dialect,
      model: r.model,
      response_model: r.responseModel,
      provider: r.provider,
      upstream_model: r.upstreamModel,
      team: r.team,
      key_id: r.keyId,
      stream: r.stream ? 1 : 0,
      http_status: r.status,
      upstream_status: r.upstreamStatus,
      error_type: r.errorType,
      aborted: r.aborted ? 1 : 0,
      total_ns: String(totalNs),
      gateway_ns: String(totalNs - upstreamNs),
      upstream_ns: String(upstreamNs),
      ttfb_ns: String(r.tFirstWrite > 0 ? markDiffNs(r.t0, r.tFirstWrite) : 0),
      ttft_ns: String(r.tFirstToken > 0 ? markDiffNs(r.t0, r.tFirstToken) : 0),
      input_tokens: r.inputTokens,
      output_tokens: r.outputTokens,
      cache_read_tokens: r.cacheReadTokens,
      cache_write_tokens: r.cacheWriteTokens,
      request_bytes: r.requestBytes,
      response_bytes: r.responseBytes,
      usage_partial: r.partial ? 1 : 0,
      cache_hit: r.cacheHit ? 1 : 0,
      end_user: r.endUser,
      session_id: r.sessionId,
      tag_keys: r.tagKeys,
      tag_values: r.tagValues,
    };
    return { request, spans };
  }

  /**
   * The record's spans as the SDK's, for the span processors: started and ended with the
   * plans' ids, times, attributes and status, the root first and ended last.
   */
  #startSpans(tracer: Tracer, traceId: string, parentSpanId: string, root: SpanPlan, children: readonly SpanPlan[]): void {
    let parent: Context = ROOT_CONTEXT;
    if (parentSpanId !== '') parent = trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId: parentSpanId, traceFlags: 1, isRemote: true });
    else this.#ids.nextTraceId = traceId;
    this.#ids.nextSpanId = root.spanId;
    const rootSpan = tracer.startSpan(root.name, { kind: root.kind, startTime: root.start, attributes: root.attributes ?? {} }, parent);
    if (root.error !== null) rootSpan.setStatus({ code: SpanStatusCode.ERROR, message: root.error });
    const ctx = trace.setSpan(ROOT_CONTEXT, rootSpan);
    for (const p of children) {
      this.#ids.nextSpanId = p.spanId;
      const span = tracer.startSpan(p.name, p.attributes === null ? { kind: p.kind, startTime: p.start } : { kind: p.kind, startTime: p.start, attributes: p.attributes }, ctx);
      if (p.error !== null) span.setStatus({ code: SpanStatusCode.ERROR, message: p.error });
      span.end(p.end);
    }
    rootSpan.end(root.end);
    this.#ids.nextTraceId = '';
    this.#ids.nextSpanId = '';
  }
}

/** `kind` column values, indexed by SpanKind. */
const KIND_NAMES: Readonly<Record<SpanKind, string>> = {
  [SpanKind.INTERNAL]: 'internal',
  [SpanKind.SERVER]: 'server',
  [SpanKind.CLIENT]: 'client',
  [SpanKind.PRODUCER]: 'producer',
  [SpanKind.CONSUMER]: 'consumer',
};

/** The first `max` UTF-16 units of `text`, not splitting a surrogate pair. */
function cut(text: string, max: number): string {
  const c = text.charCodeAt(max - 1);
  return text.slice(0, c >= 0xd800 && c <= 0xdbff ? max - 1 : max);
}

/** Decimal nanoseconds from `start` to `end`, 0 when `end` is before it (as the SDK ends such a span). */
function durationNs(start: HrTime, end: HrTime): string {
  let sec = end[0] - start[0];
  let ns = end[1] - start[1];
  if (ns < 0) {
    sec -= 1;
    ns += 1e9;
  }
  return sec < 0 ? '0' : String(sec * 1e9 + ns);
}

function row(p: SpanPlan, traceId: string, parentSpanId: string, r: WireRecord, instance: string): SpanRow {
  const keys: string[] = [];
  const values: string[] = [];
  const attrs = p.attributes;
  if (attrs !== null) {
    // As the SDK keeps them: in the order set, values that are null or undefined left out,
    // and none past its count limit (content attributes count there, and are never in rows).
    let kept = 0;
    for (const k in attrs) {
      const v = attrs[k];
      if (v === undefined || v === null || k === '') continue;
      if (++kept > ATTRIBUTE_COUNT_LIMIT) break;
      if (CONTENT_ATTRIBUTES.has(k)) continue;
      keys.push(k);
      const text = String(v);
      values.push(text.length > ROW_ATTRIBUTE_MAX_CHARS ? cut(text, ROW_ATTRIBUTE_MAX_CHARS) : text);
    }
  }
  return {
    trace_id: traceId,
    span_id: p.spanId,
    parent_span_id: parentSpanId,
    name: p.name,
    kind: KIND_NAMES[p.kind],
    is_root: p.kind === SpanKind.SERVER ? 1 : 0,
    start_time: p.start[0],
    start_time_unix_nano: hrToNsString(p.start),
    duration_ns: durationNs(p.start, p.end),
    status_code: p.error === null ? 'UNSET' : 'ERROR',
    status_message: p.error ?? '',
    model: r.model,
    provider: r.provider,
    team: r.team,
    key_id: r.keyId,
    instance,
    attr_keys: keys,
    attr_values: values,
  };
}
