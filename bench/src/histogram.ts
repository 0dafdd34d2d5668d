/**
 * HDR histograms in microseconds (hdr-histogram-js, the JS port of Gil Tene's HdrHistogram):
 * 3 significant digits, so a value is recorded to within 0.1 % whatever its size, from 1 µs up
 * to the 10-minute ceiling below, in constant memory.
 */
import { build, decodeFromCompressedBase64, encodeIntoCompressedBase64 } from 'hdr-histogram-js';
import type { Histogram } from 'hdr-histogram-js';
import type { Percentiles } from './stats.js';

/** 10 minutes in µs: no single request in any block can take longer (blocks are bounded). */
const HIGHEST_US = 600_000_000;

export function newHistogram(): Histogram {
  return build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: HIGHEST_US,
    numberOfSignificantValueDigits: 3,
    autoResize: false,
    useWebAssembly: false,
  });
}

/** Records `us`, clamped into the trackable range so one outlier cannot throw mid-block. */
export function recordUs(h: Histogram, us: number): void {
  h.recordValue(Math.min(HIGHEST_US, Math.max(1, Math.round(us))));
}

export function encode(h: Histogram): string {
  return encodeIntoCompressedBase64(h);
}

export function decode(s: string): Histogram {
  return decodeFromCompressedBase64(s, 32, false);
}

/** Adds decoded histograms into one fresh histogram. */
export function merge(encoded: readonly string[]): Histogram {
  const sum = newHistogram();
  for (const e of encoded) {
    const h = decode(e);
    sum.add(h);
    h.destroy();
  }
  return sum;
}

export function percentiles(h: Histogram): Percentiles {
  const count = h.totalCount;
  if (count === 0) return { p50: 0, p90: 0, p99: 0, p999: 0, max: 0, mean: 0, count: 0 };
  return {
    p50: h.getValueAtPercentile(50),
    p90: h.getValueAtPercentile(90),
    p99: h.getValueAtPercentile(99),
    p999: h.getValueAtPercentile(99.9),
    max: h.maxValue,
    mean: Math.round(h.mean),
    count,
  };
}

/** Percentiles of a set of encoded block histograms, merged. */
export function percentilesOf(encoded: readonly string[]): Percentiles {
  const h = merge(encoded);
  const p = percentiles(h);
  h.destroy();
  return p;
}
