/**
 * What every phase of a run shares (warmup.ts, blocks.ts, ladder.ts, run.ts): the plan, the
 * started processes and the driver, the gates recorded so far, the requests sent per capturing
 * Sightline arm and team, and the two primitives every phase measures with: one block against one arm
 * (`measure`) and the wait for capture to catch up (`waitCaptured`).
 */
import type { DriverClient } from './driver-client.js';
import { sampleCpu, sleep } from './procs.js';
import type { CpuSample } from './procs.js';
import { chQuery, countCaptured } from './clickhouse.js';
import type { Gate } from './report.js';
import { template } from './scenarios.js';
import type { ArmName, Plan, Scenario } from './scenarios.js';
import { CH_DATABASE, sumRss } from './stack.js';
import type { Arm, Stack } from './stack.js';
import type { BlockResult, BlockSpec, RequestTemplate } from './types.js';
import { log, message } from './log.js';

/**
 * A completeness wait stops early when the row count has not changed for this long: the
 * gateway flushes every 50 ms and the ingester writes within ~1 s, so 8 s without a new row
 * means capture is stuck, not slow.
 */
const STALL_MS = 8_000;
/** Once capture was seen stuck in this run, later waits stop after this long without progress. */
const STALL_AGAIN_MS = 2_000;
/** After a stalled wait, how long the count is still watched (logged only) to tell slow from stuck. */
const RECOVERY_WATCH_MS = 30_000;
/** The parts of nats-server's /jsz?consumers=true that stallReport reads. */
interface JszReport {
  account_details?: {
    stream_detail?: {
      name: string;
      state?: { messages?: number; bytes?: number };
      consumer_detail?: { name: string; num_pending?: number; num_ack_pending?: number; num_waiting?: number; num_redelivered?: number; delivered?: { stream_seq?: number }; ack_floor?: { stream_seq?: number } }[];
    }[];
  }[];
}
/** A capturing gateway's content-thread counters, cumulative (Context.contentCounters). */
export interface ContentCounters {
  recorded: number;
  madeHere: number;
  late: number;
}

/** Unlabelled counters and gauges of a /metrics page whose names start with `prefix`, by the rest of their name. */
async function metricValues(origin: string, prefix: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${origin}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
  const out = new Map<string, number>();
  const re = new RegExp(`^${prefix}([a-z_]+) ([0-9.e+-]+)$`);
  for (const l of text.split('\n')) {
    const m = re.exec(l);
    if (m !== null) out.set(m[1]!, Number(m[2]));
  }
  return out;
}

/** Per-request timeout for latency blocks. */
export const REQUEST_TIMEOUT_MS = 30_000;

/** A block's outcome as the orchestrator keeps it. */
export interface Measured {
  result: BlockResult;
  mockRequests: number;
  rss: number | undefined;
}

export class RunContext {
  readonly gates: Gate[] = [];
  /** Set when a completeness wait gave up on a stalled count: later waits give up sooner. */
  captureStuck = false;
  /** Requests sent through each capturing gateway, by `arm/team` (for the final recount). */
  private readonly sentByTeam = new Map<string, number>();
  /** Scopes whose failures were already diagnosed (see `diagnose`). */
  private readonly diagnosed = new Set<string>();

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
   * The gateway's content-thread counters (its /metrics), or undefined when it has none or does
   * not answer: records the serving thread made itself, and batches the thread answered late.
   */
  async contentCounters(arm: Arm): Promise<ContentCounters | undefined> {
    if (arm.target === undefined) return undefined;
    try {
      const values = await metricValues(arm.target.origin, 'sightline_capture_');
      const recorded = values.get('recorded_total');
      const madeHere = values.get('content_made_here_total');
      const late = values.get('content_late_total');
      if (recorded === undefined || madeHere === undefined || late === undefined) return undefined;
      return { recorded, madeHere, late };
    } catch {
      return undefined;
    }
  }

  /** Logs the tail of an arm's output once per scope when its requests fail. */
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
    this.record({ name, scope, passed, detail });
  }

  /** Keeps gates built elsewhere (gates.ts), in order; a failed one is logged at once. */
  record(...gates: Gate[]): void {
    for (const g of gates) {
      this.gates.push(g);
      if (!g.passed) log(`GATE FAILED ${g.name} (${g.scope}): ${g.detail}`);
    }
  }

  /** Runs one block against `arm` with fresh mock counters, then reads them and the arm's RSS. */
  async measure(arm: Arm, spec: BlockSpec): Promise<Measured> {
    await this.stack.mock.reset();
    const result = await this.driver.run(spec);
    // Every answer is in, so the mock has seen every request that reached it.
    const stats = await this.stack.mock.stats();
    this.diagnose(arm, spec.id.split('/').slice(0, 2).join('/'), result);
    // Every Sightline gateway of the run, idle or not, refreshes its providers' model lists in
    // the background (GET /v1/models every 10 minutes, SIGHTLINE_MODELS_REFRESH_MS): those land
    // in whichever block is running, so they are left out of the block's count. No scenario
    // sends /v1/models itself.
    return { result, mockRequests: stats.requests - stats.models, rss: sumRss(arm.pids()) };
  }

  /**
   * Waits until ClickHouse holds `expected` rows for the Sightline instance and `team`; gives up
   * at the plan's deadline, or earlier when the count has not moved for STALL_MS (capture is
   * then stuck, and waiting longer would only stretch the run). Returns the last count seen.
   */
  async waitCaptured(arm: Arm, team: string, expected: number, deadlineMs = this.plan.captureDeadlineMs): Promise<number> {
    const ch = this.stack.ch;
    const instance = arm.instance;
    // The embedded arm counts through its own query API (its chdb is locked to its process).
    const count = arm.count ?? (ch === undefined || instance === undefined ? undefined : (t: string) => countCaptured(ch.url, CH_DATABASE, instance, t));
    if (count === undefined) return 0;
    const deadline = Date.now() + deadlineMs;
    let n = -1;
    let changed = Date.now();
    for (;;) {
      let next = n;
      try {
        next = await count(team);
      } catch (e) {
        log(`${arm.name}: capture count failed: ${message(e)}`);
      }
      if (next !== n) {
        n = next;
        changed = Date.now();
      }
      // More than expected would mean a request counted twice: stop waiting, the gate reports it.
      if (n >= expected || Date.now() > deadline) return n;
      if (Date.now() - changed > (this.captureStuck ? STALL_AGAIN_MS : STALL_MS)) {
        this.captureStuck = true;
        if (arm.count === undefined) await this.stallReport(arm.name, team, expected, n, count);
        return n;
      }
      await sleep(200);
    }
  }

  /** The ingester's counters (its /metrics, `sightline_ingest_*` without the histogram), by name. */
  async ingesterCounters(): Promise<Map<string, number>> {
    const url = this.stack.ingesterUrl;
    if (url === undefined) return new Map();
    const out = await metricValues(url, 'sightline_ingest_');
    for (const name of [...out.keys()]) if (name.includes('histogram')) out.delete(name);
    return out;
  }

  /**
   * Logs what the pipeline behind the run's clickhouse-server was doing when a completeness
   * wait gave up on a stalled count: the ingester's counters and last output lines, the
   * JetStream consumer's state (nats-server's monitoring /jsz), ClickHouse's running queries
   * and merges; then watches the count for up to RECOVERY_WATCH_MS more, to tell a pipeline
   * that was slow (it moves again) from one that was stuck.
   */
  private async stallReport(armName: string, team: string, expected: number, seen: number, count: (team: string) => Promise<number>): Promise<void> {
    const lines = [`${armName}/${team}: capture count stalled at ${seen} of ${expected}`];
    const get = async (what: string, f: () => Promise<string>): Promise<void> => {
      try {
        lines.push(`  ${what}: ${await f()}`);
      } catch (e) {
        lines.push(`  ${what}: unavailable (${message(e)})`);
      }
    };
    const text = async (url: string): Promise<string> => {
      const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
      return res.text();
    };
    const { ingesterUrl, ingester, nats, ch } = this.stack;
    if (ingesterUrl !== undefined) {
      await get('ingester counters', async () =>
        [...(await this.ingesterCounters())]
          .filter(([name]) => !name.startsWith('otlp'))
          .map(([name, v]) => `${name} ${v}`)
          .join(', '),
      );
    }
    if (ingester !== undefined) {
      const tail = ingester.output.split('\n').filter((l) => l.trim() !== '').slice(-10);
      lines.push(`  ingester running: ${ingester.running}; last output lines:${tail.length === 0 ? ' none' : `\n    ${tail.join('\n    ')}`}`);
    }
    if (nats !== undefined && nats.monitorPort !== 0) {
      await get('JetStream', async () => {
        const jsz = JSON.parse(await text(`http://127.0.0.1:${nats.monitorPort}/jsz?consumers=true`)) as JszReport;
        const out: string[] = [];
        for (const acc of jsz.account_details ?? []) {
          for (const st of acc.stream_detail ?? []) {
            if (st.name !== 'SIGHTLINE_SPANS') continue;
            out.push(`stream messages ${st.state?.messages}, bytes ${st.state?.bytes}`);
            for (const c of st.consumer_detail ?? []) {
              out.push(`consumer ${c.name}: pending ${c.num_pending}, ack pending ${c.num_ack_pending}, waiting pulls ${c.num_waiting}, redelivered ${c.num_redelivered}, delivered ${c.delivered?.stream_seq}, ack floor ${c.ack_floor?.stream_seq}`);
            }
          }
        }
        return out.length === 0 ? 'no SIGHTLINE_SPANS stream' : out.join('; ');
      });
    }
    if (ch !== undefined) {
      await get('ClickHouse queries running', async () =>
        (await chQuery(ch.url, "SELECT round(elapsed, 1) AS s, substring(replaceRegexpAll(query, '\\s+', ' '), 1, 90) AS q FROM system.processes WHERE query NOT LIKE '%system.processes%' FORMAT TSV")).trim().replaceAll('\n', ' | ') || 'none',
      );
      await get('ClickHouse merges running', async () => (await chQuery(ch.url, "SELECT count(), round(max(elapsed), 1) FROM system.merges FORMAT TSV")).trim());
    }
    log(lines.join('\n'));
    const until = Date.now() + RECOVERY_WATCH_MS;
    let last = seen;
    while (Date.now() < until) {
      await sleep(1_000);
      const n = await count(team).catch(() => last);
      if (n !== last) {
        log(`${armName}/${team}: the count moved again ${Math.round((RECOVERY_WATCH_MS - (until - Date.now())) / 1000)} s after the wait gave up: ${n} of ${expected} (slow, not stuck)`);
        return;
      }
    }
    log(`${armName}/${team}: the count did not move for ${RECOVERY_WATCH_MS / 1000} s more (${last} of ${expected}): stuck`);
  }

  template(arm: Arm, scenarioName: string, s: Pick<Scenario, 'request' | 'directRequest' | 'portkeyProvider' | 'armRequests'>): RequestTemplate {
    const target = arm.target;
    if (target === undefined) throw new Error(`arm ${arm.name} has no target`);
    return template(arm.name, target, scenarioName, s.request, s.directRequest, s.portkeyProvider, s.armRequests);
  }

  /** Counts requests sent through a capturing gateway under `team`. */
  note(arm: ArmName, team: string, n: number): void {
    const k = `${arm}/${team}`;
    this.sentByTeam.set(k, (this.sentByTeam.get(k) ?? 0) + n);
  }

  /** Requests noted for a capturing gateway and team so far. */
  sent(arm: ArmName, team: string): number {
    return this.sentByTeam.get(`${arm}/${team}`) ?? 0;
  }
}
