/** `GET /v1/capture`: served vs captured requests per gateway instance and minute, and ingest lag. */
import { join, sql, table, type Sql, type Store } from '@sightline/store';
import { ms, type Num } from './common.js';

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
  const where: Sql[] = [sql`start_time >= toDateTime(${fromS}, 'UTC') AND start_time <= toDateTime(${toS}, 'UTC') AND start_time_unix_nano >= ${fromNs} AND start_time_unix_nano < ${toNs}`];
  if (instance !== null) where.push(sql`instance = ${instance}`);
  const rows = await store.query<{ instance: string; minute: Num; captured: Num; min_seq: Num; max_seq: Num }>(
    sql`SELECT instance, toUInt32(toStartOfMinute(start_time)) AS minute, count() AS captured, min(seq) AS min_seq, max(seq) AS max_seq FROM ${table(store.database, 'requests')} FINAL WHERE ${join(where, sql` AND `)} GROUP BY instance, minute ORDER BY instance, minute`,
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
  const lagWhere: Sql[] = [sql`written_at >= toDateTime(${fromS}, 'UTC') AND written_at <= toDateTime(${toS}, 'UTC') AND published_at_unix_nano > 0`];
  if (instance !== null) lagWhere.push(sql`instance = ${instance}`);
  const lagRows = await store.query<{ batches: Num; q: Num[]; mx: Num }>(
    sql`SELECT count() AS batches, quantilesExact(0.5, 0.99)(lag) AS q, max(lag) AS mx FROM (SELECT instance, batch, min(toInt64(written_at_unix_nano) - toInt64(published_at_unix_nano)) AS lag FROM ${table(store.database, 'ingest_batches')} WHERE ${join(lagWhere, sql` AND `)} GROUP BY instance, batch)`,
  );
  const l = lagRows[0];
  const batches = Number(l?.batches ?? 0);
  const q = (l?.q ?? []).map(Number);
  const lag: CaptureLag = batches === 0 ? { batches: 0, p50_ms: 0, p99_ms: 0, max_ms: 0 } : { batches, p50_ms: ms(q[0] ?? 0), p99_ms: ms(q[1] ?? 0), max_ms: ms(Number(l?.mx ?? 0)) };
  return { instances: [...byInstance.values()], lag };
}
