/**
 * Before anything is measured: the warm-up of every arm (once per run, ≥ 2,000 requests each,
 * even in quick mode) and the probe of each arm at the start of a scenario, which decides
 * whether the arm is measured or recorded as unsupported.
 */
import type { RunContext } from './context.js';
import { REQUEST_TIMEOUT_MS } from './context.js';
import { log } from './log.js';
import { ARMS, CAPTURING_ARMS, CONTROLS_SCENARIO, isControlArm, teamOf } from './scenarios.js';
import type { ArmName, MockKnobs, Scenario } from './scenarios.js';
import type { Arm } from './stack.js';
import type { BlockResult, DriverMode } from './types.js';

/** Warms every arm that started up; returns one line per arm for the results' method section. */
export async function warmup(ctx: RunContext): Promise<Record<string, string | number>> {
  const { warmup } = ctx.plan;
  const out: Record<string, string | number> = {};
  const jsonScenario = ctx.plan.scenarios[0];
  const sseScenario = ctx.plan.scenarios.find((s) => s.name === 'sse-openai');
  if (jsonScenario === undefined || sseScenario === undefined) throw new Error('plan is missing its 1 KiB JSON or OpenAI SSE scenario');
  const available = ARMS.map((n) => ctx.arm(n)).filter((a) => a.target !== undefined);
  const controls = ctx.plan.scenarios.find((s) => s.name === CONTROLS_SCENARIO);
  const phases: { knobs: MockKnobs; scenario: Scenario; mode: DriverMode; connections: number }[] = [
    { knobs: jsonScenario.mock, scenario: jsonScenario, mode: { kind: 'sequential', requests: warmup.sequential }, connections: 1 },
    { knobs: jsonScenario.mock, scenario: jsonScenario, mode: { kind: 'concurrent', concurrency: 16, requests: warmup.concurrent }, connections: 16 },
    { knobs: sseScenario.mock, scenario: sseScenario, mode: { kind: 'concurrent', concurrency: 16, requests: warmup.stream }, connections: 16 },
  ];
  const totals = new Map<ArmName, { sent: number; errors: number }>();
  for (const [i, phase] of phases.entries()) {
    await ctx.stack.mock.configure(phase.knobs);
    for (const arm of available) {
      // The control arms are the `sightline` gateway under other teams: it has had the whole
      // warm-up as `sightline`; each control team warms its own path (limits, budget, cache)
      // with the sequential phase on its own requests.
      if (i > 0 && isControlArm(arm.name)) continue;
      const started = Date.now();
      // The control arms warm up on their own requests (route, unique bodies) for the JSON phases.
      const scenario = isControlArm(arm.name) && phase.scenario.request.stream === undefined && controls !== undefined ? controls : phase.scenario;
      const r = await ctx.driver.run({
        id: `warmup/${arm.name}/${phase.mode.kind}`,
        request: ctx.template(arm, 'warmup', scenario),
        mode: phase.mode,
        prewarm: 0,
        prewarmMs: 0,
        maxDurationMs: ctx.plan.blockMaxMs,
        timeoutMs: REQUEST_TIMEOUT_MS,
        connections: phase.connections,
      });
      const t = totals.get(arm.name) ?? { sent: 0, errors: 0 };
      t.sent += r.attempted;
      t.errors += r.errors + r.prewarmErrors;
      totals.set(arm.name, t);
      if (CAPTURING_ARMS.includes(arm.name)) ctx.note(arm.name, teamOf('warmup', arm.name), r.attempted);
      ctx.diagnose(arm, `warm-up/${arm.name}`, r);
      log(`warm-up ${arm.name} ${phase.mode.kind}${phase.scenario.request.stream === undefined ? '' : ' stream'}: ${r.attempted} requests in ${((Date.now() - started) / 1000).toFixed(1)} s, ${r.errors} errors`);
    }
  }
  for (const [name, t] of totals) out[name] = `${t.sent} requests, ${t.errors} errors`;
  for (const name of CAPTURING_ARMS) {
    const s = ctx.arm(name);
    if (s.instance === undefined || s.target === undefined) continue;
    // Let the warm-up's capture drain so it does not run into the first measured block.
    await ctx.waitCaptured(s, teamOf('warmup', name), ctx.sent(name, teamOf('warmup', name)));
  }
  log(`warm-up done: ${[...totals].map(([n, t]) => `${n} ${t.sent}`).join(', ')}`);
  return out;
}

/** What a probe decided: measure the arm (`supported`), and the note for its row. */
export interface ProbeVerdict {
  supported: boolean;
  note: string;
}

/**
 * The probe's rule, pure. The arm is recorded as `unsupported` (with the answer it gave)
 * instead of being measured when
 * - every request was refused with a client-error status that means "no such route or
 *   feature" (400, 404, 405, 415, 422, 501): e.g. a route a colleague has not shipped yet; or
 * - the arm is the third-party Portkey gateway and every request failed, whatever the error:
 *   a peer's missing feature is reported in its row, it does not invalidate our run.
 * Otherwise the arm is measured and its failures count against the error-rate gate.
 * `output` is read only for the Portkey diagnosis.
 */
export function probeVerdict(r: Pick<BlockResult, 'ok' | 'sent' | 'errorKinds' | 'errorSamples'>, arm: ArmName, output: () => string): ProbeVerdict {
  if (r.ok === r.sent) return { supported: true, note: '' };
  const refused = Object.keys(r.errorKinds).every((k) => /^status (400|404|405|415|422|501)$/.test(k));
  const sample = r.errorSamples[0] ?? Object.keys(r.errorKinds).join(', ');
  if (r.ok === 0 && (refused || arm === 'portkey')) {
    const why = arm === 'portkey' && !refused ? `every probe request failed: ${sample}${portkeyDiagnosis(output())}` : sample;
    return { supported: false, note: why };
  }
  // Not a clean refusal: run the arm anyway so its errors are counted (and gated).
  return { supported: true, note: `probe: ${sample}` };
}

/** The first error line Portkey logged, e.g. its TypeError on streamed responses under Node 20. */
export function portkeyDiagnosis(output: string): string {
  const line = output.split('\n').find((l) => /error/i.test(l) && !/^\s+at /.test(l));
  return line === undefined ? '' : ` (Portkey logged: ${line.trim().slice(0, 200)})`;
}

/** Probe: three sequential requests before an arm's blocks, judged by `probeVerdict`. */
export async function probe(ctx: RunContext, arm: Arm, s: Scenario): Promise<ProbeVerdict & { attempted: number }> {
  const r = await ctx.driver.run({
    id: `${s.name}/${arm.name}/probe`,
    request: ctx.template(arm, s.name, s),
    mode: { kind: 'sequential', requests: 3 },
    prewarm: 0,
    prewarmMs: 0,
    maxDurationMs: 30_000,
    timeoutMs: 10_000,
    connections: s.connections,
  });
  return { ...probeVerdict(r, arm.name, () => arm.output()), attempted: r.attempted };
}
