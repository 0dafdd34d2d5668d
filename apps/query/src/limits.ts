/**
 * What one query API request may cost: the ClickHouse limits every query runs with, and the
 * longest time range of each endpoint (docs/api.md, "Limits"). A query stopped by a limit is
 * a 422 `query_too_large` saying how to narrow it, never a 500 (issue 9).
 */
import { envInt } from '@sightline/core';
import type { ReadLimits } from '@sightline/store';

/**
 * Defaults for a dashboard: 10 s, 1 GiB, 100 000 rows. The time stays under the store's
 * 30 s HTTP request timeout (store.ts), so a slow query ends as a 422, not a dropped request.
 */
export const DEFAULT_READ_LIMITS: ReadLimits = {
  maxExecutionTimeS: 10,
  maxMemoryBytes: 1024 ** 3,
  maxResultRows: 100_000,
};

/**
 * The limits from the environment: QUERY_MAX_EXECUTION_TIME_S (1 – 30),
 * QUERY_MAX_MEMORY_BYTES (at least 1 MiB), QUERY_MAX_RESULT_ROWS (at least 10 000: the
 * spans of a full `/v1/requests` answer, 100 requests, must fit); unset or
 * empty: the default. Throws at start for a value out of range.
 */
export function readLimitsFromEnv(): ReadLimits {
  const get = (name: string, fallback: number, min: number, max: number): number => {
    const v = envInt(name, fallback);
    if (v < min || v > max) throw new Error(`environment variable ${name} must be from ${min} to ${max}, got ${v}`);
    return v;
  };
  return {
    maxExecutionTimeS: get('QUERY_MAX_EXECUTION_TIME_S', DEFAULT_READ_LIMITS.maxExecutionTimeS, 1, 30),
    maxMemoryBytes: get('QUERY_MAX_MEMORY_BYTES', DEFAULT_READ_LIMITS.maxMemoryBytes, 1024 ** 2, Number.MAX_SAFE_INTEGER),
    maxResultRows: get('QUERY_MAX_RESULT_ROWS', DEFAULT_READ_LIMITS.maxResultRows, 10_000, Number.MAX_SAFE_INTEGER),
  };
}

/**
 * The most bytes (uncompressed) one phrase search (`GET /v1/requests?q=`) may read from
 * the `content` table per query: 2 GiB, about 4,000 requests at the full capture bound
 * (2 × 256 KiB) or 400,000 of 5 KiB. A search past it is a 422 naming `q`.
 */
export const DEFAULT_SEARCH_MAX_BYTES = 2 * 1024 ** 3;

/** QUERY_SEARCH_MAX_BYTES (at least 1 MiB); unset or empty: DEFAULT_SEARCH_MAX_BYTES. */
export function searchMaxBytesFromEnv(): number {
  const v = envInt('QUERY_SEARCH_MAX_BYTES', DEFAULT_SEARCH_MAX_BYTES);
  if (v < 1024 ** 2 || v > Number.MAX_SAFE_INTEGER) throw new Error(`environment variable QUERY_SEARCH_MAX_BYTES must be at least 1048576, got ${v}`);
  return v;
}

/**
 * The most bytes (uncompressed, as ClickHouse counts them in its blocks) one `POST /v1/sql`
 * answer may hold: 64 MiB. Rows of prompts can be wide; the row limit alone would let
 * 100,000 of them through. Past it: a 422.
 */
export const DEFAULT_SQL_MAX_RESULT_BYTES = 64 * 1024 ** 2;

/** QUERY_SQL_MAX_RESULT_BYTES (at least 1 MiB); unset or empty: DEFAULT_SQL_MAX_RESULT_BYTES. */
export function sqlMaxResultBytesFromEnv(): number {
  const v = envInt('QUERY_SQL_MAX_RESULT_BYTES', DEFAULT_SQL_MAX_RESULT_BYTES);
  if (v < 1024 ** 2 || v > Number.MAX_SAFE_INTEGER) throw new Error(`environment variable QUERY_SQL_MAX_RESULT_BYTES must be at least 1048576, got ${v}`);
  return v;
}

/** The limits of `POST /v1/sql` and `npm run sql`: the query API's and the answer's bytes, from the environment. */
export function sqlLimitsFromEnv(): ReadLimits {
  return { ...readLimitsFromEnv(), maxResultBytes: sqlMaxResultBytesFromEnv() };
}

/** The default and the longest `from`–`to` range of each endpoint that takes one. */
export interface RangeLimit {
  /** `from` when not given: this many hours before `to`. */
  defaultHours: number;
  /** A longer range is a 400 `bad_parameter`. */
  maxDays: number;
}

export const RANGES = {
  /** Percentiles over raw spans (`spans FINAL`): the costliest read. */
  stages: { defaultHours: 1, maxDays: 31 },
  /** Per-minute rows per gateway instance, and the batch ledger. */
  capture: { defaultHours: 1, maxDays: 31 },
  /** From the per-minute rollup, cheap per day: about a year (and a month) of it. */
  usage: { defaultHours: 24, maxDays: 400 },
  /** From the per-minute rollups, like usage. */
  metrics: { defaultHours: 24, maxDays: 400 },
  /**
   * Metrics by end user, session or tag: not in the rollups (too many values), so read from
   * `requests FINAL` (and `stage_spans FINAL` per stage) — a week at most.
   */
  metricsRaw: { defaultHours: 24, maxDays: 7 },
  /** The listing reads raw requests a window of days at a time, newest first (queries/requests.ts). */
  requests: { defaultHours: 24, maxDays: 31 },
} as const satisfies Record<string, RangeLimit>;

/** How to narrow a query to each endpoint, for the 422's message. */
export const NARROWING: Record<string, string> = {
  '/v1/requests': 'ask for a shorter range (from/to), add filters, or a smaller limit',
  '/v1/metrics': 'ask for a shorter range, a longer interval, fewer metrics, group by fewer dimensions, or filter by end_user, session or tag',
  '/v1/requests/:traceId': 'this trace holds more than the query API reads at once; query its requests with SQL (docs/schema.md)',
  '/v1/stages': 'ask for a shorter range (from/to) or filter by model, provider or team',
  '/v1/usage': 'ask for a shorter range (from/to), filter by team, model or provider, or group by fewer keys',
  '/v1/capture': 'ask for a shorter range (from/to) or filter by instance',
  '/v1/sql': 'add a LIMIT, a narrower WHERE on start_time, or aggregate',
};
