/**
 * How an entry is written to the bucket: a binary frame, so the body travels as its own
 * bytes. Base64 in JSON would grow every body by a third (a 1 MiB NATS message would then
 * hold at most ~750 KiB of body) and costs more to encode and decode: measured in
 * docs/cache.md ("Costs").
 *
 * | offset | size | field                                          |
 * | ------ | ---- | ---------------------------------------------- |
 * | 0      | 1    | format version, 1                              |
 * | 1      | 1    | flags: bit 0 = stream                          |
 * | 2      | 2    | status, unsigned big-endian                    |
 * | 4      | 8    | storedAtMs, float64 big-endian                 |
 * | 12     | 8    | expiresAtMs, float64 big-endian                |
 * | 20     | 4    | H, bytes of the headers JSON, big-endian       |
 * | 24     | H    | headers, a JSON object of strings (UTF-8)      |
 * | 24 + H | rest | body                                           |
 *
 * The times sit at fixed offsets so a replaying watcher can skip an expired entry without
 * parsing anything (`frameExpiry`).
 */
import type { CachedResponse } from './types.js';

const VERSION = 1;
export const FRAME_FIXED = 24;

/** The headers as they are written, and the size of the whole frame. */
export function frameSize(r: CachedResponse): { headers: string; headerBytes: number; size: number } {
  const headers = JSON.stringify(r.headers);
  const headerBytes = Buffer.byteLength(headers);
  return { headers, headerBytes, size: FRAME_FIXED + headerBytes + r.body.length };
}

export function encodeFrame(r: CachedResponse, sized: { headers: string; headerBytes: number; size: number } = frameSize(r)): Buffer {
  const out = Buffer.allocUnsafe(sized.size);
  out[0] = VERSION;
  out[1] = r.stream ? 1 : 0;
  out.writeUInt16BE(r.status, 2);
  out.writeDoubleBE(r.storedAtMs, 4);
  out.writeDoubleBE(r.expiresAtMs, 12);
  out.writeUInt32BE(sized.headerBytes, 20);
  out.write(sized.headers, FRAME_FIXED, 'utf8');
  out.set(r.body, FRAME_FIXED + sized.headerBytes);
  return out;
}

/** Times of a frame without decoding it; null when it is not a frame of this version. */
export function frameExpiry(b: Uint8Array): { storedAtMs: number; expiresAtMs: number; bodyBytes: number } | null {
  if (b.length < FRAME_FIXED || b[0] !== VERSION) return null;
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const headerBytes = v.getUint32(20);
  if (FRAME_FIXED + headerBytes > b.length) return null;
  return { storedAtMs: v.getFloat64(4), expiresAtMs: v.getFloat64(12), bodyBytes: b.length - FRAME_FIXED - headerBytes };
}

/**
 * Decodes a frame into an entry whose body is a copy: a message's bytes may be a view into
 * the connection's read buffer, which must not be kept alive (or overwritten) behind the
 * entry. Null when the frame is malformed.
 */
export function decodeFrame(b: Uint8Array): CachedResponse | null {
  const t = frameExpiry(b);
  if (t === null) return null;
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const flags = b[1]!;
  const status = v.getUint16(2);
  const headerBytes = v.getUint32(20);
  let headers: unknown;
  try {
    headers = JSON.parse(Buffer.from(b.buffer, b.byteOffset + FRAME_FIXED, headerBytes).toString('utf8'));
  } catch {
    return null;
  }
  if (!isHeaders(headers)) return null;
  const r: CachedResponse = {
    status,
    headers,
    body: Buffer.from(b.subarray(FRAME_FIXED + headerBytes)),
    stream: (flags & 1) === 1,
    storedAtMs: t.storedAtMs,
    expiresAtMs: t.expiresAtMs,
  };
  return valid(r) ? r : null;
}

export function isHeaders(h: unknown): h is Record<string, string> {
  if (typeof h !== 'object' || h === null || Array.isArray(h)) return false;
  for (const v of Object.values(h)) if (typeof v !== 'string') return false;
  return true;
}

/** The checks `put` makes before storing an entry (and a decoded frame must pass). */
export function valid(r: CachedResponse): boolean {
  return (
    Number.isInteger(r.status) &&
    r.status >= 100 &&
    r.status <= 599 &&
    r.body instanceof Uint8Array &&
    typeof r.stream === 'boolean' &&
    Number.isFinite(r.storedAtMs) &&
    Number.isFinite(r.expiresAtMs) &&
    r.expiresAtMs > r.storedAtMs &&
    isHeaders(r.headers)
  );
}
