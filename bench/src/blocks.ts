/**
 * One latency scenario: probe each arm, then interleaved blocks (a direct control block,
 * `rounds` rounds of one block per proxy arm in rotating order, a second direct control block),
 * the floor (mean of the two control blocks) and one row per arm with its figures added over
 * that floor. After each block of a capturing Sightline arm, wait until ClickHouse holds a row
 * for every request sent (the completeness check, which also keeps one arm's ingestion from
 * running into the next arm's block).
 */
import type { ContentCounters, Measured, RunContext } from './context.js';
import { REQUEST_TIMEOUT_MS } from './context.js';
import { recordedGatewayTime, recordedStages } from './clickhouse.js';
import { blockGates, controlDrift, driftGate } from './gates.js';
import { percentilesOf } from './histogram.js';
import { log, message } from './log.js';
import { foreignCpuPct } from './procs.js';
import type { ArmRow, BlockRow, Comparison, DirectControl, ScenarioResult } from './report.js';
import { CAPTURING_ARMS, COMPARISONS, CONTROL_VARIANTS, PROXY_ARMS, isControlArm, teamOf } from './scenarios.js';
import type { ArmName, Scenario } from './scenarios.js';
import { CH_DATABASE } from './stack.js';
import type { Arm } from './stack.js';
import { added, containsZero, errorRate, meanPercentiles, pairedDifferences, rotate, tInterval } from './stats.js';
import type { Percentiles } from './stats.js';
import type { BlockResult, BlockSpec, DriverMode } from './types.js';
import { probe } from './warmup.js';

export function describeMode(m: DriverMode): string {
  switch (m.kind) {
    case 'sequential':
      return `sequential, ${m.requests} requests per block`;
    case 'concurrent':
      return `${m.concurrency} concurrent (closed loop), ${m.requests} requests per block`;
    case 'open':
      return `open loop ${m.rate} req/s for ${m.durationMs} ms`;
  }
}

function spec(ctx: RunContext, arm: Arm, s: Scenario, id: string): BlockSpec {
  return {
    id,
    request: ctx.template(arm, s.name, s),
    mode: s.mode,
    prewarm: s.prewarm,
    prewarmMs: ctx.plan.prewarmMs,
    maxDurationMs: ctx.plan.blockMaxMs,
    timeoutMs: REQUEST_TIMEOUT_MS,
    connections: s.connections,
  };
}

function logBlock(m: Measured, what: string): void {
  const p = percentilesOf([m.result.hist.total]);
  const ttft = m.result.hist.ttft === undefined ? '' : `, ttft p50 ${percentilesOf([m.result.hist.ttft]).p50} µs`;
  log(`${what}: p50 ${p.p50} µs, p99 ${p.p99} µs${ttft}, ${m.result.rps} req/s, ${m.result.sent} sent, ${m.result.errors} errors, mock saw ${m.mockRequests}/${m.result.attempted}`);
}

export async function scenario(ctx: RunContext, s: Scenario): Promise<ScenarioResult> {
  log(`scenario ${s.name}: ${s.title}`);
  await ctx.stack.mock.configure(s.mock);
  const result: ScenarioResult = { name: s.name, title: s.title, driver: describeMode(s.mode), mock: { ...s.mock }, arms: [] };
  const direct = ctx.arm('direct');
  const sentTo = new Map<ArmName, number>();
  const rows = new Map<ArmName, ArmRow>();

  // Which arms take part.
  const running: Arm[] = [];
  for (const name of PROXY_ARMS) {
    const arm = ctx.arm(name);
    const na = s.notApplicable[name];
    if (na !== undefined) {
      rows.set(name, { arm: name, status: 'n/a', note: na });
      continue;
    }
    if (arm.target === undefined) {
      rows.set(name, { arm: name, status: 'not available', note: arm.reason });
      continue;
    }
    const p = await probe(ctx, arm, s);
    sentTo.set(name, p.attempted);
    if (!p.supported) {
      log(`${s.name} ${name}: unsupported (${p.note.slice(0, 160)})`);
      rows.set(name, { arm: name, status: 'unsupported', note: p.note });
      continue;
    }
    if (p.note !== '') rows.set(name, { arm: name, status: 'ok', note: p.note });
    running.push(arm);
  }

  // The capturing gateways' content-thread counters before the blocks; their deltas go in the
  // row of the first arm each gateway serves (the control arms share one gateway).
  const countersBefore = new Map<ArmName, { counters: ContentCounters; arms: ArmName[] }>();
  const byOrigin = new Map<string, ArmName[]>();
  for (const arm of running) {
    if (!CAPTURING_ARMS.includes(arm.name) || arm.target === undefined) continue;
    const shared = byOrigin.get(arm.target.origin);
    if (shared !== undefined) {
      shared.push(arm.name);
      continue;
    }
    const arms = [arm.name];
    byOrigin.set(arm.target.origin, arms);
    const c = await ctx.contentCounters(arm);
    if (c !== undefined) countersBefore.set(arm.name, { counters: c, arms });
  }

  // Blocks: direct, rounds × rotated arms, direct.
  const cpuStart = ctx.cpu();
  const blocks = new Map<ArmName, Measured[]>();
  const before = await ctx.measure(direct, spec(ctx, direct, s, `${s.name}/direct/before`));
  logBlock(before, `${s.name} direct before`);
  // The direct arm runs in every round too (issue 15 item 3): each arm's block p99 is then
  // paired with the direct block of the same round, and the per-round differences give the
  // added figures' 95 % intervals (stats.ts tInterval).
  for (let round = 0; round < ctx.plan.rounds; round++) {
    for (const arm of rotate([direct, ...running], round)) {
      const m = await ctx.measure(arm, spec(ctx, arm, s, `${s.name}/${arm.name}/r${round + 1}`));
      logBlock(m, `${s.name} ${arm.name} r${round + 1}`);
      const list = blocks.get(arm.name) ?? [];
      list.push(m);
      blocks.set(arm.name, list);
      sentTo.set(arm.name, (sentTo.get(arm.name) ?? 0) + m.result.attempted);
      if (CAPTURING_ARMS.includes(arm.name) && arm.instance !== undefined) {
        const expected = sentTo.get(arm.name) ?? 0;
        const n = await ctx.waitCaptured(arm, teamOf(s.name, arm.name), expected);
        if (n !== expected) log(`${s.name} ${arm.name}: ${n} of ${expected} captured after the deadline`);
      }
    }
  }
  const after = await ctx.measure(direct, spec(ctx, direct, s, `${s.name}/direct/after`));
  logBlock(after, `${s.name} direct after`);
  result.foreign_cpu_pct = foreignCpuPct(cpuStart, ctx.cpu());
  log(`${s.name}: other tenants of the machine used ${result.foreign_cpu_pct} % of its CPU during the blocks`);

  // The floor: mean of the two control blocks, per percentile.
  const pb = percentilesOf([before.result.hist.total]);
  const pa = percentilesOf([after.result.hist.total]);
  const floor = meanPercentiles(pb, pa);
  const ttftOf = (m: Measured): Percentiles | undefined => (m.result.hist.ttft === undefined ? undefined : percentilesOf([m.result.hist.ttft]));
  const gapOf = (m: Measured): Percentiles | undefined => (m.result.hist.gap === undefined ? undefined : percentilesOf([m.result.hist.gap]));
  const tb = ttftOf(before);
  const ta = ttftOf(after);
  const ttftFloor = tb !== undefined && ta !== undefined ? meanPercentiles(tb, ta) : undefined;
  const gb = gapOf(before);
  const ga = gapOf(after);
  const gapFloor = gb !== undefined && ga !== undefined ? meanPercentiles(gb, ga) : undefined;
  const control: DirectControl = {
    before: { p50_us: pb.p50, p99_us: pb.p99 },
    after: { p50_us: pa.p50, p99_us: pa.p99 },
    p50_drift: controlDrift(pb.p50, pa.p50),
  };
  if (tb !== undefined && ta !== undefined) {
    control.before.ttft_p50_us = tb.p50;
    control.after.ttft_p50_us = ta.p50;
  }
  result.control = control;
  ctx.record(driftGate(s.name, pb.p50, pa.p50));

  const directRounds = blocks.get('direct') ?? [];
  // Its blocks, counts and rate cover every direct block (control blocks and rounds); its
  // percentiles are the floor (below).
  const directRow = armRow('direct', [before, ...directRounds, after], undefined, undefined, undefined);
  addIntervals(directRow, directRounds, undefined);
  // The direct row shows the floor itself (the mean), not the merged blocks.
  Object.assign(directRow, { p50_us: floor.p50, p90_us: floor.p90, p99_us: floor.p99, p999_us: floor.p999 });
  if (ttftFloor !== undefined) Object.assign(directRow, { ttft_p50_us: ttftFloor.p50, ttft_p99_us: ttftFloor.p99 });
  if (gapFloor !== undefined) Object.assign(directRow, { gap_p50_us: gapFloor.p50, gap_p99_us: gapFloor.p99 });
  result.arms.push(directRow);
  ctx.record(...blockGates(s.name, 'direct', [before, ...directRounds, after]));

  for (const name of PROXY_ARMS) {
    const measured = blocks.get(name);
    const preset = rows.get(name);
    if (measured === undefined) {
      result.arms.push(preset ?? { arm: name, status: 'not available', note: 'no blocks ran' });
      continue;
    }
    const row = armRow(name, measured, floor, ttftFloor, gapFloor);
    addIntervals(row, measured, directRounds);
    if (preset?.note !== undefined) row.note = preset.note;
    row.sent = sentTo.get(name) ?? 0;
    ctx.record(...blockGates(s.name, name, measured, isControlArm(name) && CONTROL_VARIANTS[name].cache === 'hit' ? 'none' : 'all'));
    const capturing = ctx.arm(name);
    if (CAPTURING_ARMS.includes(name) && capturing.instance !== undefined) {
      const instance = capturing.instance;
      const team = teamOf(s.name, name);
      ctx.note(name, team, row.sent);
      const captured = await ctx.waitCaptured(capturing, team, row.sent);
      row.captured = captured;
      let detail = `${captured} rows in ${CH_DATABASE}.requests FINAL${capturing.count === undefined ? '' : ' (its own chdb, through POST /v1/sql)'} for ${row.sent} requests of team ${team} sent through the gateway`;
      if (captured !== row.sent) {
        const metrics = await ctx.captureMetrics(capturing);
        detail += ` (gateway capture counters, cumulative: ${metrics})`;
        row.note = `capture incomplete: ${metrics}`;
      }
      ctx.gate('capture completeness', `${s.name}/${name}`, captured === row.sent, detail);
      const before = countersBefore.get(name);
      const c1 = before === undefined ? undefined : await ctx.contentCounters(capturing);
      if (before !== undefined && c1 !== undefined) {
        const c0 = before.counters;
        row.content_thread = { recorded: c1.recorded - c0.recorded, made_here: c1.madeHere - c0.madeHere, late_batches: c1.late - c0.late, arms: before.arms };
      }
      const ch = ctx.stack.ch;
      if (ch !== undefined && capturing.count === undefined) {
        try {
          const g = await recordedGatewayTime(ch.url, CH_DATABASE, instance, team);
          if (g !== undefined) {
            row.recorded_gateway_p50_us = g.p50;
            row.recorded_gateway_p99_us = g.p99;
          }
          row.recorded_stage_p50_us = await recordedStages(ch.url, CH_DATABASE, instance, team);
          const authStage = row.recorded_stage_p50_us.auth;
          if (authStage !== undefined) row.auth_stage_p50_us = authStage;
        } catch (e) {
          log(`recorded gateway time: ${message(e)}`);
        }
      }
    }
    result.arms.push(row);
  }
  result.comparisons = comparisons(blocks);
  return result;
}

/** A block's p50 and p99 of total time, and TTFT p50 for streams, µs. */
export function blockFigures(m: Measured): { p50: number; p99: number; ttftP50: number | undefined } {
  const p = percentilesOf([m.result.hist.total]);
  const t = m.result.hist.ttft === undefined ? undefined : percentilesOf([m.result.hist.ttft]);
  return { p50: p.p50, p99: p.p99, ttftP50: t === undefined || t.count === 0 ? undefined : t.p50 };
}

/**
 * The per-block figures and their 95 % intervals (issue 15 item 3): the mean block p99 with its
 * t-interval, and, against the direct block of the same round, the added p50 / p99 (and TTFT
 * p50 for streams) as the mean of the per-round differences with their t-interval.
 */
function addIntervals(row: ArmRow, measured: readonly Measured[], directRounds: readonly Measured[] | undefined): void {
  if (row.status !== 'ok' || measured.length === 0) return;
  const own = measured.map(blockFigures);
  const p99 = tInterval(own.map((f) => f.p99));
  if (p99 !== undefined) row.p99_blocks = p99;
  const ttfts = own.map((f) => f.ttftP50);
  if (ttfts.every((v) => v !== undefined)) {
    const t = tInterval(ttfts as number[]);
    if (t !== undefined) row.ttft_p50_blocks = t;
  }
  if (directRounds === undefined || directRounds.length === 0) return;
  const d = directRounds.map(blockFigures);
  const set = (key: 'added_p50_blocks' | 'added_p99_blocks' | 'added_ttft_p50_blocks', a: (number | undefined)[], b: (number | undefined)[]): void => {
    const i = tInterval(pairedDifferences(a, b));
    if (i !== undefined) row[key] = i;
  };
  set('added_p50_blocks', own.map((f) => f.p50), d.map((f) => f.p50));
  set('added_p99_blocks', own.map((f) => f.p99), d.map((f) => f.p99));
  if (row.p99_blocks !== undefined && ttfts.some((v) => v !== undefined)) set('added_ttft_p50_blocks', ttfts, d.map((f) => f.ttftP50));
}

/**
 * Arm against arm in the same rounds (scenarios.ts COMPARISONS): the per-round differences of
 * their block figures with a 95 % interval, and whether the interval excludes 0.
 */
function comparisons(blocks: ReadonlyMap<ArmName, Measured[]>): Comparison[] {
  const out: Comparison[] = [];
  for (const [a, b] of COMPARISONS) {
    const ma = blocks.get(a);
    const mb = blocks.get(b);
    if (ma === undefined || mb === undefined) continue;
    const fa = ma.map(blockFigures);
    const fb = mb.map(blockFigures);
    const metrics: [Comparison['metric'], (number | undefined)[], (number | undefined)[]][] = [
      ['p50', fa.map((f) => f.p50), fb.map((f) => f.p50)],
      ['p99', fa.map((f) => f.p99), fb.map((f) => f.p99)],
      ['ttft_p50', fa.map((f) => f.ttftP50), fb.map((f) => f.ttftP50)],
    ];
    for (const [metric, x, y] of metrics) {
      const i = tInterval(pairedDifferences(x, y));
      if (i === undefined) continue;
      out.push({ a, b, metric, difference_us: i, distinguishable: !containsZero(i) });
    }
  }
  return out;
}

/** Aggregates an arm's blocks into its row; `floor` undefined for the direct arm itself. */
function armRow(name: ArmName, measured: Measured[], floor: Percentiles | undefined, ttftFloor: Percentiles | undefined, gapFloor: Percentiles | undefined): ArmRow {
  const results = measured.map((m) => m.result);
  const total = percentilesOf(results.map((r) => r.hist.total));
  const ttfb = percentilesOf(results.map((r) => r.hist.ttfb));
  const sum = (f: (r: BlockResult) => number): number => results.reduce((acc, r) => acc + f(r), 0);
  const okCount = sum((r) => r.ok);
  const elapsed = sum((r) => r.elapsedMs);
  const errors = sum((r) => r.errors);
  const prewarmErrors = sum((r) => r.prewarmErrors);
  const measuredCount = sum((r) => r.sent);
  const kinds: Record<string, number> = {};
  for (const r of results) for (const [k, v] of Object.entries(r.errorKinds)) kinds[k] = (kinds[k] ?? 0) + v;
  const statuses: Record<string, number> = {};
  for (const r of results) for (const [k, v] of Object.entries(r.statusCounts)) statuses[k] = (statuses[k] ?? 0) + v;
  const samples = results.flatMap((r) => r.errorSamples).slice(0, 5);
  const rss = measured.map((m) => m.rss).filter((v): v is number => v !== undefined);
  const row: ArmRow = {
    arm: name,
    status: 'ok',
    sent: sum((r) => r.attempted),
    measured: measuredCount,
    ok: okCount,
    errors: errors + prewarmErrors,
    error_rate: Math.round(errorRate(errors + prewarmErrors, sum((r) => r.attempted)) * 1e6) / 1e6,
    p50_us: total.p50,
    p90_us: total.p90,
    p99_us: total.p99,
    p999_us: total.p999,
    max_us: total.max,
    ttfb_p50_us: ttfb.p50,
    ttfb_p99_us: ttfb.p99,
    status_counts: statuses,
    rps: elapsed > 0 ? Math.round((okCount / elapsed) * 1000) : 0,
    blocks: measured.map(
      (m): BlockRow => {
        const f = blockFigures(m);
        const b: BlockRow = { id: m.result.id, p50_us: f.p50, p99_us: f.p99, rps: m.result.rps, errors: m.result.errors + m.result.prewarmErrors, attempted: m.result.attempted, mock_requests: m.mockRequests, truncated: m.result.truncated };
        if (f.ttftP50 !== undefined) b.ttft_p50_us = f.ttftP50;
        return b;
      },
    ),
  };
  if (total.count === 0) {
    // Nothing succeeded: there is no latency to report, only errors.
    for (const k of ['p50_us', 'p90_us', 'p99_us', 'p999_us', 'max_us', 'ttfb_p50_us', 'ttfb_p99_us'] as const) delete row[k];
    floor = undefined;
    ttftFloor = undefined;
    gapFloor = undefined;
  }
  if (rss.length > 0) row.rss_mb = Math.max(...rss);
  if (Object.keys(kinds).length > 0) row.error_kinds = kinds;
  if (samples.length > 0) row.error_samples = samples;
  if (floor !== undefined) {
    row.added_p50_us = added(total.p50, floor.p50);
    row.added_p99_us = added(total.p99, floor.p99);
  }
  const ttftHists = results.map((r) => r.hist.ttft).filter((h): h is string => h !== undefined);
  if (ttftHists.length > 0 && total.count > 0) {
    const t = percentilesOf(ttftHists);
    row.ttft_p50_us = t.p50;
    row.ttft_p99_us = t.p99;
    if (ttftFloor !== undefined) {
      row.added_ttft_p50_us = added(t.p50, ttftFloor.p50);
      row.added_ttft_p99_us = added(t.p99, ttftFloor.p99);
    }
  }
  const gapHists = results.map((r) => r.hist.gap).filter((h): h is string => h !== undefined);
  if (gapHists.length > 0 && total.count > 0) {
    const g = percentilesOf(gapHists);
    row.gap_p50_us = g.p50;
    row.gap_p99_us = g.p99;
    if (gapFloor !== undefined) row.added_gap_p99_us = added(g.p99, gapFloor.p99);
  }
  return row;
}
