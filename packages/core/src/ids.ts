/**
 * Trace and span identifiers (W3C Trace Context, https://www.w3.org/TR/trace-context/).
 *
 * Ids are generated on the request path, so they avoid a crypto call per request: a
 * pool of random bytes is refilled from the CSPRNG 4 KiB at a time and read as hex.
 */
import { randomFillSync } from 'node:crypto';

const POOL_SIZE = 4096;
const pool = Buffer.allocUnsafe(POOL_SIZE);
let offset = POOL_SIZE;

function randomHex(bytes: number): string {
  if (offset + bytes > POOL_SIZE) {
    randomFillSync(pool);
    offset = 0;
  }
  const hex = pool.toString('hex', offset, offset + bytes);
  offset += bytes;
  return hex;
}

const INVALID_TRACE_ID = '00000000000000000000000000000000';
const INVALID_SPAN_ID = '0000000000000000';

/** A new 16-byte trace id as 32 lowercase hex characters, never all zeros. */
export function newTraceId(): string {
  let id = randomHex(16);
  while (id === INVALID_TRACE_ID) id = randomHex(16);
  return id;
}

/** A new 8-byte span id as 16 lowercase hex characters, never all zeros. */
export function newSpanId(): string {
  let id = randomHex(8);
  while (id === INVALID_SPAN_ID) id = randomHex(8);
  return id;
}

export interface TraceParent {
  traceId: string;
  parentSpanId: string;
  sampled: boolean;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * Parses a `traceparent` header (https://www.w3.org/TR/trace-context/#traceparent-header).
 * Returns null for anything invalid, in which case the caller starts a new trace, as the
 * spec asks of a receiver that cannot parse the header.
 */
export function parseTraceparent(value: string | undefined): TraceParent | null {
  if (value === undefined || value.length < 55) return null;
  const m = TRACEPARENT.exec(value.trim());
  if (m === null) return null;
  const version = m[1]!;
  const traceId = m[2]!;
  const parentSpanId = m[3]!;
  const flags = m[4]!;
  // Version ff is forbidden; version 00 must be exactly 55 characters long.
  if (version === 'ff') return null;
  if (version === '00' && m[5] !== undefined) return null;
  if (traceId === INVALID_TRACE_ID || parentSpanId === INVALID_SPAN_ID) return null;
  return { traceId, parentSpanId, sampled: (parseInt(flags, 16) & 1) === 1 };
}
