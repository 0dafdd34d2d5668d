/**
 * `GET /v1/requests`: captured requests, newest first, a page at a time (keyset paging on
 * start time, span id and trace id; cursor.ts).
 *
 * `requests` is ordered by (trace_id, span_id) and partitioned by day, so a time range is
 * not in its index: any query over a day reads that day's partition. The listing therefore
 * (1) finds the page's keys with a narrow query (start time, ids and the filtered columns)
 * over a window of whole days, newest first — the day of the position, then 1, 2, 4 …
 * days further back until the page is full or the range is done — and (2) reads the
 * page's rows by trace id (the primary key). Step 1 reads with FINAL, so a request written
 * twice (redelivery) is one key; step 2 reads the identical copies of those keys and keeps
 * one of each.
 */
import { join, sql, table, type Sql, type Store } from '@sightline/store';
import { costUsd, type PriceOf } from '@sightline/config';
import { ms, type Num } from './common.js';

export interface RequestListFilter {
  fromNs: bigint;
  toNs: bigint;
  /** A team, or null: every team (the admin). */
  team: string | null;
  model: string | null;
  provider: string | null;
  /** An exact HTTP status (`404`) or a class (`5` for `5xx`). */
  status: { code: number } | { class: number } | null;
  errorType: string | null;
  stream: boolean | null;
  minTotalNs: bigint | null;
  keyId: string | null;
}

/** Where a page ends: the last request listed. */
export interface ListPosition {
  ns: bigint;
  spanId: string;
  traceId: string;
}

export interface RequestSummary {
  trace_id: string;
  span_id: string;
  start_time: string;
  start_time_unix_nano: string;
  team: string;
  key_id: string;
  model: string;
  provider: string;
  dialect: string;
  stream: boolean;
  status: number;
  error_type: string;
  total_ms: number;
  gateway_ms: number;
  /** 0 when not a stream (or no token came). */
  ttft_ms: number;
  tokens: { input: number; output: number; cache_read: number; cache_write: number };
  /** US dollars at the configured prices (`pricing`, then the shipped table); null when the model has no price. */
  cost_usd: number | null;
}

interface KeyRow {
  ns: Num;
  span_id: string;
  trace_id: string;
}

interface SummaryRow {
  trace_id: string;
  span_id: string;
  start_time_unix_nano: Num;
  team: string;
  key_id: string;
  model: string;
  provider: string;
  dialect: string;
  stream: Num;
  http_status: Num;
  error_type: string;
  total_ns: Num;
  gateway_ns: Num;
  ttft_ns: Num;
  input_tokens: Num;
  output_tokens: Num;
  cache_read_tokens: Num;
  cache_write_tokens: Num;
}

const DAY_S = 86_400;
const NS_PER_S = 1_000_000_000n;

function conditions(f: RequestListFilter): Sql[] {
  const c: Sql[] = [sql`start_time_unix_nano >= ${f.fromNs} AND start_time_unix_nano < ${f.toNs}`];
  if (f.team !== null) c.push(sql`team = ${f.team}`);
  if (f.model !== null) c.push(sql`model = ${f.model}`);
  if (f.provider !== null) c.push(sql`provider = ${f.provider}`);
  if (f.status !== null) c.push('code' in f.status ? sql`http_status = ${f.status.code}` : sql`intDiv(http_status, 100) = ${f.status.class}`);
  if (f.errorType !== null) c.push(sql`error_type = ${f.errorType}`);
  if (f.stream !== null) c.push(sql`stream = ${f.stream ? 1 : 0}`);
  if (f.minTotalNs !== null) c.push(sql`total_ns >= ${f.minTotalNs}`);
  if (f.keyId !== null) c.push(sql`key_id = ${f.keyId}`);
  return c;
}

/**
 * The windows (Unix seconds, [lo, hi)) searched newest first: from `upperS` down to the
 * start of its UTC day, then 1, 2, 4 … whole days, never below `lowerS`.
 */
export function listWindows(lowerS: number, upperS: number): [number, number][] {
  const out: [number, number][] = [];
  let hi = upperS;
  let lo = Math.max(lowerS, (upperS - 1) - ((upperS - 1) % DAY_S));
  let width = DAY_S;
  for (;;) {
    out.push([lo, hi]);
    if (lo <= lowerS) return out;
    hi = lo;
    lo = Math.max(lowerS, hi - width);
    width *= 2;
  }
}

/**
 * One page of requests: up to `limit` after `after` (or the newest), and the position of
 * the last one when more follow.
 */
export async function listRequests(
  store: Store,
  f: RequestListFilter,
  after: ListPosition | null,
  limit: number,
  priceOf: PriceOf,
): Promise<{ items: RequestSummary[]; next: ListPosition | null }> {
  const t = table(store.database, 'requests');
  const where = conditions(f);
  if (after !== null) where.push(sql`(start_time_unix_nano, span_id, trace_id) < (${after.ns}, ${after.spanId}, ${after.traceId})`);
  const top = after !== null && after.ns < f.toNs ? after.ns : f.toNs - 1n;
  const lowerS = Number(f.fromNs / NS_PER_S);
  const upperS = Number(top / NS_PER_S) + 1;
  const keys: KeyRow[] = [];
  for (const [lo, hi] of listWindows(lowerS, upperS)) {
    const need = limit + 1 - keys.length;
    const rows = await store.query<KeyRow>(
      sql`SELECT start_time_unix_nano AS ns, span_id, trace_id FROM ${t} FINAL
WHERE start_time >= toDateTime(${lo}, 'UTC') AND start_time < toDateTime(${hi}, 'UTC') AND ${join(where, sql` AND `)}
ORDER BY start_time_unix_nano DESC, span_id DESC, trace_id DESC LIMIT ${need}`,
    );
    keys.push(...rows);
    if (keys.length > limit) break;
  }
  const page = keys.slice(0, limit);
  if (page.length === 0) return { items: [], next: null };

  const traceIds = [...new Set(page.map((k) => k.trace_id))];
  const spanIds = [...new Set(page.map((k) => k.span_id))];
  const minS = Number(BigInt(page[page.length - 1]!.ns) / NS_PER_S);
  const maxS = Number(BigInt(page[0]!.ns) / NS_PER_S);
  const rows = await store.query<SummaryRow>(
    sql`SELECT trace_id, span_id, start_time_unix_nano, team, key_id, model, provider, dialect, stream, http_status, error_type, total_ns, gateway_ns, ttft_ns,
  input_tokens, output_tokens, cache_read_tokens, cache_write_tokens
FROM ${t}
WHERE trace_id IN (${join(traceIds.map((id) => sql`${id}`), sql`, `)}) AND span_id IN (${join(spanIds.map((id) => sql`${id}`), sql`, `)})
  AND start_time >= toDateTime(${minS}, 'UTC') AND start_time <= toDateTime(${maxS}, 'UTC')`,
  );
  // Copies of a redelivered request are identical: keep one per key.
  const byKey = new Map<string, SummaryRow>();
  for (const r of rows) byKey.set(`${r.trace_id}/${r.span_id}`, r);
  const items: RequestSummary[] = [];
  for (const k of page) {
    const r = byKey.get(`${k.trace_id}/${k.span_id}`);
    if (r === undefined) continue; // gone between the two reads (retention dropped its day)
    const input = Number(r.input_tokens);
    const output = Number(r.output_tokens);
    const cacheRead = Number(r.cache_read_tokens);
    const cacheWrite = Number(r.cache_write_tokens);
    const cost = costUsd(priceOf(r.model), input, output, cacheRead, cacheWrite);
    const ns = BigInt(r.start_time_unix_nano);
    items.push({
      trace_id: r.trace_id,
      span_id: r.span_id,
      start_time: new Date(Number(ns / 1_000_000n)).toISOString(),
      start_time_unix_nano: ns.toString(),
      team: r.team,
      key_id: r.key_id,
      model: r.model,
      provider: r.provider,
      dialect: r.dialect,
      stream: Number(r.stream) === 1,
      status: Number(r.http_status),
      error_type: r.error_type,
      total_ms: ms(Number(r.total_ns)),
      gateway_ms: ms(Number(r.gateway_ns)),
      ttft_ms: ms(Number(r.ttft_ns)),
      tokens: { input, output, cache_read: cacheRead, cache_write: cacheWrite },
      cost_usd: cost === null ? null : Math.round(cost * 1e10) / 1e10,
    });
  }
  const last = page[page.length - 1]!;
  return { items, next: keys.length > limit ? { ns: BigInt(last.ns), spanId: last.span_id, traceId: last.trace_id } : null };
}
