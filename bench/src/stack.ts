/**
 * Starts and stops everything a run measures, each as its own process on loopback:
 *
 * | process                    | started as                                                        | CPU (pinned) |
 * |----------------------------|-------------------------------------------------------------------|--------------|
 * | mock provider              | `node --import tsx bench/mock/main.ts --port P`                    | mock core    |
 * | nats-server (JetStream)    | test/support/servers.ts NatsServer                                 | load core    |
 * | clickhouse-server          | test/support/servers.ts ClickHouseServer                           | load core    |
 * | ingester                   | test/support/apps.ts startApp(apps/ingester/src/main.ts)           | load core    |
 * | gateway (capture on)       | startApp(apps/gateway/src/main.ts), SIGHTLINE_ADMIN_TOKEN set        | proxy core   |
 * | gateway (capture off)      | the same, with SIGHTLINE_BENCH_CAPTURE_OFF=1                       | proxy core   |
 * | gateway (auth off)         | the same as capture on, without SIGHTLINE_ADMIN_TOKEN               | proxy core   |
 * | node-proxy                 | `node --import tsx bench/src/peers/node-proxy.ts`                  | proxy core   |
 * | nginx                      | `nginx -p TMP -c TMP/nginx.conf -g 'daemon off;'`, one worker      | proxy core   |
 * | portkey                    | `node …/@portkey-ai/gateway/build/start-server.js --port=P --headless` | proxy core |
 *
 * The orchestrator and the driver process run on the load core too (procs.ts PIN_LAYOUTS). An arm that cannot start
 * is recorded as not available with the reason; the run goes on without it.
 *
 * Authentication (issue 10): the run makes up an admin token, and before the gateways start
 * creates one Sightline key per scenario team in the NATS key-value directory, as the query
 * API's admin endpoint would (the key hashing secret is derived from the token, so the
 * gateways given the same token accept these keys).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ClickHouseServer, NatsServer, freePort } from '../../test/support/servers.js';
import { directoryFromEnv, parseKeyInput, parseTeamSettings } from '../../packages/directory/src/index.js';
import { startApp, waitHealthy } from '../../test/support/apps.js';
import type { AppProcess } from '../../test/support/apps.js';
import { Proc, pinPid, rssMb, spawnProc, waitHttp, withChildren } from './procs.js';
import type { Pinning } from './procs.js';
import { Nginx } from './peers/nginx.js';
import { Portkey, portkeyHeaders } from './peers/portkey.js';
import type { ArmName, ArmTarget, MockKnobs } from './scenarios.js';
import { AUTH_ARMS, CAPTURING_ARMS, CONTROL_ARMS, EMBEDDED_SCENARIO, benchConfig, benchTeams, keyHeaders, teamOf } from './scenarios.js';
import type { BenchTeam } from './scenarios.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const BENCH = fileURLToPath(new URL('../', import.meta.url));
export const CH_DATABASE = 'sightline';

export interface MockStatsView {
  requests: number;
  /** Of `requests`, model lists (`/v1/models`): the gateways refresh them in the background. */
  models: number;
  completed: number;
  aborted: number;
  inFlight: number;
}

/** The mock provider process and its admin endpoints. */
export class Mock {
  readonly url: string;

  private constructor(
    public proc: Proc,
    readonly port: number,
    private readonly cpu: number | undefined,
  ) {
    this.url = `http://127.0.0.1:${port}`;
  }

  private static spawn(port: number, cpu: number | undefined): Proc {
    return spawnProc('mock', process.execPath, ['--import', 'tsx', 'bench/mock/main.ts', '--port', String(port)], { cwd: ROOT, cpu });
  }

  static async start(cpu: number | undefined): Promise<Mock> {
    const port = await freePort();
    const mock = new Mock(Mock.spawn(port, cpu), port, cpu);
    await waitHttp(mock.proc, `${mock.url}/healthz`, 30_000, 200);
    return mock;
  }

  /**
   * Stops the mock and starts a fresh one on the same port. Used before each open-loop step:
   * the proxies keep thousands of idle connections to the mock alive from earlier steps, and
   * this sandbox caps every process at 20,000 descriptors (no CAP_SYS_RESOURCE to raise it),
   * so the mock would run out of them mid-step. Restarting closes them all; the proxies see
   * their idle connections close and open new ones.
   */
  async restart(knobs: MockKnobs): Promise<void> {
    await this.proc.stop();
    this.proc = Mock.spawn(this.port, this.cpu);
    await waitHttp(this.proc, `${this.url}/healthz`, 30_000, 200);
    await this.configure(knobs);
  }

  private async admin(method: 'GET' | 'POST', path: string, body?: string): Promise<unknown> {
    const init: RequestInit = { method, signal: AbortSignal.timeout(10_000) };
    if (body !== undefined) {
      init.body = body;
      init.headers = { 'content-type': 'application/json' };
    }
    const res = await fetch(`${this.url}${path}`, init);
    const text = await res.text();
    if (!res.ok) throw new Error(`mock ${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text) as unknown;
  }

  async configure(knobs: MockKnobs): Promise<void> {
    await this.admin('POST', '/_mock/config', JSON.stringify(knobs));
  }

  async reset(): Promise<void> {
    await this.admin('POST', '/_mock/reset');
  }

  async stats(): Promise<MockStatsView> {
    const s = (await this.admin('GET', '/_mock/stats')) as Partial<Record<keyof MockStatsView, unknown>>;
    const num = (v: unknown): number => (typeof v === 'number' ? v : Number.NaN);
    return { requests: num(s.requests), models: num(s.models), completed: num(s.completed), aborted: num(s.aborted), inFlight: num(s.inFlight) };
  }
}

/** One arm as the run sees it. */
export interface Arm {
  name: ArmName;
  /** Undefined when the arm could not start; `reason` then says why. */
  target: ArmTarget | undefined;
  reason: string;
  /** The processes whose VmRSS is the arm's `rss_mb` (the proxy under test only). */
  pids: () => number[];
  /** Sightline arms: the SIGHTLINE_INSTANCE given to the gateway. */
  instance?: string;
  /** The tail of the arm's process output, for the report when it fails requests. */
  output: () => string;
  /**
   * Rows captured for a team, when not counted in the run's clickhouse-server by instance and
   * team (the embedded arm: through its query API's POST /v1/sql).
   */
  count?: (team: string) => Promise<number>;
}

export interface Stack {
  mock: Mock;
  nats: NatsServer | undefined;
  ch: ClickHouseServer | undefined;
  ingester: AppProcess | undefined;
  /** The ingester's HTTP origin (/healthz, /metrics), when it started. */
  ingesterUrl: string | undefined;
  arms: Map<ArmName, Arm>;
  /** Every pid the run started, by role, for the rig section. */
  roles: () => { role: string; pid: number }[];
  stop: () => Promise<void>;
}

export interface StackOptions {
  pin: Pinning | null;
  /** Portkey listens on all interfaces: only started inside the loopback-only namespace. */
  netns: boolean;
  runId: string;
  log: (msg: string) => void;
  /** Proxy arms to start; null: all (the others are recorded as not selected). */
  arms: string[] | null;
  /** node-proxy's upstream connections (peers/node-proxy.ts --client). */
  nodeProxyClient: 'free-list' | 'pool';
  /** GATEWAY_WORKERS of the Sightline gateways. */
  gatewayWorkers: number;
  /** Every scenario name the Sightline arms are sent traffic under (scenarios.ts benchScenarios): one key each. */
  scenarios: string[];
}

/**
 * Node flags of every Sightline arm: the gateway as it ships (package.json `start`, the
 * Dockerfile and compose files). `--single-threaded-gc` keeps V8's GC helper threads, which
 * run at the process's priority, from collecting the nice-19 content thread's heap at full
 * priority (docs/configuration.md, "V8 flags"). The peers run as they are.
 */
const GATEWAY_NODE_ARGS = ['--single-threaded-gc'] as const;

/**
 * Provider keys the gateways are configured with. With authentication on, provider
 * credentials come from the configuration only (the client's credential is a Sightline key);
 * the authentication-off gateway gets them too, so both send the mock the same headers and
 * differ only in the auth stage.
 */
const DUMMY_PROVIDER_KEYS = { OPENAI_API_KEY: 'sk-bench-configured-not-a-real-key', ANTHROPIC_API_KEY: 'sk-ant-bench-configured-not-a-real-key' };

/**
 * Creates one key (scope `gateway`, every model) per team in the NATS directory, after setting
 * the team's settings when it has some (the store and validation the query API's admin
 * endpoints use: parseTeamSettings, putTeam, parseKeyInput, createKey); returns the secrets by
 * team. The local snapshot the directory needs goes to a temporary directory removed here.
 */
async function createKeys(natsUrl: string, adminToken: string, teams: readonly BenchTeam[]): Promise<Map<string, string>> {
  const dir = mkdtempSync(join(tmpdir(), 'sightline-bench-directory-'));
  const directory = directoryFromEnv({ natsUrl, snapshotFile: join(dir, 'directory.json'), adminToken });
  try {
    await directory.ready;
    const keys = new Map<string, string>();
    for (const { team, settings } of teams) {
      const now = Date.now();
      if (settings !== undefined) await directory.putTeam(team, parseTeamSettings(settings), now);
      const { secret } = await directory.createKey(parseKeyInput({ team, name: team, scopes: ['gateway'], models: [] }, now), now);
      keys.set(team, secret);
    }
    return keys;
  } finally {
    await directory.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs one admin or SQL call against an embedded process's query API. */
async function queryApi(url: string, token: string, method: 'POST', path: string, body: unknown): Promise<unknown> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as unknown;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Sum of VmRSS over pids, MiB; undefined when none could be read. */
export function sumRss(pids: number[]): number | undefined {
  let sum = 0;
  let any = false;
  for (const pid of pids) {
    const r = rssMb(pid);
    if (r !== undefined) {
      sum += r;
      any = true;
    }
  }
  return any ? Math.round(sum * 10) / 10 : undefined;
}

export async function startStack(opts: StackOptions): Promise<Stack> {
  const { pin, log } = opts;
  const mockCpu = pin?.mock;
  const proxyCpu = pin?.proxy;
  const stoppers: (() => Promise<void>)[] = [];
  const roles: { role: string; pid: () => number }[] = [];
  const arms = new Map<ArmName, Arm>();
  const stopAll = async (): Promise<void> => {
    // Proxies first, then the pipeline, then the mock: reverse order of start.
    for (const stop of stoppers.reverse()) await stop().catch((e: unknown) => log(`stop: ${message(e)}`));
    stoppers.length = 0;
  };

  try {
    log('starting mock, nats-server and clickhouse-server');
    const [mock, nats, ch] = await Promise.all([
      Mock.start(mockCpu),
      NatsServer.start(null, { monitor: true }).catch((e: unknown) => {
        log(`nats-server failed to start: ${message(e)}`);
        return undefined;
      }),
      ClickHouseServer.start().catch((e: unknown) => {
        log(`clickhouse-server failed to start: ${message(e)}`);
        return undefined;
      }),
    ]);
    stoppers.push(() => mock.proc.stop());
    roles.push({ role: 'mock', pid: () => mock.proc.pid });
    if (nats !== undefined) {
      stoppers.push(() => nats.dispose());
      roles.push({ role: 'nats-server', pid: () => nats.pid ?? -1 });
    }
    if (ch !== undefined) {
      stoppers.push(() => ch.dispose());
      roles.push({ role: 'clickhouse-server', pid: () => ch.pid ?? -1 });
    }
    arms.set('direct', { name: 'direct', target: { origin: mock.url, extraHeaders: () => ({}) }, reason: '', pids: () => [mock.proc.pid], output: () => mock.proc.output });

    // The Sightline pipeline: ingester and two gateways, with docker-compose's environment
    // (test/e2e-processes.test.ts), all bound to loopback.
    let ingester: AppProcess | undefined;
    let ingesterUrl: string | undefined;
    const sightlineReason = nats === undefined || ch === undefined ? 'nats-server or clickhouse-server did not start (apt-get install -y nats-server clickhouse-server)' : '';
    const baseEnv = (port: number): Record<string, string> => ({
      NATS_URL: nats?.url ?? '',
      CLICKHOUSE_URL: ch?.url ?? '',
      CLICKHOUSE_USER: 'default',
      CLICKHOUSE_PASSWORD: '',
      CLICKHOUSE_DATABASE: CH_DATABASE,
      GATEWAY_HOST: '127.0.0.1',
      GATEWAY_PORT: String(port),
      INGESTER_HOST: '127.0.0.1',
      INGESTER_PORT: String(port),
      OPENAI_BASE_URL: `${mock.url}/v1`,
      // Anthropic's base URL has no /v1 in config/sightline.yaml (the client adds /v1/messages).
      ANTHROPIC_BASE_URL: mock.url,
    });

    // Keys for the authenticated gateways, made before they start (they then start with every
    // key in memory). A fresh admin token per run: no key of an earlier run is valid.
    const adminToken = randomBytes(32).toString('hex');
    const wantsAuth = AUTH_ARMS.some((a) => opts.arms === null || opts.arms.includes(a));
    let keys = new Map<string, string>();
    let keysReason = '';
    if (sightlineReason === '' && wantsAuth && nats !== undefined) {
      try {
        keys = await createKeys(nats.url, adminToken, benchTeams(opts.scenarios));
        log(`created ${keys.size} Sightline keys (one per scenario team, one per control team) in the NATS directory`);
      } catch (e) {
        keysReason = `could not create the Sightline keys in the NATS directory: ${message(e).slice(0, 400)}`;
        log(keysReason);
      }
    }
    const keyOf = (team: string): string => {
      const k = keys.get(team);
      // A name missing from StackOptions.scenarios is a bug in the run, not a refusal to measure.
      if (k === undefined) throw new Error(`no Sightline key was created for team ${team}`);
      return k;
    };
    // Every Sightline gateway of the run reads the same configuration: the shipped one plus the
    // cached route of the controls matrix.
    const configDir = mkdtempSync(join(tmpdir(), 'sightline-bench-config-'));
    stoppers.push(async () => rmSync(configDir, { recursive: true, force: true }));
    const configFile = join(configDir, 'sightline.yaml');
    writeFileSync(configFile, benchConfig(readFileSync(join(ROOT, 'config/sightline.yaml'), 'utf8')));

    const gateway = async (name: 'sightline' | 'sightline-nocapture' | 'sightline-noauth'): Promise<void> => {
      // The instance names the arm; the gateway appends a nonce. Scenarios are told apart by team.
      const instance = `bench-${opts.runId}-${name === 'sightline' ? 'capture' : name === 'sightline-nocapture' ? 'nocapture' : 'noauth'}`;
      const auth = AUTH_ARMS.includes(name);
      const reason = sightlineReason !== '' ? sightlineReason : auth ? keysReason : '';
      if (reason !== '') {
        arms.set(name, { name, target: undefined, reason, pids: () => [], instance, output: () => '' });
        return;
      }
      const port = await freePort();
      // Each gateway gets its own data directory (its copy of the key directory) and capture
      // spool: the shipped defaults (under data/ in the working directory) would be shared by
      // the gateways of this run and by anything else started from the repository root, which
      // would then replay each other's batches.
      const dataDir = mkdtempSync(join(tmpdir(), `sightline-bench-${name}-`));
      stoppers.push(async () => rmSync(dataDir, { recursive: true, force: true }));
      const spool = join(dataDir, 'spool');
      mkdirSync(spool);
      const env: Record<string, string> = {
        ...baseEnv(port),
        ...DUMMY_PROVIDER_KEYS,
        SIGHTLINE_INSTANCE: instance,
        SIGHTLINE_DATA_DIR: dataDir,
        SIGHTLINE_SPOOL_DIR: spool,
        GATEWAY_WORKERS: String(opts.gatewayWorkers),
        SIGHTLINE_CONFIG: configFile,
      };
      if (auth) env.SIGHTLINE_ADMIN_TOKEN = adminToken;
      if (name === 'sightline-nocapture') env.SIGHTLINE_BENCH_CAPTURE_OFF = '1';
      const app = startApp(name, 'apps/gateway/src/main.ts', env, GATEWAY_NODE_ARGS);
      stoppers.push(async () => {
        await app.stop();
      });
      // startApp spawns the process itself: move it (all its threads) to the proxy core now and
      // again once it serves, to catch threads started in between.
      if (proxyCpu !== undefined && app.child.pid !== undefined) pinPid(app.child.pid, proxyCpu);
      const url = `http://127.0.0.1:${port}`;
      try {
        await waitHealthy(app, `${url}/healthz`, 60_000);
        // With GATEWAY_WORKERS > 1 the workers are the primary's children: pin them too.
        if (proxyCpu !== undefined && app.child.pid !== undefined) for (const p of withChildren(app.child.pid)) pinPid(p, proxyCpu);
        const pid = app.child.pid ?? -1;
        roles.push({ role: `gateway (${name})`, pid: () => pid });
        // With authentication on, the team comes from the key and the gateway ignores the team
        // header; it is sent anyway so every Sightline arm is sent the same header names.
        const extraHeaders: ArmTarget['extraHeaders'] = auth
          ? (scenario, _p, requestHeaders) => ({ 'x-sightline-team': teamOf(scenario), ...keyHeaders(keyOf(teamOf(scenario)), requestHeaders) })
          : (scenario) => ({ 'x-sightline-team': teamOf(scenario) });
        arms.set(name, {
          name,
          target: { origin: url, extraHeaders },
          reason: '',
          pids: () => withChildren(pid),
          instance,
          output: () => app.output,
        });
        if (name === 'sightline') {
          // The controls matrix: the same gateway, one team (and key) per control setting.
          for (const ctl of CONTROL_ARMS) {
            arms.set(ctl, {
              name: ctl,
              target: { origin: url, extraHeaders: (scenario, _p, requestHeaders) => ({ 'x-sightline-team': teamOf(scenario, ctl), ...keyHeaders(keyOf(teamOf(scenario, ctl)), requestHeaders) }) },
              reason: '',
              pids: () => withChildren(pid),
              instance,
              output: () => app.output,
            });
          }
        }
      } catch (e) {
        arms.set(name, { name, target: undefined, reason: `gateway did not start: ${message(e).slice(0, 600)}`, pids: () => [], instance, output: () => app.output });
      }
    };

    /**
     * The one-command embedded mode (issue 15): `node --import tsx apps/sightline/src/main.ts`,
     * as `npm start` runs it, with its own data directory, no NATS_URL and no CLICKHOUSE_URL (so
     * the in-process bus and chdb), authentication on with this run's admin token. Its keys are
     * made through its own query API (POST /v1/admin/keys), and its rows are counted through
     * POST /v1/sql: chdb locks its data directory to the process.
     */
    const embedded = async (): Promise<void> => {
      const name = 'sightline-embedded';
      const [gwPort, queryPort, ingesterPort] = [await freePort(), await freePort(), await freePort()];
      const dataDir = mkdtempSync(join(tmpdir(), 'sightline-bench-embedded-'));
      stoppers.push(async () => rmSync(dataDir, { recursive: true, force: true }));
      const env: Record<string, string> = {
        ...DUMMY_PROVIDER_KEYS,
        NATS_URL: '',
        CLICKHOUSE_URL: '',
        GATEWAY_HOST: '127.0.0.1',
        GATEWAY_PORT: String(gwPort),
        QUERY_HOST: '127.0.0.1',
        QUERY_PORT: String(queryPort),
        INGESTER_PORT: String(ingesterPort),
        SIGHTLINE_DATA_DIR: dataDir,
        SIGHTLINE_ADMIN_TOKEN: adminToken,
        SIGHTLINE_CONFIG: configFile,
        OPENAI_BASE_URL: `${mock.url}/v1`,
        ANTHROPIC_BASE_URL: mock.url,
      };
      const app = startApp(name, 'apps/sightline/src/main.ts', env, GATEWAY_NODE_ARGS);
      stoppers.push(async () => {
        await app.stop();
      });
      if (proxyCpu !== undefined && app.child.pid !== undefined) pinPid(app.child.pid, proxyCpu);
      const url = `http://127.0.0.1:${gwPort}`;
      const queryUrl = `http://127.0.0.1:${queryPort}`;
      try {
        await waitHealthy(app, `${url}/healthz`, 120_000);
        await waitHealthy(app, `${queryUrl}/healthz`, 120_000);
        if (proxyCpu !== undefined && app.child.pid !== undefined) pinPid(app.child.pid, proxyCpu);
        const embeddedKeys = new Map<string, string>();
        for (const scenario of ['warmup', EMBEDDED_SCENARIO]) {
          const team = teamOf(scenario);
          const created = (await queryApi(queryUrl, adminToken, 'POST', '/v1/admin/keys', { team, name: team, scopes: ['gateway'], models: [] })) as { key?: unknown };
          if (typeof created.key !== 'string') throw new Error(`POST /v1/admin/keys answered without a key: ${JSON.stringify(created).slice(0, 200)}`);
          embeddedKeys.set(team, created.key);
        }
        const pid = app.child.pid ?? -1;
        roles.push({ role: 'sightline (embedded: gateway, ingester, query API, chdb)', pid: () => pid });
        arms.set(name, {
          name,
          target: {
            origin: url,
            extraHeaders: (scenario, _p, requestHeaders) => {
              const team = teamOf(scenario);
              const k = embeddedKeys.get(team);
              if (k === undefined) throw new Error(`no key was made in the embedded process for team ${team}`);
              return { 'x-sightline-team': team, ...keyHeaders(k, requestHeaders) };
            },
          },
          reason: '',
          pids: () => withChildren(pid),
          instance: 'embedded',
          output: () => app.output,
          count: async (team) => {
            if (!/^[a-z0-9-]+$/.test(team)) throw new Error(`refusing to put ${JSON.stringify(team)} into SQL`);
            const r = (await queryApi(queryUrl, adminToken, 'POST', '/v1/sql', { query: `SELECT count() FROM sightline.requests FINAL WHERE team = '${team}'` })) as { rows?: unknown };
            const n = Array.isArray(r.rows) && Array.isArray(r.rows[0]) ? Number(r.rows[0][0]) : Number.NaN;
            if (!Number.isInteger(n)) throw new Error(`POST /v1/sql answered ${JSON.stringify(r).slice(0, 200)} to a count`);
            return n;
          },
        });
      } catch (e) {
        arms.set(name, { name, target: undefined, reason: `embedded mode did not start: ${message(e).slice(0, 600)}`, pids: () => [], output: () => app.output });
      }
    };

    const startIngester = async (): Promise<void> => {
      if (sightlineReason !== '') return;
      const port = await freePort();
      const app = startApp('ingester', 'apps/ingester/src/main.ts', baseEnv(port));
      stoppers.push(async () => {
        await app.stop();
      });
      try {
        await waitHealthy(app, `http://127.0.0.1:${port}/healthz`, 90_000);
        ingester = app;
        ingesterUrl = `http://127.0.0.1:${port}`;
        const pid = app.child.pid ?? -1;
        roles.push({ role: 'ingester', pid: () => pid });
      } catch (e) {
        log(`ingester did not start: ${message(e).slice(0, 600)}`);
      }
    };

    const nodeProxy = async (): Promise<void> => {
      const port = await freePort();
      const proc = spawnProc('node-proxy', process.execPath, ['--import', 'tsx', 'src/peers/node-proxy.ts', '--port', String(port), '--upstream', mock.url, '--client', opts.nodeProxyClient], { cwd: BENCH, cpu: proxyCpu });
      stoppers.push(() => proc.stop());
      const url = `http://127.0.0.1:${port}`;
      try {
        await waitHttp(proc, `${url}/healthz`, 30_000, 200);
        roles.push({ role: 'node-proxy', pid: () => proc.pid });
        arms.set('node-proxy', { name: 'node-proxy', target: { origin: url, extraHeaders: () => ({}) }, reason: '', pids: () => [proc.pid], output: () => proc.output });
      } catch (e) {
        arms.set('node-proxy', { name: 'node-proxy', target: undefined, reason: `did not start: ${message(e).slice(0, 400)}`, pids: () => [], output: () => proc.output });
      }
    };

    const nginx = async (): Promise<void> => {
      try {
        const n = await Nginx.start(await freePort(), mock.port, proxyCpu);
        stoppers.push(() => n.stop());
        roles.push({ role: 'nginx (master + worker)', pid: () => n.proc.pid });
        arms.set('nginx', { name: 'nginx', target: { origin: n.url, extraHeaders: () => ({}) }, reason: '', pids: () => n.pids(), output: () => n.errorLog() });
      } catch (e) {
        arms.set('nginx', { name: 'nginx', target: undefined, reason: message(e).slice(0, 400), pids: () => [], output: () => '' });
      }
    };

    const portkey = async (): Promise<void> => {
      if (!opts.netns) {
        arms.set('portkey', {
          name: 'portkey',
          target: undefined,
          reason: 'not run: Portkey listens on all interfaces, so it only runs inside the loopback-only network namespace (needs root for `unshare -n`)',
          pids: () => [],
          output: () => '',
        });
        return;
      }
      try {
        const p = await Portkey.start(await freePort(), proxyCpu);
        stoppers.push(() => p.stop());
        roles.push({ role: 'portkey', pid: () => p.proc.pid });
        arms.set('portkey', {
          name: 'portkey',
          target: { origin: p.url, extraHeaders: (_s, provider) => portkeyHeaders(provider, mock.url) },
          reason: '',
          pids: () => [p.proc.pid],
          output: () => p.proc.output,
        });
      } catch (e) {
        arms.set('portkey', { name: 'portkey', target: undefined, reason: message(e).slice(0, 400), pids: () => [], output: () => '' });
      }
    };

    log('starting ingester, gateways (capture on / off, authentication off), node-proxy, nginx and portkey');
    const selected = (name: ArmName, start: () => Promise<void>): Promise<void> => {
      if (opts.arms === null || opts.arms.includes(name)) return start();
      arms.set(name, { name, target: undefined, reason: 'not selected (--arms)', pids: () => [], output: () => '' });
      return Promise.resolve();
    };
    const wantsPipeline = CAPTURING_ARMS.some((a) => opts.arms === null || opts.arms.includes(a));
    await Promise.all([
      wantsPipeline ? startIngester() : Promise.resolve(),
      selected('sightline', () => gateway('sightline')),
      selected('sightline-nocapture', () => gateway('sightline-nocapture')),
      selected('sightline-noauth', () => gateway('sightline-noauth')),
      selected('sightline-embedded', embedded),
      selected('node-proxy', nodeProxy),
      selected('nginx', nginx),
      selected('portkey', portkey),
    ]);
    for (const ctl of CONTROL_ARMS) {
      // Set up with the `sightline` gateway (above) or not at all.
      if (!arms.has(ctl)) arms.set(ctl, { name: ctl, target: undefined, reason: `the sightline gateway, which the control arms use, is not available: ${arms.get('sightline')?.reason ?? ''}`, pids: () => [], output: () => '' });
    }
    if (ingester === undefined) {
      for (const name of CAPTURING_ARMS) {
        const arm = arms.get(name);
        if (arm !== undefined && arm.target !== undefined) {
          arms.set(name, { ...arm, target: undefined, reason: 'the ingester did not start, so capture could not be checked' });
        }
      }
    }

    return {
      mock,
      nats,
      ch,
      ingester,
      ingesterUrl,
      arms,
      roles: () => roles.map((r) => ({ role: r.role, pid: r.pid() })),
      stop: stopAll,
    };
  } catch (e) {
    await stopAll();
    throw e;
  }
}
