/**
 * `GET /v1/requests/{traceId}`: the requests of one trace, each with its stage waterfall and
 * upstream attempts. Reads use FINAL so a batch written twice (redelivery) is counted once
 * even before ClickHouse merged it.
 */
import { sql, table, type Store } from '@sightline/store';
import { ATTEMPT_SPAN, STAGES } from '@sightline/core';
import { ms, type Num } from './common.js';
import { contentOf, type ContentView } from './content.js';

interface RequestDbRow {
  trace_id: string;
  span_id: string;
  instance: string;
  seq: Num;
  start_time_unix_nano: Num;
  method: string;
  route: string;
  dialect: string;
  model: string;
  response_model: string;
  provider: string;
  upstream_model: string;
  team: string;
  stream: Num;
  http_status: Num;
  upstream_status: Num;
  error_type: string;
  aborted: Num;
  total_ns: Num;
  gateway_ns: Num;
  upstream_ns: Num;
  ttfb_ns: Num;
  ttft_ns: Num;
  input_tokens: Num;
  output_tokens: Num;
  cache_read_tokens: Num;
  cache_write_tokens: Num;
  request_bytes: Num;
  response_bytes: Num;
  usage_partial: Num;
  end_user: string;
  session_id: string;
  tag_keys: string[];
  tag_values: string[];
}

interface SpanDbRow {
  span_id: string;
  parent_span_id: string;
  name: string;
  kind: string;
  is_root: Num;
  start_time_unix_nano: Num;
  duration_ns: Num;
  status_code: string;
  status_message: string;
  attr_keys: string[];
  attr_values: string[];
}

export interface WaterfallEntry {
  stage: string;
  span_id: string;
  /** Nanoseconds from the request's start to the stage's start. */
  offset_ns: number;
  duration_ns: number;
  offset_ms: number;
  duration_ms: number;
  status: string;
  status_message: string;
}

export interface AttemptView {
  attempt: number;
  span_id: string;
  provider: string;
  model: string;
  status: number;
  error_type: string;
  offset_ns: number;
  duration_ns: number;
  offset_ms: number;
  duration_ms: number;
  ok: boolean;
}

export interface RequestView {
  trace_id: string;
  span_id: string;
  parent_span_id: string;
  instance: string;
  seq: number;
  start_time: string;
  start_time_unix_nano: string;
  method: string;
  route: string;
  dialect: string;
  model: string;
  response_model: string;
  provider: string;
  upstream_model: string;
  team: string;
  stream: boolean;
  http_status: number;
  upstream_status: number;
  error_type: string;
  aborted: boolean;
  total_ns: number;
  gateway_ns: number;
  upstream_ns: number;
  ttfb_ns: number;
  ttft_ns: number;
  /** `partial`: the stream was cut short; the counts are what had been seen by then. */
  usage: { input_tokens: number; output_tokens: number; cache_read_tokens: number; cache_write_tokens: number; partial: boolean };
  request_bytes: number;
  response_bytes: number;
  /** Attribution the caller named: the end user, the session, tags by name ('' and {} when none). */
  end_user: string;
  session_id: string;
  tags: Record<string, string>;
  attributes: Record<string, string>;
  waterfall: WaterfallEntry[];
  /** Every upstream attempt, in order (retries and fallbacks included). */
  attempts: AttemptView[];
  /**
   * The prompt and the answer, for callers who may read content (asked with `withContent`);
   * null when none was stored (policy `none`, or withheld). Absent otherwise.
   */
  content?: ContentView | null;
}

/** Tags as an object; the first value of a name wins (the gateway keeps names unique). */
export function tagsOf(keys: readonly string[], values: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  keys.forEach((k, i) => {
    if (!(k in out)) out[k] = values[i] ?? '';
  });
  return out;
}

const STAGE_SET: ReadonlySet<string> = new Set(STAGES);

function attrMap(s: SpanDbRow): Record<string, string> {
  const m: Record<string, string> = {};
  s.attr_keys.forEach((k, i) => (m[k] = s.attr_values[i] ?? ''));
  return m;
}

/** The most requests one answer lists (oldest first); the rest are counted in `omitted`. */
export const TRACE_REQUESTS_LIMIT = 100;

export interface TraceView {
  /** The first `TRACE_REQUESTS_LIMIT` requests of the trace by start time, oldest first. */
  requests: RequestView[];
  /** Requests with this trace id in the store. */
  total: number;
  /** `total` minus the requests listed. */
  omitted: number;
}

/**
 * The requests of one trace. Callers choose their trace ids (`traceparent`), so one trace
 * can hold any number of requests (issue 9): the list is bounded, the rest is counted, and
 * only the listed requests' spans are read, matched to them through maps by span id.
 */
export async function requestsByTrace(store: Store, traceId: string, team: string | null, max: number = TRACE_REQUESTS_LIMIT, opts: { withContent?: boolean } = {}): Promise<TraceView> {
  const reqT = table(store.database, 'requests');
  const spanT = table(store.database, 'spans');
  // A team key sees its team's requests of the trace only (a trace id may be shared by anyone).
  const where = team === null ? sql`trace_id = ${traceId}` : sql`trace_id = ${traceId} AND team = ${team}`;
  const reqs = await store.query<RequestDbRow>(
    sql`SELECT * FROM ${reqT} FINAL WHERE ${where} ORDER BY start_time_unix_nano, span_id LIMIT ${max}`,
  );
  if (reqs.length === 0) return { requests: [], total: 0, omitted: 0 };
  const ids = reqs.map((r) => r.span_id);
  const [counted, spans, content] = await Promise.all([
    // Counted only when the list is full: the common trace of one request costs no second scan.
    reqs.length < max ? Promise.resolve(reqs.length) : store.query<{ n: Num }>(sql`SELECT count() AS n FROM ${reqT} FINAL WHERE ${where}`).then((rows) => Number(rows[0]?.n ?? 0)),
    store.query<SpanDbRow>(
      sql`SELECT span_id, parent_span_id, name, kind, is_root, start_time_unix_nano, duration_ns, status_code, status_message, attr_keys, attr_values FROM ${spanT} FINAL WHERE trace_id = ${traceId} AND (has(${ids}, span_id) OR has(${ids}, parent_span_id)) ORDER BY start_time_unix_nano, is_root DESC`,
    ),
    opts.withContent === true
      ? contentOf(store, traceId, reqs.map((r) => ({ trace_id: r.trace_id, span_id: r.span_id, team: r.team, start_time_unix_nano: BigInt(r.start_time_unix_nano) })))
      : Promise.resolve(null),
  ]);
  // Rows written after the list was read may already be counted, never fewer than listed.
  const total = Math.max(counted, reqs.length);
  const byId = new Map<string, SpanDbRow>();
  const childrenOf = new Map<string, SpanDbRow[]>();
  for (const s of spans) {
    if (!byId.has(s.span_id)) byId.set(s.span_id, s);
    if (Number(s.is_root) !== 0) continue;
    const siblings = childrenOf.get(s.parent_span_id);
    if (siblings === undefined) childrenOf.set(s.parent_span_id, [s]);
    else siblings.push(s);
  }
  const requests = reqs.map((r): RequestView => {
    const start = BigInt(r.start_time_unix_nano);
    const root = byId.get(r.span_id);
    const attributes: Record<string, string> = root === undefined ? {} : attrMap(root);
    const children = childrenOf.get(r.span_id) ?? [];
    const attempts = children
      .filter((s) => s.name === ATTEMPT_SPAN)
      .map((s): AttemptView => {
        const a = attrMap(s);
        const offset = Number(BigInt(s.start_time_unix_nano) - start);
        const duration = Number(s.duration_ns);
        return {
          attempt: Number(a['sightline.attempt'] ?? 0),
          span_id: s.span_id,
          provider: a['gen_ai.provider.name'] ?? '',
          model: a['gen_ai.request.model'] ?? '',
          status: Number(a['http.response.status_code'] ?? 0),
          error_type: a['error.type'] ?? '',
          offset_ns: offset,
          duration_ns: duration,
          offset_ms: ms(offset),
          duration_ms: ms(duration),
          ok: s.status_code !== 'ERROR',
        };
      })
      .sort((x, y) => x.attempt - y.attempt);
    const waterfall = children
      .filter((s) => STAGE_SET.has(s.name))
      .map((s): WaterfallEntry => {
        const offset = Number(BigInt(s.start_time_unix_nano) - start);
        const duration = Number(s.duration_ns);
        return { stage: s.name, span_id: s.span_id, offset_ns: offset, duration_ns: duration, offset_ms: ms(offset), duration_ms: ms(duration), status: s.status_code, status_message: s.status_message };
      });
    return {
      trace_id: r.trace_id,
      span_id: r.span_id,
      parent_span_id: root?.parent_span_id ?? '',
      instance: r.instance,
      seq: Number(r.seq),
      start_time: new Date(Number(start / 1_000_000n)).toISOString(),
      start_time_unix_nano: start.toString(),
      method: r.method,
      route: r.route,
      dialect: r.dialect,
      model: r.model,
      response_model: r.response_model,
      provider: r.provider,
      upstream_model: r.upstream_model,
      team: r.team,
      stream: Number(r.stream) === 1,
      http_status: Number(r.http_status),
      upstream_status: Number(r.upstream_status),
      error_type: r.error_type,
      aborted: Number(r.aborted) === 1,
      total_ns: Number(r.total_ns),
      gateway_ns: Number(r.gateway_ns),
      upstream_ns: Number(r.upstream_ns),
      ttfb_ns: Number(r.ttfb_ns),
      ttft_ns: Number(r.ttft_ns),
      usage: {
        input_tokens: Number(r.input_tokens),
        output_tokens: Number(r.output_tokens),
        cache_read_tokens: Number(r.cache_read_tokens),
        cache_write_tokens: Number(r.cache_write_tokens),
        partial: Number(r.usage_partial) === 1,
      },
      request_bytes: Number(r.request_bytes),
      response_bytes: Number(r.response_bytes),
      end_user: r.end_user,
      session_id: r.session_id,
      tags: tagsOf(r.tag_keys, r.tag_values),
      attributes,
      waterfall,
      attempts,
      ...(content === null ? {} : { content: content.get(r.span_id) ?? null }),
    };
  });
  return { requests, total, omitted: total - requests.length };
}
