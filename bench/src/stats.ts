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

/**
 * A 95 % interval for the mean of a few per-block figures (issue 15 item 3): mean ± t × s / √n,
 * Student's t with n − 1 degrees of freedom.
 *
 * Why a t-interval and not a bootstrap: a run has 5 (quick) to 12 (full) blocks per arm, and a
 * percentile bootstrap over so few values under-covers (its resamples never reach beyond the
 * observed extremes, so its interval is too narrow, markedly so below ~20 values), while the
 * t-interval widens with small n as it should. Each block figure is itself a percentile over
 * hundreds of requests, so the block figures are close enough to normal for the mean of a few
 * of them; the blocks are interleaved with the other arms' (rotated order), so a slow drift of
 * the machine is spread across arms rather than charged to one.
 */
export interface Interval {
  /** Mean of the per-block values. */
  mean: number;
  /** Lower and upper 95 % bounds of that mean. */
  lo: number;
  hi: number;
  /** Number of blocks. */
  n: number;
}

/** Two-sided 95 % quantiles of Student's t (t_{0.975, df}), df = 1 … 30; above 30 the normal 1.96 is within 4 %. */
const T975: readonly number[] = [
  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06,
  2.056, 2.052, 2.048, 2.045, 2.042,
];

/** t_{0.975, df}; df must be ≥ 1. Beyond the table: 2.042 down to 1.96 (df > 120). */
export function t975(df: number): number {
  if (!Number.isInteger(df) || df < 1) throw new Error(`t975: degrees of freedom must be a positive integer, got ${df}`);
  const v = T975[df - 1];
  if (v !== undefined) return v;
  if (df <= 40) return 2.021;
  if (df <= 60) return 2.0;
  if (df <= 120) return 1.98;
  return 1.96;
}

/** Sample mean and standard deviation (n − 1 in the denominator); sd 0 for one value. */
export function meanSd(values: readonly number[]): { mean: number; sd: number } {
  const n = values.length;
  if (n === 0) return { mean: Number.NaN, sd: Number.NaN };
  const mean = values.reduce((a, v) => a + v, 0) / n;
  if (n === 1) return { mean, sd: 0 };
  const ss = values.reduce((a, v) => a + (v - mean) * (v - mean), 0);
  return { mean, sd: Math.sqrt(ss / (n - 1)) };
}

/** The 95 % t-interval of the mean of `values`, rounded to whole µs; undefined for fewer than 2 values. */
export function tInterval(values: readonly number[]): Interval | undefined {
  const n = values.length;
  if (n < 2 || values.some((v) => !Number.isFinite(v))) return undefined;
  const { mean, sd } = meanSd(values);
  const half = (t975(n - 1) * sd) / Math.sqrt(n);
  return { mean: Math.round(mean), lo: Math.round(mean - half), hi: Math.round(mean + half), n };
}

/**
 * Per-round differences a[i] − b[i] of two arms' block figures (arm minus the direct block of
 * the same round, or one arm minus another): pairing by round removes what the machine did to
 * both in that round. Rounds where either is missing are skipped.
 */
export function pairedDifferences(a: readonly (number | undefined)[], b: readonly (number | undefined)[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const x = a[i];
    const y = b[i];
    if (x !== undefined && y !== undefined) out.push(x - y);
  }
  return out;
}

/** Whether an interval contains 0: the difference it bounds cannot be told from noise in this run. */
export function containsZero(i: Interval): boolean {
  return i.lo <= 0 && i.hi >= 0;
}

/**
 * Failed requests of a step whose connection to the proxy was never made (driver.ts names a
 * failure `network <code>`): they never reached a gateway, so it cannot have captured them.
 */
export function neverConnected(kinds: Record<string, number>): number {
  return (kinds['network UND_ERR_CONNECT_TIMEOUT'] ?? 0) + (kinds['network ECONNREFUSED'] ?? 0);
}
