/**
 * The run's judgements, without any server: the validity gates (gates.ts), the probe's
 * measure-or-unsupported rule (warmup.ts), the issue 5 ratios and the BRIEF's targets
 * (targets.ts) and the CPU share the ladder's quiet wait compares (settle.ts). Like
 * bench-pure.test.ts, imports nothing from bench/node_modules, so it runs in the root `npm test`.
 */
import { describe, it } from 'node:test';
import { strict as assert } from 'node:assert';
import { MAX_ERROR_RATE, REDELIVERY_GATE, blockGates, controlDrift, driftGate, ladderFloorGates, redeliveryGate } from '../src/gates.js';
import type { GatedBlock } from '../src/gates.js';
import type { ArmRow, LadderStep, RunResults, ScenarioResult } from '../src/report.js';
import { SETTLE_CPU_PCT, pctOfCore } from '../src/settle.js';
import { ratios, targets } from '../src/targets.js';
import { probeVerdict } from '../src/warmup.js';
import { authStageLine, contentThreadLine } from '../src/report.js';

function block(id: string, attempted: number, over: Partial<GatedBlock['result']> = {}, mockRequests = attempted): GatedBlock {
  return { result: { id, attempted, errors: 0, prewarmErrors: 0, truncated: false, ...over }, mockRequests };
}

function step(rate: number, over: Partial<LadderStep> = {}): LadderStep {
  return { rate, sent: 100, ok: 100, errors: 0, error_kinds: {}, p50_us: 1_500_000, p99_us: 1_510_000, achieved_rps: rate, max_send_lag_us: 10, answered_all: true, mock_requests: 100, cpu_pct: {}, ...over };
}

describe('drift gate', () => {
  it('passes drift up to 25 % of the control blocks mean and fails above it', () => {
    const ok = driftGate('json-1k-seq', 7, 9);
    assert.equal(ok.passed, true, '2 / 8 is exactly 25 %');
    assert.deepEqual(ok, { name: 'direct p50 drift', scope: 'json-1k-seq', passed: true, detail: 'before 7 µs, after 9 µs: 25.0 % (max 25 %)' });
    const noisy = driftGate('json-1k-seq', 88, 51);
    assert.equal(noisy.passed, false);
    assert.equal(noisy.detail, 'before 88 µs, after 51 µs: 53.2 % (max 25 %)');
  });

  it('gates the drift as reported, rounded to three decimals', () => {
    // |1000 − 1286| / 1143 = 0.25022: reported as 0.25, so it passes.
    assert.equal(controlDrift(1000, 1286), 0.25);
    assert.equal(driftGate('s', 1000, 1286).passed, true);
    // 0.2511 rounds to 0.251: fails.
    assert.equal(controlDrift(7, 9.01), 0.251);
    assert.equal(driftGate('s', 7, 9.01).passed, false);
    assert.equal(controlDrift(0, 0), 0);
  });
});

describe('block gates', () => {
  it('passes clean blocks with one error-rate and one mock-count gate', () => {
    const gates = blockGates('json-1k-seq', 'sightline', [block('a', 1_000), block('b', 1_000)]);
    assert.deepEqual(gates, [
      { name: 'error rate', scope: 'json-1k-seq/sightline', passed: true, detail: '0 of 2000 requests failed (0.000 %, max 0.1 %)' },
      { name: 'mock request count', scope: 'json-1k-seq/sightline', passed: true, detail: 'mock counted every request of 2 blocks (2000)' },
    ]);
  });

  it('fails the error rate above 0.1 %, prewarm failures included', () => {
    assert.equal(MAX_ERROR_RATE, 0.001);
    const atLimit = blockGates('s', 'nginx', [block('a', 1_000, { errors: 1 })]);
    assert.equal(atLimit[0]?.passed, true, '1 in 1,000 is the limit itself');
    const over = blockGates('s', 'nginx', [block('a', 1_000, { errors: 1, prewarmErrors: 1 })]);
    assert.equal(over[0]?.passed, false);
    assert.equal(over[0]?.detail, '2 of 1000 requests failed (0.200 %, max 0.1 %)');
  });

  it('names each block whose requests the mock did not all see', () => {
    const gates = blockGates('s', 'portkey', [block('s/portkey/r1', 500), block('s/portkey/r2', 500, {}, 499)]);
    assert.equal(gates[1]?.passed, false);
    assert.equal(gates[1]?.detail, 's/portkey/r2: driver sent 500, mock saw 499');
  });

  it('for the cache-hit arm, wants the mock to have seen no request at all', () => {
    const hits = blockGates('controls-1k-seq', 'ctl-cache-hit', [block('c/hit/r1', 650, {}, 0), block('c/hit/r2', 650, {}, 0)], 'none');
    assert.deepEqual(hits[1], { name: 'cache hits only', scope: 'controls-1k-seq/ctl-cache-hit', passed: true, detail: 'every one of 1300 requests in 2 blocks answered from the cache (the mock saw none)' });
    const missed = blockGates('controls-1k-seq', 'ctl-cache-hit', [block('c/hit/r1', 650, {}, 0), block('c/hit/r2', 650, {}, 1)], 'none');
    assert.equal(missed[1]?.passed, false);
    assert.equal(missed[1]?.detail, 'c/hit/r2: 1 of 650 requests reached the mock');
  });

  it('adds a failed gate for blocks that hit their time bound, and only then', () => {
    const gates = blockGates('s', 'direct', [block('s/direct/before', 10, { truncated: true }), block('s/direct/after', 10)]);
    assert.equal(gates.length, 3);
    assert.deepEqual(gates[2], { name: 'block finished in time', scope: 's/direct', passed: false, detail: 's/direct/before hit the block time bound' });
  });
});

describe('ladder floor gates', () => {
  it('fails each direct step that did not answer every request, and only those', () => {
    const gates = ladderFloorGates([step(500), step(1_000, { ok: 90, errors: 10, answered_all: false }), step(2_000)]);
    assert.equal(gates.length, 1);
    assert.equal(gates[0]?.scope, 'ladder-1000/direct');
    assert.equal(gates[0]?.passed, false);
    assert.match(gates[0]?.detail ?? '', /^90\/100 answered: /);
    assert.deepEqual(ladderFloorGates([]), []);
  });
});

describe('ingester redelivery gate', () => {
  const counters = (redelivered: number, givenBack: number | undefined): Map<string, number> => {
    const c = new Map([['redelivered_total', redelivered], ['write_failures_total', 1], ['dead_lettered_total', 0], ['batches_total', 900], ['requests_total', 4_500]]);
    if (givenBack !== undefined) c.set('given_back_total', givenBack);
    return c;
  };

  it('passes redeliveries the ingester gave back itself (a failed write retried), and none at all', () => {
    // 3,500 req/s on f1fe617 (docs/benchmarks.md): one `write EPIPE`, 64 batches given back and redelivered.
    const g = redeliveryGate(counters(64, 64));
    assert.deepEqual(g, { name: REDELIVERY_GATE, scope: 'ingester', passed: true, detail: 'redelivered 64, given back 64, write failures 1, dead-lettered 0, batches 900, requests 4500' });
    assert.equal(redeliveryGate(counters(0, 0)).passed, true);
    assert.equal(redeliveryGate(counters(10, 64)).passed, true, 'given back and not yet come back');
  });

  it('fails a redelivery the ingester never gave back, and an ingester without the counters', () => {
    const g = redeliveryGate(counters(65, 64));
    assert.equal(g.passed, false);
    assert.match(g.detail, /^redelivered 65, given back 64, /);
    assert.equal(redeliveryGate(counters(1, 0)).passed, false);
    const old = redeliveryGate(counters(0, undefined));
    assert.equal(old.passed, false, 'an ingester that does not count what it gives back cannot pass');
    assert.match(old.detail, /given back \?/);
    assert.equal(redeliveryGate(new Map()).passed, false);
  });
});

describe('probe verdict', () => {
  const never = (): string => {
    throw new Error('output read although no diagnosis was needed');
  };

  it('measures an arm whose probe requests all succeeded', () => {
    assert.deepEqual(probeVerdict({ ok: 3, sent: 3, errorKinds: {}, errorSamples: [] }, 'sightline', never), { supported: true, note: '' });
  });

  it('records a route every request refused as unsupported, with the answer given', () => {
    const v = probeVerdict({ ok: 0, sent: 3, errorKinds: { 'status 404': 2, 'status 501': 1 }, errorSamples: ['404 {"error":"no route"}'] }, 'nginx', never);
    assert.deepEqual(v, { supported: false, note: '404 {"error":"no route"}' });
  });

  it('measures our own arm when its failures are not a clean refusal, so the error gate sees them', () => {
    const v = probeVerdict({ ok: 0, sent: 3, errorKinds: { 'status 500': 3 }, errorSamples: [] }, 'sightline', never);
    assert.deepEqual(v, { supported: true, note: 'probe: status 500' });
    const partly = probeVerdict({ ok: 2, sent: 3, errorKinds: { 'status 404': 1 }, errorSamples: ['404'] }, 'node-proxy', never);
    assert.equal(partly.supported, true, 'one success means the route exists');
  });

  it('records Portkey as unsupported when every request failed, with the first error it logged', () => {
    const output = 'starting\n  at foo (x.js:1)\nTypeError: Cannot read properties of undefined\n  at bar (y.js:2)';
    const v = probeVerdict({ ok: 0, sent: 3, errorKinds: { 'network ECONNRESET': 3 }, errorSamples: ['socket hang up'] }, 'portkey', () => output);
    assert.equal(v.supported, false);
    assert.equal(v.note, 'every probe request failed: socket hang up (Portkey logged: TypeError: Cannot read properties of undefined)');
  });
});

describe('ratios and targets', () => {
  const arm = (a: ArmRow['arm'], over: Partial<ArmRow>): ArmRow => ({ arm: a, status: 'ok', ...over });
  const scenarios = (rows: ArmRow[]): ScenarioResult[] => [{ name: 'json-1k-seq', title: '', driver: '', mock: {}, arms: rows }];

  it('computes the Portkey ratio and the capture cost from the 1 KiB sequential scenario', () => {
    const [pk, cost] = ratios(scenarios([arm('sightline', { added_p50_us: 100 }), arm('portkey', { added_p50_us: 500 }), arm('sightline-nocapture', { added_p50_us: 95 })]));
    assert.equal(pk?.value, 5);
    assert.equal(pk?.met, true);
    assert.equal(cost?.value, 0.05);
    assert.equal(cost?.met, true);
  });

  it('computes the auth cost from the same scenario and meets it up to 5 % only', () => {
    const auth = (withAuth: number, without: number) => ratios(scenarios([arm('sightline', { added_p50_us: withAuth }), arm('sightline-noauth', { added_p50_us: without })]))[2];
    const ok = auth(105, 100);
    assert.equal(ok?.value, 1.05);
    assert.equal(ok?.met, true);
    assert.equal(ok?.detail, 'authentication on 105 µs, off 100 µs');
    assert.match(ok?.want ?? '', /authentication adds ≤ 5 % to the added p50/);
    assert.equal(auth(106, 100)?.met, false);
    assert.equal(auth(100, 0)?.met, null, 'an authentication-off figure at the floor gives no ratio, not a pass');
    const missing = ratios(scenarios([arm('sightline', { added_p50_us: 100 }), arm('sightline-noauth', { status: 'n/a', added_p50_us: 90 })]))[2];
    assert.equal(missing?.value, null);
    assert.equal(missing?.met, null);
  });

  it('checks the auth stage p50 with keys against a few microseconds and shows both arms', () => {
    const rows = scenarios([arm('sightline', { auth_stage_p50_us: 1.4 }), arm('sightline-noauth', { auth_stage_p50_us: 0.3 })]);
    const stage = targets(rows, null)[5];
    assert.equal(stage?.value, 1.4);
    assert.equal(stage?.met, true);
    assert.equal(targets(scenarios([arm('sightline', { auth_stage_p50_us: 5.1 })]), null)[5]?.met, false);
    assert.match(authStageLine(rows), /json-1k-seq sightline 1\.4; json-1k-seq sightline-noauth 0\.3\.$/);
    assert.equal(authStageLine(scenarios([arm('sightline', {})])), '');
  });

  it('reports the records the serving thread made itself, per capturing arm and scenario', () => {
    const line = contentThreadLine(scenarios([arm('sightline', { content_thread: { recorded: 1_200, made_here: 805, late_batches: 3, arms: ['sightline'] } }), arm('sightline-nocapture', {})]));
    assert.match(line, /: json-1k-seq sightline 805 of 1200 \(3 late\)\.$/);
    const shared = contentThreadLine(scenarios([arm('ctl-none', { content_thread: { recorded: 3_000, made_here: 0, late_batches: 0, arms: ['ctl-none', 'ctl-limits'] } }), arm('ctl-limits', {})]));
    assert.match(shared, /: json-1k-seq ctl-none \+ ctl-limits 0 of 3000 \(0 late\)\.$/);
    assert.equal(contentThreadLine(scenarios([arm('sightline', {})])), '');
  });

  it('reports what was not measured as unknown, never as met', () => {
    // Portkey unsupported: its row is not `ok`, so the ratio has no input.
    const [pk, cost] = ratios(scenarios([arm('sightline', { added_p50_us: 100 }), arm('portkey', { status: 'unsupported', added_p50_us: 500 })]));
    assert.equal(pk?.value, null);
    assert.equal(pk?.met, null);
    assert.equal(cost?.met, null);
    const t = targets([], null);
    assert.equal(t.length, 9);
    assert.ok(t.every((c) => c.met === null && c.value === null));
    assert.match(t[3]?.detail ?? '', /not in this run's ladder \(highest passing: none req\/s\)/);
  });

  it('checks the latency targets and the 5,000 req/s step, captured included', () => {
    const ladder = (captured: number): NonNullable<RunResults['ladder']> => ({
      mock_latency_ms: 1_500,
      step_ms: 10_000,
      rates: [5_000],
      foreign_cpu_pct: 0,
      arms: [{ arm: 'sightline', status: 'ok', max_ok_rate: 5_000, steps: [step(5_000, { sent: 50_000, ok: 50_000, captured, capture_expected: 57_500, added_p99_us: 40_000 })] }],
    });
    const rows = scenarios([arm('sightline', { added_p50_us: 251, added_p99_us: 500 })]);
    const [p50, p99, ttft, top, topP99] = targets(rows, ladder(57_500));
    assert.equal(p50?.met, false, '251 µs is over the 250 µs target');
    assert.equal(p99?.met, true);
    assert.equal(ttft?.met, null, 'no SSE scenario ran');
    assert.equal(top?.met, true);
    assert.equal(top?.detail, '50000/50000 answered, 57500/57500 captured');
    assert.equal(topP99?.met, true);
    assert.equal(targets(rows, ladder(57_499))[3]?.met, false, 'one request not captured fails the target');
  });
});

describe('settle', () => {
  it('measures CPU as a share of one core over the window', () => {
    assert.equal(pctOfCore(50, 500, 100), 100);
    assert.equal(pctOfCore(4, 500, 100), 8);
    assert.ok(pctOfCore(5, 500, 100) >= SETTLE_CPU_PCT, '10 % of a core is not quiet');
  });
});
