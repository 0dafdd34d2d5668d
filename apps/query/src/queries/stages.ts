/** `GET /v1/stages`: count and percentiles of each stage's duration over a time range. */
import { join, sql, table, type Sql, type Store } from '@sightline/store';
import { STAGES } from '@sightline/core';
import { ms, type Num } from './common.js';

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

/**
 * Count and p50/p95/p99 of each stage's duration. Percentiles are t-digest estimates
 * (`quantilesTDigest`): memory per stage stays constant however many spans the range holds,
 * where `quantilesExact` kept every duration (issue 9: 400 days of it could take the
 * server's memory). Measured against quantilesExact on a long-tailed sample, both engines:
 * within 0.1 % from 100 000 spans, within 2.5 % at 1 000; below that the estimate
 * interpolates between the spans' durations.
 */
export async function stageStats(store: Store, f: StageFilter): Promise<StageStats[]> {
  const fromS = Number(f.fromNs / 1_000_000_000n);
  const toS = Number((f.toNs + 999_999_999n) / 1_000_000_000n);
  const where: Sql[] = [
    sql`is_root = 0 AND has(${STAGES}, name) AND start_time >= toDateTime(${fromS}, 'UTC') AND start_time <= toDateTime(${toS}, 'UTC') AND start_time_unix_nano >= ${f.fromNs} AND start_time_unix_nano < ${f.toNs}`,
  ];
  if (f.model !== null) where.push(sql`model = ${f.model}`);
  if (f.provider !== null) where.push(sql`provider = ${f.provider}`);
  if (f.team !== null) where.push(sql`team = ${f.team}`);
  const rows = await store.query<{ name: string; count: Num; q: Num[] }>(
    sql`SELECT name, count() AS count, quantilesTDigest(0.5, 0.95, 0.99)(duration_ns) AS q FROM ${table(store.database, 'spans')} FINAL WHERE ${join(where, sql` AND `)} GROUP BY name`,
  );
  return rows
    .map((r) => {
      // t-digest answers Float32 (about 7 significant digits): whole nanoseconds suffice.
      const [p50, p95, p99] = r.q.map((v) => Math.round(Number(v))) as [number, number, number];
      return { stage: r.name, count: Number(r.count), p50_ns: p50, p95_ns: p95, p99_ns: p99, p50_ms: ms(p50), p95_ms: ms(p95), p99_ms: ms(p99) };
    })
    .sort((a, b) => (STAGE_ORDER.get(a.stage) ?? 99) - (STAGE_ORDER.get(b.stage) ?? 99) || a.stage.localeCompare(b.stage));
}
