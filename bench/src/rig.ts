/** The rig section of the results: the machine, versions, CPU placement and network settings. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, release, totalmem } from 'node:os';
import { chVersion } from './clickhouse.js';
import { nginxVersion } from './peers/nginx.js';
import { portkeyVersion } from './peers/portkey.js';
import { affinityOf, findBinary } from './procs.js';
import type { Pinning } from './procs.js';
import type { Rig } from './report.js';
import { BENCH } from './stack.js';
import type { Stack } from './stack.js';

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

export async function rig(stack: Stack, pin: Pinning | null, netns: boolean, driverPid: number | undefined): Promise<Rig> {
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

export function pinningText(pin: Pinning | null): string {
  if (pin === null) return 'No CPU pinning: the kernel places every process.';
  if (pin.layout === 'apart') {
    return `Pinned with taskset (layout "apart"): CPU ${pin.load} = driver, orchestrator, NATS, ClickHouse, ingester; CPU ${pin.proxy} = mock and the proxy under test (gateways, node-proxy, nginx, portkey; one busy at a time).`;
  }
  return `Pinned with taskset (layout "split"): CPU ${pin.proxy} = the proxy under test alone (gateways, node-proxy, nginx, portkey; one busy at a time); CPU ${pin.load} = driver, mock, orchestrator, NATS, ClickHouse, ingester.`;
}
