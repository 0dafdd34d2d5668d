/**
 * The issue 5 ratios and the BRIEF's targets, read off a run's results. Pure (tested in
 * bench/test/bench-pure.test.ts); a target not measured in the run is reported as such
 * (`met: null`), never as passed.
 */
import type { ArmRow, Check, RunResults, ScenarioResult } from './report.js';
import type { ArmName } from './scenarios.js';
import { captureCost, portkeyRatio } from './stats.js';

function findRow(results: ScenarioResult[], scenario: string, arm: ArmName): ArmRow | undefined {
  const row = results.find((s) => s.name === scenario)?.arms.find((a) => a.arm === arm);
  return row?.status === 'ok' ? row : undefined;
}

export function ratios(results: ScenarioResult[]): Check[] {
  const sl = findRow(results, 'json-1k-seq', 'sightline');
  const pk = findRow(results, 'json-1k-seq', 'portkey');
  const nc = findRow(results, 'json-1k-seq', 'sightline-nocapture');
  const r = portkeyRatio(sl?.added_p50_us, pk?.added_p50_us);
  const c = captureCost(sl?.added_p50_us, nc?.added_p50_us);
  return [
    {
      name: 'Portkey added p50 / Sightline added p50 (1 KiB JSON, sequential)',
      value: r ?? null,
      want: '≥ 4',
      met: r === undefined ? null : r >= 4,
      detail: `Sightline ${sl?.added_p50_us ?? '–'} µs, Portkey ${pk?.added_p50_us ?? '–'} µs`,
    },
    {
      name: 'capture cost = (Sightline − capture-off added p50) / Sightline added p50 (1 KiB JSON, sequential)',
      value: c ?? null,
      want: '≤ 0.10',
      met: c === undefined ? null : c <= 0.1,
      detail: `capture on ${sl?.added_p50_us ?? '–'} µs, off ${nc?.added_p50_us ?? '–'} µs`,
    },
  ];
}

export function targets(results: ScenarioResult[], ladder: RunResults['ladder']): Check[] {
  const sl = findRow(results, 'json-1k-seq', 'sightline');
  const sse = findRow(results, 'sse-openai', 'sightline');
  const lad = ladder?.arms.find((a) => a.arm === 'sightline');
  const top = lad?.steps.find((s) => s.rate === 5_000);
  const check = (name: string, value: number | undefined, limit: number, unit: string): Check => ({
    name,
    value: value ?? null,
    want: `≤ ${limit} ${unit}`,
    met: value === undefined ? null : value <= limit,
    detail: value === undefined ? 'not measured in this run' : '',
  });
  return [
    check('Sightline added p50, 1 KiB JSON (µs)', sl?.added_p50_us, 250, 'µs'),
    check('Sightline added p99, 1 KiB JSON (µs)', sl?.added_p99_us, 500, 'µs'),
    check('Sightline added TTFT p50, OpenAI SSE (µs)', sse?.added_ttft_p50_us, 500, 'µs'),
    {
      name: 'Sightline at 5,000 req/s open loop, 1,500 ms mock: every request answered and captured',
      value: top === undefined ? null : top.ok,
      want: 'all answered, all captured',
      met: top === undefined ? null : top.answered_all && top.captured !== undefined && top.captured === top.capture_expected,
      detail: top === undefined ? `5,000 req/s not in this run's ladder (highest passing: ${lad?.max_ok_rate ?? 'none'} req/s)` : `${top.ok}/${top.sent} answered, ${top.captured ?? 0}/${top.capture_expected ?? 0} captured`,
    },
    check('Sightline added p99 at 5,000 req/s (µs)', top?.added_p99_us, 50_000, 'µs'),
  ];
}
