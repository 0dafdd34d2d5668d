/**
 * Retention: ClickHouse 18.16 has no TTL, so old data is removed by dropping whole daily
 * partitions (`toYYYYMMDD` of the row's time) older than the configured number of days.
 * Runs at start and then every hour; dropping a partition is instant and idempotent, so
 * several ingesters may all run it.
 */
import { sql, table, type Store } from '@sightline/store';

/** Tables partitioned by day, with their partition column. */
const DAILY_TABLES = ['spans', 'requests', 'ingest_batches', 'stage_spans'] as const;
/** The per-minute rollups, partitioned by month. */
const MONTHLY_TABLES = ['requests_1m', 'requests_agg_1m', 'requests_agg_1h', 'requests_agg_1d', 'stages_agg_1m', 'stages_agg_1h', 'stages_agg_1d'] as const;

export class Retention {
  #timer: NodeJS.Timeout | null = null;
  /** Partitions dropped since start. */
  dropped = 0;

  constructor(
    readonly store: Store,
    /** Days of data to keep; 0 keeps everything. */
    readonly days: number,
    readonly log: (msg: string) => void = () => {},
  ) {}

  start(everyMs = 3_600_000): void {
    if (this.days <= 0) return;
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
    if (this.days <= 0) return 0;
    const cutoff = new Date(nowMs - this.days * 86_400_000);
    const cutoffDay = Number(`${cutoff.getUTCFullYear()}${String(cutoff.getUTCMonth() + 1).padStart(2, '0')}${String(cutoff.getUTCDate()).padStart(2, '0')}`);
    let n = 0;
    for (const name of DAILY_TABLES) {
      const parts = await this.store.query<{ partition: string }>(
        sql`SELECT DISTINCT partition FROM system.parts WHERE database = ${this.store.database} AND table = ${name} AND active`,
      );
      for (const p of parts) {
        const day = Number(p.partition.replace(/'/g, ''));
        if (!Number.isInteger(day) || day >= cutoffDay) continue;
        await this.store.command(sql`ALTER TABLE ${table(this.store.database, name)} DROP PARTITION ${day}`);
        n++;
        this.log(`retention: dropped ${name} partition ${day} (older than ${this.days} days)`);
      }
    }
    // The monthly rollups keep whole months older than the cut-off's month.
    const monthCut = Math.floor(cutoffDay / 100);
    for (const name of MONTHLY_TABLES) {
      const rparts = await this.store.query<{ partition: string }>(
        sql`SELECT DISTINCT partition FROM system.parts WHERE database = ${this.store.database} AND table = ${name} AND active`,
      );
      for (const p of rparts) {
        const month = Number(p.partition.replace(/'/g, ''));
        if (!Number.isInteger(month) || month >= monthCut) continue;
        await this.store.command(sql`ALTER TABLE ${table(this.store.database, name)} DROP PARTITION ${month}`);
        n++;
      }
    }
    this.dropped += n;
    return n;
  }
}
