/**
 * One benchmark run (docs/benchmarks.md describes the method):
 *
 * 1. start every process (stack.ts) and the driver process (driver-client.ts);
 * 2. warm every arm up (≥ 2,000 requests each, even in quick mode);
 * 3. per scenario: probe each arm (unsupported routes are recorded, not run), a direct control
 *    block, `rounds` rounds of one block per proxy arm in rotating order, a second direct
 *    control block; after each Sightline block, wait until ClickHouse holds a row for every
 *    request sent (the completeness check, which also keeps one arm's ingestion from running
 *    into the next arm's block);
 * 4. the open-loop ladder against a 1,500 ms mock;
 * 5. gates, ratios, targets; results to bench/results/.
 */
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { cpus, release, totalmem } from 'node:os';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { DriverClient } from './driver-client.js';
import { OPEN_LOOP_MAX_IN_FLIGHT } from './driver.js';
import { percentilesOf } from './histogram.js';
import { PIN_LAYOUTS, affinityOf, findBinary, foreignCpuPct, pinPid, procTicks, sampleCpu, sleep, ticksPerSecond } from './procs.js';
import type { CpuSample } from './procs.js';
import type { Pinning } from './procs.js';
import { chVersion, countCaptured, recordedGatewayTime, recordedStages } from './clickhouse.js';
import { nginxVersion } from './peers/nginx.js';
import { portkeyVersion } from './peers/portkey.js';
import { renderMarkdown } from './report.js';
import type { ArmRow, BlockRow, Check, DirectControl, Gate, LadderArm, LadderStep, Rig, RunResults, ScenarioResult } from './report.js';
import { ARMS, PROXY_ARMS, buildPlan, teamOf, template } from './scenarios.js';
import type { ArmName, MockKnobs, Plan, Scenario } from './scenarios.js';
import { BENCH, CH_DATABASE, sumRss, startStack } from './stack.js';
import type { Arm, Stack } from './stack.js';
import { added, captureCost, drift, errorRate, meanPercentiles, portkeyRatio, rotate } from './stats.js';
import type { Percentiles } from './stats.js';
import type { BlockResult, BlockSpec, DriverMode, RequestTemplate } from './types.js';

export interface RunOptions {
  quick: boolean;
  /** Running inside the loopback-only namespace. */
  netns: boolean;
  /** CPU layout (procs.ts PIN_LAYOUTS), or none. */
  pin: 'apart' | 'split' | 'none';
  only: string[] | null;
  /** Proxy arms to start and run (direct always runs); null: all. */
  arms: string[] | null;
  /** Ladder rates overriding the plan's. */
  rates: number[] | null;
  /** Upstream connections of the node-proxy arm (peers/node-proxy.ts). */
  nodeProxyClient: 'free-list' | 'pool';
  gatewayWorkers: number;
}

/** Error-rate gate: more than 0.1 % failed requests invalidates an arm's figures (issue 5). */
const MAX_ERROR_RATE = 0.001;
/**
 * Drift gate: the two direct control blocks of a scenario may differ by at most 25 % at p50.
 * The floor subtracted from every arm is their mean, so a drift d shifts any added figure by
 * up to d/2 of the floor; at the 1 KiB floor (~100 µs here) 25 % bounds that error to ~12 µs,
 * well under the 250 µs target being checked. More drift means the machine changed speed
 * during the scenario (a noisy neighbour) and the scenario must be re-run.
 */
const MAX_P50_DRIFT = 0.25;
/** Overall bound on one run (the watchdog): quick mode must finish in 5 minutes normally. */
const RUN_BOUND_MS = { quick: 15 * 60_000, full: 90 * 60_000 };
/**
 * A completeness wait stops early when the row count has not changed for this long: the
 * gateway flushes every 50 ms and the ingester writes within ~1 s, so 8 s without a new row
 * means capture is stuck, not slow.
 */
const STALL_MS = 8_000;
/** Once capture was seen stuck in this run, later waits stop after this long without progress. */
const STALL_AGAIN_MS = 2_000;
/** Ladder steps start once the proxies together use less than this (% of one core)... */
const SETTLE_CPU_PCT = 10;
/** ...or after this long. */
const SETTLE_MAX_MS = 60_000;
/** Per-request timeout for latency blocks. */
const REQUEST_TIMEOUT_MS = 30_000;

const t0 = Date.now();
function log(msg: string): void {
  process.stderr.write(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(6)} s] ${msg}\n`);
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function describeMode(m: DriverMode): string {
  switch (m.kind) {
    case 'sequential':
      return `sequential, ${m.requests} requests per block`;
    case 'concurrent':
      return `${m.concurrency} concurrent (closed loop), ${m.requests} requests per block`;
    case 'open':
      return `open loop ${m.rate} req/s for ${m.durationMs} ms`;
  }
}

/** A block's outcome as the orchestrator keeps it. */
interface Measured {
  result: BlockResult;
  mockRequests: number;
  rss: number | undefined;
}

class Runner {
  readonly gates: Gate[] = [];
  /** Set when a completeness wait gave up on a stalled count: later waits give up sooner. */
  captureStuck = false;
  /** Per Sightline-instance team: requests sent through the gateway (for the final recount). */
  readonly sentByTeam = new Map<string, number>();

  constructor(
    readonly plan: Plan,
    readonly stack: Stack,
    readonly driver: DriverClient,
  ) {}

  /** CPU sample over every process of the run (orchestrator and driver included). */
  cpu(): CpuSample {
    return sampleCpu([process.pid, this.driver.pid ?? -1, ...this.stack.roles().map((r) => r.pid)]);
  }

  /** The gateway's capture counters (its /metrics), when a completeness check fails. */
  async captureMetrics(arm: Arm): Promise<string> {
    if (arm.target === undefined) return '';
    try {
      const text = await (await fetch(`${arm.target.origin}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
      return text
        .split('\n')
        .filter((l) => l.startsWith('sightline_capture_'))
        .map((l) => l.replace('sightline_capture_', ''))
        .join(', ');
    } catch (e) {
      return `metrics unavailable: ${message(e)}`;
    }
  }

  /**
   * Waits (up to SETTLE_MAX_MS) until the proxy arms together use under SETTLE_CPU_PCT of a
   * core over half a second, so that one arm's leftover work does not land in the next
   * arm's step. Logs how long it waited when it had to.
   */
  async settle(scope: string): Promise<void> {
    const pids = [...this.stack.arms.values()].filter((a) => a.name !== 'direct').flatMap((a) => a.pids());
    const start = Date.now();
    for (;;) {
      const t0 = pids.reduce((a, p) => a + procTicks(p), 0);
      await sleep(500);
      const pct = ((pids.reduce((a, p) => a + procTicks(p), 0) - t0) / (0.5 * ticksPerSecond())) * 100;
      if (pct < SETTLE_CPU_PCT) break;
      if (Date.now() - start > SETTLE_MAX_MS) {
        log(`${scope}: proxies still used ${pct.toFixed(0)} % of a core after ${SETTLE_MAX_MS / 1000} s; measuring anyway`);
        return;
      }
    }
    const waited = Date.now() - start;
    if (waited > 1_000) log(`${scope}: waited ${(waited / 1000).toFixed(1)} s for the proxies to go quiet`);
  }

  /** Logs the tail of an arm's output once per scope when its requests fail. */
  private readonly diagnosed = new Set<string>();
  diagnose(arm: Arm, scope: string, r: BlockResult): void {
    if (r.errors + r.prewarmErrors === 0 || this.diagnosed.has(scope)) return;
    this.diagnosed.add(scope);
    const tail = arm.output().split('\n').filter((l) => l.trim() !== '').slice(-15).join('\n    ');
    log(`${scope}: ${r.errors + r.prewarmErrors} failed requests (${Object.entries(r.errorKinds).map(([k, v]) => `${k} × ${v}`).join(', ')}); e.g. ${r.errorSamples[0] ?? ''}${tail === '' ? '' : `\n  ${arm.name} output:\n    ${tail}`}`);
  }

  arm(name: ArmName): Arm {
    const a = this.stack.arms.get(name);
    if (a === undefined) throw new Error(`arm ${name} was never set up`);
    return a;
  }

  gate(name: string, scope: string, passed: boolean, detail: string): void {
    this.gates.push({ name, scope, passed, detail });
    if (!passed) log(`GATE FAILED ${name} (${scope}): ${detail}`);
  }

  /** Runs one block against `arm` with fresh mock counters, then reads them and the arm's RSS. */
  async measure(arm: Arm, spec: BlockSpec): Promise<Measured> {
    await this.stack.mock.reset();
    const result = await this.driver.run(spec);
    // Every answer is in, so the mock has seen every request that reached it.
    const stats = await this.stack.mock.stats();
    this.diagnose(arm, spec.id.split('/').slice(0, 2).join('/'), result);
    return { result, mockRequests: stats.requests, rss: sumRss(arm.pids()) };
  }

  /**
   * Waits until ClickHouse holds `expected` rows for the Sightline instance and `team`; gives up
   * at the plan's deadline, or earlier when the count has not moved for STALL_MS (capture is
   * then stuck, and waiting longer would only stretch the run). Returns the last count seen.
   */
  async waitCaptured(instance: string, team: string, expected: number, deadlineMs = this.plan.captureDeadlineMs): Promise<number> {
    const ch = this.stack.ch;
    if (ch === undefined) return 0;
    const deadline = Date.now() + deadlineMs;
    let n = -1;
    let changed = Date.now();
    for (;;) {
      let next = n;
      try {
        next = await countCaptured(ch.url, CH_DATABASE, instance, team);
      } catch (e) {
        log(`clickhouse count failed: ${message(e)}`);
      }
      if (next !== n) {
        n = next;
        changed = Date.now();
      }
      // More than expected would mean a request counted twice: stop waiting, the gate reports it.
      if (n >= expected || Date.now() > deadline) return n;
      if (Date.now() - changed > (this.captureStuck ? STALL_AGAIN_MS : STALL_MS)) {
        this.captureStuck = true;
        return n;
      }
      await sleep(200);
    }
  }

  template(arm: Arm, scenarioName: string, s: Pick<Scenario, 'request' | 'directRequest' | 'portkeyProvider'>): RequestTemplate {
    const target = arm.target;
    if (target === undefined) throw new Error(`arm ${arm.name} has no target`);
    return template(arm.name, target, scenarioName, s.request, s.directRequest, s.portkeyProvider);
  }

  note(team: string, n: number): void {
    this.sentByTeam.set(team, (this.sentByTeam.get(team) ?? 0) + n);
  }

  // -------------------------------------------------------------------------------------------
  // Warm-up

  async warmup(): Promise<Record<string, string | number>> {
    const { warmup } = this.plan;
    const out: Record<string, string | number> = {};
    const jsonScenario = this.plan.scenarios[0];
    const sseScenario = this.plan.scenarios.find((s) => s.name === 'sse-openai');
    if (jsonScenario === undefined || sseScenario === undefined) throw new Error('plan is missing its 1 KiB JSON or OpenAI SSE scenario');
    const available = ARMS.map((n) => this.arm(n)).filter((a) => a.target !== undefined);
    const phases: { knobs: MockKnobs; scenario: Scenario; mode: DriverMode; connections: number }[] = [
      { knobs: jsonScenario.mock, scenario: jsonScenario, mode: { kind: 'sequential', requests: warmup.sequential }, connections: 1 },
      { knobs: jsonScenario.mock, scenario: jsonScenario, mode: { kind: 'concurrent', concurrency: 16, requests: warmup.concurrent }, connections: 16 },
      { knobs: sseScenario.mock, scenario: sseScenario, mode: { kind: 'concurrent', concurrency: 16, requests: warmup.stream }, connections: 16 },
    ];
    const totals = new Map<ArmName, { sent: number; errors: number }>();
    for (const phase of phases) {
      await this.stack.mock.configure(phase.knobs);
      for (const arm of available) {
        const started = Date.now();
        const r = await this.driver.run({
          id: `warmup/${arm.name}/${phase.mode.kind}`,
          request: this.template(arm, 'warmup', phase.scenario),
          mode: phase.mode,
          prewarm: 0,
          prewarmMs: 0,
          maxDurationMs: this.plan.blockMaxMs,
          timeoutMs: REQUEST_TIMEOUT_MS,
          connections: phase.connections,
        });
        const t = totals.get(arm.name) ?? { sent: 0, errors: 0 };
        t.sent += r.attempted;
        t.errors += r.errors + r.prewarmErrors;
        totals.set(arm.name, t);
        if (arm.name === 'sightline') this.note(teamOf('warmup'), r.attempted);
        this.diagnose(arm, `warm-up/${arm.name}`, r);
        log(`warm-up ${arm.name} ${phase.mode.kind}${phase.scenario.request.stream === undefined ? '' : ' stream'}: ${r.attempted} requests in ${((Date.now() - started) / 1000).toFixed(1)} s, ${r.errors} errors`);
      }
    }
    for (const [name, t] of totals) out[name] = `${t.sent} requests, ${t.errors} errors`;
    const s = this.arm('sightline');
    if (s.instance !== undefined && s.target !== undefined) {
      // Let the warm-up's capture drain so it does not run into the first measured block.
      const expected = this.sentByTeam.get(teamOf('warmup')) ?? 0;
      await this.waitCaptured(s.instance, teamOf('warmup'), expected);
    }
    log(`warm-up done: ${[...totals].map(([n, t]) => `${n} ${t.sent}`).join(', ')}`);
    return out;
  }

  // -------------------------------------------------------------------------------------------
  // Latency scenarios

  /**
   * Probe: three sequential requests before an arm's blocks. The arm is recorded as
   * `unsupported` (with the answer it gave) instead of being measured when
   * - every request was refused with a client-error status that means "no such route or
   *   feature" (400, 404, 405, 415, 422, 501): e.g. a route a colleague has not shipped yet; or
   * - the arm is the third-party Portkey gateway and every request failed, whatever the error:
   *   a peer's missing feature is reported in its row, it does not invalidate our run.
   * Otherwise the arm is measured and its failures count against the error-rate gate.
   */
  async probe(arm: Arm, s: Scenario): Promise<{ supported: boolean; note: string; attempted: number }> {
    const r = await this.driver.run({
      id: `${s.name}/${arm.name}/probe`,
      request: this.template(arm, s.name, s),
      mode: { kind: 'sequential', requests: 3 },
      prewarm: 0,
          prewarmMs: 0,
      maxDurationMs: 30_000,
      timeoutMs: 10_000,
      connections: s.connections,
    });
    if (r.ok === r.sent) return { supported: true, note: '', attempted: r.attempted };
    const refused = Object.keys(r.errorKinds).every((k) => /^status (400|404|405|415|422|501)$/.test(k));
    const sample = r.errorSamples[0] ?? Object.keys(r.errorKinds).join(', ');
    if (r.ok === 0 && (refused || arm.name === 'portkey')) {
      const why = arm.name === 'portkey' && !refused ? `every probe request failed: ${sample}${portkeyDiagnosis(arm.output())}` : sample;
      return { supported: false, note: why, attempted: r.attempted };
    }
    // Not a clean refusal: run the arm anyway so its errors are counted (and gated).
    return { supported: true, note: `probe: ${sample}`, attempted: r.attempted };
  }

  spec(arm: Arm, s: Scenario, id: string): BlockSpec {
    return {
      id,
      request: this.template(arm, s.name, s),
      mode: s.mode,
      prewarm: s.prewarm,
      prewarmMs: this.plan.prewarmMs,
      maxDurationMs: this.plan.blockMaxMs,
      timeoutMs: REQUEST_TIMEOUT_MS,
      connections: s.connections,
    };
  }

  logBlock(m: Measured, what: string): void {
    const p = percentilesOf([m.result.hist.total]);
    const ttft = m.result.hist.ttft === undefined ? '' : `, ttft p50 ${percentilesOf([m.result.hist.ttft]).p50} µs`;
    log(`${what}: p50 ${p.p50} µs, p99 ${p.p99} µs${ttft}, ${m.result.rps} req/s, ${m.result.sent} sent, ${m.result.errors} errors, mock saw ${m.mockRequests}/${m.result.attempted}`);
  }

  async scenario(s: Scenario): Promise<ScenarioResult> {
    log(`scenario ${s.name}: ${s.title}`);
    await this.stack.mock.configure(s.mock);
    const result: ScenarioResult = { name: s.name, title: s.title, driver: describeMode(s.mode), mock: { ...s.mock }, arms: [] };
    const direct = this.arm('direct');
    const sentTo = new Map<ArmName, number>();
    const rows = new Map<ArmName, ArmRow>();

    // Which arms take part.
    const running: Arm[] = [];
    for (const name of PROXY_ARMS) {
      const arm = this.arm(name);
      const na = s.notApplicable[name];
      if (na !== undefined) {
        rows.set(name, { arm: name, status: 'n/a', note: na });
        continue;
      }
      if (arm.target === undefined) {
        rows.set(name, { arm: name, status: 'not available', note: arm.reason });
        continue;
      }
      const p = await this.probe(arm, s);
      sentTo.set(name, p.attempted);
      if (!p.supported) {
        log(`${s.name} ${name}: unsupported (${p.note.slice(0, 160)})`);
        rows.set(name, { arm: name, status: 'unsupported', note: p.note });
        continue;
      }
      if (p.note !== '') rows.set(name, { arm: name, status: 'ok', note: p.note });
      running.push(arm);
    }

    // Blocks: direct, rounds × rotated arms, direct.
    const cpuStart = this.cpu();
    const blocks = new Map<ArmName, Measured[]>();
    const sightline = this.arm('sightline');
    const team = teamOf(s.name);
    const before = await this.measure(direct, this.spec(direct, s, `${s.name}/direct/before`));
    this.logBlock(before, `${s.name} direct before`);
    for (let round = 0; round < this.plan.rounds; round++) {
      for (const arm of rotate(running, round)) {
        const m = await this.measure(arm, this.spec(arm, s, `${s.name}/${arm.name}/r${round + 1}`));
        this.logBlock(m, `${s.name} ${arm.name} r${round + 1}`);
        const list = blocks.get(arm.name) ?? [];
        list.push(m);
        blocks.set(arm.name, list);
        sentTo.set(arm.name, (sentTo.get(arm.name) ?? 0) + m.result.attempted);
        if (arm.name === 'sightline' && sightline.instance !== undefined) {
          const expected = sentTo.get('sightline') ?? 0;
          const n = await this.waitCaptured(sightline.instance, team, expected);
          if (n !== expected) log(`${s.name} sightline: ${n} of ${expected} captured after the deadline`);
        }
      }
    }
    const after = await this.measure(direct, this.spec(direct, s, `${s.name}/direct/after`));
    this.logBlock(after, `${s.name} direct after`);
    result.foreign_cpu_pct = foreignCpuPct(cpuStart, this.cpu());
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
      p50_drift: Math.round(drift(pb.p50, pa.p50) * 1000) / 1000,
    };
    if (tb !== undefined && ta !== undefined) {
      control.before.ttft_p50_us = tb.p50;
      control.after.ttft_p50_us = ta.p50;
    }
    result.control = control;
    this.gate('direct p50 drift', s.name, control.p50_drift <= MAX_P50_DRIFT, `before ${pb.p50} µs, after ${pa.p50} µs: ${(control.p50_drift * 100).toFixed(1)} % (max ${MAX_P50_DRIFT * 100} %)`);

    const directRow = this.row('direct', [before, after], undefined, undefined, undefined);
    // The direct row shows the floor itself (the mean), not the merged blocks.
    Object.assign(directRow, { p50_us: floor.p50, p90_us: floor.p90, p99_us: floor.p99, p999_us: floor.p999 });
    if (ttftFloor !== undefined) Object.assign(directRow, { ttft_p50_us: ttftFloor.p50, ttft_p99_us: ttftFloor.p99 });
    if (gapFloor !== undefined) Object.assign(directRow, { gap_p50_us: gapFloor.p50, gap_p99_us: gapFloor.p99 });
    result.arms.push(directRow);
    this.checkBlocks(s.name, 'direct', [before, after]);

    for (const name of PROXY_ARMS) {
      const measured = blocks.get(name);
      const preset = rows.get(name);
      if (measured === undefined) {
        result.arms.push(preset ?? { arm: name, status: 'not available', note: 'no blocks ran' });
        continue;
      }
      const row = this.row(name, measured, floor, ttftFloor, gapFloor);
      if (preset?.note !== undefined) row.note = preset.note;
      row.sent = sentTo.get(name) ?? 0;
      this.checkBlocks(s.name, name, measured);
      if (name === 'sightline' && sightline.instance !== undefined) {
        this.note(team, row.sent);
        const captured = await this.waitCaptured(sightline.instance, team, row.sent);
        row.captured = captured;
        let detail = `${captured} rows in ${CH_DATABASE}.requests FINAL for ${row.sent} requests sent through the gateway`;
        if (captured !== row.sent) {
          const metrics = await this.captureMetrics(sightline);
          detail += ` (gateway capture counters, cumulative: ${metrics})`;
          row.note = `capture incomplete: ${metrics}`;
        }
        this.gate('capture completeness', `${s.name}/sightline`, captured === row.sent, detail);
        const ch = this.stack.ch;
        if (ch !== undefined) {
          try {
            const g = await recordedGatewayTime(ch.url, CH_DATABASE, sightline.instance, team);
            if (g !== undefined) {
              row.recorded_gateway_p50_us = g.p50;
              row.recorded_gateway_p99_us = g.p99;
            }
            row.recorded_stage_p50_us = await recordedStages(ch.url, CH_DATABASE, sightline.instance, team);
          } catch (e) {
            log(`recorded gateway time: ${message(e)}`);
          }
        }
      }
      result.arms.push(row);
    }
    return result;
  }

  /** Aggregates an arm's blocks into its row; `floor` undefined for the direct arm itself. */
  row(name: ArmName, measured: Measured[], floor: Percentiles | undefined, ttftFloor: Percentiles | undefined, gapFloor: Percentiles | undefined): ArmRow {
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
          const p = percentilesOf([m.result.hist.total]);
          return { id: m.result.id, p50_us: p.p50, p99_us: p.p99, rps: m.result.rps, errors: m.result.errors + m.result.prewarmErrors, attempted: m.result.attempted, mock_requests: m.mockRequests, truncated: m.result.truncated };
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

  /** Error-rate and mock-count gates over an arm's blocks in one scenario. */
  checkBlocks(scenario: string, arm: ArmName, measured: Measured[]): void {
    const attempted = measured.reduce((a, m) => a + m.result.attempted, 0);
    const errors = measured.reduce((a, m) => a + m.result.errors + m.result.prewarmErrors, 0);
    const rate = errorRate(errors, attempted);
    this.gate('error rate', `${scenario}/${arm}`, rate <= MAX_ERROR_RATE, `${errors} of ${attempted} requests failed (${(rate * 100).toFixed(3)} %, max ${MAX_ERROR_RATE * 100} %)`);
    const off = measured.filter((m) => m.mockRequests !== m.result.attempted);
    this.gate(
      'mock request count',
      `${scenario}/${arm}`,
      off.length === 0,
      off.length === 0 ? `mock counted every request of ${measured.length} blocks (${attempted})` : off.map((m) => `${m.result.id}: driver sent ${m.result.attempted}, mock saw ${m.mockRequests}`).join('; '),
    );
    const truncated = measured.filter((m) => m.result.truncated);
    if (truncated.length > 0) this.gate('block finished in time', `${scenario}/${arm}`, false, `${truncated.map((m) => m.result.id).join(', ')} hit the block time bound`);
  }

  // -------------------------------------------------------------------------------------------
  // Open-loop ladder

  async ladder(): Promise<NonNullable<RunResults['ladder']>> {
    const { ladder } = this.plan;
    log(`ladder: ${ladder.rates.join(', ')} req/s, ${ladder.stepMs} ms each, mock latency ${ladder.mock.latencyMs} ms`);
    await this.stack.mock.configure(ladder.mock);
    const arms = new Map<ArmName, LadderArm>();
    for (const name of ARMS) {
      const arm = this.arm(name);
      arms.set(name, arm.target === undefined ? { arm: name, status: 'not available', note: arm.reason, steps: [], max_ok_rate: null } : { arm: name, status: 'ok', steps: [], max_ok_rate: null });
    }
    const given = { request: ladder.request, portkeyProvider: 'openai' as const };
    const sightline = this.arm('sightline');
    /** Arms that collapsed (more than half the requests failed) skip the higher rates. */
    const collapsed = new Set<ArmName>();
    const cpuStart = this.cpu();
    for (const [i, rate] of ladder.rates.entries()) {
      const name = `ladder-${rate}`;
      const proxies = rotate(PROXY_ARMS.filter((a) => this.arm(a).target !== undefined), i);
      let directP99: number | undefined;
      for (const armName of ['direct' as const, ...proxies]) {
        const row = arms.get(armName);
        if (row === undefined) continue;
        if (collapsed.has(armName)) {
          row.note = `skipped from ${rate} req/s: collapsed at a lower rate`;
          continue;
        }
        const arm = this.arm(armName);
        // Enough connections for every request in flight (rate × latency) plus slack.
        const connections = Math.min(OPEN_LOOP_MAX_IN_FLIGHT, Math.ceil((rate * ladder.mock.latencyMs * 1.2) / 1000) + 64);
        const spec: BlockSpec = {
          id: `${name}/${armName}`,
          request: this.template(arm, name, given),
          mode: { kind: 'open', rate, durationMs: ladder.stepMs },
          prewarm: 0,
          prewarmMs: 0,
          // Sending time, plus the mock's latency, plus 20 s for a backlog to drain.
          maxDurationMs: ladder.stepMs + ladder.mock.latencyMs + 20_000,
          timeoutMs: 20_000,
          connections,
        };
        // Open the step's connections first, as a load generator with keep-alive does (wrk
        // connects before it measures): with the mock answering at once, a closed-loop burst as
        // wide as the expected number of requests in flight leaves that many kept-alive
        // connections in the driver's pool (and behind the proxy). The step then measures
        // 5,000 req/s over warm connections, not a storm of 7,500 TCP handshakes.
        const width = Math.min(connections, Math.ceil((rate * ladder.mock.latencyMs) / 1000));
        // A fresh mock (stack.ts Mock.restart: descriptors), then give the proxies a moment to
        // see their idle connections to the old one close.
        // A proxy that fell behind in its own step can still be working through requests the
        // driver gave up on, on the core the next arm is measured on (Portkey, seen at 3,500
        // req/s): wait until every proxy is quiet first.
        await this.settle(`${name}/${armName}`);
        await this.stack.mock.restart({ ...ladder.mock, latencyMs: 0 });
        await sleep(500);
        const warm = await this.driver.run({ ...spec, id: `${name}/${armName}/connect`, mode: { kind: 'concurrent', concurrency: width, requests: width }, maxDurationMs: 60_000 });
        await this.stack.mock.configure(ladder.mock);
        if (armName === 'sightline') this.note(teamOf(name), warm.attempted);
        // CPU used during the step by the driver, the mock and the proxy under test: which of
        // them ran out of core first says whether the step measured the proxy or the rig.
        const who = { driver: [this.driver.pid ?? -1], mock: [this.stack.mock.proc.pid], proxy: armName === 'direct' ? [] : arm.pids() };
        const ticks = (pids: number[]): number => pids.reduce((a, p) => a + procTicks(p), 0);
        const before = { driver: ticks(who.driver), mock: ticks(who.mock), proxy: ticks(who.proxy), t: Date.now() };
        const m = await this.measure(arm, spec);
        const secs = ((Date.now() - before.t) / 1000) * ticksPerSecond();
        const pct = (now: number, then: number): number => Math.round(((now - then) / secs) * 100);
        const cpu = { driver: pct(ticks(who.driver), before.driver), mock: pct(ticks(who.mock), before.mock), proxy: pct(ticks(who.proxy), before.proxy) };
        // Thousands of sockets: close them before the next arm's step.
        await this.driver.release(spec.request.origin);
        const p = percentilesOf([m.result.hist.total]);
        if (armName === 'direct') directP99 = p.p99;
        const step: LadderStep = {
          rate,
          sent: m.result.sent,
          ok: m.result.ok,
          errors: m.result.errors,
          error_kinds: m.result.errorKinds,
          p50_us: p.p50,
          p99_us: p.p99,
          achieved_rps: m.result.rps,
          max_send_lag_us: m.result.maxSendLagUs,
          answered_all: m.result.errors === 0 && m.result.ok === m.result.sent,
          mock_requests: m.mockRequests,
          cpu_pct: armName === 'direct' ? { driver: cpu.driver, mock: cpu.mock } : cpu,
        };
        if (armName !== 'direct' && directP99 !== undefined) step.added_p99_us = added(p.p99, directP99);
        if (m.rss !== undefined) step.rss_mb = m.rss;
        let passed = step.answered_all;
        if (armName === 'sightline' && sightline.instance !== undefined) {
          this.note(teamOf(name), m.result.attempted);
          // The connection burst went through the gateway too, under the same team.
          const expected = m.result.attempted + warm.attempted;
          step.captured = await this.waitCaptured(sightline.instance, teamOf(name), expected);
          step.capture_expected = expected;
          passed = passed && step.captured === expected;
        }
        log(
          `${name} ${armName}: ${step.ok}/${step.sent} answered, p50 ${(p.p50 / 1000).toFixed(1)} ms, p99 ${(p.p99 / 1000).toFixed(1)} ms, send lag max ${(step.max_send_lag_us / 1000).toFixed(1)} ms, CPU % driver ${cpu.driver} mock ${cpu.mock}${armName === 'direct' ? '' : ` proxy ${cpu.proxy}`}${step.captured === undefined ? '' : `, captured ${step.captured}`}`,
        );
        row.steps.push(step);
        if (passed) row.max_ok_rate = Math.max(row.max_ok_rate ?? 0, rate);
        if (m.result.errors > m.result.sent / 2) collapsed.add(armName);
      }
    }
    // Sightline's ladder figures are only meaningful against a direct floor that kept up.
    const directRow = arms.get('direct');
    for (const st of directRow?.steps ?? []) {
      if (!st.answered_all) this.gate('ladder direct floor answered every request', `ladder-${st.rate}/direct`, false, `${st.ok}/${st.sent} answered: the driver or the mock could not sustain the rate, so this step measures the rig, not the proxies`);
    }
    return { mock_latency_ms: ladder.mock.latencyMs, step_ms: ladder.stepMs, rates: ladder.rates, foreign_cpu_pct: foreignCpuPct(cpuStart, this.cpu()), arms: ARMS.map((a) => arms.get(a)).filter((a): a is LadderArm => a !== undefined) };
  }
}

/** The first error line Portkey logged, e.g. its TypeError on streamed responses under Node 20. */
function portkeyDiagnosis(output: string): string {
  const line = output.split('\n').find((l) => /error/i.test(l) && !/^\s+at /.test(l));
  return line === undefined ? '' : ` (Portkey logged: ${line.trim().slice(0, 200)})`;
}

// ---------------------------------------------------------------------------------------------
// Rig, ratios and targets

function cpuModel(): string {
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
    return m?.[1]?.trim() ?? cpus()[0]?.model ?? 'unknown';
  } catch {
    return cpus()[0]?.model ?? 'unknown';
  }
}

function versionOf(cmd: string, args: string[], pattern: RegExp): string {
  const bin = findBinary(cmd);
  if (bin === undefined) return 'not installed';
  try {
    const out = execFileSync(bin, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    return pattern.exec(out)?.[1] ?? out.trim().slice(0, 60);
  } catch {
    return 'unknown';
  }
}

function packageVersion(name: string): string {
  try {
    const req = createRequire(`${BENCH}package.json`);
    const pkg = JSON.parse(readFileSync(req.resolve(`${name}/package.json`), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'not installed';
  }
}

async function rig(stack: Stack, pin: Pinning | null, netns: boolean, driverPid: number | undefined): Promise<Rig> {
  const versions: Record<string, string> = {
    node: process.versions.node,
    'nats-server': versionOf('nats-server', ['--version'], /v?(\d+\.\d+\.\d+)/),
    'clickhouse-server': stack.ch === undefined ? 'not running' : await chVersion(stack.ch.url).catch(() => 'unknown'),
    nginx: findBinary('nginx') === undefined ? 'not installed' : nginxVersion(findBinary('nginx') ?? 'nginx'),
    '@portkey-ai/gateway': portkeyVersion() ?? 'not installed',
    undici: packageVersion('undici'),
    'hdr-histogram-js': packageVersion('hdr-histogram-js'),
  };
  const processes = [{ role: 'orchestrator (bench/src/run.ts)', pid: process.pid }, ...(driverPid === undefined ? [] : [{ role: 'driver (bench/src/driver-process.ts)', pid: driverPid }]), ...stack.roles()].map((p) => ({
    ...p,
    cpus: affinityOf(p.pid),
  }));
  return {
    cpu_model: cpuModel(),
    cores: cpus().length,
    memory_gb: Math.round(totalmem() / 2 ** 30),
    kernel: release(),
    node: process.versions.node,
    network_namespace: netns,
    pinning: pinningText(pin),
    processes,
    versions,
    net: netSettings(),
  };
}

/** The network settings the run had (set by main.ts inside the namespace). */
function netSettings(): Record<string, string> {
  const out: Record<string, string> = {};
  try {
    out['nofile'] = execFileSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }).trim();
  } catch {
    out['nofile'] = 'unknown';
  }
  for (const key of ['net/ipv4/ip_local_port_range', 'net/ipv4/tcp_tw_reuse', 'net/core/somaxconn', 'net/ipv4/tcp_max_syn_backlog']) {
    try {
      out[key.replace(/\//g, '.')] = readFileSync(`/proc/sys/${key}`, 'utf8').trim().replace(/\s+/g, ' ');
    } catch {
      out[key.replace(/\//g, '.')] = 'unknown';
    }
  }
  return out;
}

function pinningText(pin: Pinning | null): string {
  if (pin === null) return 'No CPU pinning: the kernel places every process.';
  if (pin.layout === 'apart') {
    return `Pinned with taskset (layout "apart"): CPU ${pin.load} = driver, orchestrator, NATS, ClickHouse, ingester; CPU ${pin.proxy} = mock and the proxy under test (gateways, node-proxy, nginx, portkey; one busy at a time).`;
  }
  return `Pinned with taskset (layout "split"): CPU ${pin.proxy} = the proxy under test alone (gateways, node-proxy, nginx, portkey; one busy at a time); CPU ${pin.load} = driver, mock, orchestrator, NATS, ClickHouse, ingester.`;
}

function findRow(results: ScenarioResult[], scenario: string, arm: ArmName): ArmRow | undefined {
  const row = results.find((s) => s.name === scenario)?.arms.find((a) => a.arm === arm);
  return row?.status === 'ok' ? row : undefined;
}

function ratios(results: ScenarioResult[]): Check[] {
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

function targets(results: ScenarioResult[], ladder: RunResults['ladder']): Check[] {
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

// ---------------------------------------------------------------------------------------------

function stamp(d: Date): string {
  // YYYY-MM-DDTHH-MM (UTC), safe in file names.
  return d.toISOString().slice(0, 16).replace(':', '-');
}

function writeResults(results: RunResults, markdown: string): string[] {
  const dir = `${BENCH}results`;
  mkdirSync(dir, { recursive: true });
  const write = (name: string, text: string): string => {
    // Write then rename, so a reader never sees half a file (*.tmp is git-ignored).
    const path = `${dir}/${name}`;
    writeFileSync(`${path}.tmp`, text);
    renameSync(`${path}.tmp`, path);
    return path;
  };
  const json = `${JSON.stringify(results, null, 2)}\n`;
  return [write('latest.json', json), write(`${stamp(new Date(results.started_at))}.json`, json), write('latest.md', `${markdown}\n`)];
}

export async function run(opts: RunOptions): Promise<number> {
  const started = new Date();
  const plan = buildPlan(opts.quick);
  if (opts.rates !== null) plan.ladder.rates = opts.rates;
  for (const a of opts.arms ?? []) {
    if (!(PROXY_ARMS as readonly string[]).includes(a)) throw new Error(`--arms: unknown arm ${a} (one of ${PROXY_ARMS.join(', ')})`);
  }
  const pin: Pinning | null = opts.pin === 'none' ? null : PIN_LAYOUTS[opts.pin];
  if (pin !== null) {
    // Children inherit the mask: the driver, mock and pipeline start on the load core, and the
    // proxies are moved (or started) onto the proxy core.
    pinPid(process.pid, pin.load);
  }
  const runId = stamp(started).toLowerCase().replace(/[^a-z0-9]/g, '');
  const wanted = (name: string): boolean => opts.only === null || opts.only.includes(name);
  for (const name of opts.only ?? []) {
    if (name !== 'ladder' && !plan.scenarios.some((s) => s.name === name)) throw new Error(`--only: unknown scenario ${name}`);
  }
  log(`mode ${plan.mode}; network namespace ${opts.netns ? 'yes (loopback only)' : 'no'}; ${pinningText(pin)}`);

  let stack: Stack | undefined;
  let driver: DriverClient | undefined;
  let stopping = false;
  const cleanup = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    await driver?.stop().catch(() => undefined);
    await stack?.stop().catch(() => undefined);
  };
  const onSignal = (sig: NodeJS.Signals): void => {
    log(`${sig}: stopping every process this run started`);
    void cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const watchdog = setTimeout(() => {
    log(`the run exceeded its bound of ${RUN_BOUND_MS[plan.mode] / 60_000} minutes: stopping`);
    void cleanup().finally(() => process.exit(3));
  }, RUN_BOUND_MS[plan.mode]);
  watchdog.unref();

  try {
    stack = await startStack({ pin, netns: opts.netns, runId, log, arms: opts.arms, nodeProxyClient: opts.nodeProxyClient, gatewayWorkers: opts.gatewayWorkers });
    for (const [name, arm] of stack.arms) log(`arm ${name}: ${arm.target === undefined ? `not available (${arm.reason.slice(0, 200)})` : arm.target.origin}`);
    driver = await DriverClient.start();
    const runner = new Runner(plan, stack, driver);
    for (const name of ['direct', 'sightline'] as const) {
      const arm = runner.arm(name);
      runner.gate('required arm started', name, arm.target !== undefined, arm.target === undefined ? arm.reason : `at ${arm.target.origin}`);
    }
    if (runner.arm('direct').target === undefined) throw new Error('the mock did not start');

    const warm = await runner.warmup();
    const scenarios: ScenarioResult[] = [];
    for (const s of plan.scenarios) {
      if (!wanted(s.name)) continue;
      scenarios.push(await runner.scenario(s));
    }
    const ladder = wanted('ladder') ? await runner.ladder() : null;

    // Final recount: every Sightline team, and the capture-off gateway must have written nothing.
    const sl = runner.arm('sightline');
    if (stack.ch !== undefined && sl.instance !== undefined && sl.target !== undefined) {
      const expected = runner.sentByTeam.get(teamOf('warmup')) ?? 0;
      const n = await runner.waitCaptured(sl.instance, teamOf('warmup'), expected);
      const metrics = n === expected ? '' : ` (gateway capture counters: ${await runner.captureMetrics(sl)})`;
      runner.gate('capture completeness', 'warm-up/sightline', n === expected, `${n} rows for ${expected} warm-up requests${metrics}`);
    }
    const nc = runner.arm('sightline-nocapture');
    if (stack.ch !== undefined && nc.instance !== undefined && nc.target !== undefined) {
      const n = await countCaptured(stack.ch.url, CH_DATABASE, nc.instance).catch(() => -1);
      runner.gate('capture off writes nothing', 'sightline-nocapture', n === 0, `${n} rows for the capture-off gateway's instance`);
    }

    const finished = new Date();
    const results: RunResults = {
      schema: 1,
      mode: plan.mode,
      started_at: started.toISOString(),
      finished_at: finished.toISOString(),
      wall_s: Math.round((finished.getTime() - started.getTime()) / 1000),
      rig: await rig(stack, pin, opts.netns, driver.pid),
      method: {
        arms_order: 'direct control block, then rounds of one block per proxy arm in rotated order, then a second direct control block',
        rounds: plan.rounds,
        warmup_per_arm: `${plan.warmup.sequential} sequential + ${plan.warmup.concurrent} at 16 concurrent (1 KiB JSON) + ${plan.warmup.stream} OpenAI SSE at 16 concurrent`,
        warmup_result: JSON.stringify(warm),
        added_latency: 'arm percentile − mean(direct before, direct after) percentile, same scenario, same run',
        max_error_rate: MAX_ERROR_RATE,
        max_direct_p50_drift: MAX_P50_DRIFT,
        ttft: 'first non-empty OpenAI content delta / first Anthropic text_delta, from the send time',
        gap: 'per request, the largest interval between two body reads after the first token',
        open_loop: 'latency from the intended send time (request i due at start + i/rate), so stalls are not omitted',
        node_proxy_client: opts.nodeProxyClient,
        gateway_workers: opts.gatewayWorkers,
      },
      scenarios,
      ladder,
      ratios: ratios(scenarios),
      targets: targets(scenarios, ladder),
      gates: runner.gates,
      passed: runner.gates.every((g) => g.passed),
    };
    const markdown = renderMarkdown(results);
    const files = writeResults(results, markdown);
    process.stdout.write(`\n${markdown}\n`);
    log(`wrote ${files.join(', ')}`);
    log(`validity gates ${results.passed ? 'passed' : 'FAILED'}; wall time ${results.wall_s} s`);
    return results.passed ? 0 : 1;
  } finally {
    clearTimeout(watchdog);
    await cleanup();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
