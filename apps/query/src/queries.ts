/**
 * The SQL behind the query API. Every value goes through `sql` (store/sql.ts); the same
 * text runs on ClickHouse 18.16 and on chdb 26.x. Reads use FINAL so a batch written
 * twice (redelivery) is counted once even before ClickHouse merged it.
 */
import { sql, table, SqlFragment, type Store } from '@sightline/store';
import { ATTEMPT_SPAN, STAGES } from '@sightline/core';

type Num = number | string;

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
  attributes: Record<string, string>;
  waterfall: WaterfallEntry[];
  /** Every upstream attempt, in order (retries and fallbacks included). */
  attempts: AttemptView[];
}

const STAGE_SET: ReadonlySet<string> = new Set(STAGES);

function attrMap(s: SpanDbRow): Record<string, string> {
  const m: Record<string, string> = {};
  s.attr_keys.forEach((k, i) => (m[k] = s.attr_values[i] ?? ''));
  return m;
}

const ms = (ns: number) => Math.round(ns / 1000) / 1000;

export async function requestsByTrace(store: Store, traceId: string): Promise<RequestView[]> {
  const reqT = table(store.database, 'requests');
  const spanT = table(store.database, 'spans');
  const [reqs, spans] = await Promise.all([
    store.query<RequestDbRow>(sql`SELECT * FROM ${reqT} FINAL WHERE trace_id = ${traceId} ORDER BY start_time_unix_nano`),
    store.query<SpanDbRow>(
      sql`SELECT span_id, parent_span_id, name, kind, is_root, start_time_unix_nano, duration_ns, status_code, status_message, attr_keys, attr_values FROM ${spanT} FINAL WHERE trace_id = ${traceId} ORDER BY start_time_unix_nano, is_root DESC`,
    ),
  ]);
  return reqs.map((r) => {
    const start = BigInt(r.start_time_unix_nano);
    const root = spans.find((s) => s.span_id === r.span_id);
    const attributes: Record<string, string> = root === undefined ? {} : attrMap(root);
    const children = spans.filter((s) => s.parent_span_id === r.span_id && Number(s.is_root) === 0);
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
      attributes,
      waterfall,
      attempts,
    };
  });
}

export interface StageFilter {
  fromNs: bigint;
  toNs: bigint;
  model: string | null;
  provider: string | null;
  team: string | null;
}

export interface StageStats {
  stage: string;
  count: number;
  p50_ns: number;
  p95_ns: number;
  p99_ns: number;
  p50_ms: number;
  p95_ms: number;
  p99_ms: number;
}

const STAGE_ORDER = new Map<string, number>(STAGES.map((s, i) => [s, i]));

export async function stageStats(store: Store, f: StageFilter): Promise<StageStats[]> {
  const fromS = Number(f.fromNs / 1_000_000_000n);
  const toS = Number((f.toNs + 999_999_999n) / 1_000_000_000n);
  let where = sql`is_root = 0 AND has(${STAGES}, name) AND start_time >= toDateTime(${fromS}, 'UTC') AND start_time <= toDateTime(${toS}, 'UTC') AND start_time_unix_nano >= ${f.fromNs} AND start_time_unix_nano < ${f.toNs}`;
  if (f.model !== null) where += sql` AND model = ${f.model}`;
  if (f.provider !== null) where += sql` AND provider = ${f.provider}`;
  if (f.team !== null) where += sql` AND team = ${f.team}`;
  const rows = await store.query<{ name: string; count: Num; q: Num[] }>(
    sql`SELECT name, count() AS count, quantilesExact(0.5, 0.95, 0.99)(duration_ns) AS q FROM ${table(store.database, 'spans')} FINAL WHERE ${new SqlFragment(where)} GROUP BY name`,
  );
  return rows
    .map((r) => {
      const [p50, p95, p99] = r.q.map(Number) as [number, number, number];
      return { stage: r.name, count: Number(r.count), p50_ns: p50, p95_ns: p95, p99_ns: p99, p50_ms: ms(p50), p95_ms: ms(p95), p99_ms: ms(p99) };
    })
    .sort((a, b) => (STAGE_ORDER.get(a.stage) ?? 99) - (STAGE_ORDER.get(b.stage) ?? 99) || a.stage.localeCompare(b.stage));
}

export interface CaptureMinute {
  minute: string;
  /** Requests the gateway instance served that minute (from its request numbers). */
  served: number;
  /** Requests of that minute found in ClickHouse. */
  captured: number;
  missing: number;
}

export interface CaptureInstance {
  instance: string;
  served: number;
  captured: number;
  missing: number;
  minutes: CaptureMinute[];
}

export interface CaptureLag {
  batches: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
}

/**
 * Capture health per gateway instance and minute. Each instance numbers its requests
 * from 1 as they arrive (`seq`), so the requests it served in a minute are the step in
 * its highest number since the minute before — a quiet minute shows 0 served, a lost
 * capture shows served > captured.
 */
export async function captureHealth(store: Store, fromNs: bigint, toNs: bigint, instance: string | null): Promise<{ instances: CaptureInstance[]; lag: CaptureLag }> {
  const fromS = Number(fromNs / 1_000_000_000n);
  const toS = Number((toNs + 999_999_999n) / 1_000_000_000n);
  let where = sql`start_time >= toDateTime(${fromS}, 'UTC') AND start_time <= toDateTime(${toS}, 'UTC') AND start_time_unix_nano >= ${fromNs} AND start_time_unix_nano < ${toNs}`;
  if (instance !== null) where += sql` AND instance = ${instance}`;
  const rows = await store.query<{ instance: string; minute: Num; captured: Num; min_seq: Num; max_seq: Num }>(
    sql`SELECT instance, toUInt32(toStartOfMinute(start_time)) AS minute, count() AS captured, min(seq) AS min_seq, max(seq) AS max_seq FROM ${table(store.database, 'requests')} FINAL WHERE ${new SqlFragment(where)} GROUP BY instance, minute ORDER BY instance, minute`,
  );
  const byInstance = new Map<string, CaptureInstance>();
  let prevMax = 0;
  for (const r of rows) {
    let inst = byInstance.get(r.instance);
    if (inst === undefined) {
      inst = { instance: r.instance, served: 0, captured: 0, missing: 0, minutes: [] };
      byInstance.set(r.instance, inst);
      prevMax = Number(r.min_seq) - 1;
    }
    const maxSeq = Number(r.max_seq);
    const served = Math.max(0, maxSeq - prevMax);
    prevMax = Math.max(prevMax, maxSeq);
    const captured = Number(r.captured);
    inst.minutes.push({ minute: new Date(Number(r.minute) * 1000).toISOString(), served, captured, missing: Math.max(0, served - captured) });
    inst.served += served;
    inst.captured += captured;
    inst.missing += Math.max(0, served - captured);
  }
  const wfrom = sql`written_at >= toDateTime(${fromS}, 'UTC') AND written_at <= toDateTime(${toS}, 'UTC')`;
  const lagRows = await store.query<{ batches: Num; q: Num[]; mx: Num }>(
    sql`SELECT count() AS batches, quantilesExact(0.5, 0.99)(lag) AS q, max(lag) AS mx FROM (SELECT instance, batch, min(toInt64(written_at_unix_nano) - toInt64(published_at_unix_nano)) AS lag FROM ${table(store.database, 'ingest_batches')} WHERE ${new SqlFragment(wfrom)} AND published_at_unix_nano > 0${instance === null ? new SqlFragment('') : new SqlFragment(sql` AND instance = ${instance}`)} GROUP BY instance, batch)`,
  );
  const l = lagRows[0];
  const batches = Number(l?.batches ?? 0);
  const q = (l?.q ?? []).map(Number);
  const lag: CaptureLag = batches === 0 ? { batches: 0, p50_ms: 0, p99_ms: 0, max_ms: 0 } : { batches, p50_ms: ms(q[0] ?? 0), p99_ms: ms(q[1] ?? 0), max_ms: ms(Number(l?.mx ?? 0)) };
  return { instances: [...byInstance.values()], lag };
}

export type UsageKey = 'team' | 'model' | 'provider' | 'dialect';
export const USAGE_KEYS: readonly UsageKey[] = ['team', 'model', 'provider', 'dialect'];

export interface UsageRow {
  team?: string;
  model?: string;
  provider?: string;
  dialect?: string;
  requests: number;
  errors: number;
  aborted: number;
  streams: number;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
  /** US dollars from `pricing` in the configuration; null when a model in the group has no price. */
  cost_usd: number | null;
  /** Mean of the gateway's own time per request, in milliseconds. */
  gateway_mean_ms: number;
}

export interface UsageFilter {
  fromS: number;
  toS: number;
  team: string | null;
  model: string | null;
  provider: string | null;
  groupBy: UsageKey[];
}

/** Price lookup for a model: per-million-token prices, or null. */
export type PriceOf = (model: string) => { input: number; output: number; cacheRead: number; cacheWrite: number } | null;

/**
 * Usage and cost from the per-minute rollup (requests_1m FINAL), grouped as asked.
 * Minutes are whole: `from` is rounded down and `to` up to the minute.
 */
export async function usage(store: Store, f: UsageFilter, priceOf: PriceOf): Promise<{ rows: UsageRow[]; total: UsageRow }> {
  const from = f.fromS - (f.fromS % 60);
  let where = sql`minute >= toDateTime(${from}, 'UTC') AND minute < toDateTime(${f.toS}, 'UTC')`;
  if (f.team !== null) where += sql` AND team = ${f.team}`;
  if (f.model !== null) where += sql` AND model = ${f.model}`;
  if (f.provider !== null) where += sql` AND provider = ${f.provider}`;
  const rows = await store.query<Record<string, Num | string>>(
    sql`SELECT team, model, provider, dialect, sum(requests) AS requests, sum(errors) AS errors, sum(aborted) AS aborted, sum(streams) AS streams,
  sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cache_read_tokens) AS cache_read_tokens, sum(cache_write_tokens) AS cache_write_tokens,
  sum(gateway_ns_sum) AS gateway_ns
FROM ${table(store.database, 'requests_1m')} FINAL WHERE ${new SqlFragment(where)} GROUP BY team, model, provider, dialect`,
  );
  const groups = new Map<string, UsageRow & { gatewayNs: number }>();
  const blank = (): UsageRow & { gatewayNs: number } => ({ requests: 0, errors: 0, aborted: 0, streams: 0, input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0, cost_usd: 0, gateway_mean_ms: 0, gatewayNs: 0 });
  const total = blank();
  for (const r of rows) {
    const key = f.groupBy.map((k) => String(r[k])).join('\u0000');
    let g = groups.get(key);
    if (g === undefined) {
      g = blank();
      for (const k of f.groupBy) g[k] = String(r[k]);
      groups.set(key, g);
    }
    const input = Number(r.input_tokens);
    const output = Number(r.output_tokens);
    const cr = Number(r.cache_read_tokens);
    const cw = Number(r.cache_write_tokens);
    const p = priceOf(String(r.model));
    // input_tokens include cached tokens for every provider (docs/schema.md).
    const cost = p === null ? null : (Math.max(0, input - cr - cw) * p.input + cr * p.cacheRead + cw * p.cacheWrite + output * p.output) / 1e6;
    for (const t of [g, total]) {
      t.requests += Number(r.requests);
      t.errors += Number(r.errors);
      t.aborted += Number(r.aborted);
      t.streams += Number(r.streams);
      t.input_tokens += input;
      t.output_tokens += output;
      t.cache_read_tokens += cr;
      t.cache_write_tokens += cw;
      t.gatewayNs += Number(r.gateway_ns);
      t.cost_usd = t.cost_usd === null || cost === null ? null : t.cost_usd + cost;
    }
  }
  const finish = (g: UsageRow & { gatewayNs: number }): UsageRow => {
    const { gatewayNs, ...rest } = g;
    return { ...rest, cost_usd: rest.cost_usd === null ? null : Math.round(rest.cost_usd * 1e6) / 1e6, gateway_mean_ms: rest.requests === 0 ? 0 : ms(gatewayNs / rest.requests) };
  };
  const out = [...groups.values()].map(finish).sort((a, b) => b.requests - a.requests);
  return { rows: out, total: finish(total) };
}
