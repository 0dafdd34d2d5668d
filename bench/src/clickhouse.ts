/**
 * The completeness check reads ClickHouse over its HTTP interface: rows of one gateway
 * instance and one scenario's team in `sightline.requests FINAL` (FINAL collapses a batch the
 * ingester wrote twice after a redelivery, so a row is counted once, docs/schema.md).
 *
 * The two values put into the SQL are names this benchmark generated; they are checked against
 * a strict pattern instead of being escaped, so nothing else can reach the query.
 */
import { STAGES } from '../../packages/core/src/rows.js';

const SAFE = /^[a-z0-9-]+$/;

function checked(value: string): string {
  if (!SAFE.test(value)) throw new Error(`refusing to put ${JSON.stringify(value)} into SQL: only [a-z0-9-] names are generated here`);
  return value;
}

export async function chQuery(chUrl: string, sql: string): Promise<string> {
  const res = await fetch(`${chUrl}/`, { method: 'POST', body: sql, signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  if (!res.ok) throw new Error(`ClickHouse ${res.status}: ${text.slice(0, 300)}`);
  return text.trim();
}

/**
 * Rows captured for `instancePrefix` (the gateway's SIGHTLINE_INSTANCE; the gateway appends
 * `-<nonce>`) and `team` (omit to count every team).
 */
export async function countCaptured(chUrl: string, database: string, instancePrefix: string, team?: string): Promise<number> {
  const where = [`instance LIKE '${checked(instancePrefix)}-%'`];
  if (team !== undefined) where.push(`team = '${checked(team)}'`);
  const out = await chQuery(chUrl, `SELECT count() FROM ${checked(database)}.requests FINAL WHERE ${where.join(' AND ')}`);
  const n = Number(out);
  if (!Number.isInteger(n)) throw new Error(`ClickHouse answered ${JSON.stringify(out)} to a count`);
  return n;
}

/** p50 and p99 of `gateway_ns` over the same rows as countCaptured, in µs; undefined without rows. */
export async function recordedGatewayTime(chUrl: string, database: string, instancePrefix: string, team: string): Promise<{ p50: number; p99: number } | undefined> {
  const out = await chQuery(
    chUrl,
    `SELECT quantilesExact(0.5, 0.99)(gateway_ns) FROM ${checked(database)}.requests FINAL WHERE instance LIKE '${checked(instancePrefix)}-%' AND team = '${checked(team)}'`,
  );
  const m = /^\[(\d+),(\d+)\]$/.exec(out);
  if (m === null) return undefined;
  return { p50: Math.round(Number(m[1]) / 1000), p99: Math.round(Number(m[2]) / 1000) };
}

/**
 * p50 of each stage span (not the root, not attempts) over the same requests, in µs to one
 * decimal (stages such as `auth` take a microsecond or two: whole microseconds would hide
 * their change), in stage order.
 */
export async function recordedStages(chUrl: string, database: string, instancePrefix: string, team: string): Promise<Record<string, number>> {
  const out = await chQuery(
    chUrl,
    `SELECT name, round(quantileExact(0.5)(duration_ns) / 100) / 10 AS p50 FROM ${checked(database)}.spans FINAL WHERE instance LIKE '${checked(instancePrefix)}-%' AND team = '${checked(team)}' AND is_root = 0 AND name != 'upstream.attempt' GROUP BY name FORMAT TabSeparated`,
  );
  const rows: [string, number][] = [];
  for (const line of out.split('\n')) {
    const [name, p50] = line.split('\t');
    if (name !== undefined && name !== '' && p50 !== undefined) rows.push([name, Number(p50)]);
  }
  // In request order (the stage list of docs/schema.md); unknown names last.
  const order: readonly string[] = STAGES;
  const rank = (n: string): number => (order.includes(n) ? order.indexOf(n) : order.length);
  rows.sort((x, y) => rank(x[0]) - rank(y[0]));
  return Object.fromEntries(rows);
}

export async function chVersion(chUrl: string): Promise<string> {
  return chQuery(chUrl, 'SELECT version()');
}
