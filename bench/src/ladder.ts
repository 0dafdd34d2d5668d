/**
 * The open-loop rate ladder against a slow mock (1,500 ms by default): per rate, the direct
 * floor then every proxy arm in rotating order, each step over pre-opened connections, after
 * the proxies went quiet (settle.ts). An arm that collapsed skips the higher rates.
 */
import type { RunContext } from './context.js';
import { OPEN_LOOP_MAX_IN_FLIGHT } from './driver.js';
import { ladderFloorGates } from './gates.js';
import { percentilesOf } from './histogram.js';
import { log } from './log.js';
import { foreignCpuPct, procTicks, sleep, threadTicks, ticksPerSecond } from './procs.js';
import type { LadderArm, LadderStep, RunResults } from './report.js';
import { LADDER_ARMS, teamOf } from './scenarios.js';
import type { ArmName } from './scenarios.js';
import { settle } from './settle.js';
import { added, neverConnected, rotate } from './stats.js';
import type { BlockSpec } from './types.js';

export async function ladder(ctx: RunContext): Promise<NonNullable<RunResults['ladder']>> {
  const { ladder } = ctx.plan;
  log(`ladder: ${ladder.rates.join(', ')} req/s, ${ladder.stepMs} ms each, mock latency ${ladder.mock.latencyMs} ms`);
  await ctx.stack.mock.configure(ladder.mock);
  const arms = new Map<ArmName, LadderArm>();
  for (const name of LADDER_ARMS) {
    const arm = ctx.arm(name);
    arms.set(name, arm.target === undefined ? { arm: name, status: 'not available', note: arm.reason, steps: [], max_ok_rate: null } : { arm: name, status: 'ok', steps: [], max_ok_rate: null });
  }
  const given = { request: ladder.request, portkeyProvider: 'openai' as const };
  const sightline = ctx.arm('sightline');
  /** Arms that collapsed (more than half the requests failed) skip the higher rates. */
  const collapsed = new Set<ArmName>();
  const cpuStart = ctx.cpu();
  for (const [i, rate] of ladder.rates.entries()) {
    const name = `ladder-${rate}`;
    const proxies = rotate(LADDER_ARMS.filter((a) => a !== 'direct' && ctx.arm(a).target !== undefined), i);
    let directP99: number | undefined;
    for (const armName of ['direct' as const, ...proxies]) {
      const row = arms.get(armName);
      if (row === undefined) continue;
      if (collapsed.has(armName)) {
        row.note = `skipped from ${rate} req/s: collapsed at a lower rate`;
        continue;
      }
      const arm = ctx.arm(armName);
      // Enough connections for every request in flight (rate × latency) plus slack.
      const connections = Math.min(OPEN_LOOP_MAX_IN_FLIGHT, Math.ceil((rate * ladder.mock.latencyMs * 1.2) / 1000) + 64);
      const spec: BlockSpec = {
        id: `${name}/${armName}`,
        request: ctx.template(arm, name, given),
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
      await settle(proxyPids(ctx), `${name}/${armName}`);
      await ctx.stack.mock.restart({ ...ladder.mock, latencyMs: 0 });
      await sleep(500);
      const warm = await ctx.driver.run({ ...spec, id: `${name}/${armName}/connect`, mode: { kind: 'concurrent', concurrency: width, requests: width }, maxDurationMs: 60_000 });
      await ctx.stack.mock.configure(ladder.mock);
      if (armName === 'sightline') ctx.note(armName, teamOf(name), warm.attempted - neverConnected(warm.errorKinds));
      // CPU used during the step by the driver, the mock and the proxy under test: which of
      // them ran out of core first says whether the step measured the proxy or the rig.
      const who = { driver: [ctx.driver.pid ?? -1], mock: [ctx.stack.mock.proc.pid], proxy: armName === 'direct' ? [] : arm.pids() };
      const ticks = (pids: number[]): number => pids.reduce((a, p) => a + procTicks(p), 0);
      const idleTicks = (pids: number[]): number => pids.reduce((a, p) => a + threadTicks(p).idle, 0);
      const before = { driver: ticks(who.driver), mock: ticks(who.mock), proxy: ticks(who.proxy), content: idleTicks(who.proxy), t: Date.now() };
      const m = await ctx.measure(arm, spec);
      const after = { driver: ticks(who.driver), mock: ticks(who.mock), proxy: ticks(who.proxy), content: idleTicks(who.proxy), t: Date.now() };
      const secs = ((after.t - before.t) / 1000) * ticksPerSecond();
      const pct = (k: 'driver' | 'mock' | 'proxy'): number => Math.round(((after[k] - before[k]) / secs) * 100);
      const cpu = { driver: pct('driver'), mock: pct('mock'), proxy: pct('proxy') };
      // Per answered request: what capacity costs per request, whatever the step's length.
      const perRequest = (k: 'mock' | 'proxy' | 'content'): number => (m.result.ok === 0 ? 0 : Math.round((((after[k] - before[k]) / ticksPerSecond()) * 1e6) / m.result.ok));
      const cpuPerRequest: Record<string, number> = armName === 'direct' ? { mock: perRequest('mock') } : { mock: perRequest('mock'), proxy: perRequest('proxy'), content: perRequest('content') };
      // Thousands of sockets: close them before the next arm's step.
      await ctx.driver.release(spec.request.origin);
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
        cpu_us_per_request: cpuPerRequest,
      };
      if (armName !== 'direct' && directP99 !== undefined) step.added_p99_us = added(p.p99, directP99);
      if (m.rss !== undefined) step.rss_mb = m.rss;
      let passed = step.answered_all;
      if (armName === 'sightline' && sightline.instance !== undefined) {
        ctx.note(armName, teamOf(name), m.result.attempted - neverConnected(m.result.errorKinds));
        // The connection burst went through the gateway too, under the same team. A request
        // whose connection to the gateway was never made (seen at 5,000 req/s: connect timeouts)
        // never reached it, so it cannot be captured: not expected.
        const expected = m.result.attempted + warm.attempted - neverConnected(m.result.errorKinds) - neverConnected(warm.errorKinds);
        step.captured = await ctx.waitCaptured(sightline, teamOf(name), expected);
        step.capture_expected = expected;
        passed = passed && step.captured === expected;
      }
      // Short of the expected count: the gateway's own counters tell lost (dropped) from late (queued, spooled).
      const counters = step.captured !== undefined && step.captured !== step.capture_expected ? ` (gateway capture counters: ${await ctx.captureMetrics(sightline)})` : '';
      log(
        `${name} ${armName}: ${step.ok}/${step.sent} answered, p50 ${(p.p50 / 1000).toFixed(1)} ms, p99 ${(p.p99 / 1000).toFixed(1)} ms, send lag max ${(step.max_send_lag_us / 1000).toFixed(1)} ms, CPU % driver ${cpu.driver} mock ${cpu.mock}${armName === 'direct' ? '' : ` proxy ${cpu.proxy}`}, CPU µs/request mock ${cpuPerRequest['mock']}${armName === 'direct' ? '' : ` proxy ${cpuPerRequest['proxy']} (content thread ${cpuPerRequest['content']})`}${step.captured === undefined ? '' : `, captured ${step.captured}`}${counters}`,
      );
      row.steps.push(step);
      if (passed) row.max_ok_rate = Math.max(row.max_ok_rate ?? 0, rate);
      if (m.result.errors > m.result.sent / 2) collapsed.add(armName);
    }
  }
  ctx.record(...ladderFloorGates(arms.get('direct')?.steps ?? []));
  return { mock_latency_ms: ladder.mock.latencyMs, step_ms: ladder.stepMs, rates: ladder.rates, foreign_cpu_pct: foreignCpuPct(cpuStart, ctx.cpu()), arms: LADDER_ARMS.map((a) => arms.get(a)).filter((a): a is LadderArm => a !== undefined) };
}

/** Every process of the proxy arms (not the mock behind `direct`): what settle() watches. */
function proxyPids(ctx: RunContext): number[] {
  return [...ctx.stack.arms.values()].filter((a) => a.name !== 'direct').flatMap((a) => a.pids());
}
