/**
 * Real servers for integration tests: nats-server (with JetStream) and clickhouse-server,
 * each started as its own process on free loopback ports with a temporary directory,
 * and stopped by process id. Install them with `apt-get install -y nats-server
 * clickhouse-server` (.ci/run does).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync, mkdirSync, readFileSync, writeFileSync, copyFileSync } from 'node:fs';
import { createServer, connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Ports this process has handed out: a port closed by one freePort can be the next one's too. */
const handedOut = new Set<number>();

/**
 * A loopback port free now and not handed out before in this process. Servers started
 * together (Promise.all) each ask for theirs before any of them binds: without the set, the
 * kernel gave a nats-server and a clickhouse-server the same port in one CI run, and the
 * clickhouse-server's five tries, all on that port, failed.
 */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = await anyFreePort();
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error('no loopback port free that was not handed out already');
}

function anyFreePort(): Promise<number> {
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

/**
 * The server processes started here that have not exited. They do not keep this process alive
 * (unref), and are killed when it exits: a test file whose setup failed halfway (one server of
 * a Promise.all started, another not) has no handle to stop the one that started, and in one
 * CI run its nats-server kept the file's process, and so the whole run, waiting.
 */
const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

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
    live.add(child);
    child.once('exit', () => live.delete(child));
    child.unref();
    for (const s of [child.stdout, child.stderr]) (s as unknown as { unref?: () => void } | null)?.unref?.();
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
  /** In a cluster (NatsCluster): the server's name, its route port and its peers' route ports. */
  cluster: { name: string; routePort: number; peers: number[] } | null = null;
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
    const c = this.cluster;
    const cluster =
      c === null
        ? []
        : ['--server_name', c.name, '--cluster_name', 'sightline-test', '--cluster', `nats://127.0.0.1:${c.routePort}`, '--routes', c.peers.map((p) => `nats://127.0.0.1:${p}`).join(',')];
    this.spawnProcess(bin, ['-a', '127.0.0.1', '-p', String(this.port), '-js', '-sd', join(this.dir, 'js'), ...cluster, ...auth, ...monitor]);
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
  /**
   * As a replica in a cluster (ClickHouseCluster): a `config.d/` file with `<zookeeper>`,
   * `<macros>` and `<remote_servers>`, beside copies of the Debian config and users files.
   */
  clusterXml: string | null = null;
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
    let configFile = '/etc/clickhouse-server/config.xml';
    const extra: string[] = [];
    if (this.clusterXml !== null) {
      // config.d/ is read from beside the config file, so the config and users files are copied.
      const conf = join(this.dir, 'conf');
      mkdirSync(join(conf, 'config.d'), { recursive: true });
      copyFileSync('/etc/clickhouse-server/config.xml', join(conf, 'config.xml'));
      copyFileSync('/etc/clickhouse-server/users.xml', join(conf, 'users.xml'));
      writeFileSync(join(conf, 'config.d', 'cluster.xml'), this.clusterXml);
      configFile = join(conf, 'config.xml');
      extra.push('--interserver_http_host=127.0.0.1');
    }
    this.spawnProcess(bin, [
      `--config-file=${configFile}`,
      '--',
      ...extra,
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

/**
 * Three (or `size`) nats-server processes clustered over routes on loopback, with JetStream
 * (each its own store directory), as a NATS cluster in production: `url` lists every
 * server, the way NATS_URL does in a cluster.
 */
export class NatsCluster {
  private constructor(readonly nodes: NatsServer[]) {}

  get url(): string {
    return this.nodes.map((n) => n.url).join(',');
  }

  static async start(size = 3): Promise<NatsCluster> {
    const routePorts: number[] = [];
    const nodes: NatsServer[] = [];
    for (let i = 0; i < size; i++) routePorts.push(await freePort());
    for (let i = 0; i < size; i++) {
      const n = new NatsServer('sightline-nats-c-');
      n.port = await freePort();
      n.cluster = { name: `n${i + 1}`, routePort: routePorts[i]!, peers: routePorts.filter((_, j) => j !== i) };
      nodes.push(n);
    }
    await Promise.all(nodes.map((n) => n.start()));
    return new NatsCluster(nodes);
  }

  /** The node named `name` (a stream's `cluster.leader`). */
  node(name: string): NatsServer {
    const n = this.nodes.find((x) => x.cluster?.name === name);
    if (n === undefined) throw new Error(`no NATS node named ${name}`);
    return n;
  }

  async dispose(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.dispose()));
  }
}

/**
 * A standalone ZooKeeper (Debian's `zookeeper` package, run with its own java class path) on
 * a free loopback port with a temporary data directory: the coordination service of
 * replicated ClickHouse tables and of ON CLUSTER DDL for ClickHouse 18.16, which predates
 * ClickHouse Keeper.
 */
export class ZooKeeperServer extends ServerProcess {
  port = 0;

  static async start(): Promise<ZooKeeperServer> {
    const z = new ZooKeeperServer('sightline-zk-');
    z.port = await freePort();
    await z.start();
    return z;
  }

  async start(): Promise<void> {
    if (!existsSync('/usr/share/zookeeper') && !existsSync('/usr/share/java/zookeeper.jar')) {
      throw new Error('zookeeper is not installed: run "apt-get install -y zookeeper" (.ci/run does)');
    }
    mkdirSync(join(this.dir, 'data'), { recursive: true });
    const cfg = join(this.dir, 'zoo.cfg');
    writeFileSync(
      cfg,
      [
        'tickTime=500',
        'initLimit=10',
        'syncLimit=5',
        `dataDir=${join(this.dir, 'data')}`,
        `clientPort=${this.port}`,
        'clientPortAddress=127.0.0.1',
        'admin.enableServer=false',
        '4lw.commands.whitelist=ruok',
        'maxSessionTimeout=60000',
        '',
      ].join('\n'),
    );
    this.spawnProcess('java', ['-Xmx256m', '-Dzookeeper.log.dir=' + this.dir, '-cp', '/usr/share/java/*:/usr/share/zookeeper/*', 'org.apache.zookeeper.server.quorum.QuorumPeerMain', cfg]);
    await waitFor(
      `zookeeper on port ${this.port}`,
      async () => {
        if (!this.running) throw new Error(`zookeeper exited: ${this.output}`);
        return (await fourLetter(this.port, 'ruok')) === 'imok';
      },
      60_000,
      200,
    );
  }
}

/** Sends a ZooKeeper four-letter command and returns the answer ('' when refused). */
function fourLetter(port: number, cmd: string): Promise<string> {
  return new Promise((resolve) => {
    const sock = tcpConnect(port, '127.0.0.1');
    let out = '';
    sock.setTimeout(2000, () => sock.destroy());
    sock.on('connect', () => sock.write(cmd));
    sock.on('data', (b) => (out += b.toString()));
    sock.on('close', () => resolve(out.trim()));
    sock.on('error', () => resolve(''));
  });
}

/**
 * ClickHouse replicas of one shard (two by default) coordinated by a ZooKeeper: each replica
 * a clickhouse-server process with the cluster `name` in its remote_servers, its own
 * `{shard}`/`{replica}` macros, and ON CLUSTER DDL through the Debian config's
 * `<distributed_ddl>` queue.
 */
export class ClickHouseCluster {
  private constructor(
    readonly name: string,
    readonly zk: ZooKeeperServer,
    readonly replicas: ClickHouseServer[],
  ) {}

  static async start(zk: ZooKeeperServer, name = 'sightline', replicas = 2): Promise<ClickHouseCluster> {
    const nodes: ClickHouseServer[] = [];
    for (let i = 0; i < replicas; i++) {
      const s = new ClickHouseServer('sightline-chc-');
      s.httpPort = await freePort();
      s.tcpPort = await freePort();
      s.interPort = await freePort();
      nodes.push(s);
    }
    const shard = nodes.map((n) => `<replica><host>127.0.0.1</host><port>${n.tcpPort}</port></replica>`).join('');
    nodes.forEach((n, i) => {
      n.clusterXml = [
        '<?xml version="1.0"?>',
        '<yandex>',
        `  <zookeeper><node><host>127.0.0.1</host><port>${zk.port}</port></node><session_timeout_ms>10000</session_timeout_ms></zookeeper>`,
        `  <macros><shard>01</shard><replica>r${i + 1}</replica></macros>`,
        `  <remote_servers><${name}><shard><internal_replication>true</internal_replication>${shard}</shard></${name}></remote_servers>`,
        '</yandex>',
        '',
      ].join('\n');
    });
    await Promise.all(nodes.map((n) => n.start()));
    return new ClickHouseCluster(name, zk, nodes);
  }

  /** CLICKHOUSE_URL for the apps: every replica, comma-separated. */
  get url(): string {
    return this.replicas.map((r) => r.url).join(',');
  }

  async dispose(): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.dispose()));
  }
}
