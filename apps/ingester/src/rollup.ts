/**
 * The per-minute rollups (migrations 003 and 005: `requests_agg_1m`, `stages_agg_1m` and
 * the older `requests_1m`), kept exact when batches are redelivered: after a write, each
 * minute it touched is recomputed in full from tables that collapse a batch written twice
 * (`requests FINAL`, `stage_spans FINAL`) and inserted with a newer version, which replaces
 * the previous computation (ReplacingMergeTree(version), read with FINAL). Recomputing is
 * idempotent, so several ingesters may do it for the same minute; the last one to run has
 * seen every row written before it started.
 *
 * Minutes touched but not recomputed (an ingester that died between its write and the next
 * round) and data written before migration 005 are caught by `reconcile`, which the
 * ingester runs at start: it copies old stage spans into `stage_spans` and recomputes every
 * day whose rollup does not count what the raw tables hold, a day at a time.
 */
import { sql, table, type Sql, type Store } from '@sightline/store';
import { unixNanoNow } from '@sightline/core';

const DAY_S = 86_400;

/** `20250601` → Unix seconds of that UTC midnight; NaN for anything else. */
function dayStart(yyyymmdd: number): number {
  const y = Math.floor(yyyymmdd / 10_000);
  const m = Math.floor(yyyymmdd / 100) % 100;
  const d = yyyymmdd % 100;
  if (!Number.isInteger(yyyymmdd) || y < 1970 || m < 1 || m > 12 || d < 1 || d > 31) return Number.NaN;
  return Date.UTC(y, m - 1, d) / 1000;
}

/** Unix seconds → `20250601` (UTC). */
function dayNumber(s: number): number {
  const t = new Date(s * 1000);
  return t.getUTCFullYear() * 10_000 + (t.getUTCMonth() + 1) * 100 + t.getUTCDate();
}

type Num = number | string;

/** What one `reconcile` did. */
export interface ReconcileResult {
  /** Days of stage spans copied from `spans` into `stage_spans` (data older than migration 005). */
  copiedDays: number[];
  /** Days whose request rollups were recomputed (they did not count every request). */
  requestDays: number[];
  /** Days whose stage rollup was recomputed. */
  stageDays: number[];
}

export interface ReconcileOptions {
  /**
   * Days back from today whose stage rollup is checked against `stage_spans` (a count per
   * day, with FINAL). Older days are checked only when their requests were off or their
   * stage spans were just copied: a stage minute lost by a crashed ingester is found if
   * an ingester starts within this many days. Default 2.
   */
  recentDays?: number;
  /** Now, in Unix seconds (tests). */
  nowS?: number;
}

export class Rollup {
  readonly #dirty = new Set<number>();
  #running: Promise<void> | null = null;
  #timer: NodeJS.Timeout | null = null;
  #stopped = false;
  /** Minute recomputations done, and failed (retried on the next round). */
  done = 0;
  failed = 0;

  constructor(
    readonly store: Store,
    /** Milliseconds between recomputation rounds. */
    readonly intervalMs = 2_000,
    readonly log: (msg: string) => void = () => {},
  ) {}

  /**
   * Marks the minutes of these start times (Unix seconds) for recomputation: those of the
   * requests written, and of their spans (a stage span belongs to the minute it started in).
   */
  touch(startTimes: Iterable<number>): void {
    for (const s of startTimes) this.#dirty.add(s - (s % 60));
    if (this.#timer === null && this.#dirty.size > 0 && !this.#stopped) {
      this.#timer = setTimeout(() => {
        this.#timer = null;
        void this.flush();
      }, this.intervalMs);
      this.#timer.unref();
    }
  }

  /** Recomputes every dirty minute now; resolves when done. */
  flush(): Promise<void> {
    this.#running ??= this.#round().finally(() => {
      this.#running = null;
    });
    return this.#running;
  }

  async #round(): Promise<void> {
    const minutes = [...this.#dirty].sort((a, b) => a - b);
    this.#dirty.clear();
    for (const m of minutes) {
      try {
        await this.recompute(m);
        this.done++;
      } catch (e) {
        this.failed++;
        this.#dirty.add(m);
        this.log(`rollup of minute ${new Date(m * 1000).toISOString()} failed, will retry: ${(e as Error).message.split('\n')[0]}`);
      }
    }
    if (this.#dirty.size > 0) this.touch([]);
  }

  /** Recomputes one minute (Unix seconds, a multiple of 60) of every rollup. */
  recompute(minute: number): Promise<void> {
    return this.recomputeRange(minute, minute + 60);
  }

  /**
   * Recomputes every minute in [fromS, toS) (multiples of 60) of every rollup: the request
   * rollup from `requests FINAL`, `requests_1m` from it, and the stage rollup from
   * `stage_spans FINAL`, all with one new version.
   */
  async recomputeRange(fromS: number, toS: number, parts: { requests?: boolean; stages?: boolean } = {}): Promise<void> {
    const version = unixNanoNow();
    const db = this.store.database;
    const from = sql`toDateTime(${fromS}, 'UTC')`;
    const to = sql`toDateTime(${toS}, 'UTC')`;
    if (parts.requests !== false) {
      await this.store.command(sql`INSERT INTO ${table(db, 'requests_agg_1m')} (minute, team, key_id, model, provider, dialect, status_class, requests, errors, aborted, streams,
  input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_ns_sum, gateway_ns_sum, upstream_ns_sum, gateway_ns_max, ttft_ns_sum, ttft_count,
  total_ns_q, gateway_ns_q, ttft_ns_q, version)
SELECT toStartOfMinute(start_time) AS minute, team, key_id, model, provider, dialect, toUInt16(intDiv(http_status, 100) * 100) AS status_class,
  count(), countIf(http_status >= 400), countIf(aborted = 1), countIf(stream = 1),
  sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_write_tokens),
  sum(total_ns), sum(gateway_ns), sum(upstream_ns), max(gateway_ns), sumIf(ttft_ns, ttft_ns > 0), countIf(ttft_ns > 0),
  quantilesTDigestState(0.5, 0.95, 0.99)(total_ns), quantilesTDigestState(0.5, 0.95, 0.99)(gateway_ns), quantilesTDigestIfState(0.5, 0.95, 0.99)(ttft_ns, ttft_ns > 0),
  ${version}
FROM ${table(db, 'requests')} FINAL
WHERE start_time >= ${from} AND start_time < ${to}
GROUP BY minute, team, key_id, model, provider, dialect, status_class`);
      // requests_1m (migration 003) is a public table: kept, now summed from the rollup
      // just written (its newest computation per group, whoever wrote it).
      await this.store.command(sql`INSERT INTO ${table(db, 'requests_1m')} (minute, team, model, provider, dialect, status_class, requests, errors, aborted, streams,
  input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_ns_sum, gateway_ns_sum, upstream_ns_sum, gateway_ns_max, version)
SELECT minute, team, model, provider, dialect, status_class, sum(requests), sum(errors), sum(aborted), sum(streams),
  sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_write_tokens), sum(total_ns_sum), sum(gateway_ns_sum), sum(upstream_ns_sum), max(gateway_ns_max), ${version}
FROM ${table(db, 'requests_agg_1m')} FINAL
WHERE minute >= ${from} AND minute < ${to}
GROUP BY minute, team, model, provider, dialect, status_class`);
    }
    if (parts.stages !== false) {
      await this.store.command(sql`INSERT INTO ${table(db, 'stages_agg_1m')} (minute, team, key_id, model, provider, stage, spans, errors, duration_ns_sum, duration_ns_q, version)
SELECT minute, team, key_id, model, provider, stage, count(), sum(failed), sum(duration_ns), quantilesTDigestState(0.5, 0.95, 0.99)(duration_ns), ${version}
FROM ${table(db, 'stage_spans')} FINAL
WHERE minute >= ${from} AND minute < ${to}
GROUP BY minute, team, key_id, model, provider, stage`);
    }
  }

  /**
   * Brings the rollups in line with the raw tables, a day at a time (see the file comment):
   * 1. stage spans of days before migration 005 are copied into `stage_spans` (once);
   * 2. each day whose `requests_agg_1m` does not count what `requests FINAL` holds is
   *    recomputed, with its stage rollup;
   * 3. the stage rollup of recent days (and of days copied in 1) is checked against
   *    `stage_spans FINAL` and recomputed where it differs.
   * Safe beside the minute rounds and other ingesters: every step is a full recomputation.
   */
  async reconcile(opts: ReconcileOptions = {}): Promise<ReconcileResult> {
    const db = this.store.database;
    const nowS = opts.nowS ?? Math.floor(Date.now() / 1000);
    const recentFrom = dayNumber(nowS - (opts.recentDays ?? 2) * DAY_S);
    const out: ReconcileResult = { copiedDays: [], requestDays: [], stageDays: [] };

    // 1. Stage spans written before the materialized view existed.
    const state = await this.store.query<{ name: string; lo: Num; hi: Num }>(
      sql`SELECT name, min(value) AS lo, max(value) AS hi FROM ${table(db, 'rollup_state')} GROUP BY name`,
    );
    const since = Number(state.find((s) => s.name === 'stage_spans_since')?.lo ?? 0);
    const copiedThrough = Number(state.find((s) => s.name === 'stage_spans_copied_through')?.hi ?? 0);
    if (since > copiedThrough) {
      const spanDays = await this.#partitions('spans');
      for (const d of spanDays.filter((d) => d <= since && d > copiedThrough)) {
        if (this.#stopped) return out;
        const s = dayStart(d);
        await this.store.command(sql`INSERT INTO ${table(db, 'stage_spans')} (minute, trace_id, parent_span_id, stage, span_id, team, key_id, model, provider, duration_ns, failed)
SELECT toStartOfMinute(start_time), trace_id, parent_span_id, name, span_id, team, key_id, model, provider, duration_ns, toUInt8(status_code = 'ERROR')
FROM ${table(db, 'spans')}
WHERE is_root = 0 AND name != 'upstream.attempt' AND start_time >= toDateTime(${s}, 'UTC') AND start_time < toDateTime(${s + DAY_S}, 'UTC')`);
        out.copiedDays.push(d);
      }
      await this.store.command(sql`INSERT INTO ${table(db, 'rollup_state')} (name, value, updated_at) VALUES ('stage_spans_copied_through', ${since}, ${new Date(nowS * 1000)})`);
    }

    // 2. Request rollup per day against the requests themselves (exact: FINAL).
    const raw = await this.#counts(sql`SELECT toYYYYMMDD(start_time) AS d, count() AS n FROM ${table(db, 'requests')} FINAL GROUP BY d`);
    const rolled = await this.#counts(sql`SELECT toYYYYMMDD(minute) AS d, sum(requests) AS n FROM ${table(db, 'requests_agg_1m')} FINAL GROUP BY d`);
    const stageCheck = new Set<number>(out.copiedDays);
    for (const [d, n] of raw) {
      if (rolled.get(d) === n) continue;
      if (this.#stopped) return out;
      const s = dayStart(d);
      await this.recomputeRange(s, s + DAY_S);
      out.requestDays.push(d);
      out.stageDays.push(d);
    }

    // 3. Stage rollup of recent and copied days against stage_spans.
    const spanCounts = await this.#counts(
      sql`SELECT toYYYYMMDD(minute) AS d, count() AS n FROM ${table(db, 'stage_spans')} FINAL WHERE minute >= toDateTime(${dayStart(recentFrom)}, 'UTC') GROUP BY d`,
    );
    for (const d of spanCounts.keys()) stageCheck.add(d);
    for (const d of [...stageCheck].sort((a, b) => a - b)) {
      if (out.stageDays.includes(d)) continue;
      if (this.#stopped) return out;
      const s = dayStart(d);
      let n = spanCounts.get(d);
      if (n === undefined) {
        const r = await this.#counts(sql`SELECT toYYYYMMDD(minute) AS d, count() AS n FROM ${table(db, 'stage_spans')} FINAL WHERE minute >= toDateTime(${s}, 'UTC') AND minute < toDateTime(${s + DAY_S}, 'UTC') GROUP BY d`);
        n = r.get(d) ?? 0;
      }
      const r = await this.#counts(sql`SELECT toYYYYMMDD(minute) AS d, sum(spans) AS n FROM ${table(db, 'stages_agg_1m')} FINAL WHERE minute >= toDateTime(${s}, 'UTC') AND minute < toDateTime(${s + DAY_S}, 'UTC') GROUP BY d`);
      if ((r.get(d) ?? 0) === n) continue;
      await this.recomputeRange(s, s + DAY_S, { requests: false });
      out.stageDays.push(d);
    }
    out.stageDays.sort((a, b) => a - b);
    if (out.copiedDays.length + out.requestDays.length + out.stageDays.length > 0) {
      this.log(`rollup reconciled: copied stage spans of ${out.copiedDays.length} days, recomputed requests of ${out.requestDays.length} days and stages of ${out.stageDays.length}`);
    }
    return out;
  }

  async #counts(q: Sql): Promise<Map<number, number>> {
    const rows = await this.store.query<{ d: Num; n: Num }>(q);
    return new Map(rows.map((r) => [Number(r.d), Number(r.n)]));
  }

  /** The daily partitions (`20250601`) a table has, oldest first. */
  async #partitions(name: string): Promise<number[]> {
    const rows = await this.store.query<{ partition: string }>(
      sql`SELECT DISTINCT partition FROM system.parts WHERE database = ${this.store.database} AND table = ${name} AND active`,
    );
    return rows
      .map((r) => Number(String(r.partition).replace(/'/g, '')))
      .filter((d) => !Number.isNaN(dayStart(d)))
      .sort((a, b) => a - b);
  }

  /** Stops the timer and any reconciliation between two days; recomputations in flight finish. */
  stop(): void {
    this.#stopped = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }
}
