/**
 * The controls matrix (issue 12) and the embedded arm (issue 15) without any server: the
 * controls scenario's requests, the teams and settings the run creates, the gateway
 * configuration with its cached route (parsed by the product's own loader), unique bodies,
 * the two targets and the matrix table; and the Responses API scenario. Imports nothing from bench/node_modules, so it runs in
 * the root `npm test`.
 */
import { describe, it } from 'node:test';
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Router, parseConfig } from '../../packages/config/src/index.js';
import { parseTeamSettings } from '../../packages/directory/src/index.js';
import {
  ARMS,
  CACHED_MODEL,
  CONTROLS_SCENARIO,
  CONTROL_ARMS,
  CONTROL_VARIANTS,
  EMBEDDED_SCENARIO,
  OPENAI_MODEL,
  benchConfig,
  benchScenarios,
  benchTeams,
  buildPlan,
  isControlArm,
  isControlsScenario,
  teamOf,
  template,
} from '../src/scenarios.js';
import type { ArmName, ArmTarget } from '../src/scenarios.js';
import { UNIQUE_MARKER } from '../src/types.js';
import { uniqueBodies } from '../src/unique.js';
import { controlsChecks, embeddedCheck, embeddedRatio, targets } from '../src/targets.js';
import { controlsTable } from '../src/report.js';
import type { ArmRow, ScenarioResult } from '../src/report.js';

const TARGET: ArmTarget = { origin: 'http://127.0.0.1:1', extraHeaders: () => ({}) };

function row(arm: ArmName, over: Partial<ArmRow> = {}): ArmRow {
  return { arm, status: 'ok', ...over };
}

function scenario(name: string, arms: ArmRow[], over: Partial<ScenarioResult> = {}): ScenarioResult {
  return { name, title: name, driver: '', mock: {}, arms, ...over };
}

describe('controls scenarios', () => {
  for (const quick of [true, false]) {
    const plan = buildPlan(quick);
    const controls = plan.scenarios.filter((x) => isControlsScenario(x.name));
    it(`${quick ? 'quick' : 'full'}: 1 KiB JSON in every run; 16 and 64 KiB and SSE in full mode`, () => {
      assert.deepEqual(
        controls.map((c) => c.name),
        quick ? [CONTROLS_SCENARIO] : [CONTROLS_SCENARIO, 'controls-16k-seq', 'controls-64k-seq', 'controls-sse'],
      );
      assert.equal(controls[0]?.mode.kind, 'sequential');
    });
    it(`${quick ? 'quick' : 'full'}: run the direct control and the control arms only; the control arms nowhere else`, () => {
      for (const s of controls) {
        const running = ARMS.filter((a) => a !== 'direct' && s.notApplicable[a] === undefined);
        assert.deepEqual(running, [...CONTROL_ARMS], s.name);
      }
      for (const other of plan.scenarios) {
        if (isControlsScenario(other.name)) continue;
        for (const a of CONTROL_ARMS) assert.match(other.notApplicable[a] ?? '', /controls-\* scenarios only/, `${other.name} ${a}`);
        assert.equal(other.notApplicable['sightline-embedded'] === undefined, other.name === EMBEDDED_SCENARIO, other.name);
      }
    });
    it(`${quick ? 'quick' : 'full'}: send each control arm its route's model, unique bodies for all but the cache hit, of the scenario's size`, () => {
      const sizes: Record<string, number> = { [CONTROLS_SCENARIO]: 1024, 'controls-16k-seq': 16 * 1024, 'controls-64k-seq': 64 * 1024, 'controls-sse': 1024 };
      for (const s of controls) {
        for (const a of ['direct', ...CONTROL_ARMS] as ArmName[]) {
          const t = template(a, TARGET, s.name, s.request, s.directRequest, s.portkeyProvider, s.armRequests);
          assert.equal(Buffer.byteLength(t.body), sizes[s.name], `${s.name} ${a}`);
          assert.ok(t.body.includes(UNIQUE_MARKER), a);
          const body = JSON.parse(t.body) as { model: string; stream?: boolean };
          assert.equal(body.stream === true, s.name === 'controls-sse');
          assert.equal(t.stream, s.name === 'controls-sse' ? 'openai' : undefined);
          const v = isControlArm(a) ? CONTROL_VARIANTS[a] : undefined;
          assert.equal(body.model, v !== undefined && v.cache !== 'off' ? CACHED_MODEL : OPENAI_MODEL, a);
          assert.equal(t.unique === true, v !== undefined && v.cache !== 'hit', a);
        }
      }
    });
  }
});

describe('control teams', () => {
  const names = benchScenarios(buildPlan(true));
  const teams = benchTeams(names);
  it('one team per scenario name, plus one per control arm in the warm-up and each controls scenario', () => {
    assert.equal(teams.length, names.length + 2 * CONTROL_ARMS.length);
    const full = benchScenarios(buildPlan(false));
    assert.equal(benchTeams(full).length, full.length + 5 * CONTROL_ARMS.length);
    assert.equal(new Set(teams.map((t) => t.team)).size, teams.length, 'the completeness check counts by team');
    for (const t of teams) assert.match(t.team, /^[a-z0-9-]{1,64}$/, 'safe in SQL and a valid team name');
  });
  it('gives each control team exactly its controls, valid for the admin API', () => {
    for (const scenarioName of ['warmup', CONTROLS_SCENARIO]) {
      for (const a of CONTROL_ARMS) {
        const t = teams.find((x) => x.team === teamOf(scenarioName, a));
        assert.ok(t?.settings !== undefined, a);
        const parsed = parseTeamSettings(t.settings);
        assert.equal(parsed.limits !== undefined, CONTROL_VARIANTS[a].limits, a);
        assert.equal(parsed.budget !== undefined, CONTROL_VARIANTS[a].budget, a);
      }
    }
    assert.equal(teamOf(CONTROLS_SCENARIO, 'ctl-cache-hit'), 'bench-controls-1k-seq-cache-hit');
    assert.equal(teamOf('json-1k-seq', 'sightline-embedded'), 'bench-json-1k-seq');
  });
});

describe('bench gateway configuration', () => {
  const shipped = readFileSync(fileURLToPath(new URL('../../config/sightline.yaml', import.meta.url)), 'utf8');
  const env = (name: string): string | undefined => ({ OPENAI_BASE_URL: 'http://127.0.0.1:1/v1', ANTHROPIC_BASE_URL: 'http://127.0.0.1:1' })[name];
  it('adds an exact cached route for the cached model; every other model routes as shipped', () => {
    const config = parseConfig(benchConfig(shipped), 'bench.yaml', { env });
    const base = parseConfig(shipped, 'shipped.yaml', { env });
    assert.equal(config.routes.length, base.routes.length + 1);
    const router = new Router(config.routes);
    const cached = router.match(CACHED_MODEL);
    assert.equal(cached?.pattern, CACHED_MODEL, 'the exact name wins over gpt-*');
    assert.equal(cached?.route.cacheTtlMs, 12 * 3_600_000, 'outlives any scenario: the hit arm relies on one stored entry');
    for (const m of [OPENAI_MODEL, 'claude-3-5-haiku-20241022']) {
      assert.equal(router.match(m)?.route.cacheTtlMs, 0, m);
      assert.equal(router.match(m)?.pattern, new Router(base.routes).match(m)?.pattern, m);
    }
  });
  it('refuses a configuration without a routes list', () => {
    assert.throws(() => benchConfig('gateway:\n  port: 1\n'), /no top-level routes/);
  });
});

describe('uniqueBodies', () => {
  it('makes every body different, of the same length and still JSON', () => {
    const base = Buffer.from(`{"model":"m","messages":[{"role":"user","content":"${UNIQUE_MARKER} padding"}]}`);
    const next = uniqueBodies(base);
    const seen = new Set<string>();
    for (let i = 0; i < 1000; i++) {
      const b = next();
      assert.equal(b.length, base.length);
      const text = b.toString('utf8');
      JSON.parse(text);
      assert.match(text, /"uniq-\d{12} padding"/);
      seen.add(text);
    }
    assert.equal(seen.size, 1000);
    assert.ok(base.toString().includes(UNIQUE_MARKER), 'the template itself is never changed');
  });
  it('refuses a body without the marker', () => {
    assert.throws(() => uniqueBodies(Buffer.from('{}')), /must contain uniq-/);
  });
});

describe('embedded and controls targets', () => {
  it('embedded ratio: embedded added p99 over the separate-process one, undefined at or under 0', () => {
    assert.equal(embeddedRatio(900, 450), 2);
    assert.equal(embeddedRatio(900, 0), undefined);
    assert.equal(embeddedRatio(undefined, 450), undefined);
    const met = embeddedCheck([scenario(EMBEDDED_SCENARIO, [row('sightline', { added_p99_us: 400 }), row('sightline-embedded', { added_p99_us: 800 })])]);
    assert.equal(met.met, true);
    assert.equal(met.value, 2);
    const missed = embeddedCheck([scenario(EMBEDDED_SCENARIO, [row('sightline', { added_p99_us: 400 }), row('sightline-embedded', { added_p99_us: 801 })])]);
    assert.equal(missed.met, false);
    assert.equal(embeddedCheck([]).met, null);
  });
  it('all controls within 20 µs of the default at p50, and a hit under a miss', () => {
    const rows = (all: number, hit: number): ScenarioResult[] => [
      scenario(CONTROLS_SCENARIO, [row('ctl-none', { added_p50_us: 100 }), row('ctl-all', { added_p50_us: all }), row('ctl-cache-miss', { added_p50_us: 110 }), row('ctl-cache-hit', { added_p50_us: hit })]),
    ];
    const [allOk, hitOk] = controlsChecks(rows(120, 90));
    assert.equal(allOk?.value, 20);
    assert.equal(allOk?.met, true);
    assert.equal(hitOk?.value, 20);
    assert.equal(hitOk?.met, true);
    const [allBad, hitBad] = controlsChecks(rows(121, 110));
    assert.equal(allBad?.met, false);
    assert.equal(hitBad?.met, false, 'a hit no cheaper than a miss fails');
    assert.ok(controlsChecks([]).every((c) => c.met === null && c.value === null));
    assert.equal(targets([], null).filter((c) => c.met === null).length, targets([], null).length);
  });
  it('renders the matrix with the per-round difference from the default', () => {
    const s = scenario(CONTROLS_SCENARIO, [row('ctl-none', { added_p50_us: 100, added_p99_us: 300, captured: 10, sent: 10 }), row('ctl-limits', { added_p50_us: 104, added_p99_us: 310, captured: 10, sent: 10 })], {
      comparisons: [
        { a: 'ctl-limits', b: 'ctl-none', metric: 'p50', difference_us: { mean: 4, lo: 1, hi: 7, n: 5 }, distinguishable: true },
        { a: 'ctl-limits', b: 'ctl-none', metric: 'p99', difference_us: { mean: 10, lo: -30, hi: 50, n: 5 }, distinguishable: false },
      ],
    });
    const lines = controlsTable([s]);
    assert.ok(lines.includes('| ctl-none | – | – | – | 100 | 300 | – | – | 1.00 | 10/10 |  |'), lines.join('\n'));
    assert.ok(lines.includes('| ctl-limits | on | – | – | 104 | 310 | 4 [1, 7] | 10 [-30, 50] | 1.04 | 10/10 |  |'), lines.join('\n'));
    assert.deepEqual(controlsTable([scenario('json-1k-seq', [])]), []);
  });
  it('adds the TTFT columns for a streamed controls scenario, one table per scenario', () => {
    const sse = scenario('controls-sse', [row('ctl-none', { added_p50_us: 900, added_p99_us: 2000, ttft_p50_us: 5400, added_ttft_p50_us: 300 }), row('ctl-cache-hit', { added_p50_us: -4000, added_p99_us: 100, ttft_p50_us: 600, added_ttft_p50_us: -4500 })], {
      comparisons: [{ a: 'ctl-cache-hit', b: 'ctl-none', metric: 'ttft_p50', difference_us: { mean: -4800, lo: -5000, hi: -4600, n: 12 }, distinguishable: true }],
    });
    const lines = controlsTable([scenario(CONTROLS_SCENARIO, [row('ctl-none', { added_p50_us: 100 })]), sse]);
    assert.equal(lines.filter((l) => l.startsWith('## ')).length, 2);
    assert.ok(lines.includes('| ctl-cache-hit | – | – | hit | -4000 | 100 | – | – | -4.44 | -4500 | -4800 [-5000, -4600] | – |  |'), lines.join('\n'));
  });
});

describe('Responses API scenario', () => {
  it('posts 1,024 bytes of Responses API JSON to /v1/responses, to every classic arm', () => {
    for (const quick of [true, false]) {
      const s = buildPlan(quick).scenarios.find((x) => x.name === 'responses-1k-seq');
      assert.ok(s !== undefined);
      const t = template('sightline', TARGET, s.name, s.request, s.directRequest, s.portkeyProvider, s.armRequests);
      assert.equal(t.path, '/v1/responses');
      assert.equal(Buffer.byteLength(t.body), 1024);
      const body = JSON.parse(t.body) as { model: string; store: boolean; input: string };
      assert.equal(body.model, OPENAI_MODEL);
      assert.equal(body.store, false);
      assert.ok(body.input.length > 900);
      const running = ARMS.filter((a) => a !== 'direct' && s.notApplicable[a] === undefined);
      assert.deepEqual(running, ['sightline', 'sightline-nocapture', 'node-proxy', 'nginx', 'portkey']);
    }
  });
});
