/**
 * Request bodies new to the exact cache on every request (issue 12's cache-miss arms), for the
 * driver (driver.ts). Pure and without dependencies, so bench/test runs it in the root `npm test`.
 */
import { UNIQUE_MARKER } from './types.js';

/** Run-wide sequence of unique bodies (one driver process per run, so no body repeats in a run). */
let uniqueSeq = 0;

/**
 * Bodies that differ on every call: a copy of `base` with the 12 digits of its UNIQUE_MARKER
 * replaced by the next sequence number (same length, so content-length holds).
 */
export function uniqueBodies(base: Buffer): () => Buffer {
  const at = base.indexOf(UNIQUE_MARKER);
  if (at < 0) throw new Error(`a unique request's body must contain ${UNIQUE_MARKER}`);
  const digitsAt = at + UNIQUE_MARKER.length - 12;
  return () => {
    uniqueSeq = (uniqueSeq + 1) % 1e12;
    const b = Buffer.from(base);
    b.write(String(uniqueSeq).padStart(12, '0'), digitsAt, 'latin1');
    return b;
  };
}
