/**
 * The issue 5 ratios, issue 10's auth cost and the BRIEF's targets, read off a run's results. Pure (tested in
 * bench/test/bench-pure.test.ts); a target not measured in the run is reported as such
 * (`met: null`), never as passed.
 */
import type { ArmRow, Check, RunResults, ScenarioResult } from './report.js';
import type { ArmName } from './scenarios.js';
import { AUTH_COST_SCENARIO, CONTROLS_SCENARIO, EMBEDDED_SCENARIO } from './scenarios.js';
import { authCost, captureCost, portkeyRatio } from './stats.js';

/** Issue 10: authentication may add at most 5 % to Sightline's added p50. */
export const MAX_AUTH_COST = 1.05;
/** Issue 10: the `auth` stage is a map lookup, "its p50 must stay within a few microseconds". */
export const MAX_AUTH_STAGE_P50_US = 5;
/** Issue 12: all controls together add at most 20 µs at p50 over the default. */
export const MAX_CONTROLS_P50_US = 20;
/** Issue 15: the embedded mode's added p99 at most 2 × the separate-process mode's, same run. */
export const MAX_EMBEDDED_P99_RATIO = 2;

/**
 * Issue 15's embedded ratio: embedded added p99 / separate-process added p99. Undefined when an
 * input is missing or the separate-process added p99 is ≤ 0 (inside the floor's noise).
 */
export function embeddedRatio(embedded: number | undefined, separate: number | undefined): number | undefined {
  if (embedded === undefined || separate === undefined || separate <= 0) return undefined;
  return embedded / separate;
}

/** The issue 12 checks on the controls matrix (CONTROLS_SCENARIO), pure. */
export function controlsChecks(results: ScenarioResult[]): Check[] {
  const row = (arm: ArmName): ArmRow | undefined => findRow(results, CONTROLS_SCENARIO, arm);
  const none = row('ctl-none');
  const all = row('ctl-all');
  const hit = row('ctl-cache-hit');
  const miss = row('ctl-cache-miss');
  const comp = results.find((x) => x.name === CONTROLS_SCENARIO)?.comparisons;
  const blocks = (a: ArmName, b: ArmName): string => {
    const c = comp?.find((x) => x.a === a && x.b === b && x.metric === 'p50');
    return c === undefined ? '' : `; per round ${c.difference_us.mean} µs [${c.difference_us.lo}, ${c.difference_us.hi}]`;
  };
  const allOver = all?.added_p50_us !== undefined && none?.added_p50_us !== undefined ? all.added_p50_us - none.added_p50_us : undefined;
  const hitUnder = hit?.added_p50_us !== undefined && miss?.added_p50_us !== undefined ? miss.added_p50_us - hit.added_p50_us : undefined;
  return [
    {
      name: 'all controls (limits, budget, cache miss) added p50 − default added p50, 1 KiB JSON (µs)',
      value: allOver ?? null,
      want: `≤ ${MAX_CONTROLS_P50_US} µs`,
      met: allOver === undefined ? null : allOver <= MAX_CONTROLS_P50_US,
      detail: allOver === undefined ? 'not measured in this run' : `all ${all?.added_p50_us} µs, default ${none?.added_p50_us} µs${blocks('ctl-all', 'ctl-none')}`,
    },
    {
      name: 'cache miss added p50 − cache hit added p50, 1 KiB JSON (µs)',
      value: hitUnder ?? null,
      want: '> 0 (a hit adds less than a miss)',
      met: hitUnder === undefined ? null : hitUnder > 0,
      detail: hitUnder === undefined ? 'not measured in this run' : `hit ${hit?.added_p50_us} µs, miss ${miss?.added_p50_us} µs${blocks('ctl-cache-hit', 'ctl-cache-miss').replace('per round', 'hit − miss per round')}`,
    },
  ];
}

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
  const slAuth = findRow(results, AUTH_COST_SCENARIO, 'sightline');
  const na = findRow(results, AUTH_COST_SCENARIO, 'sightline-noauth');
  const a = authCost(slAuth?.added_p50_us, na?.added_p50_us);
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
    {
      name: 'auth cost = Sightline added p50 / authentication-off added p50 (1 KiB JSON, sequential)',
      value: a ?? null,
      want: `≤ ${MAX_AUTH_COST} (authentication adds ≤ 5 % to the added p50)`,
      met: a === undefined ? null : a <= MAX_AUTH_COST,
      detail: `authentication on ${slAuth?.added_p50_us ?? '–'} µs, off ${na?.added_p50_us ?? '–'} µs`,
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
    check('Sightline auth stage p50 with keys, 1 KiB JSON (µs)', findRow(results, AUTH_COST_SCENARIO, 'sightline')?.auth_stage_p50_us, MAX_AUTH_STAGE_P50_US, 'µs'),
    embeddedCheck(results),
    ...controlsChecks(results),
  ];
}

/** Issue 15: embedded added p99 / separate-process added p99 (1 KiB JSON, sequential). */
export function embeddedCheck(results: ScenarioResult[]): Check {
  const em = findRow(results, EMBEDDED_SCENARIO, 'sightline-embedded');
  const sep = findRow(results, EMBEDDED_SCENARIO, 'sightline');
  const r = embeddedRatio(em?.added_p99_us, sep?.added_p99_us);
  const blocks = em?.added_p99_blocks !== undefined && sep?.added_p99_blocks !== undefined ? `; block means ${em.added_p99_blocks.mean} [${em.added_p99_blocks.lo}, ${em.added_p99_blocks.hi}] vs ${sep.added_p99_blocks.mean} [${sep.added_p99_blocks.lo}, ${sep.added_p99_blocks.hi}] µs` : '';
  return {
    name: 'embedded (npm start) added p99 / separate-process added p99, 1 KiB JSON',
    value: r ?? null,
    want: `≤ ${MAX_EMBEDDED_P99_RATIO}`,
    met: r === undefined ? null : r <= MAX_EMBEDDED_P99_RATIO,
    detail: em === undefined || sep === undefined ? 'not measured in this run' : `embedded ${em.added_p99_us ?? '–'} µs, separate ${sep.added_p99_us ?? '–'} µs${blocks}`,
  };
}
