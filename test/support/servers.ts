/**
 * Real servers for integration tests: nats-server (with JetStream) and clickhouse-server,
 * each started as its own process on free loopback ports with a temporary directory,
 * and stopped by process id. Install them with `apt-get install -y nats-server
 * clickhouse-server` (.ci/run does).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function findBinary(name: string): string {
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/sbin', '/usr/bin', '/usr/local/bin'])) {
    const p = join(dir, name);
    if (dir !== '' && existsSync(p)) return p;
  }
  throw new Error(`${name} is not installed: run "apt-get install -y nats-server clickhouse-server" (see README.md)`);
}

/** Waits for `check` to return true, polling every `everyMs`, failing after `timeoutMs`. */
export async function waitFor(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 20_000, everyMs = 50): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      if (await check()) return;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last === undefined ? '' : `: ${String(last)}`}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

async function stopProcess(child: ChildProcess | null, signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 15_000): Promise<void> {
  if (child === null || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  await exited;
  clearTimeout(timer);
}

function errorLogTail(dir: string): string {
  try {
    return readFileSync(join(dir, 'clickhouse.err.log'), 'utf8').split('\n').slice(-8).join('\n');
  } catch {
    return '';
  }
}

abstract class ServerProcess {
  protected child: ChildProcess | null = null;
  readonly dir: string;
  protected output = '';

  constructor(prefix: string) {
    this.dir = mkdtempSync(join(tmpdir(), prefix));
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  protected spawnProcess(bin: string, args: string[]): void {
    this.output = '';
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: this.dir });
    const keep = (b: Buffer) => {
      this.output = (this.output + b.toString()).slice(-8000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.child = child;
  }

  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Stops the process (SIGTERM, or SIGKILL with `kill`), keeping its data directory. */
  async stop(kill = false): Promise<void> {
    await stopProcess(this.child, kill ? 'SIGKILL' : 'SIGTERM');
    this.child = null;
  }

  /** Stops the process and removes its data directory. */
  async dispose(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export class NatsServer extends ServerProcess {
  port = 0;
  /** HTTP monitoring port (`-m`: /healthz, /varz), when started with `monitor`; else 0. */
  monitorPort = 0;
  /** Client credentials the server requires (`--user`/`--pass`); none by default. */
  auth: { user: string; pass: string } | null = null;
  /** The client URL, with the credentials when the server requires them. */
  get url(): string {
    return `nats://${this.auth === null ? '' : `${this.auth.user}:${this.auth.pass}@`}127.0.0.1:${this.port}`;
  }

  static async start(auth: { user: string; pass: string } | null = null, opts: { monitor?: boolean } = {}): Promise<NatsServer> {
    const s = new NatsServer('sightline-nats-');
    s.port = await freePort();
    if (opts.monitor === true) s.monitorPort = await freePort();
    s.auth = auth;
    await s.start();
    return s;
  }

  /** Starts (or restarts) the server on the same port and store directory. */
  async start(): Promise<void> {
    const bin = findBinary('nats-server');
    const auth = this.auth === null ? [] : ['--user', this.auth.user, '--pass', this.auth.pass];
    const monitor = this.monitorPort === 0 ? [] : ['-m', String(this.monitorPort)];
    this.spawnProcess(bin, ['-a', '127.0.0.1', '-p', String(this.port), '-js', '-sd', join(this.dir, 'js'), ...auth, ...monitor]);
    await waitFor(`nats-server on port ${this.port}`, () => {
      if (!this.running) throw new Error(`nats-server exited: ${this.output}`);
      return this.output.includes('Server is ready');
    });
  }
}

export class ClickHouseServer extends ServerProcess {
  httpPort = 0;
  tcpPort = 0;
  interPort = 0;
  get url(): string {
    return `http://127.0.0.1:${this.httpPort}`;
  }

  static async start(): Promise<ClickHouseServer> {
    const s = new ClickHouseServer('sightline-ch-');
    s.httpPort = await freePort();
    s.tcpPort = await freePort();
    s.interPort = await freePort();
    await s.start();
    return s;
  }

  /** Starts (or restarts) on the same ports and data; retries while the old process's ports linger. */
  async start(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#startOnce();
        return;
      } catch (e) {
        if (attempt >= 5) throw e;
        await this.stop(true);
        await new Promise((r) => setTimeout(r, 500 * attempt));
      }
    }
  }

  /** SIGTERM, then SIGKILL after 5 s: a test outage should not wait for a graceful drain. */
  override async stop(kill = false): Promise<void> {
    await stopProcess(this.child, kill ? 'SIGKILL' : 'SIGTERM', 5_000);
    this.child = null;
  }

  async #startOnce(): Promise<void> {
    const bin = findBinary('clickhouse-server');
    mkdirSync(join(this.dir, 'tmp'), { recursive: true });
    mkdirSync(join(this.dir, 'user_files'), { recursive: true });
    this.spawnProcess(bin, [
      '--config-file=/etc/clickhouse-server/config.xml',
      '--',
      `--path=${this.dir}/`,
      `--tmp_path=${this.dir}/tmp/`,
      `--user_files_path=${this.dir}/user_files/`,
      `--format_schema_path=${this.dir}/format_schemas/`,
      `--http_port=${this.httpPort}`,
      `--tcp_port=${this.tcpPort}`,
      `--interserver_http_port=${this.interPort}`,
      '--listen_host=127.0.0.1',
      `--logger.log=${this.dir}/clickhouse.log`,
      `--logger.errorlog=${this.dir}/clickhouse.err.log`,
      '--logger.level=warning',
    ]);
    await waitFor(
      `clickhouse-server on port ${this.httpPort}`,
      async () => {
        if (!this.running) throw new Error(`clickhouse-server exited: ${this.output}\n${errorLogTail(this.dir)}`);
        const res = await fetch(`${this.url}/ping`).catch(() => null);
        return res !== null && res.ok;
      },
      60_000,
      100,
    );
  }
}
