/**
 * The per-minute rollup (migrations/003_requests_rollup.sql), kept exact when batches
 * are redelivered: after a write, each minute it touched is recomputed in full from
 * `requests FINAL` and inserted with a newer version, which replaces the previous
 * computation. Recomputing is idempotent, so several ingesters may do it for the same
 * minute; the last one to run has seen every row written before it started.
 */
import { sql, table, type Store } from '@sightline/store';
import { unixNanoNow } from '@sightline/core';

export class Rollup {
  readonly #dirty = new Set<number>();
  #running: Promise<void> | null = null;
  #timer: NodeJS.Timeout | null = null;
  /** Minute recomputations done, and failed (retried on the next round). */
  done = 0;
  failed = 0;

  constructor(
    readonly store: Store,
    /** Milliseconds between recomputation rounds. */
    readonly intervalMs = 2_000,
    readonly log: (msg: string) => void = () => {},
  ) {}

  /** Marks the minutes of these start times (Unix seconds) for recomputation. */
  touch(startTimes: Iterable<number>): void {
    for (const s of startTimes) this.#dirty.add(s - (s % 60));
    if (this.#timer === null && this.#dirty.size > 0) {
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

  async recompute(minute: number): Promise<void> {
    const version = unixNanoNow();
    const src = table(this.store.database, 'requests');
    const dst = table(this.store.database, 'requests_1m');
    await this.store.command(sql`INSERT INTO ${dst} (minute, team, model, provider, dialect, status_class, requests, errors, aborted, streams, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_ns_sum, gateway_ns_sum, upstream_ns_sum, gateway_ns_max, version)
SELECT toDateTime(${minute}, 'UTC') AS minute, team, model, provider, dialect, toUInt16(intDiv(http_status, 100) * 100) AS status_class,
  count(), countIf(http_status >= 400), countIf(aborted = 1), countIf(stream = 1),
  sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_write_tokens),
  sum(total_ns), sum(gateway_ns), sum(upstream_ns), max(gateway_ns), ${version}
FROM ${src} FINAL
WHERE start_time >= toDateTime(${minute}, 'UTC') AND start_time < toDateTime(${minute + 60}, 'UTC')
GROUP BY team, model, provider, dialect, status_class`);
  }

  stop(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }
}
