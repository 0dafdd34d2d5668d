/**
 * One benchmark run (docs/benchmarks.md describes the method):
 *
 * 1. start every process (stack.ts) and the driver process (driver-client.ts);
 * 2. warm every arm up (warmup.ts: ≥ 2,000 requests each, even in quick mode);
 * 3. per scenario (blocks.ts): probe each arm (unsupported routes are recorded, not run), a
 *    direct control block, `rounds` rounds of one block per proxy arm in rotating order, a
 *    second direct control block; after each Sightline block, wait until ClickHouse holds a row
 *    for every request sent (the completeness check, which also keeps one arm's ingestion from
 *    running into the next arm's block);
 * 4. the open-loop ladder against a 1,500 ms mock (ladder.ts, settle.ts);
 * 5. gates (gates.ts), ratios and targets (targets.ts), the rig (rig.ts); results to
 *    bench/results/.
 *
 * This file orchestrates: options, signals and the watchdog, the order of the phases, the final
 * recount, and writing the results. The state the phases share is context.ts.
 */
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { scenario } from './blocks.js';
import { countCaptured } from './clickhouse.js';
import { RunContext } from './context.js';
import { DriverClient } from './driver-client.js';
import { MAX_ERROR_RATE, MAX_P50_DRIFT, REDELIVERY_GATE, redeliveryGate } from './gates.js';
import { ladder } from './ladder.js';
import { log, message } from './log.js';
import { PIN_LAYOUTS, pinPid } from './procs.js';
import type { Pinning } from './procs.js';
import { renderMarkdown } from './report.js';
import type { RunResults, ScenarioResult } from './report.js';
import { pinningText, rig } from './rig.js';
import { CAPTURING_ARMS, PROXY_ARMS, benchScenarios, buildPlan, teamOf } from './scenarios.js';
import { BENCH, CH_DATABASE, startStack } from './stack.js';
import type { Stack } from './stack.js';
import { ratios, targets } from './targets.js';
import { warmup } from './warmup.js';

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

/**
 * Overall bound on one run (the watchdog), a safety net rather than a target: quick mode takes
 * ~5–8 minutes on a quiet machine, but with the embedded and control arms and 5 rounds it took
 * over 9 minutes for two scenarios on the shared machine under a load average of 20.
 */
const RUN_BOUND_MS = { quick: 45 * 60_000, full: 180 * 60_000 };

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
    stack = await startStack({ pin, netns: opts.netns, runId, log, arms: opts.arms, nodeProxyClient: opts.nodeProxyClient, gatewayWorkers: opts.gatewayWorkers, scenarios: benchScenarios(plan) });
    for (const [name, arm] of stack.arms) log(`arm ${name}: ${arm.target === undefined ? `not available (${arm.reason.slice(0, 200)})` : arm.target.origin}`);
    driver = await DriverClient.start();
    const ctx = new RunContext(plan, stack, driver);
    for (const name of ['direct', 'sightline'] as const) {
      const arm = ctx.arm(name);
      ctx.gate('required arm started', name, arm.target !== undefined, arm.target === undefined ? arm.reason : `at ${arm.target.origin}`);
    }
    if (ctx.arm('direct').target === undefined) throw new Error('the mock did not start');

    const warm = await warmup(ctx);
    const scenarios: ScenarioResult[] = [];
    for (const s of plan.scenarios) {
      if (!wanted(s.name)) continue;
      scenarios.push(await scenario(ctx, s));
    }
    const ladderResult = wanted('ladder') ? await ladder(ctx) : null;

    // Final recount: the warm-up of every capturing gateway, and the capture-off gateway must
    // have written nothing.
    for (const name of CAPTURING_ARMS) {
      const sl = ctx.arm(name);
      if ((stack.ch === undefined && sl.count === undefined) || sl.instance === undefined || sl.target === undefined) continue;
      const expected = ctx.sent(name, teamOf('warmup', name));
      const n = await ctx.waitCaptured(sl, teamOf('warmup', name), expected);
      const metrics = n === expected ? '' : ` (gateway capture counters: ${await ctx.captureMetrics(sl)})`;
      ctx.gate('capture completeness', `warm-up/${name}`, n === expected, `${n} rows for ${expected} warm-up requests${metrics}`);
    }
    // A batch delivered to the ingester again that it had not given back (gates.ts) means capture
    // waited for the bus's ack wait: a delivery the ingester never saw, or a lost ack.
    if (stack.ingesterUrl !== undefined) {
      try {
        ctx.record(redeliveryGate(await ctx.ingesterCounters()));
      } catch (e) {
        ctx.gate(REDELIVERY_GATE, 'ingester', false, `its /metrics did not answer: ${message(e)}`);
      }
    }
    const nc = ctx.arm('sightline-nocapture');
    if (stack.ch !== undefined && nc.instance !== undefined && nc.target !== undefined) {
      const n = await countCaptured(stack.ch.url, CH_DATABASE, nc.instance).catch(() => -1);
      ctx.gate('capture off writes nothing', 'sightline-nocapture', n === 0, `${n} rows for the capture-off gateway's instance`);
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
        arms_order: 'direct control block, then rounds of one block per arm (direct included) in rotated order, then a second direct control block',
        intervals: "95 % Student's t-interval over the rounds' blocks: mean block p99; per-round differences against the direct block of the same round (added p50 / p99 / TTFT p50) and between arms (comparisons)",
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
      ladder: ladderResult,
      ratios: ratios(scenarios),
      targets: targets(scenarios, ladderResult),
      gates: ctx.gates,
      passed: ctx.gates.every((g) => g.passed),
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
