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
 *
 * With a phrase (`q`), step 1 reads `content` instead (ordered by team and start time, so a
 * team's window is a range of its primary key): the keys of the window's requests whose
 * prompt or answer holds the phrase, and, when the listing has filters that only `requests`
 * has, only those of requests that pass them (PREWHERE, so the prompts of requests that do
 * not are not read). Each such query is bounded by `searchLimits` (maxBytesToRead): a search
 * that would read more is a 422, not a long scan.
 */
import { join, sql, table, StoreError, type ReadLimits, type Sql, type Store } from '@sightline/store';
import { QueryError } from '../errors.js';
import { costUsd, type PriceOf } from '@sightline/config';
import { ms, type Num } from './common.js';
import { phraseCondition } from './content.js';
import { tagsOf } from './trace.js';

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
  /** Attribution (issue 11): exact end user and session; tags as [name, value], all must match. */
  endUser: string | null;
  sessionId: string | null;
  tags: readonly (readonly [string, string])[];
  /** A phrase searched case-insensitively in the request's and the answer's content; null: no search. */
  phrase: string | null;
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
  /** Attribution the caller named ('' and {} when none). */
  end_user: string;
  session_id: string;
  tags: Record<string, string>;
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
  end_user: string;
  session_id: string;
  tag_keys: string[];
  tag_values: string[];
}

const DAY_S = 86_400;
const NS_PER_S = 1_000_000_000n;

/** The filters that only `requests` has (not the range, the team or the phrase). */
function requestConditions(f: RequestListFilter): Sql[] {
  const c: Sql[] = [];
  if (f.model !== null) c.push(sql`model = ${f.model}`);
  if (f.provider !== null) c.push(sql`provider = ${f.provider}`);
  if (f.status !== null) c.push('code' in f.status ? sql`http_status = ${f.status.code}` : sql`intDiv(http_status, 100) = ${f.status.class}`);
  if (f.errorType !== null) c.push(sql`error_type = ${f.errorType}`);
  if (f.stream !== null) c.push(sql`stream = ${f.stream ? 1 : 0}`);
  if (f.minTotalNs !== null) c.push(sql`total_ns >= ${f.minTotalNs}`);
  if (f.keyId !== null) c.push(sql`key_id = ${f.keyId}`);
  if (f.endUser !== null) c.push(sql`end_user = ${f.endUser}`);
  if (f.sessionId !== null) c.push(sql`session_id = ${f.sessionId}`);
  for (const [name, value] of f.tags) c.push(sql`arrayExists((k, v) -> k = ${name} AND v = ${value}, tag_keys, tag_values)`);
  return c;
}

/** The range and the team: columns of both `requests` and `content`. */
function commonConditions(f: RequestListFilter): Sql[] {
  const c: Sql[] = [sql`start_time_unix_nano >= ${f.fromNs} AND start_time_unix_nano < ${f.toNs}`];
  if (f.team !== null) c.push(sql`team = ${f.team}`);
  return c;
}

function conditions(f: RequestListFilter): Sql[] {
  return [...commonConditions(f), ...requestConditions(f)];
}

const inWindow = (lo: number, hi: number): Sql => sql`start_time >= toDateTime(${lo}, 'UTC') AND start_time < toDateTime(${hi}, 'UTC')`;

/**
 * Step 1 with a phrase: the window's keys from `content` (see the file comment). A query
 * stopped by the scan bound is a 422 that says so.
 */
async function searchKeys(store: Store, f: RequestListFilter, phrase: string, after: Sql | null, lo: number, hi: number, need: number, limits: ReadLimits | undefined): Promise<KeyRow[]> {
  const where = [inWindow(lo, hi), ...commonConditions(f), phraseCondition(phrase)];
  if (after !== null) where.push(after);
  const only = requestConditions(f);
  const prewhere =
    only.length === 0
      ? sql``
      : sql`
PREWHERE (trace_id, span_id) IN (SELECT trace_id, span_id FROM ${table(store.database, 'requests')} FINAL WHERE ${join([inWindow(lo, hi), ...conditions(f)], sql` AND `)})`;
  try {
    return await store.query<KeyRow>(
      sql`SELECT DISTINCT start_time_unix_nano AS ns, span_id, trace_id FROM ${table(store.database, 'content')}${prewhere}
WHERE ${join(where, sql` AND `)}
ORDER BY ns DESC, span_id DESC, trace_id DESC LIMIT ${need}`,
      limits,
    );
  } catch (e) {
    // TOO_MANY_BYTES (307) or TOO_MANY_ROWS (158): the scan bound (maxBytesToRead), not the answer's.
    if (e instanceof StoreError && limits?.maxBytesToRead !== undefined && (e.clickhouseCode === 307 || e.clickhouseCode === 158)) {
      const n = limits.maxBytesToRead;
      const bound = n >= 1024 ** 2 ? `${Math.round(n / 1024 ** 2)} MiB` : `${n} bytes`;
      throw new QueryError('query_too_large', `searching for \`q\` would read more than ${bound} of prompts and answers (the query API's search bound); ask for a shorter range (from/to), name a team, or add filters`, { cause: e, field: 'q' });
    }
    throw e;
  }
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
  opts: { searchLimits?: ReadLimits } = {},
): Promise<{ items: RequestSummary[]; next: ListPosition | null }> {
  const t = table(store.database, 'requests');
  const where = conditions(f);
  const position = after === null ? null : sql`(start_time_unix_nano, span_id, trace_id) < (${after.ns}, ${after.spanId}, ${after.traceId})`;
  if (position !== null) where.push(position);
  const top = after !== null && after.ns < f.toNs ? after.ns : f.toNs - 1n;
  const lowerS = Number(f.fromNs / NS_PER_S);
  const upperS = Number(top / NS_PER_S) + 1;
  const keys: KeyRow[] = [];
  for (const [lo, hi] of listWindows(lowerS, upperS)) {
    const need = limit + 1 - keys.length;
    if (f.phrase !== null) {
      keys.push(...(await searchKeys(store, f, f.phrase, position, lo, hi, need, opts.searchLimits)));
      if (keys.length > limit) break;
      continue;
    }
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
  input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, end_user, session_id, tag_keys, tag_values
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
      end_user: r.end_user,
      session_id: r.session_id,
      tags: tagsOf(r.tag_keys, r.tag_values),
    });
  }
  const last = page[page.length - 1]!;
  return { items, next: keys.length > limit ? { ns: BigInt(last.ns), spanId: last.span_id, traceId: last.trace_id } : null };
}
