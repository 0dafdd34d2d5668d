/** Parsing and checking of query-string parameters; every failure is a 400 with a message. */
import { unixNanoNow } from '@sightline/core';
import { QueryError } from './errors.js';
import type { RangeLimit } from './limits.js';

const TRACE_ID = /^[0-9a-f]{32}$/;

export function traceIdParam(v: string): string {
  const id = v.toLowerCase();
  if (!TRACE_ID.test(id)) throw new QueryError('bad_parameter', `trace id must be 32 hexadecimal characters, got "${v.slice(0, 64)}"`);
  return id;
}

/**
 * A point in time: RFC 3339 / ISO 8601 (`2026-11-29T18:00:00Z`), or Unix time in seconds
 * or milliseconds (told apart by magnitude). Returns Unix nanoseconds.
 */
export function timeParam(name: string, v: unknown, fallback: bigint): bigint {
  if (v === undefined || v === '') return fallback;
  if (typeof v !== 'string') throw new QueryError('bad_parameter', `${name} must be given once`);
  if (/^\d{1,16}(\.\d+)?$/.test(v)) {
    const n = Number(v);
    const ms = n < 1e11 ? n * 1000 : n;
    return BigInt(Math.round(ms)) * 1_000_000n;
  }
  const ms = Date.parse(v);
  if (Number.isNaN(ms) || !/^\d{4}-\d{2}-\d{2}/.test(v)) {
    throw new QueryError('bad_parameter', `${name} must be an RFC 3339 time (2026-11-29T18:00:00Z) or Unix seconds, got "${v.slice(0, 64)}"`);
  }
  return BigInt(ms) * 1_000_000n;
}

export function stringParam(name: string, v: unknown, maxLength = 256): string | null {
  if (v === undefined || v === '') return null;
  if (typeof v !== 'string') throw new QueryError('bad_parameter', `${name} must be given once`);
  if (v.length > maxLength) throw new QueryError('bad_parameter', `${name} is longer than ${maxLength} characters`);
  return v;
}

const HOUR_NS = 3600n * 1_000_000_000n;

/**
 * `from` and `to` of a query (Unix nanoseconds): `to` defaults to now, `from` to
 * `defaultHours` before `to`; `from` must be before `to`, and the range at most `maxDays`
 * long (limits.ts `RANGES`).
 */
export function rangeParams(q: Record<string, unknown>, { defaultHours, maxDays }: RangeLimit): { fromNs: bigint; toNs: bigint } {
  const toNs = timeParam('to', q.to, unixNanoNow());
  const fromNs = timeParam('from', q.from, toNs - BigInt(defaultHours) * HOUR_NS);
  if (fromNs >= toNs) throw new QueryError('bad_parameter', '`from` must be before `to`');
  if (toNs - fromNs > BigInt(maxDays) * 24n * HOUR_NS) {
    throw new QueryError('bad_parameter', `the range from \`from\` to \`to\` must be at most ${maxDays} days`);
  }
  return { fromNs, toNs };
}
