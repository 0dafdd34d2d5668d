/**
 * The loading step: the migrations (the product's runner), the synthetic rows generated
 * inside ClickHouse chunk by chunk (generate.ts), and the rollups computed by the ingester's
 * own code (`Rollup.reconcile`, apps/ingester/src/rollup.ts — what an ingester runs at start
 * for data it has not rolled up), each step timed.
 */
import { Rollup } from '@sightline/app-ingester';
import { migrate, sql, type Store } from '@sightline/store';
import type { Catalogue, Hour } from './catalogue.js';
import { chunkRequests, chunks, insertRequests, insertSpans, SPAN_PARTS } from './generate.js';

export interface TableSize {
  table: string;
  parts: number;
  rows: number;
  bytesOnDisk: number;
  compressedBytes: number;
  uncompressedBytes: number;
}

export interface LoadResult {
  migrateMs: number;
  /** Generation time per statement kind (requests, roots, stages, attempts), summed over chunks. */
  generateMs: Record<string, number>;
  generateTotalMs: number;
  chunks: number;
  /** Waiting for background merges after the load. */
  mergeWaitMs: number;
}

export interface RollupResult {
  reconcileMs: number;
  requestDays: number;
  stageDays: number;
  /** Days whose key-less rollups (migration 008) reconcile filled or recomputed beyond those. */
  teamDays?: number;
  mergeWaitMs: number;
  /**
   * What a running ingester pays per round at this size (median of 3): one minute of every
   * minute rollup (`recomputeMinutes`), and one minute with its hour and day (`recomputeRange`).
   */
  minuteMs: number;
  minuteWithHourAndDayMs: number;
}

const msSince = (t0: bigint): number => Math.round(Number(process.hrtime.bigint() - t0) / 1e6);

export async function applyMigrations(store: Store): Promise<number> {
  const t0 = process.hrtime.bigint();
  await migrate(store);
  // An ingester starting on the empty database reconciles once: nothing to copy or
  // recompute, and it records that stage spans need no copy (rollup_state).
  await new Rollup(store).reconcile();
  return msSince(t0);
}

export async function generate(store: Store, cat: Catalogue, seed: number, all: readonly Hour[], log: (m: string) => void): Promise<Omit<LoadResult, 'migrateMs' | 'mergeWaitMs'>> {
  const list = chunks(all);
  const total = all.reduce((a, h) => a + h.count, 0);
  const generateMs: Record<string, number> = { requests: 0 };
  for (const p of SPAN_PARTS) generateMs[p] = 0;
  const t0 = process.hrtime.bigint();
  let done = 0;
  for (const [i, c] of list.entries()) {
    let t = process.hrtime.bigint();
    await store.command(insertRequests(store.database, cat, seed, c));
    generateMs.requests! += msSince(t);
    for (const p of SPAN_PARTS) {
      t = process.hrtime.bigint();
      await store.command(insertSpans(store.database, cat, seed, c, p));
      generateMs[p]! += msSince(t);
    }
    done += chunkRequests(c);
    const elapsed = msSince(t0) / 1000;
    log(`chunk ${i + 1}/${list.length}: ${done.toLocaleString('en-US')} of ${total.toLocaleString('en-US')} requests in ${elapsed.toFixed(0)} s (about ${((elapsed / done) * (total - done)).toFixed(0)} s to go)`);
  }
  return { generateMs, generateTotalMs: msSince(t0), chunks: list.length };
}

/** Waits until no merge has run for three polls in a row (or `deadlineMs`); returns the time waited. */
export async function waitForMerges(store: Store, deadlineMs: number, log: (m: string) => void): Promise<number> {
  const t0 = process.hrtime.bigint();
  let quiet = 0;
  let lastLog = 0;
  while (quiet < 3) {
    const [row] = await store.query<{ n: string | number }>(sql`SELECT count() AS n FROM system.merges WHERE database = ${store.database}`);
    const n = Number(row?.n ?? 0);
    quiet = n === 0 ? quiet + 1 : 0;
    const waited = msSince(t0);
    if (waited > deadlineMs) {
      log(`merges still running after ${Math.round(waited / 1000)} s; measuring anyway`);
      break;
    }
    if (n > 0 && waited - lastLog > 30_000) {
      lastLog = waited;
      log(`waiting for ${n} merges (${Math.round(waited / 1000)} s)`);
    }
    // Polling a server-side state: there is no event to wait on.
    await new Promise((r) => setTimeout(r, 1000));
  }
  return msSince(t0);
}

export async function tableSizes(store: Store): Promise<TableSize[]> {
  const rows = await store.query<Record<string, string | number>>(
    sql`SELECT table, count() AS parts, sum(rows) AS rows, sum(bytes_on_disk) AS disk, sum(data_compressed_bytes) AS compressed, sum(data_uncompressed_bytes) AS uncompressed
FROM system.parts WHERE active AND database = ${store.database} GROUP BY table ORDER BY disk DESC`,
  );
  return rows.map((r) => ({
    table: String(r.table),
    parts: Number(r.parts),
    rows: Number(r.rows),
    bytesOnDisk: Number(r.disk),
    compressedBytes: Number(r.compressed),
    uncompressedBytes: Number(r.uncompressed),
  }));
}

/** The rollups by the ingester's reconciliation, then the cost of one live round at this size. */
export async function rollups(store: Store, lastMinuteS: number, log: (m: string) => void): Promise<RollupResult> {
  const rollup = new Rollup(store, 2_000, log);
  let t0 = process.hrtime.bigint();
  const r = await rollup.reconcile();
  const reconcileMs = msSince(t0);
  log(`rollups: reconcile recomputed requests of ${r.requestDays.length} days and stages of ${r.stageDays.length}, key-less rollups of ${r.teamDays.length} more, in ${(reconcileMs / 1000).toFixed(0)} s`);
  const mergeWaitMs = await waitForMerges(store, 20 * 60_000, log);
  const minute: number[] = [];
  const full: number[] = [];
  for (let i = 0; i < 3; i++) {
    t0 = process.hrtime.bigint();
    await rollup.recomputeMinutes(lastMinuteS, lastMinuteS + 60);
    minute.push(msSince(t0));
    t0 = process.hrtime.bigint();
    await rollup.recomputeRange(lastMinuteS, lastMinuteS + 60);
    full.push(msSince(t0));
  }
  const mid = (xs: number[]) => [...xs].sort((a, b) => a - b)[1]!;
  return { reconcileMs, requestDays: r.requestDays.length, stageDays: r.stageDays.length, teamDays: r.teamDays.length, mergeWaitMs, minuteMs: mid(minute), minuteWithHourAndDayMs: mid(full) };
}
