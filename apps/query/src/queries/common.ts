/**
 * Helpers shared by the endpoint queries (one file per endpoint beside this one). Every
 * value goes through `sql` (store/sql.ts); the same text runs on ClickHouse 18.16 and on
 * chdb 26.x. Reads use FINAL so a batch written twice (redelivery) is counted once even
 * before ClickHouse merged it.
 */

/** A number as ClickHouse returns it in JSON: 64-bit integers arrive quoted. */
export type Num = number | string;

/** Nanoseconds to milliseconds, rounded to the microsecond. */
export const ms = (ns: number): number => Math.round(ns / 1000) / 1000;
