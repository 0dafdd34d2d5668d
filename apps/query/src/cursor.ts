/**
 * The opaque cursor of `GET /v1/requests`: the position after which the next page starts
 * (keyset paging: start time, span id, trace id — the listing's order), the lower bound of
 * the range the first page resolved, and a hash of the filters it was made for, signed
 * with HMAC-SHA-256 under the server's secret.
 *
 * Signed, so a client cannot forge a position or shorten one (a truncated or edited cursor
 * fails the check); bound to its filters, so a cursor replayed with other filters (another
 * team, model or range) is refused rather than silently paging a different listing. It
 * carries no secret: the payload is readable base64url JSON.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { QueryError } from './errors.js';

export interface CursorPosition {
  /** `start_time_unix_nano` of the last request of the page. */
  ns: bigint;
  spanId: string;
  traceId: string;
  /** The range's start as the first page resolved it (a default `from` moves with the clock). */
  fromNs: bigint;
}

/** The longest cursor accepted: a real one is about 170 characters. */
export const MAX_CURSOR_LENGTH = 512;

const MAC_BYTES = 16;
const SPAN = /^[0-9a-f]{16}$/;
const TRACE = /^[0-9a-f]{32}$/;
const NS = /^\d{1,20}$/;

/** A hash of the values a listing was filtered by (canonical JSON, key order ignored). */
export function filterHash(filters: Record<string, string | number | boolean | null>): string {
  const canonical = JSON.stringify(Object.keys(filters).sort().map((k) => [k, filters[k]]));
  return createHash('sha256').update(canonical).digest('base64url').slice(0, 22);
}

const invalid = () => new QueryError('bad_parameter', 'invalid cursor: pass `next_cursor` from the previous page as it was given', { field: 'cursor' });

export class CursorCodec {
  readonly #secret: Buffer;

  /** `secret`: at least 16 bytes; default random (cursors then last as long as the process). */
  constructor(secret?: string | Uint8Array) {
    const s = secret === undefined ? randomBytes(32) : Buffer.from(secret);
    if (s.length < 16) throw new TypeError('the cursor secret must be at least 16 bytes');
    this.#secret = s;
  }

  #mac(payload: string): Buffer {
    return createHmac('sha256', this.#secret).update(payload).digest().subarray(0, MAC_BYTES);
  }

  encode(p: CursorPosition, hash: string): string {
    const payload = Buffer.from(JSON.stringify([1, p.ns.toString(), p.spanId, p.traceId, p.fromNs.toString(), hash])).toString('base64url');
    return `${payload}.${this.#mac(payload).toString('base64url')}`;
  }

  /** The position in `cursor`; a 400 naming `cursor` if it is not one we signed for these filters. */
  decode(cursor: string, hash: string): CursorPosition {
    if (cursor.length > MAX_CURSOR_LENGTH) throw invalid();
    const dot = cursor.indexOf('.');
    if (dot <= 0) throw invalid();
    const payload = cursor.slice(0, dot);
    const mac = Buffer.from(cursor.slice(dot + 1), 'base64url');
    if (mac.length !== MAC_BYTES || !timingSafeEqual(mac, this.#mac(payload))) throw invalid();
    let v: unknown;
    try {
      v = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    } catch {
      throw invalid();
    }
    if (!Array.isArray(v) || v.length !== 6 || v[0] !== 1) throw invalid();
    const [, ns, spanId, traceId, fromNs, h] = v as unknown[];
    if (typeof ns !== 'string' || !NS.test(ns) || typeof spanId !== 'string' || !SPAN.test(spanId) || typeof traceId !== 'string' || !TRACE.test(traceId) || typeof fromNs !== 'string' || !NS.test(fromNs) || typeof h !== 'string') {
      throw invalid();
    }
    if (h !== hash) {
      throw new QueryError('bad_parameter', 'this cursor belongs to a listing with other parameters (filters, team or range): repeat them as they were, or start again without `cursor`', { field: 'cursor' });
    }
    return { ns: BigInt(ns), spanId, traceId, fromNs: BigInt(fromNs) };
  }
}
