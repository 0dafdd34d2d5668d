/**
 * `npm run bench` / `npm run bench -- --quick` (root), i.e. `npm --prefix bench run bench`.
 *
 * This file only reads the flags, checks what the run needs (preflight) and, as root, re-runs
 * itself inside a fresh network namespace that has nothing but loopback (`unshare -n`): every
 * server of the run then lives where only 127.0.0.1 exists, including Portkey, which cannot be
 * told to listen on loopback only. The measurement itself is in run.ts, loaded after the
 * preflight so that a missing `npm --prefix bench install` is reported as such, not as a
 * module resolution stack trace.
 *
 * Flags: --quick (short run, < 5 min), --no-netns, --pin apart|split|none (--no-pin = none),
 * --only a,b (scenario names, for
 * development; `ladder` is one), --help. Exit code: 0 when every validity gate passed, 1 when a
 * gate failed, 2 when the run could not start, 3 when the run hit its overall time bound.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const BENCH = fileURLToPath(new URL('../', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const INNER_ENV = 'SIGHTLINE_BENCH_INNER';

const USAGE = `usage: npm run bench [-- --quick] [--no-netns] [--pin apart|split|none] [--only scenario,...]
  --quick     short run (warm-up 2,200 requests per arm, 5 rounds, ladder 500 and 1,000 req/s)
  --no-netns  do not re-run inside a loopback-only network namespace (Portkey is then skipped)
  --pin       CPU layout with taskset (default apart: driver and capture pipeline on CPU 0,
              mock and proxy under test on CPU 1; split: proxy alone on CPU 1; none)
  --no-pin    same as --pin none
  --arms      start and run only these proxy arms (sightline, sightline-nocapture,
              sightline-noauth, sightline-embedded, node-proxy, nginx, portkey; the
              control arms ctl-none, ctl-limits, ctl-budget, ctl-cache-miss, ctl-cache-hit,
              ctl-all run on the sightline gateway); direct always runs. For
              development: ratios need all of them
  --gateway-workers N
              processes serving each Sightline gateway's port (GATEWAY_WORKERS; default 1).
              With layout apart or split they share the proxy core; use --pin none to give
              them every core
  --node-proxy-client free-list|pool
              upstream connections of the node-proxy arm (default free-list; pool is undici's
              Pool, which walks all its connections per request: see peers/node-proxy.ts)
  --rates     open-loop ladder rates in req/s, e.g. 3500,5000 (default: quick 500,1000;
              full 1000,2000,3500,5000)
  --only      run only these scenarios (json-1k-seq, json-1k-c16, json-16k-seq, json-64k-seq,
              sse-openai, sse-anthropic, sse-cross, responses-1k-seq, controls-1k-seq; full
              mode also controls-16k-seq, controls-64k-seq, controls-sse; ladder); gates still
              apply to what ran`;

export interface Flags {
  quick: boolean;
  netns: boolean;
  pin: 'apart' | 'split' | 'none';
  only: string[] | null;
  arms: string[] | null;
  rates: number[] | null;
  nodeProxyClient: 'free-list' | 'pool';
  gatewayWorkers: number;
}

function list(v: string | undefined): string[] | null {
  return v === undefined ? null : v.split(',').map((s) => s.trim()).filter((s) => s !== '');
}

function flags(): Flags | null {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean' },
      'no-netns': { type: 'boolean' },
      'no-pin': { type: 'boolean' },
      pin: { type: 'string' },
      arms: { type: 'string' },
      rates: { type: 'string' },
      'node-proxy-client': { type: 'string' },
      'gateway-workers': { type: 'string' },
      only: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help === true) return null;
  const pin = values['no-pin'] === true ? 'none' : (values.pin ?? 'apart');
  if (pin !== 'apart' && pin !== 'split' && pin !== 'none') throw new Error(`--pin must be apart, split or none, got ${pin}`);
  const nodeProxyClient = values['node-proxy-client'] ?? 'free-list';
  if (nodeProxyClient !== 'free-list' && nodeProxyClient !== 'pool') throw new Error(`--node-proxy-client must be free-list or pool, got ${nodeProxyClient}`);
  const gatewayWorkers = Number(values['gateway-workers'] ?? '1');
  if (!Number.isInteger(gatewayWorkers) || gatewayWorkers < 1 || gatewayWorkers > 16) throw new Error(`--gateway-workers must be an integer from 1 to 16, got ${values['gateway-workers']}`);
  return {
    nodeProxyClient,
    gatewayWorkers,
    quick: values.quick === true,
    netns: values['no-netns'] !== true,
    pin,
    only: list(values.only),
    arms: list(values.arms),
    rates:
      values.rates === undefined
        ? null
        : list(values.rates)?.map((r) => {
            const n = Number(r);
            if (!Number.isInteger(n) || n < 1 || n > 20_000) throw new Error(`--rates: ${r} is not a rate between 1 and 20000 req/s`);
            return n;
          }) ?? null,
  };
}

function has(cmd: string): boolean {
  return spawnSync('sh', ['-c', 'command -v "$0" >/dev/null 2>&1 || [ -x "/usr/sbin/$0" ]', cmd]).status === 0;
}

export interface Preflight {
  fatal: string[];
  notes: string[];
  nginx: boolean;
  netnsPossible: boolean;
  pinPossible: boolean;
}

/** What the run needs, with the command that fixes each missing piece. */
function preflight(): Preflight {
  const fatal: string[] = [];
  const notes: string[] = [];
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  if (major < 20 || (major === 20 && minor < 10)) fatal.push(`Node ${process.versions.node}: Node >= 20.10 is required`);
  const benchRequire = createRequire(`${BENCH}package.json`);
  for (const dep of ['undici', 'hdr-histogram-js', 'tsx']) {
    try {
      benchRequire.resolve(`${dep}/package.json`);
    } catch {
      fatal.push(`${dep} is not installed in bench/: run \`npm --prefix bench ci\` (bench/ has its own package.json)`);
    }
  }
  try {
    benchRequire.resolve('@portkey-ai/gateway/package.json');
  } catch {
    notes.push('@portkey-ai/gateway is not installed in bench/ (`npm --prefix bench ci`): the portkey row will say not available');
  }
  if (!existsSync(`${ROOT}node_modules/fastify`) || !existsSync(`${ROOT}node_modules/tsx`)) {
    fatal.push('the product is not installed: run `npm ci` at the repository root');
  }
  for (const bin of ['nats-server', 'clickhouse-server']) {
    if (!has(bin)) fatal.push(`${bin} is not installed: run \`apt-get install -y nats-server clickhouse-server\``);
  }
  const nginx = has('nginx');
  if (!nginx) notes.push('nginx is not installed: run `apt-get install -y nginx` to add the nginx row (it will say not available)');
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const netnsPossible = isRoot && has('unshare') && has('ip') && spawnSync('unshare', ['-n', 'true']).status === 0;
  if (!netnsPossible) notes.push('cannot create a network namespace (needs root, unshare and ip from util-linux/iproute2): Portkey will not be run');
  const pinPossible = has('taskset') && cpus().length >= 2;
  if (!pinPossible) notes.push('no pinning: needs taskset (util-linux) and at least 2 cores');
  return { fatal, notes, nginx, netnsPossible, pinPossible };
}

/**
 * Limits of the run (the descriptor limit is inherited by every process of the run) and network
 * settings of the namespace (they are per namespace, so the host's stay untouched).
 * Every proxy and the driver connect to the same mock port from 127.0.0.1, and each open-loop
 * step holds up to 9,000 connections per hop while earlier steps' connections linger (kept
 * alive by the proxies, or in TIME_WAIT): Linux's default range of 28,232 ephemeral ports runs
 * out, and connect() then stalls or fails. A wider range and TIME_WAIT reuse keep the ladder
 * measuring the proxies rather than port exhaustion.
 */
const NAMESPACE_SETUP = [
  'ip link set lo up',
  // Descriptors: the mock alone can hold the ladder's 9,000 connections per hop plus the
  // connections the proxies keep alive from earlier steps; the default 20,000 runs out.
  '(ulimit -Hn 262144 && ulimit -Sn 262144 || true)',
  '(sysctl -q -w net.ipv4.ip_local_port_range="16384 65000" || true)',
  '(sysctl -q -w net.ipv4.tcp_tw_reuse=1 || true)',
  '(sysctl -q -w net.core.somaxconn=16384 || true)',
  '(sysctl -q -w net.ipv4.tcp_max_syn_backlog=16384 || true)',
].join(' && ');

/** Re-runs this command inside `unshare -n` with loopback up; resolves with its exit code. */
function reexecInNamespace(argv: string[]): Promise<number> {
  const child = spawn('unshare', ['-n', '--', 'sh', '-c', `${NAMESPACE_SETUP} && exec "$@"`, 'sh', process.execPath, '--import', 'tsx', fileURLToPath(import.meta.url), ...argv], {
    cwd: BENCH,
    env: { ...process.env, [INNER_ENV]: '1' },
    stdio: 'inherit',
  });
  // The child is the benchmark itself (unshare and sh exec into it): pass signals on by pid.
  const forward = (sig: NodeJS.Signals): void => {
    child.kill(sig);
  };
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  return new Promise((resolve) => {
    child.once('exit', (code, signal) => resolve(code ?? (signal === null ? 1 : 128)));
  });
}

async function main(): Promise<number> {
  let f: Flags | null;
  try {
    f = flags();
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n${USAGE}\n`);
    return 2;
  }
  if (f === null) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const inner = process.env[INNER_ENV] === '1';
  const pre = preflight();
  if (!inner) {
    for (const n of pre.notes) process.stderr.write(`bench preflight: ${n}\n`);
  }
  if (pre.fatal.length > 0) {
    for (const m of pre.fatal) process.stderr.write(`bench preflight: ${m}\n`);
    return 2;
  }
  if (!inner && f.netns && pre.netnsPossible) {
    return reexecInNamespace(process.argv.slice(2));
  }
  const { run } = await import('./run.js');
  return run({ ...f, netns: inner, pin: pre.pinPossible ? f.pin : 'none' });
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 2;
  },
);
