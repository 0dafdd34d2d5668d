/**
 * The rollups (migrations 003 and 005): per minute `requests_agg_1m`, `stages_agg_1m` and the
 * older `requests_1m`; per hour and per day `requests_agg_1h`/`_1d` and `stages_agg_1h`/`_1d`.
 * They are kept exact when batches are redelivered: after a write, each minute it touched is
 * recomputed in full from tables that collapse a batch written twice (`requests FINAL`,
 * `stage_spans FINAL`) and inserted with a newer version, which replaces the previous
 * computation (ReplacingMergeTree(version), read with FINAL). In the same round, each hour
 * of those minutes is recomputed the same way from its minutes; a day is recomputed from its
 * hours once it has ended (and again when a late minute of it changes), because it costs
 * more and the query API reads only ended days from it (apps/query/src/queries/metrics.ts).
 * Recomputing is idempotent, so several ingesters may do it for the same period; the last
 * one to run has seen every row written before it started.
 *
 * Each level has a key-less twin (migration 008: `requests_team_agg_1m`/`_1h`/`_1d`,
 * `stages_team_agg_1m`/`_1h`/`_1d`), which the query API reads when a request names no key:
 * whenever a period of a per-key rollup is recomputed, the same period of its twin is
 * recomputed right after from it (the per-key table FINAL, the key summed out, states
 * merged), with a newer version. So the twin of a period always sums the per-key rollup's
 * newest computation of it, and is exact under redelivery for the same reason.
 *
 * Periods touched but not recomputed (an ingester that died between its write and the next
 * round, or before a day it held ended) and data written before migration 005 (or, for the
 * key-less twins, 008) are caught by `reconcile`, which the ingester runs at start, a day at
 * a time.
 */
import { ident, localTable, sql, table, type Sql, type Store } from '@sightline/store';
import { unixNanoNow } from '@sightline/core';

const HOUR_S = 3_600;
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

/** Which rollups a recomputation covers. */
export interface RollupParts {
  /** The request rollups (and requests_1m). Default true. */
  requests?: boolean;
  /** The stage rollups. Default true. */
  stages?: boolean;
}

/** What one `reconcile` did. */
export interface ReconcileResult {
  /** Days of stage spans copied from `spans` into `stage_spans` (data older than migration 005). */
  copiedDays: number[];
  /** Days whose request rollups were recomputed (they did not count every request). */
  requestDays: number[];
  /** Days whose stage rollups were recomputed. */
  stageDays: number[];
  /**
   * Days whose key-less rollups (migration 008) were recomputed from the per-key ones,
   * beyond those recomputed with them above (all days, the first time after the upgrade).
   */
  teamDays: number[];
}

export interface ReconcileOptions {
  /**
   * Days back from today whose stage rollup is checked against `stage_spans`, and whose
   * hours against their minutes (a count per day or hour, with FINAL). Older days are
   * checked only when their requests were off, their day rollup disagrees with their
   * minutes, or their stage spans were just copied: a stage minute or an hour lost by a
   * crashed ingester is found if an ingester starts within this many days. Default 2.
   */
  recentDays?: number;
  /** Now, in Unix seconds (tests). */
  nowS?: number;
}

/** Each level's tables and time column, and the level it is computed from. */
const LEVELS = {
  hour: { column: 'hour', requests: 'requests_agg_1h', stages: 'stages_agg_1h', from: { column: 'minute', requests: 'requests_agg_1m', stages: 'stages_agg_1m' }, start: sql`toStartOfHour(minute)` },
  day: { column: 'day', requests: 'requests_agg_1d', stages: 'stages_agg_1d', from: { column: 'hour', requests: 'requests_agg_1h', stages: 'stages_agg_1h' }, start: sql`toStartOfDay(hour)` },
} as const;

/** Each level's per-key tables and their key-less twins (migration 008). */
const TEAM_LEVELS = {
  minute: { column: 'minute', requests: 'requests_agg_1m', stages: 'stages_agg_1m', teamRequests: 'requests_team_agg_1m', teamStages: 'stages_team_agg_1m' },
  hour: { column: 'hour', requests: 'requests_agg_1h', stages: 'stages_agg_1h', teamRequests: 'requests_team_agg_1h', teamStages: 'stages_team_agg_1h' },
  day: { column: 'day', requests: 'requests_agg_1d', stages: 'stages_agg_1d', teamRequests: 'requests_team_agg_1d', teamStages: 'stages_team_agg_1d' },
} as const;
type Level = keyof typeof TEAM_LEVELS;

export class Rollup {
  readonly #dirty = new Set<number>();
  /** Days with changed hours, recomputed once they have ended. */
  readonly #days = new Set<number>();
  #running: Promise<void> | null = null;
  #timer: NodeJS.Timeout | null = null;
  /** When #timer fires (Date.now() milliseconds). */
  #timerAt = 0;
  #stopped = false;
  /** Minute recomputations done, and failed (retried on the next round). */
  done = 0;
  failed = 0;

  constructor(
    readonly store: Store,
    /** Milliseconds between recomputation rounds. */
    readonly intervalMs = 2_000,
    readonly log: (msg: string) => void = () => {},
    /** The clock that says whether an hour or a day has ended (tests). */
    readonly now: () => number = Date.now,
    /**
     * On a ClickHouse cluster: after a minute is recomputed, it is recomputed again after each
     * of these delays (milliseconds, counted from the previous computation). Replication is
     * asynchronous, so a computation may have read a replica that had not yet fetched every
     * write (a replica back from an outage, or writes made through another one while it was
     * away); a later one, made once the replicas have caught up, replaces it. Default none
     * (a single server sees its writes at once).
     */
    readonly settleMs: readonly number[] = [],
  ) {}

  /** Minute → how many settle recomputations it has had since it was last touched. */
  readonly #settleStage = new Map<number, number>();
  readonly #settleTimers = new Map<number, NodeJS.Timeout>();

  /** Schedules minute `m`'s next settle recomputation, if any is left. */
  #settle(m: number): void {
    if (this.settleMs.length === 0) return;
    const k = this.#settleStage.get(m) ?? 0;
    const delay = this.settleMs[k];
    const prev = this.#settleTimers.get(m);
    if (prev !== undefined) clearTimeout(prev);
    if (delay === undefined || this.#stopped) {
      this.#settleStage.delete(m);
      this.#settleTimers.delete(m);
      return;
    }
    this.#settleStage.set(m, k + 1);
    const t = setTimeout(() => {
      this.#settleTimers.delete(m);
      this.#dirty.add(m);
      this.#schedule();
    }, delay);
    t.unref();
    this.#settleTimers.set(m, t);
  }

  /**
   * Marks the minutes of these start times (Unix seconds) for recomputation: those of the
   * requests written, and of their spans (a stage span belongs to the minute it started in).
   */
  touch(startTimes: Iterable<number>): void {
    for (const s of startTimes) {
      const m = s - (s % 60);
      this.#dirty.add(m);
      if (this.settleMs.length > 0) this.#settleStage.set(m, 0);
    }
    this.#schedule();
  }

  #schedule(): void {
    if (this.#stopped) return;
    let delay: number;
    if (this.#dirty.size > 0) delay = this.intervalMs;
    else if (this.#days.size > 0) {
      // Nothing dirty: wake when the first waiting day ends.
      const first = Math.min(...this.#days) + DAY_S;
      delay = Math.min(2 ** 31 - 1, Math.max(this.intervalMs, first * 1000 - this.now() + this.intervalMs));
    } else return;
    const at = Date.now() + delay;
    if (this.#timer !== null) {
      // A wake-up already due sooner stands. One set for the end of a day (nothing was dirty
      // then) must not hold back a minute touched since: it would wait until that day ends.
      if (this.#timerAt <= at) return;
      clearTimeout(this.#timer);
    }
    this.#timerAt = at;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      void this.flush();
    }, delay);
    this.#timer.unref();
  }

  /** Recomputes every dirty minute now, and the hours and days that have ended; resolves when done. */
  flush(): Promise<void> {
    this.#running ??= this.#round().finally(() => {
      this.#running = null;
    });
    return this.#running;
  }

  async #round(): Promise<void> {
    const minutes = [...this.#dirty].sort((a, b) => a - b);
    this.#dirty.clear();
    const hours = new Set<number>();
    for (const m of minutes) {
      try {
        await this.recomputeMinutes(m, m + 60);
        hours.add(m - (m % HOUR_S));
        this.done++;
        this.#settle(m);
      } catch (e) {
        this.failed++;
        this.#dirty.add(m);
        this.log(`rollup of minute ${new Date(m * 1000).toISOString()} failed, will retry: ${(e as Error).message.split('\n')[0]}`);
      }
    }
    for (const h of [...hours].sort((a, b) => a - b)) {
      try {
        await this.#level('hour', h, h + HOUR_S, {});
        this.#days.add(h - (h % DAY_S));
      } catch (e) {
        // Its minutes are done: recomputing one of them again brings the hour along.
        this.#dirty.add(h);
        this.log(`rollup of hour ${new Date(h * 1000).toISOString()} failed, will retry: ${(e as Error).message.split('\n')[0]}`);
      }
    }
    const nowS = this.now() / 1000;
    for (const d of [...this.#days].sort((a, b) => a - b)) {
      if (d + DAY_S > nowS) continue;
      try {
        await this.#level('day', d, d + DAY_S, {});
        this.#days.delete(d);
      } catch (e) {
        this.log(`rollup of day ${new Date(d * 1000).toISOString()} failed, will retry: ${(e as Error).message.split('\n')[0]}`);
      }
    }
    this.#schedule();
  }

  /** Recomputes one minute (Unix seconds, a multiple of 60) of every rollup, with its hour and day. */
  recompute(minute: number): Promise<void> {
    return this.recomputeRange(minute, minute + 60);
  }

  /**
   * Recomputes every minute in [fromS, toS) (multiples of 60) of the rollups, then every
   * hour and day that overlaps it, whether or not it has ended (an early computation is
   * replaced by the one made after it ends).
   */
  async recomputeRange(fromS: number, toS: number, parts: RollupParts = {}): Promise<void> {
    const up = (t: number, size: number) => (t % size === 0 ? t : t - (t % size) + size);
    await this.recomputeMinutes(fromS, toS, parts);
    // Whole hours and days: each from all of its minutes (hours), not only those in range.
    await this.#level('hour', fromS - (fromS % HOUR_S), up(toS, HOUR_S), parts);
    await this.#level('day', fromS - (fromS % DAY_S), up(toS, DAY_S), parts);
  }

  /**
   * The minute rollups of [fromS, toS): the request rollup from `requests FINAL`,
   * `requests_1m` from it, and the stage rollup from `stage_spans FINAL`.
   */
  async recomputeMinutes(fromS: number, toS: number, parts: RollupParts = {}): Promise<void> {
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
  ${unixNanoNow()}
FROM ${table(db, 'requests')} FINAL
WHERE start_time >= ${from} AND start_time < ${to}
GROUP BY minute, team, key_id, model, provider, dialect, status_class`);
      // requests_1m (migration 003) is a public table: kept, now summed from the rollup
      // just written (its newest computation per group, whoever wrote it).
      await this.store.command(sql`INSERT INTO ${table(db, 'requests_1m')} (minute, team, model, provider, dialect, status_class, requests, errors, aborted, streams,
  input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_ns_sum, gateway_ns_sum, upstream_ns_sum, gateway_ns_max, version)
SELECT minute, team, model, provider, dialect, status_class, sum(requests), sum(errors), sum(aborted), sum(streams),
  sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_write_tokens), sum(total_ns_sum), sum(gateway_ns_sum), sum(upstream_ns_sum), max(gateway_ns_max), ${unixNanoNow()}
FROM ${table(db, 'requests_agg_1m')} FINAL
WHERE minute >= ${from} AND minute < ${to}
GROUP BY minute, team, model, provider, dialect, status_class`);
    }
    if (parts.stages !== false) {
      await this.store.command(sql`INSERT INTO ${table(db, 'stages_agg_1m')} (minute, team, key_id, model, provider, stage, spans, errors, duration_ns_sum, duration_ns_q, version)
SELECT minute, team, key_id, model, provider, stage, count(), sum(failed), sum(duration_ns), quantilesTDigestState(0.5, 0.95, 0.99)(duration_ns), ${unixNanoNow()}
FROM ${table(db, 'stage_spans')} FINAL
WHERE minute >= ${from} AND minute < ${to}
GROUP BY minute, team, key_id, model, provider, stage`);
    }
    await this.#team('minute', fromS, toS, parts);
  }

  /**
   * The hour (or day) rollups of the periods starting in [fromS, toS), from the level below:
   * sums added, t-digest states merged (-MergeState). The version is taken just before each
   * statement, so a computation that read newer minutes than another always wins.
   */
  async #level(level: 'hour' | 'day', fromS: number, toS: number, parts: RollupParts): Promise<void> {
    const L = LEVELS[level];
    const db = this.store.database;
    const col = ident(L.column);
    const src = ident(L.from.column);
    const start = L.start;
    const range = sql`${src} >= toDateTime(${fromS}, 'UTC') AND ${src} < toDateTime(${toS}, 'UTC')`;
    if (parts.requests !== false) {
      await this.store.command(sql`INSERT INTO ${table(db, L.requests)} (${col}, team, key_id, model, provider, dialect, status_class, requests, errors, aborted, streams,
  input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_ns_sum, gateway_ns_sum, upstream_ns_sum, gateway_ns_max, ttft_ns_sum, ttft_count,
  total_ns_q, gateway_ns_q, ttft_ns_q, version)
SELECT ${start} AS ${col}, team, key_id, model, provider, dialect, status_class, sum(requests), sum(errors), sum(aborted), sum(streams),
  sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_write_tokens), sum(total_ns_sum), sum(gateway_ns_sum), sum(upstream_ns_sum), max(gateway_ns_max),
  sum(ttft_ns_sum), sum(ttft_count),
  quantilesTDigestMergeState(0.5, 0.95, 0.99)(total_ns_q), quantilesTDigestMergeState(0.5, 0.95, 0.99)(gateway_ns_q), quantilesTDigestIfMergeState(0.5, 0.95, 0.99)(ttft_ns_q),
  ${unixNanoNow()}
FROM ${table(db, L.from.requests)} FINAL
WHERE ${range}
GROUP BY ${col}, team, key_id, model, provider, dialect, status_class`);
    }
    if (parts.stages !== false) {
      await this.store.command(sql`INSERT INTO ${table(db, L.stages)} (${col}, team, key_id, model, provider, stage, spans, errors, duration_ns_sum, duration_ns_q, version)
SELECT ${start} AS ${col}, team, key_id, model, provider, stage, sum(spans), sum(errors), sum(duration_ns_sum), quantilesTDigestMergeState(0.5, 0.95, 0.99)(duration_ns_q), ${unixNanoNow()}
FROM ${table(db, L.from.stages)} FINAL
WHERE ${range}
GROUP BY ${col}, team, key_id, model, provider, stage`);
    }
    await this.#team(level, fromS, toS, parts);
  }

  /**
   * The key-less twins (migration 008) of the periods of one level starting in [fromS, toS),
   * each from the same period of the per-key rollup (FINAL: its newest computation), the key
   * summed out. Called right after the per-key periods are recomputed, with a version taken
   * after theirs were written, so the last twin written sums the last per-key computation.
   */
  async #team(level: Level, fromS: number, toS: number, parts: RollupParts): Promise<void> {
    const L = TEAM_LEVELS[level];
    const db = this.store.database;
    const col = ident(L.column);
    const range = sql`${col} >= toDateTime(${fromS}, 'UTC') AND ${col} < toDateTime(${toS}, 'UTC')`;
    if (parts.requests !== false) {
      await this.store.command(sql`INSERT INTO ${table(db, L.teamRequests)} (${col}, team, model, provider, dialect, status_class, requests, errors, aborted, streams,
  input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_ns_sum, gateway_ns_sum, upstream_ns_sum, gateway_ns_max, ttft_ns_sum, ttft_count,
  total_ns_q, gateway_ns_q, ttft_ns_q, version)
SELECT ${col}, team, model, provider, dialect, status_class, sum(requests), sum(errors), sum(aborted), sum(streams),
  sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_write_tokens), sum(total_ns_sum), sum(gateway_ns_sum), sum(upstream_ns_sum), max(gateway_ns_max),
  sum(ttft_ns_sum), sum(ttft_count),
  quantilesTDigestMergeState(0.5, 0.95, 0.99)(total_ns_q), quantilesTDigestMergeState(0.5, 0.95, 0.99)(gateway_ns_q), quantilesTDigestIfMergeState(0.5, 0.95, 0.99)(ttft_ns_q),
  ${unixNanoNow()}
FROM ${table(db, L.requests)} FINAL
WHERE ${range}
GROUP BY ${col}, team, model, provider, dialect, status_class`);
    }
    if (parts.stages !== false) {
      await this.store.command(sql`INSERT INTO ${table(db, L.teamStages)} (${col}, team, model, provider, stage, spans, errors, duration_ns_sum, duration_ns_q, version)
SELECT ${col}, team, model, provider, stage, sum(spans), sum(errors), sum(duration_ns_sum), quantilesTDigestMergeState(0.5, 0.95, 0.99)(duration_ns_q), ${unixNanoNow()}
FROM ${table(db, L.stages)} FINAL
WHERE ${range}
GROUP BY ${col}, team, model, provider, stage`);
    }
  }

  /**
   * Brings the rollups in line with the raw tables, a day at a time (see the file comment):
   * 1. stage spans of days before migration 005 are copied into `stage_spans` (once);
   * 2. each day whose `requests_agg_1m` does not count what `requests FINAL` holds is
   *    recomputed (every level), with its stage rollups;
   * 3. the stage rollup of recent days (and of days copied in 1) is checked against
   *    `stage_spans FINAL`, and recomputed where it differs;
   * 4. days and recent hours whose level rollups do not add up to their minutes (an hour
   *    that ended while no ingester held it) are recomputed from them;
   * 5. the key-less twins (migration 008) of every day whose day totals differ from the
   *    per-key day's (every day, the first time after the upgrade), and of recent days whose
   *    minutes or hours differ, are recomputed at every level from the per-key rollups.
   * Safe beside the rounds and other ingesters: every step is a full recomputation.
   */
  async reconcile(opts: ReconcileOptions = {}): Promise<ReconcileResult> {
    const db = this.store.database;
    const nowS = opts.nowS ?? Math.floor(this.now() / 1000);
    const recentFromS = dayStart(dayNumber(nowS - (opts.recentDays ?? 2) * DAY_S));
    const out: ReconcileResult = { copiedDays: [], requestDays: [], stageDays: [], teamDays: [] };

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
    for (const [d, n] of [...raw].sort((a, b) => a[0] - b[0])) {
      if (rolled.get(d) === n) continue;
      if (this.#stopped) return out;
      const s = dayStart(d);
      await this.recomputeRange(s, s + DAY_S);
      out.requestDays.push(d);
      out.stageDays.push(d);
    }

    // 3. Stage rollup of recent and copied days against stage_spans.
    const spanCounts = await this.#counts(
      sql`SELECT toYYYYMMDD(minute) AS d, count() AS n FROM ${table(db, 'stage_spans')} FINAL WHERE minute >= toDateTime(${recentFromS}, 'UTC') GROUP BY d`,
    );
    for (const d of spanCounts.keys()) stageCheck.add(d);
    for (const d of [...stageCheck].sort((a, b) => a - b)) {
      if (out.stageDays.includes(d)) continue;
      if (this.#stopped) return out;
      const s = dayStart(d);
      const inDay = sql`minute >= toDateTime(${s}, 'UTC') AND minute < toDateTime(${s + DAY_S}, 'UTC')`;
      const n = spanCounts.get(d) ?? (await this.#counts(sql`SELECT toYYYYMMDD(minute) AS d, count() AS n FROM ${table(db, 'stage_spans')} FINAL WHERE ${inDay} GROUP BY d`)).get(d) ?? 0;
      const r = await this.#counts(sql`SELECT toYYYYMMDD(minute) AS d, sum(spans) AS n FROM ${table(db, 'stages_agg_1m')} FINAL WHERE ${inDay} GROUP BY d`);
      if ((r.get(d) ?? 0) === n) continue;
      await this.recomputeRange(s, s + DAY_S, { requests: false });
      out.stageDays.push(d);
    }
    out.stageDays.sort((a, b) => a - b);

    // 4. Recent hours against their minutes, and ended days against their hours (a day left
    //    waiting by an ingester that stopped before it ended).
    const endedDay = nowS - (nowS % DAY_S);
    const endedHour = nowS - (nowS % HOUR_S);
    const redone = new Set([...out.requestDays, ...out.stageDays]);
    for (const kind of ['requests', 'stages'] as const) {
      const n = ident(kind === 'requests' ? 'requests' : 'spans');
      const t = (level: string) => table(db, `${kind}_agg_${level}`);
      const parts: RollupParts = kind === 'requests' ? { stages: false } : { requests: false };
      const done = kind === 'requests' ? out.requestDays : out.stageDays;
      const byHourMinutes = await this.#counts(
        sql`SELECT toUInt32(toStartOfHour(minute)) AS d, sum(${n}) AS n FROM ${t('1m')} FINAL WHERE minute >= toDateTime(${recentFromS}, 'UTC') AND minute < toDateTime(${endedHour}, 'UTC') GROUP BY d`,
      );
      const byHour = await this.#counts(sql`SELECT toUInt32(hour) AS d, sum(${n}) AS n FROM ${t('1h')} FINAL WHERE hour >= toDateTime(${recentFromS}, 'UTC') GROUP BY d`);
      for (const [h, count] of [...byHourMinutes].sort((a, b) => a[0] - b[0])) {
        if (redone.has(dayNumber(h)) || byHour.get(h) === count) continue;
        if (this.#stopped) return out;
        await this.#level('hour', h, h + HOUR_S, parts);
        redone.add(dayNumber(h));
        done.push(dayNumber(h));
        if (h - (h % DAY_S) < endedDay) await this.#level('day', h - (h % DAY_S), h - (h % DAY_S) + DAY_S, parts);
      }
      const byDayHours = await this.#counts(sql`SELECT toYYYYMMDD(hour) AS d, sum(${n}) AS n FROM ${t('1h')} FINAL WHERE hour < toDateTime(${endedDay}, 'UTC') GROUP BY d`);
      const byDay = await this.#counts(sql`SELECT toYYYYMMDD(day) AS d, sum(${n}) AS n FROM ${t('1d')} FINAL GROUP BY d`);
      for (const [d, count] of [...byDayHours].sort((a, b) => a[0] - b[0])) {
        if (redone.has(d) || byDay.get(d) === count) continue;
        if (this.#stopped) return out;
        const s = dayStart(d);
        await this.#level('day', s, s + DAY_S, parts);
        done.push(d);
      }
    }
    out.requestDays = [...new Set(out.requestDays)].sort((a, b) => a - b);
    out.stageDays = [...new Set(out.stageDays)].sort((a, b) => a - b);

    // 5. The key-less twins against the per-key rollups they sum (counts per day, with FINAL
    //    on both sides). Everything redone above brought its twins along; this finds the
    //    periods of an ingester that died between the two, and fills the twins after the
    //    upgrade to migration 008.
    const teamDays = new Set<number>();
    for (const kind of ['requests', 'stages'] as const) {
      const n = ident(kind === 'requests' ? 'requests' : 'spans');
      const parts: RollupParts = kind === 'requests' ? { stages: false } : { requests: false };
      const perDay = (level: Level, team: boolean, recent: boolean) => {
        const L = TEAM_LEVELS[level];
        const col = ident(L.column);
        const t = table(db, team ? (kind === 'requests' ? L.teamRequests : L.teamStages) : L[kind]);
        return this.#counts(sql`SELECT toYYYYMMDD(${col}) AS d, sum(${n}) AS n FROM ${t} FINAL${recent ? sql` WHERE ${col} >= toDateTime(${recentFromS}, 'UTC')` : sql``} GROUP BY d`);
      };
      const bad = new Set<number>();
      for (const [level, recent] of [['day', false], ['hour', true], ['minute', true]] as const) {
        const perKey = await perDay(level, false, recent);
        const twin = await perDay(level, true, recent);
        for (const d of new Set([...perKey.keys(), ...twin.keys()])) if (perKey.get(d) !== twin.get(d)) bad.add(d);
      }
      for (const d of [...bad].sort((a, b) => a - b)) {
        if (this.#stopped) return out;
        const s = dayStart(d);
        for (const level of ['minute', 'hour', 'day'] as const) await this.#team(level, s, s + DAY_S, parts);
        teamDays.add(d);
      }
    }
    out.teamDays = [...teamDays].sort((a, b) => a - b);
    if (out.copiedDays.length + out.requestDays.length + out.stageDays.length + out.teamDays.length > 0) {
      this.log(
        `rollup reconciled: copied stage spans of ${out.copiedDays.length} days, recomputed requests of ${out.requestDays.length} days and stages of ${out.stageDays.length}, key-less rollups of ${out.teamDays.length} more`,
      );
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
      sql`SELECT DISTINCT partition FROM system.parts WHERE database = ${this.store.database} AND table = ${localTable(this.store.cluster, name)} AND active`,
    );
    return rows
      .map((r) => Number(String(r.partition).replace(/'/g, '')))
      .filter((d) => !Number.isNaN(dayStart(d)))
      .sort((a, b) => a - b);
  }

  /** Stops the timer and any reconciliation between two days; recomputations in flight finish. */
  stop(): void {
    this.#stopped = true;
    for (const t of this.#settleTimers.values()) clearTimeout(t);
    this.#settleTimers.clear();
    this.#settleStage.clear();
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }
}
