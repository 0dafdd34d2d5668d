/**
 * Retention: ClickHouse 18.16 has no TTL, so old data is removed by dropping whole daily
 * partitions (`toYYYYMMDD` of the row's time) older than the configured number of days.
 * Runs at start and then every hour; dropping a partition is instant and idempotent, so
 * several ingesters may all run it.
 *
 * Content (prompts and answers, the `content` table) has a setting of its own
 * (SIGHTLINE_CONTENT_RETENTION_DAYS, default SIGHTLINE_RETENTION_DAYS): content often must
 * be kept for less time than metrics.
 */
import { localTable, onCluster, sql, table, type Store } from '@sightline/store';

/** Tables partitioned by day that follow the general setting. */
const DAILY_TABLES = ['spans', 'requests', 'ingest_batches', 'stage_spans'] as const;
/** Tables partitioned by day that follow the content setting. */
const CONTENT_TABLES = ['content'] as const;
/** The rollups, partitioned by month. */
const MONTHLY_TABLES = [
  'requests_1m',
  'requests_agg_1m',
  'requests_agg_1h',
  'requests_agg_1d',
  'stages_agg_1m',
  'stages_agg_1h',
  'stages_agg_1d',
  'requests_team_agg_1m',
  'requests_team_agg_1h',
  'requests_team_agg_1d',
  'stages_team_agg_1m',
  'stages_team_agg_1h',
  'stages_team_agg_1d',
] as const;

/** `YYYYMMDD` (UTC) of the day `days` days before `nowMs`. */
function cutoffDay(nowMs: number, days: number): number {
  const cutoff = new Date(nowMs - days * 86_400_000);
  return Number(`${cutoff.getUTCFullYear()}${String(cutoff.getUTCMonth() + 1).padStart(2, '0')}${String(cutoff.getUTCDate()).padStart(2, '0')}`);
}

export class Retention {
  #timer: NodeJS.Timeout | null = null;
  /** Partitions dropped since start. */
  dropped = 0;

  constructor(
    readonly store: Store,
    /** Days of data to keep; 0 keeps everything. */
    readonly days: number,
    readonly log: (msg: string) => void = () => {},
    /** Days of content (`content` table) to keep; 0 keeps everything. Default: `days`. */
    readonly contentDays: number = days,
  ) {}

  start(everyMs = 3_600_000): void {
    if (this.days <= 0 && this.contentDays <= 0) return;
    void this.run().catch((e: unknown) => this.log(`retention failed: ${(e as Error).message}`));
    this.#timer = setInterval(() => {
      void this.run().catch((e: unknown) => this.log(`retention failed: ${(e as Error).message}`));
    }, everyMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }

  /** Drops every daily partition older than the cut-off; returns how many. */
  async run(nowMs = Date.now()): Promise<number> {
    let n = 0;
    if (this.contentDays > 0) n += await this.#dropDays(CONTENT_TABLES, this.contentDays, nowMs);
    if (this.days <= 0) {
      this.dropped += n;
      return n;
    }
    n += await this.#dropDays(DAILY_TABLES, this.days, nowMs);
    // The monthly rollups keep whole months older than the cut-off's month.
    const monthCut = Math.floor(cutoffDay(nowMs, this.days) / 100);
    for (const name of MONTHLY_TABLES) {
      const rparts = await this.store.query<{ partition: string }>(
        sql`SELECT DISTINCT partition FROM system.parts WHERE database = ${this.store.database} AND table = ${localTable(this.store.cluster, name)} AND active`,
      );
      for (const p of rparts) {
        const month = Number(p.partition.replace(/'/g, ''));
        if (!Number.isInteger(month) || month >= monthCut) continue;
        await this.store.command(sql`ALTER TABLE ${table(this.store.database, localTable(this.store.cluster, name))}${onCluster(this.store.cluster)} DROP PARTITION ${month}`);
        n++;
      }
    }
    this.dropped += n;
    return n;
  }

  /** Drops the daily partitions of `tables` older than `days` days; returns how many. */
  async #dropDays(tables: readonly string[], days: number, nowMs: number): Promise<number> {
    const cut = cutoffDay(nowMs, days);
    let n = 0;
    for (const name of tables) {
      const parts = await this.store.query<{ partition: string }>(
        sql`SELECT DISTINCT partition FROM system.parts WHERE database = ${this.store.database} AND table = ${localTable(this.store.cluster, name)} AND active`,
      );
      for (const p of parts) {
        const day = Number(p.partition.replace(/'/g, ''));
        if (!Number.isInteger(day) || day >= cut) continue;
        await this.store.command(sql`ALTER TABLE ${table(this.store.database, localTable(this.store.cluster, name))}${onCluster(this.store.cluster)} DROP PARTITION ${day}`);
        n++;
        this.log(`retention: dropped ${name} partition ${day} (older than ${days} days)`);
      }
    }
    return n;
  }
}
