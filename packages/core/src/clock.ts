/**
 * The clock of stage marks.
 *
 * A stage mark is `performance.now()`: a monotonic double in milliseconds since the
 * process started, with sub-microsecond resolution. Marks are converted to Unix
 * nanoseconds only when spans are built, after the response has been sent.
 */
import { performance } from 'node:perf_hooks';

/** The current monotonic time in milliseconds: the value every stage mark holds. */
export const now: () => number = performance.now.bind(performance);

// performance.timeOrigin is a Unix time in milliseconds with a fraction. It is split once
// into whole milliseconds and a nanosecond remainder so that mark → Unix-nanosecond
// conversion keeps nanosecond precision instead of a double's ~0.2 µs at this magnitude.
const originMsWhole = Math.floor(performance.timeOrigin);
const originNsFrac = Math.round((performance.timeOrigin - originMsWhole) * 1e6);
const originNs = BigInt(originMsWhole) * 1_000_000n + BigInt(originNsFrac);

/** Converts a mark (monotonic ms) to Unix time in nanoseconds. */
export function markToUnixNano(mark: number): bigint {
  return originNs + BigInt(Math.round(mark * 1e6));
}

/** Nanoseconds between two marks, as an integer number (exact below 104 days). */
export function markDiffNs(from: number, to: number): number {
  return Math.round(to * 1e6) - Math.round(from * 1e6);
}

/** Unix time in nanoseconds, as a bigint, from the wall clock. */
export function unixNanoNow(): bigint {
  return markToUnixNano(now());
}
