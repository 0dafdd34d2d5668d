/**
 * The shape of bench/results/*.json and its markdown rendering. Field names are in snake_case
 * with their unit as suffix (`_us`, `_mb`, `_ms`), because people read and diff these files.
 */
import type { ArmName } from './scenarios.js';
import { CONTROL_ARMS, CONTROL_VARIANTS, isControlsScenario } from './scenarios.js';
import type { Interval } from './stats.js';

export type ArmStatus = 'ok' | 'unsupported' | 'not available' | 'n/a';

export interface BlockRow {
  id: string;
  p50_us: number;
  p99_us: number;
  /** Streams: the block's time-to-first-token p50. */
  ttft_p50_us?: number;
  rps: number;
  errors: number;
  /** Requests the driver issued in the block (prewarm included). */
  attempted: number;
  /** Requests the mock counted in the block (GET /_mock/stats). */
  mock_requests: number;
  truncated: boolean;
}

export interface ArmRow {
  arm: ArmName;
  status: ArmStatus;
  /** Why the arm is not `ok`, or the probe's answer when it is `unsupported`. */
  note?: string;
  /** Every request sent to the arm in this scenario: probe, per-block prewarm and measured. */
  sent?: number;
  /** Measured requests. */
  measured?: number;
  ok?: number;
  errors?: number;
  error_rate?: number;
  error_kinds?: Record<string, number>;
  error_samples?: string[];
  /** Measured requests by HTTP status ("0": no response). */
  status_counts?: Record<string, number>;
  p50_us?: number;
  p90_us?: number;
  p99_us?: number;
  p999_us?: number;
  max_us?: number;
  /** Arm minus the direct floor (mean of the before/after control blocks), per percentile. */
  added_p50_us?: number;
  added_p99_us?: number;
  ttfb_p50_us?: number;
  ttfb_p99_us?: number;
  /** Streams: time to first token, its added value, and the largest inter-chunk gap per request. */
  ttft_p50_us?: number;
  ttft_p99_us?: number;
  added_ttft_p50_us?: number;
  added_ttft_p99_us?: number;
  gap_p50_us?: number;
  gap_p99_us?: number;
  added_gap_p99_us?: number;
  /** Successful requests per second over the measured blocks. */
  rps?: number;
  /** Largest VmRSS of the proxy process(es) under test seen after its blocks, MiB. */
  rss_mb?: number;
  /** Sightline: rows in ClickHouse `sightline.requests FINAL` for this arm's instance and scenario. */
  captured?: number;
  /**
   * Sightline: the gateway's own time per request as it recorded it (`gateway_ns`: total
   * minus the wait on the provider), over the captured rows of this scenario, µs.
   */
  recorded_gateway_p50_us?: number;
  recorded_gateway_p99_us?: number;
  /**
   * Sightline with a content thread: over this scenario's blocks, the records it handed over,
   * how many of them its serving thread made itself (the thread held its bound of unanswered
   * work, or failed), and the thread's batches answered more than 1 s late (its /metrics). On
   * the first arm a gateway serves; `arms` names every arm of the scenario it served.
   */
  content_thread?: { recorded: number; made_here: number; late_batches: number; arms: string[] };
  /** Sightline: p50 of each stage span of this scenario's captured requests, µs to 0.1 (docs/schema.md). */
  recorded_stage_p50_us?: Record<string, number>;
  /**
   * Sightline: p50 of the `auth` stage of this scenario's captured requests, µs to 0.1: the key
   * lookup with authentication on, reading the team header with it off (issue 10: "within a
   * few microseconds").
   */
  auth_stage_p50_us?: number;
  /**
   * Per-block figures with 95 % intervals (issue 15 item 3; stats.ts tInterval): the mean of
   * the arm's block p99s; and against the direct block of the same round, the mean per-round
   * added p50 / p99 (and TTFT p50 for streams). A t-interval over the blocks, n = rounds.
   */
  p99_blocks?: Interval;
  added_p50_blocks?: Interval;
  added_p99_blocks?: Interval;
  ttft_p50_blocks?: Interval;
  added_ttft_p50_blocks?: Interval;
  blocks?: BlockRow[];
}

/**
 * Arm `a` minus arm `b`, per round (their blocks of the same round), with a 95 % t-interval of
 * the mean difference; `distinguishable` when the interval excludes 0 (scenarios.ts COMPARISONS).
 */
export interface Comparison {
  a: ArmName;
  b: ArmName;
  metric: 'p50' | 'p99' | 'ttft_p50';
  difference_us: Interval;
  distinguishable: boolean;
}

export interface DirectControl {
  before: { p50_us: number; p99_us: number; ttft_p50_us?: number };
  after: { p50_us: number; p99_us: number; ttft_p50_us?: number };
  /** |after − before| / mean, of p50. */
  p50_drift: number;
}

export interface ScenarioResult {
  name: string;
  title: string;
  driver: string;
  mock: Record<string, number>;
  /** Share of the machine's CPU used by processes outside this run during the scenario, %. */
  foreign_cpu_pct?: number;
  control?: DirectControl;
  arms: ArmRow[];
  comparisons?: Comparison[];
}

export interface LadderStep {
  rate: number;
  /** Measured requests of the step (the connection burst before it is not included). */
  sent: number;
  ok: number;
  errors: number;
  error_kinds: Record<string, number>;
  p50_us: number;
  p99_us: number;
  added_p99_us?: number;
  achieved_rps: number;
  max_send_lag_us: number;
  answered_all: boolean;
  /** Sightline: rows captured for the step, connection burst included (`capture_expected`). */
  captured?: number;
  capture_expected?: number;
  rss_mb?: number;
  mock_requests: number;
  /** CPU used over the step (sending and drain), % of one core: driver, mock, proxy under test. */
  cpu_pct: Record<string, number>;
  /**
   * CPU time per answered request over the step (sending and drain), µs, all threads: `mock`;
   * `proxy`, the process under test; `content`, the part of `proxy` spent in its `SCHED_IDLE`
   * threads (a Sightline gateway's content thread). Unlike `cpu_pct` it does not shrink when a
   * slow step's drain makes the step longer. Absent for the direct floor's proxy and content.
   */
  cpu_us_per_request?: Record<string, number>;
}

export interface LadderArm {
  arm: ArmName;
  status: ArmStatus;
  note?: string;
  steps: LadderStep[];
  /** Highest rate at which every request was answered (and, for Sightline, captured). */
  max_ok_rate: number | null;
}

export interface Gate {
  name: string;
  scope: string;
  passed: boolean;
  detail: string;
}

export interface Check {
  name: string;
  value: number | null;
  want: string;
  met: boolean | null;
  detail: string;
}

export interface Rig {
  cpu_model: string;
  cores: number;
  memory_gb: number;
  kernel: string;
  node: string;
  network_namespace: boolean;
  pinning: string;
  processes: { role: string; pid: number; cpus: string }[];
  versions: Record<string, string>;
  /** Kernel network settings of the run's namespace. */
  net: Record<string, string>;
}

export interface RunResults {
  schema: 1;
  mode: 'quick' | 'full';
  started_at: string;
  finished_at: string;
  wall_s: number;
  rig: Rig;
  method: Record<string, string | number>;
  scenarios: ScenarioResult[];
  ladder: { mock_latency_ms: number; step_ms: number; rates: number[]; foreign_cpu_pct: number; arms: LadderArm[] } | null;
  ratios: Check[];
  targets: Check[];
  gates: Gate[];
  passed: boolean;
}

const dash = '–';

function us(v: number | undefined): string {
  return v === undefined ? dash : String(Math.round(v));
}

/** `mean [lo, hi]` of a 95 % interval, µs. */
export function interval(i: Interval | undefined): string {
  return i === undefined ? dash : `${i.mean} [${i.lo}, ${i.hi}]`;
}

/** One line per compared pair of a scenario: a − b per round, with its interval. */
export function comparisonLines(scenarios: readonly ScenarioResult[]): string[] {
  const out: string[] = [];
  for (const s of scenarios) {
    for (const c of s.comparisons ?? []) {
      out.push(`- ${s.name}: ${c.a} − ${c.b}, ${c.metric.replace('_', ' ')}: ${interval(c.difference_us)} µs over ${c.difference_us.n} rounds — ${c.distinguishable ? 'a difference beyond noise' : 'within noise (the interval holds 0)'}`);
    }
  }
  return out;
}

/**
 * The controls matrix (issue 12): each control arm's added p50 / p99 over the direct floor, its
 * difference from the default arm per round with a 95 % interval, and its added p50 over the
 * default's. Empty when the controls scenario did not run.
 */
export function controlsTable(scenarios: readonly ScenarioResult[]): string[] {
  const out: string[] = [];
  for (const s of scenarios.filter((x) => isControlsScenario(x.name))) {
    const none = s.arms.find((a) => a.arm === 'ctl-none');
    const stream = s.arms.some((a) => a.ttft_p50_us !== undefined);
    out.push(
      `## ${s.title}, \`${s.name}\``,
      '',
      'The capturing, authenticating `sightline` gateway; each arm a team with these controls (limits and budget high enough never to refuse). "vs default": this arm\'s block minus the `ctl-none` block of the same round, mean [95 % t-interval], µs.',
      '',
      `| arm | limits | budget | cache | added p50 | added p99 | p50 vs default, blocks | p99 vs default, blocks | added p50 / default's |${stream ? ' added TTFT p50 | TTFT p50 vs default, blocks |' : ''} captured/sent | note |`,
      `|---|---|---|---|---:|---:|---:|---:|---:|${stream ? '---:|---:|' : ''}---:|---|`,
    );
    for (const arm of CONTROL_ARMS) {
      const r = s.arms.find((a) => a.arm === arm);
      if (r === undefined) continue;
      const v = CONTROL_VARIANTS[arm];
      const vs = (metric: Comparison['metric']): string => (arm === 'ctl-none' ? dash : interval(s.comparisons?.find((c) => c.a === arm && c.b === 'ctl-none' && c.metric === metric)?.difference_us));
      const ratio = r.added_p50_us !== undefined && none?.added_p50_us !== undefined && none.added_p50_us > 0 ? (r.added_p50_us / none.added_p50_us).toFixed(2) : dash;
      const captured = r.captured === undefined ? dash : `${r.captured}/${r.sent ?? 0}`;
      const ttft = stream ? ` ${us(r.added_ttft_p50_us)} | ${vs('ttft_p50')} |` : '';
      out.push(`| ${arm} | ${v.limits ? 'on' : dash} | ${v.budget ? 'on' : dash} | ${v.cache === 'off' ? dash : v.cache} | ${us(r.added_p50_us)} | ${us(r.added_p99_us)} | ${vs('p50')} | ${vs('p99')} | ${ratio} |${ttft} ${captured} | ${rowNote(r)} |`);
    }
    out.push('');
  }
  return out;
}

function rowNote(r: ArmRow): string {
  if (r.status === 'ok') return '';
  return `${r.status}${r.note === undefined ? '' : `: ${r.note.replace(/\s+/g, ' ').replace(/\|/g, '/').slice(0, 90)}`}`;
}

/**
 * The `auth` stage p50 of every captured arm, so "the auth stage p50 stays within a few
 * microseconds" (issue 10) reads off the report: with authentication on it is the key lookup,
 * with it off the team header read. Empty when no arm recorded one.
 */
export function authStageLine(scenarios: readonly ScenarioResult[]): string {
  const parts = scenarios.flatMap((s) => s.arms.filter((a) => a.auth_stage_p50_us !== undefined).map((a) => `${s.name} ${a.arm} ${a.auth_stage_p50_us}`));
  if (parts.length === 0) return '';
  return `\`auth\` stage p50 µs (\`sightline\`: the key lookup, authentication on; \`sightline-noauth\`: the team header read): ${parts.join('; ')}.`;
}

/**
 * Per capturing arm and scenario, the records its serving thread made itself of those handed
 * over, and the content thread's late batches: a record made there costs the next request its
 * content's preparation (64 KiB prompts: hundreds of µs). Empty when no arm reported them.
 */
export function contentThreadLine(scenarios: readonly ScenarioResult[]): string {
  const parts = scenarios.flatMap((s) =>
    s.arms.flatMap((a) => (a.content_thread === undefined ? [] : [`${s.name} ${a.content_thread.arms.join(' + ')} ${a.content_thread.made_here} of ${a.content_thread.recorded} (${a.content_thread.late_batches} late)`])),
  );
  if (parts.length === 0) return '';
  return `Records made on a capturing gateway's serving thread, of those its scenario's blocks handed over (the content thread held its bound of unanswered work, 4 MiB, or failed), and the thread's batches answered more than 1 s late, per gateway (arms joined by + share one): ${parts.join('; ')}.`;
}

/** The markdown table printed at the end of a run and written to bench/results/latest.md. */
export function renderMarkdown(r: RunResults): string {
  const out: string[] = [];
  out.push(`# Sightline benchmark — ${r.mode} mode, ${r.started_at}`);
  out.push('');
  const workers = Number(r.method.gateway_workers ?? 1);
  out.push(`Rig: ${r.rig.cpu_model}, ${r.rig.cores} cores, ${r.rig.memory_gb} GB, Linux ${r.rig.kernel}, Node ${r.rig.node}. ${r.rig.pinning}${workers > 1 ? ` Sightline gateways: ${workers} worker processes each (GATEWAY_WORKERS).` : ''}`);
  out.push(`Wall time ${r.wall_s} s. Validity gates: **${r.passed ? 'passed' : 'FAILED'}**.`);
  out.push('');
  out.push('Latencies in µs. "added" = arm − direct floor (mean of the control blocks before and after the arms), per percentile, same run.');
  out.push('');
  out.push('"blocks" columns: the mean over the interleaved blocks with its 95 % t-interval [lo, hi] (n = rounds); "added … blocks" pairs each block with the direct block of the same round. A difference whose interval holds 0 cannot be told from noise in this run.');
  out.push('');
  out.push('| scenario | arm | p50 | p99 | added p50 | added p99 | block p99, blocks | added p99, blocks | TTFT p50 | added TTFT p50 | added TTFT p50, blocks | gap p99 | req/s | errors | RSS MB | captured/sent | note |');
  out.push('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|');
  for (const s of r.scenarios) {
    for (const a of s.arms) {
      const captured = a.captured === undefined ? dash : `${a.captured}/${a.sent ?? 0}`;
      const errors = a.status === 'ok' ? `${a.errors ?? 0}` : dash;
      out.push(
        `| ${s.name} | ${a.arm} | ${us(a.p50_us)} | ${us(a.p99_us)} | ${us(a.added_p50_us)} | ${us(a.added_p99_us)} | ${interval(a.p99_blocks)} | ${interval(a.added_p99_blocks)} | ${us(a.ttft_p50_us)} | ${us(a.added_ttft_p50_us)} | ${interval(a.added_ttft_p50_blocks)} | ${us(a.gap_p99_us)} | ${a.rps ?? dash} | ${errors} | ${a.rss_mb ?? dash} | ${captured} | ${rowNote(a)} |`,
      );
    }
  }
  out.push('');
  const comps = comparisonLines(r.scenarios);
  if (comps.length > 0) {
    out.push('Arm against arm, per round (block of a minus block of b in the same round; mean and 95 % t-interval, µs):');
    out.push('');
    out.push(...comps);
    out.push('');
  }
  out.push(...controlsTable(r.scenarios));
  const drifts = r.scenarios.filter((s) => s.control !== undefined);
  if (drifts.length > 0) {
    out.push('Direct control blocks (p50 µs before → after, drift; CPU used by other tenants of the machine during the scenario): ' + drifts.map((s) => `${s.name} ${s.control?.before.p50_us} → ${s.control?.after.p50_us} (${((s.control?.p50_drift ?? 0) * 100).toFixed(1)} %; ${s.foreign_cpu_pct ?? '?'} % foreign CPU)`).join('; ') + '.');
    out.push('');
  }
  const recorded = r.scenarios.flatMap((s) => s.arms.filter((a) => a.recorded_gateway_p50_us !== undefined).map((a) => `${s.name} ${a.arm} ${a.recorded_gateway_p50_us} / ${a.recorded_gateway_p99_us}`));
  if (recorded.length > 0) {
    out.push(`Sightline's own time per request as it recorded it in ClickHouse (\`gateway_ns\` = total − wait on the provider, from request headers parsed to response written; p50 / p99 µs): ${recorded.join('; ')}. Unlike "added", it leaves out the kernel, the client and the machine's scheduling.`);
    out.push('');
    for (const s of r.scenarios) {
      for (const a of s.arms) {
        const st = a.recorded_stage_p50_us;
        if (st === undefined) continue;
        out.push(`- ${s.name} ${a.arm}, stage p50 µs: ${Object.entries(st).map(([k, v]) => `${k} ${v}`).join(', ')}`);
      }
    }
    out.push('');
  }
  const content = contentThreadLine(r.scenarios);
  if (content !== '') {
    out.push(content);
    out.push('');
  }
  const auth = authStageLine(r.scenarios);
  if (auth !== '') {
    out.push(auth);
    out.push('');
  }
  const cpuPerRequest = (c: Record<string, number> | undefined): string => {
    if (c === undefined) return dash;
    const proxy = c['proxy'] === undefined ? dash : `${c['proxy']}${c['content'] ? ` (${c['content']})` : ''}`;
    return `${proxy} / ${c['mock'] ?? dash}`;
  };
  if (r.ladder !== null) {
    out.push(`## Open-loop ladder (mock answers after ${r.ladder.mock_latency_ms} ms, ${r.ladder.step_ms / 1000} s per step, latency from the intended send time)`);
    out.push('');
    out.push('| arm | rate req/s | answered/sent | p50 ms | p99 ms | added p99 ms | captured/expected | max send lag ms | RSS MB | CPU µs/req: proxy (content thread) / mock |');
    out.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const a of r.ladder.arms) {
      if (a.steps.length === 0) {
        out.push(`| ${a.arm} | ${dash} | ${dash} | ${dash} | ${dash} | ${dash} | ${dash} | ${dash} | ${dash} | ${dash} |`);
        continue;
      }
      for (const st of a.steps) {
        const ms = (v: number | undefined): string => (v === undefined ? dash : (v / 1000).toFixed(1));
        out.push(
          `| ${a.arm} | ${st.rate} | ${st.ok}/${st.sent} | ${ms(st.p50_us)} | ${ms(st.p99_us)} | ${ms(st.added_p99_us)} | ${st.captured === undefined ? dash : `${st.captured}/${st.capture_expected ?? '?'}`} | ${ms(st.max_send_lag_us)} | ${st.rss_mb ?? dash} | ${cpuPerRequest(st.cpu_us_per_request)} |`,
        );
      }
    }
    out.push('');
    out.push('Highest rate with every request answered (Sightline: and captured): ' + r.ladder.arms.map((a) => `${a.arm} ${a.max_ok_rate === null ? (a.status === 'ok' ? 'none' : a.status) : `${a.max_ok_rate} req/s`}`).join(', ') + '.');
    out.push('');
  }
  out.push('## Ratios and targets');
  out.push('');
  out.push('| check | value | want | met | detail |');
  out.push('|---|---:|---|---|---|');
  for (const c of [...r.ratios, ...r.targets]) {
    const v = c.value === null ? dash : Number.isFinite(c.value) ? String(Math.round(c.value * 100) / 100) : '∞';
    out.push(`| ${c.name} | ${v} | ${c.want} | ${c.met === null ? dash : c.met ? 'yes' : 'no'} | ${c.detail} |`);
  }
  out.push('');
  out.push('## Validity gates');
  out.push('');
  const failed = r.gates.filter((g) => !g.passed);
  out.push(`${r.gates.length - failed.length} of ${r.gates.length} passed.`);
  for (const g of failed) out.push(`- FAILED ${g.name} (${g.scope}): ${g.detail}`);
  out.push('');
  return out.join('\n');
}
