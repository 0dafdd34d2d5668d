/**
 * The measuring step: the dashboard's typical requests, sent to the query API's own fastify
 * app (`buildQueryServer`, `app.inject`) over the loaded store, so the product's SQL runs
 * exactly as it would behind `npm run start:query` (authentication on, the default read
 * limits, prices configured). Each request is timed from inject to the parsed answer;
 * its statements are then read back from `system.query_log` (server time, rows read).
 */
import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { buildQueryServer, CursorCodec } from '@sightline/app-query';
import { priceLookup } from '@sightline/config';
import { KeyHasher, MemoryDirectory, parseKeyInput } from '@sightline/directory';
import { join, sql, table, type Sql, type Store } from '@sightline/store';
import { MODELS } from './catalogue.js';

export const LISTING_TARGET_MS = 1000;
export const DASHBOARD_TARGET_MS = 500;

/** One measured request. */
export interface Scenario {
  id: string;
  /** What a dashboard shows with it. */
  title: string;
  /** `admin` or the team whose key sends it. */
  caller: string;
  method: 'GET' | 'POST';
  url: string;
  body?: object;
  targetMs: number;
}

export interface QueryProfile {
  /** Statements per request (mean over the runs). */
  statements: number;
  /** Server time of a request's statements (query_duration_ms, summed), mean over the runs. */
  serverMs: number;
  /** Rows and bytes a request's statements read, mean over the runs. */
  readRows: number;
  readBytes: number;
  /** Peak memory of the heaviest statement. */
  memoryBytes: number;
}

export interface ScenarioResult extends Omit<Scenario, 'body'> {
  body?: object;
  runsMs: number[];
  medianMs: number;
  maxMs: number;
  met: boolean;
  /** Rows (metrics) or items (listing) in the answer, and whether a next page exists. */
  answer: string;
  profile: QueryProfile | null;
  error?: string;
}

export const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length === 0 ? Number.NaN : s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

const round1 = (x: number): number => Math.round(x * 10) / 10;

/** Prices of the dataset's models (so `cost_usd` is computed, as in a configured deployment). */
export const PRICING = MODELS.map((m) => ({ match: [m.name], inputPerMTok: m.price[0], outputPerMTok: m.price[1], cacheReadPerMTok: m.price[2], cacheWritePerMTok: m.price[3] }));

export interface Api {
  app: FastifyInstance;
  adminToken: string;
  /** Bearer secrets of read keys, by team. */
  keys: Map<string, string>;
  cursors: CursorCodec;
}

export async function startApi(store: Store, teams: readonly string[]): Promise<Api> {
  const adminToken = `bench-admin-${createHash('sha256').update(String(process.pid)).digest('hex').slice(0, 24)}`;
  const directory = new MemoryDirectory({ hasher: KeyHasher.fromAdminToken(adminToken) });
  const keys = new Map<string, string>();
  for (const team of teams) {
    const { secret } = await directory.createKey(parseKeyInput({ team, name: 'dashboard', scopes: ['read'] }, Date.now()), Date.now());
    keys.set(team, secret);
  }
  const cursorSecret = createHash('sha256').update(`${adminToken}/cursors`).digest();
  const app = buildQueryServer({ store, priceOf: priceLookup(PRICING), auth: { adminToken, directory }, cursorSecret });
  await app.ready();
  return { app, adminToken, keys, cursors: new CursorCodec(cursorSecret) };
}

export interface Answer {
  status: number;
  json: unknown;
  ms: number;
}

export async function send(api: Api, s: Pick<Scenario, 'caller' | 'method' | 'url' | 'body'>): Promise<Answer> {
  const secret = s.caller === 'admin' ? api.adminToken : api.keys.get(s.caller);
  if (secret === undefined) throw new Error(`no key for ${s.caller}`);
  const t0 = process.hrtime.bigint();
  const res = await api.app.inject({ method: s.method, url: s.url, headers: { authorization: `Bearer ${secret}` }, ...(s.body !== undefined ? { payload: s.body } : {}) });
  const json: unknown = res.json();
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  return { status: res.statusCode, json, ms };
}

/** `{"rows":[…]}` → "12 rows"; `{"data":[…],"next_cursor"}` → "50 items, more". */
export function describeAnswer(json: unknown): string {
  if (typeof json !== 'object' || json === null) return String(json);
  const o = json as Record<string, unknown>;
  if (Array.isArray(o.rows)) return `${o.rows.length} rows${o.truncated === true ? ', truncated' : ''}`;
  if (Array.isArray(o.data)) return `${o.data.length} items${o.next_cursor !== null ? ', more' : ', last page'}`;
  return JSON.stringify(json).slice(0, 120);
}

interface LogRow {
  query_duration_ms: string | number;
  read_rows: string | number;
  read_bytes: string | number;
  memory_usage: string | number;
}

/** Waits for the wall clock to pass a whole second, so query_log windows (second resolution) do not overlap. */
export async function nextSecond(): Promise<number> {
  const s = Math.floor(Date.now() / 1000) + 1;
  await new Promise((r) => setTimeout(r, s * 1000 - Date.now() + 5));
  return s;
}

/**
 * The statements the query API ran from `fromS` to `toS` (Unix seconds, inclusive; the
 * query log has second resolution, so the caller keeps other queries out of that window),
 * per request: `runs` requests ran in it, one after the other.
 */
export async function profileOf(store: Store, fromS: number, toS: number, runs: number): Promise<QueryProfile | null> {
  await store.command(sql`SYSTEM FLUSH LOGS`);
  const rows = await store.query<LogRow>(
    sql`SELECT query_duration_ms, read_rows, read_bytes, memory_usage FROM system.query_log
WHERE type = 2 AND event_date >= toDate(toDateTime(${fromS}, 'UTC')) AND query_start_time >= toDateTime(${fromS}, 'UTC') AND query_start_time <= toDateTime(${toS}, 'UTC')
  AND position(query, 'system.') = 0 AND ${currentDb(store)}`,
  );
  if (rows.length === 0 || runs === 0) return null;
  const sum = (k: keyof LogRow) => rows.reduce((a, x) => a + Number(x[k]), 0);
  return {
    statements: Math.round((rows.length / runs) * 10) / 10,
    serverMs: Math.round(sum('query_duration_ms') / runs),
    readRows: Math.round(sum('read_rows') / runs),
    readBytes: Math.round(sum('read_bytes') / runs),
    memoryBytes: Math.max(...rows.map((x) => Number(x.memory_usage))),
  };
}

function currentDb(store: Store): Sql {
  return sql`position(query, ${`${store.database}.`}) > 0`;
}

/** Runs a scenario `repeat` times (each run timed) and profiles it. */
export async function measure(api: Api, profiler: Store, s: Scenario, repeat: number, log: (m: string) => void): Promise<ScenarioResult> {
  const runsMs: number[] = [];
  let answer = '';
  let error: string | undefined;
  const fromS = await nextSecond();
  for (let i = 0; i < repeat; i++) {
    const a = await send(api, s);
    runsMs.push(round1(a.ms));
    if (a.status !== 200) {
      error = `HTTP ${a.status}: ${JSON.stringify(a.json).slice(0, 300)}`;
      break;
    }
    answer = describeAnswer(a.json);
  }
  const toS = Math.floor(Date.now() / 1000);
  const profile = await profileOf(profiler, fromS, toS, runsMs.length).catch(() => null);
  const med = round1(median(runsMs));
  const max = Math.max(...runsMs);
  const r: ScenarioResult = { ...s, runsMs, medianMs: med, maxMs: max, met: error === undefined && max < s.targetMs, answer, profile, ...(error !== undefined ? { error } : {}) };
  log(`${s.id} [${s.caller}]: median ${med} ms, max ${max} ms${error !== undefined ? ` — ${error}` : ''} (${answer}${profile !== null ? `; ${profile.statements} statements, ${profile.serverMs} ms in ClickHouse, ${profile.readRows} rows read` : ''})`);
  return r;
}

/** A position in a listing, as `GET /v1/requests` keeps it in its cursor. */
export interface Position {
  ns: bigint;
  spanId: string;
  traceId: string;
}

/**
 * A cursor for `position` in the listing that `firstCursor` (a `next_cursor` the API gave for
 * the same parameters) belongs to: the same filter hash and range start, re-signed. What a
 * client holds after paging that far, without paging there.
 */
export function cursorAt(api: Api, firstCursor: string, position: Position): string {
  const payload = JSON.parse(Buffer.from(firstCursor.slice(0, firstCursor.indexOf('.')), 'base64url').toString('utf8')) as unknown[];
  const fromNs = BigInt(String(payload[4]));
  const hash = String(payload[5]);
  return api.cursors.encode({ ...position, fromNs }, hash);
}

/**
 * The listing's position `offset` requests from its oldest end (offset 0: the oldest), or
 * the newest request before `beforeS`: found with SQL over the raw table, as the
 * positions of a client that paged there.
 */
export async function positionFromEnd(store: Store, team: string | null, fromS: number, toS: number, offset: number): Promise<Position | null> {
  const where: Sql[] = [sql`start_time >= toDateTime(${fromS}, 'UTC') AND start_time < toDateTime(${Math.min(toS, fromS + 86_400)}, 'UTC')`, sql`start_time_unix_nano >= ${BigInt(fromS) * 1_000_000_000n}`];
  if (team !== null) where.push(sql`team = ${team}`);
  const rows = await store.query<{ ns: string; span_id: string; trace_id: string }>(
    sql`SELECT start_time_unix_nano AS ns, span_id, trace_id FROM ${table(store.database, 'requests')} FINAL WHERE ${join(where, sql` AND `)}
ORDER BY start_time_unix_nano, span_id, trace_id LIMIT 1 OFFSET ${offset}`,
  );
  const r = rows[0];
  return r === undefined ? null : { ns: BigInt(r.ns), spanId: r.span_id, traceId: r.trace_id };
}

export async function positionBefore(store: Store, team: string | null, beforeS: number): Promise<Position | null> {
  const where: Sql[] = [sql`start_time >= toDateTime(${beforeS - 3600}, 'UTC') AND start_time < toDateTime(${beforeS}, 'UTC')`];
  if (team !== null) where.push(sql`team = ${team}`);
  const rows = await store.query<{ ns: string; span_id: string; trace_id: string }>(
    sql`SELECT start_time_unix_nano AS ns, span_id, trace_id FROM ${table(store.database, 'requests')} FINAL WHERE ${join(where, sql` AND `)}
ORDER BY start_time_unix_nano DESC, span_id DESC, trace_id DESC LIMIT 1`,
  );
  const r = rows[0];
  return r === undefined ? null : { ns: BigInt(r.ns), spanId: r.span_id, traceId: r.trace_id };
}
