/**
 * The per-block intervals of issue 15 item 3 (stats.ts): Student's t quantiles, the t-interval
 * of the mean of block figures, per-round pairing, and their rendering in the report. Imports
 * nothing from bench/node_modules, so it runs in the root `npm test`.
 */
import { describe, it } from 'node:test';
import { strict as assert } from 'node:assert';
import { containsZero, meanSd, pairedDifferences, t975, tInterval } from '../src/stats.js';
import { comparisonLines, interval } from '../src/report.js';
import type { ScenarioResult } from '../src/report.js';
import { seeded as rng } from '../../test/support/seeded.js';

/** A standard normal draw (Box–Muller). */
function normal(r: () => number): number {
  const u = Math.max(r(), 1e-12);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r());
}

describe('t975', () => {
  it('gives the tabulated two-sided 95 % quantiles', () => {
    assert.equal(t975(1), 12.706);
    assert.equal(t975(4), 2.776);
    assert.equal(t975(11), 2.201);
    assert.equal(t975(30), 2.042);
    assert.equal(t975(1000), 1.96);
  });
  it('decreases with the degrees of freedom', () => {
    for (let df = 1; df < 200; df++) assert.ok(t975(df + 1) <= t975(df), `t975(${df + 1}) > t975(${df})`);
  });
  it('refuses zero or fractional degrees of freedom', () => {
    assert.throws(() => t975(0), /positive integer/);
    assert.throws(() => t975(2.5), /positive integer/);
  });
});

describe('meanSd and tInterval', () => {
  it('computes the sample mean and standard deviation (n − 1)', () => {
    const { mean, sd } = meanSd([10, 12, 14, 16, 18]);
    assert.equal(mean, 14);
    assert.ok(Math.abs(sd - Math.sqrt(10)) < 1e-12);
    assert.deepEqual(meanSd([7]), { mean: 7, sd: 0 });
  });
  it('gives mean ± t × s / √n, rounded to whole µs', () => {
    // half = 2.776 × √10 / √5 = 3.926
    assert.deepEqual(tInterval([10, 12, 14, 16, 18]), { mean: 14, lo: 10, hi: 18, n: 5 });
    // Two blocks: t = 12.706, s = √2 × 50, half = 12.706 × 50 = 635.3
    assert.deepEqual(tInterval([100, 200]), { mean: 150, lo: -485, hi: 785, n: 2 });
  });
  it('is a point when every block agrees, and undefined below two blocks or with a non-number', () => {
    assert.deepEqual(tInterval([300, 300, 300]), { mean: 300, lo: 300, hi: 300, n: 3 });
    assert.equal(tInterval([5]), undefined);
    assert.equal(tInterval([]), undefined);
    assert.equal(tInterval([1, Number.NaN, 3]), undefined);
  });
  it('covers the true mean about 95 % of the time with 5 blocks (seeded simulation)', () => {
    const r = rng(15);
    const trials = 4000;
    let covered = 0;
    for (let k = 0; k < trials; k++) {
      // Block p99s around 1,000 µs with a 200 µs spread; unrounded check via a scaled copy.
      const values = Array.from({ length: 5 }, () => 100_000 + 20_000 * normal(r));
      const i = tInterval(values);
      assert.ok(i !== undefined);
      if (i.lo <= 100_000 && i.hi >= 100_000) covered++;
    }
    const rate = covered / trials;
    assert.ok(rate > 0.93 && rate < 0.97, `coverage ${rate}`);
  });
  it('is wider with fewer blocks of the same spread', () => {
    const few = tInterval([90, 110, 95, 105]);
    const many = tInterval([90, 110, 95, 105, 90, 110, 95, 105, 90, 110, 95, 105]);
    assert.ok(few !== undefined && many !== undefined);
    assert.ok(few.hi - few.lo > many.hi - many.lo);
  });
});

describe('pairedDifferences and containsZero', () => {
  it('subtracts round by round and skips rounds where either side is missing', () => {
    assert.deepEqual(pairedDifferences([300, 320, undefined, 400], [100, 110, 120, 150]), [200, 210, 250]);
    assert.deepEqual(pairedDifferences([1, 2, 3], [1]), [0]);
  });
  it('pairing removes what a round did to both arms', () => {
    // Both arms slow down together in round 3: unpaired, the arm's p99s spread widely; paired,
    // the difference is steady.
    const arm = [500, 510, 1500, 505, 495];
    const direct = [300, 310, 1300, 305, 295];
    const unpaired = tInterval(arm);
    const paired = tInterval(pairedDifferences(arm, direct));
    assert.ok(unpaired !== undefined && paired !== undefined);
    assert.deepEqual(paired, { mean: 200, lo: 200, hi: 200, n: 5 });
    assert.ok(unpaired.hi - unpaired.lo > 1000);
  });
  it('tells an interval holding 0 from one that does not', () => {
    assert.equal(containsZero({ mean: 5, lo: -3, hi: 13, n: 5 }), true);
    assert.equal(containsZero({ mean: 0, lo: 0, hi: 0, n: 5 }), true);
    assert.equal(containsZero({ mean: 40, lo: 12, hi: 68, n: 5 }), false);
    assert.equal(containsZero({ mean: -40, lo: -68, hi: -12, n: 5 }), false);
  });
});

describe('report rendering of intervals', () => {
  it('writes mean [lo, hi], or a dash', () => {
    assert.equal(interval({ mean: 412, lo: 250, hi: 574, n: 5 }), '412 [250, 574]');
    assert.equal(interval(undefined), '–');
  });
  it('says whether a comparison is beyond noise', () => {
    const s: ScenarioResult = {
      name: 'json-1k-seq',
      title: '',
      driver: '',
      mock: {},
      arms: [],
      comparisons: [
        { a: 'sightline', b: 'sightline-nocapture', metric: 'p99', difference_us: { mean: 40, lo: -20, hi: 100, n: 5 }, distinguishable: false },
        { a: 'sightline', b: 'node-proxy', metric: 'ttft_p50', difference_us: { mean: 300, lo: 200, hi: 400, n: 5 }, distinguishable: true },
      ],
    };
    assert.deepEqual(comparisonLines([s]), [
      '- json-1k-seq: sightline − sightline-nocapture, p99: 40 [-20, 100] µs over 5 rounds — within noise (the interval holds 0)',
      '- json-1k-seq: sightline − node-proxy, ttft p50: 300 [200, 400] µs over 5 rounds — a difference beyond noise',
    ]);
  });
});
