/**
 * Process plumbing for the benchmark: spawning a server pinned to a core, waiting for it,
 * reading its resident memory, and stopping it by pid. Only processes this run started are
 * ever signalled, each by its own pid.
 */
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Which CPU each role runs on; null when the run does not pin (docs/benchmarks.md discusses the
 * layouts). The proxies all live on `proxy` and are busy one at a time.
 */
export interface Pinning {
  layout: 'apart' | 'split';
  /** Orchestrator, driver, NATS, ClickHouse, ingester. */
  load: number;
  /** The mock provider. */
  mock: number;
  /** The proxy under test (gateways, node-proxy, nginx, portkey). */
  proxy: number;
}

export const PIN_LAYOUTS = {
  /**
   * Driver apart: the driver (and the capture pipeline) on CPU 0, mock and proxies on CPU 1. The
   * floor (driver → mock) and every arm (driver → proxy → mock) cross between the cores the same
   * number of times, so the added latency holds the proxy's own work and its loopback hop, not
   * the machine's cross-core wake-up cost. The default.
   */
  apart: { layout: 'apart', load: 0, mock: 1, proxy: 1 },
  /**
   * Proxy alone: the proxy under test has CPU 1 to itself, everything else shares CPU 0. Every
   * arm then pays two cross-core wake-ups per request that the floor does not, which on this
   * virtual machine adds ~100 µs to every proxy arm alike.
   */
  split: { layout: 'split', load: 0, mock: 0, proxy: 1 },
} as const satisfies Record<string, Pinning>;

export function findBinary(name: string): string | undefined {
  for (const dir of (process.env['PATH'] ?? '').split(':').concat(['/usr/sbin', '/usr/bin', '/usr/local/bin', '/sbin'])) {
    if (dir === '') continue;
    const p = join(dir, name);
    if (existsSync(p)) return p;
  }
  return undefined;
}

/** A server process started by the benchmark, with the tail of its output for diagnostics. */
export class Proc {
  output = '';
  readonly exited: Promise<number | null>;

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    const keep = (b: Buffer): void => {
      this.output = (this.output + b.toString()).slice(-8_000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
    // A spawn failure (ENOENT) surfaces as 'error'; 'exit' may not follow.
    child.once('error', (err) => {
      this.output += `\nspawn error: ${err.message}`;
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get running(): boolean {
    return this.child.pid !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** SIGTERM, then SIGKILL after `timeoutMs`; resolves when the process is gone. */
  async stop(timeoutMs = 10_000): Promise<void> {
    if (!this.running) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/**
 * Spawns `cmd args`, under `taskset -c CPU` when `cpu` is given. taskset execs the command,
 * so the child's pid is the server's own pid (what /proc and stop() need).
 */
export function spawnProc(name: string, cmd: string, args: string[], opts: { cwd: string; env?: Record<string, string>; cpu?: number | undefined }): Proc {
  const [bin, argv] = opts.cpu === undefined ? [cmd, args] : ['taskset', ['-c', String(opts.cpu), cmd, ...args]];
  const child = spawn(bin, argv, {
    cwd: opts.cwd,
    env: { ...process.env, ...(opts.env ?? {}) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Proc(name, child);
}

/**
 * Moves every thread of a running process to `cpu` (taskset -a -p). Used for processes started
 * by helpers that spawn them themselves (test/support/apps.ts); threads created later inherit
 * the main thread's mask.
 */
export function pinPid(pid: number, cpu: number): void {
  execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { stdio: 'ignore' });
}

/** A pid and its child processes (e.g. a gateway's cluster workers), from /proc. */
export function withChildren(pid: number): number[] {
  const out = [pid];
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const kids = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim();
      if (kids !== '') for (const k of kids.split(/\s+/)) out.push(Number(k));
    }
  } catch {
    // Gone, or no /proc: the pid alone.
  }
  return out;
}

/** The CPU list a pid may run on, as taskset prints it (e.g. "1"), or "?" when unreadable. */
export function affinityOf(pid: number): string {
  try {
    const out = execFileSync('taskset', ['-c', '-p', String(pid)], { encoding: 'utf8' });
    return out.split(':').pop()?.trim() ?? '?';
  } catch {
    return '?';
  }
}

/** VmRSS of a pid in MiB (from /proc/PID/status), or undefined when it is gone. */
export function rssMb(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return m?.[1] === undefined ? undefined : Math.round((Number(m[1]) / 1024) * 10) / 10;
  } catch {
    return undefined;
  }
}

/**
 * The fields of a /proc stat file (proc(5)) from field 3 (state) on: the command name (field 2)
 * is in parentheses and may hold spaces, so they are counted from after it. Field n is at n − 3.
 * Throws when the file cannot be read (the process or thread ended).
 */
function statFields(path: string): string[] {
  const stat = readFileSync(path, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** utime + stime (fields 14 and 15) of stat fields read by statFields. */
const cpuTicksOf = (f: string[]): number => Number(f[11] ?? 0) + Number(f[12] ?? 0);

/** Pids whose parent is `pid` (e.g. nginx's worker under its master), found in /proc. */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // Field 4 is the ppid.
      if (Number(statFields(`/proc/${entry}/stat`)[1]) === pid) out.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return out;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `check` every `everyMs` until it returns true; throws after `timeoutMs`. */
export async function waitUntil(what: string, check: () => Promise<boolean> | boolean, timeoutMs: number, everyMs = 100): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      if (await check()) return;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last === undefined ? '' : `: ${last instanceof Error ? last.message : String(last)}`}`);
    }
    await sleep(everyMs);
  }
}

/** Waits for `url` to answer with `status` (any status when undefined), failing early if `proc` exits. */
export async function waitHttp(proc: Proc, url: string, timeoutMs: number, status?: number): Promise<void> {
  await waitUntil(
    `${proc.name} at ${url}`,
    async () => {
      if (!proc.running) throw new Error(`${proc.name} exited: ${proc.output.slice(-2_000)}`);
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) }).catch(() => null);
      if (res === null) return false;
      await res.arrayBuffer();
      return status === undefined || res.status === status;
    },
    timeoutMs,
  );
}

/** CPU time of the whole machine, in clock ticks, from /proc/stat. */
export interface CpuSample {
  busy: number;
  total: number;
  /** utime + stime of the run's own processes. */
  ours: number;
}

/** Clock ticks per second of /proc's CPU times (getconf CLK_TCK; 100 on Linux x86-64). */
let clkTck: number | undefined;
export function ticksPerSecond(): number {
  if (clkTck === undefined) {
    try {
      clkTck = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clkTck = 100;
    }
  }
  return clkTck;
}

/** Linux's number for SCHED_IDLE (include/uapi/linux/sched.h): the gateway's content thread runs at it. */
const SCHED_IDLE = 5;

/**
 * utime + stime of a process's threads in clock ticks, split into its `SCHED_IDLE` threads
 * (a Sightline gateway's content thread, apps/gateway/src/thread-priority.ts) and the rest.
 * Threads that ended before the call are not counted; {0, 0} when the process is gone.
 */
export function threadTicks(pid: number): { idle: number; other: number } {
  const out = { idle: 0, other: 0 };
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const f = statFields(`/proc/${pid}/task/${tid}/stat`);
      const t = cpuTicksOf(f);
      // Field 41: the scheduling policy.
      if (Number(f[38]) === SCHED_IDLE) out.idle += t;
      else out.other += t;
    } catch {
      // The thread ended while we looked.
    }
  }
  return out;
}

/** utime + stime of a process (all its threads), in clock ticks; 0 when it is gone. */
export function procTicks(pid: number): number {
  try {
    return cpuTicksOf(statFields(`/proc/${pid}/stat`));
  } catch {
    return 0;
  }
}

/**
 * Samples the machine's busy time and the run's own processes' time, so that the share of the
 * CPU used by other tenants of this shared machine during a scenario can be reported next to
 * its figures (a noisy neighbour explains a drift gate failing).
 */
export function sampleCpu(pids: number[]): CpuSample {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? '';
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = f;
  const busy = user + nice + system + irq + softirq + steal;
  const all = new Set<number>();
  for (const pid of pids) {
    if (pid <= 0) continue;
    all.add(pid);
    for (const c of childPids(pid)) all.add(c);
  }
  let ours = 0;
  for (const pid of all) ours += procTicks(pid);
  return { busy, total: busy + idle + iowait, ours };
}

/** Percentage of the machine's CPU capacity used by processes outside the run between two samples. */
export function foreignCpuPct(a: CpuSample, b: CpuSample): number {
  const total = b.total - a.total;
  if (total <= 0) return 0;
  const foreign = Math.max(0, b.busy - a.busy - (b.ours - a.ours));
  return Math.round((foreign / total) * 1000) / 10;
}
