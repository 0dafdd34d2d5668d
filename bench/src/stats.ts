/**
 * The arithmetic of the report, kept pure (no histogram library, no I/O) so it is tested on its
 * own in bench/test/bench-pure.test.ts.
 *
 * Added latency (docs/benchmarks.md, "Targets"): arm percentile minus direct percentile,
 * per percentile, in the same run. The direct floor of a scenario is the mean of its control
 * block before the arms and its control block after them, so a slow drift of the machine over
 * the scenario is split evenly between the arms instead of being charged to the last one.
 */

/** Percentile values of one measured series, microseconds. */
export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  mean: number;
  count: number;
}

/** Mean of the two control blocks, per percentile. */
export function meanPercentiles(a: Percentiles, b: Percentiles): Percentiles {
  const m = (x: number, y: number): number => (x + y) / 2;
  return {
    p50: m(a.p50, b.p50),
    p90: m(a.p90, b.p90),
    p99: m(a.p99, b.p99),
    p999: m(a.p999, b.p999),
    max: m(a.max, b.max),
    mean: m(a.mean, b.mean),
    count: a.count + b.count,
  };
}

/** Arm minus floor for one percentile, rounded to whole microseconds. */
export function added(arm: number, floor: number): number {
  return Math.round(arm - floor);
}

/**
 * Relative drift between the two control blocks: |after − before| / mean(before, after).
 * 0 when both are 0.
 */
export function drift(before: number, after: number): number {
  const mean = (before + after) / 2;
  return mean === 0 ? 0 : Math.abs(after - before) / mean;
}

/** errors / attempts; 0 when nothing was attempted. */
export function errorRate(errors: number, attempts: number): number {
  return attempts === 0 ? 0 : errors / attempts;
}

/**
 * Issue 5's first ratio: how many times lower Sightline's added p50 is than Portkey's (want ≥ 4).
 * Undefined when either input is missing; when Sightline's added p50 is ≤ 0 µs (inside the
 * noise of the floor) the ratio is unbounded and reported as Infinity.
 */
export function portkeyRatio(sightlineAdded: number | undefined, portkeyAdded: number | undefined): number | undefined {
  if (sightlineAdded === undefined || portkeyAdded === undefined) return undefined;
  if (sightlineAdded <= 0) return portkeyAdded > 0 ? Number.POSITIVE_INFINITY : undefined;
  return portkeyAdded / sightlineAdded;
}

/**
 * Issue 5's second ratio: the share of Sightline's added latency that capture costs,
 * (added with capture − added without) / added with capture (want ≤ 0.10). Undefined when an
 * input is missing or Sightline's added p50 is ≤ 0 (no share can be computed).
 */
export function captureCost(withCapture: number | undefined, withoutCapture: number | undefined): number | undefined {
  if (withCapture === undefined || withoutCapture === undefined || withCapture <= 0) return undefined;
  return (withCapture - withoutCapture) / withCapture;
}

/**
 * Issue 10's auth cost: Sightline's added p50 (authentication on) over the same gateway's with
 * authentication off, same scenario, same run (want ≤ 1.05: authentication adds at most 5 %).
 * Undefined when an input is missing or the authentication-off added p50 is ≤ 0 (inside the
 * noise of the floor: no ratio can be computed).
 */
export function authCost(withAuth: number | undefined, withoutAuth: number | undefined): number | undefined {
  if (withAuth === undefined || withoutAuth === undefined || withoutAuth <= 0) return undefined;
  return withAuth / withoutAuth;
}

/** Rotates `items` left by `by`, so each arm takes every position across rounds. */
export function rotate<T>(items: readonly T[], by: number): T[] {
  if (items.length === 0) return [];
  const k = ((by % items.length) + items.length) % items.length;
  return [...items.slice(k), ...items.slice(0, k)];
}

/** A JSON string body of exactly `bytes` UTF-8 bytes: `prefix` + ASCII padding + `suffix`. */
export function padBody(prefix: string, suffix: string, bytes: number): string {
  const fixed = Buffer.byteLength(prefix) + Buffer.byteLength(suffix);
  if (fixed > bytes) throw new Error(`body skeleton is ${fixed} bytes, more than the ${bytes} asked for`);
  // Words rather than one run of a letter, so the mock's token count is a plausible number.
  const words = 'the quick brown fox jumps over the lazy dog ';
  let pad = words.repeat(Math.ceil((bytes - fixed) / words.length)).slice(0, bytes - fixed);
  // JSON strings must not end in a backslash or contain quotes: the word list has neither.
  if (pad.endsWith(' ')) pad = `${pad.slice(0, -1)}.`;
  return prefix + pad + suffix;
}
