/**
 * docker-compose.yml and the Dockerfile, checked without Docker (issue 13, item 7): no
 * Docker engine runs here, so what can be checked is checked from the files, and the apps
 * are started the way the image starts them.
 *
 * - Compose refuses to start without SIGHTLINE_ADMIN_TOKEN; every variable it takes from the
 *   host, every service, image, published port, volume and profile agrees with
 *   docs/configuration.md ("Docker Compose"), and the published ports with the README.
 * - Every healthcheck runs a tool its image ships (IMAGE_TOOLS: the shipped file once used
 *   `wget` in `nats:2.11`, which is FROM scratch, so nothing waiting for NATS ever started).
 * - The environment: READS lists, per app, every variable its code reads (a grep of the
 *   source must find exactly these names) and whether compose sets it or why not; compose
 *   sets exactly the `set` ones. Then, at run time, each app's process records what its own
 *   code reads (a preload that wraps process.env, passed in NODE_OPTIONS so the command line
 *   stays the image's), and it must be exactly READS.
 * - The apps start from the image's command lines (`npm run build`, then
 *   `node --conditions=production apps/<app>/dist/main.js` from a directory laid out like the
 *   image's /app), as separate processes with the compose environment adapted to loopback
 *   ports, against a real nats-server, clickhouse-server and the mock provider; each
 *   healthcheck command passes against them; a key made through the admin API sends a
 *   request through the gateway that the query API then lists; each exits 0 on SIGTERM.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parse } from 'yaml';
import { ClickHouseServer, NatsServer, freePort, waitFor } from './support/servers.js';
import { AppProcess, ROOT, waitHealthy } from './support/apps.js';
import { startMock, type MockServer } from '../bench/mock/server.js';

const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');

// ---------------------------------------------------------------------------------------------
// Compose's file format, as far as this repository uses it.

interface Service {
  image?: string;
  build?: string;
  command?: string[];
  environment?: Record<string, string | number | boolean | null>;
  ports?: string[];
  volumes?: string[];
  healthcheck?: { test: string[] };
  profiles?: string[];
  depends_on?: Record<string, { condition: string }>;
}

interface Compose {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
}

type Env = Record<string, string | undefined>;

const VARIABLE = /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g;

/**
 * Compose's interpolation (compose-spec, "Interpolation"): `${VAR}`, `$VAR`, `${VAR:-default}`
 * (unset or empty), `${VAR-default}` (unset), `${VAR:?error}` / `${VAR?error}` (refuse to
 * start), `$$` for a `$`.
 */
function interpolate(text: string, env: Env): string {
  return text.replace(VARIABLE, (all, braced: string | undefined, op: string | undefined, arg: string | undefined, bare: string | undefined) => {
    if (all === '$$') return '$';
    const name = braced ?? bare!;
    const v = env[name];
    switch (op) {
      case ':-':
        return v === undefined || v === '' ? arg! : v;
      case '-':
        return v === undefined ? arg! : v;
      case ':?':
        if (v === undefined || v === '') throw new Error(`required variable ${name} is missing a value: ${arg}`);
        return v;
      case '?':
        if (v === undefined) throw new Error(`required variable ${name} is missing a value: ${arg}`);
        return v;
      default:
        return v ?? '';
    }
  });
}

/** The variables docker-compose.yml takes from the host (shell or .env). */
function hostVariables(text: string): Set<string> {
  const out = new Set<string>();
  for (const m of text.matchAll(VARIABLE)) if (m[0] !== '$$') out.add(m[1] ?? m[4]!);
  return out;
}

/** What the test gives compose from "the host": the required token, provider keys. */
const HOST_ENV: Env = {
  SIGHTLINE_ADMIN_TOKEN: 'compose-test-admin-token-0123456789',
  OPENAI_API_KEY: 'sk-compose-test-openai',
  ANTHROPIC_API_KEY: 'sk-ant-compose-test',
};

function loadCompose(env: Env = HOST_ENV): Compose {
  // `merge`: the YAML 1.1 `<<` merge keys the file uses for shared environments, as Compose reads them.
  return parse(interpolate(read('docker-compose.yml'), env), { merge: true }) as Compose;
}

function environment(s: Service): Record<string, string> {
  return Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, v === null ? '' : String(v)]));
}

// ---------------------------------------------------------------------------------------------
// The images' tools: what a healthcheck may run in each image.

const IMAGE_TOOLS: { image: RegExp; tools: readonly string[]; why: string }[] = [
  { image: /^nats:\d+(\.\d+)*$/, tools: [], why: 'built FROM scratch: the nats-server binary alone, no shell, no wget' },
  { image: /^nats:\d+(\.\d+)*-alpine[\d.]*$/, tools: ['sh', 'wget', 'nats-server'], why: 'Alpine: busybox sh and wget' },
  { image: /^clickhouse\/clickhouse-server:/, tools: ['sh', 'wget', 'clickhouse'], why: 'Ubuntu base with wget (docs/configuration.md)' },
  { image: /^grafana\/grafana:/, tools: ['sh', 'wget', 'grafana'], why: 'Alpine base: busybox wget' },
  { image: /^node:\d+(\.\d+)*-(bookworm|bullseye)-slim$/, tools: ['sh', 'node', 'npm'], why: 'Debian slim: neither wget nor curl' },
];

/** Why `test` cannot run in `image`, or null when it can. */
function healthcheckProblem(image: string, test: readonly string[]): string | null {
  const entry = IMAGE_TOOLS.find((e) => e.image.test(image));
  if (entry === undefined) return `no tools known for the image ${image}: add it to IMAGE_TOOLS`;
  const [kind, ...rest] = test;
  if (kind === 'NONE') return null;
  const tool = kind === 'CMD-SHELL' ? (rest.join(' ').trim().split(/\s+/)[0] ?? '') : (rest[0] ?? '');
  if (kind === 'CMD-SHELL' && !entry.tools.includes('sh')) return `${image} has no shell for CMD-SHELL (${entry.why})`;
  if (kind !== 'CMD' && kind !== 'CMD-SHELL') return `unknown healthcheck kind ${kind}`;
  return entry.tools.includes(tool) ? null : `${image} has no ${tool} (${entry.why})`;
}

/** The Dockerfile's stages: each `FROM` with ARG defaults resolved, and its instructions. */
function dockerfileStages(): { from: string; name: string; lines: string[] }[] {
  const text = read('Dockerfile').replace(/\\\n/g, ' ');
  const args = new Map<string, string>();
  const stages: { from: string; name: string; lines: string[] }[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const arg = /^ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(\S+)$/.exec(line);
    if (arg !== null && stages.length === 0) args.set(arg[1]!, arg[2]!);
    const from = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?$/i.exec(line);
    if (from !== null) {
      const image = from[1]!.replace(/\$\{(\w+)\}/g, (_m, n: string) => args.get(n) ?? '');
      stages.push({ from: image, name: from[2] ?? '', lines: [] });
    } else stages.at(-1)?.lines.push(line);
  }
  return stages;
}

/** The image a service runs: its `image`, or the Dockerfile's last stage's base for `build: .`. */
function imageOf(s: Service): string {
  if (s.image !== undefined) return s.image;
  assert.equal(s.build, '.', 'services build the repository Dockerfile');
  return dockerfileStages().at(-1)!.from;
}

// ---------------------------------------------------------------------------------------------
// What each app reads from its environment, and what compose does with it. `set`: the
// service's environment sets it; otherwise, why it is left to its default.

type Why = 'set' | { unset: string; conditional?: true };
const set = 'set' as const;
const unset = (why: string): Why => ({ unset: why });
/** Left unset, and read only on a path the started apps do not take (so the run below does not require the read). */
const when = (why: string): Why => ({ unset: why, conditional: true });
const OTLP = when('OTLP export is off unless an endpoint is given; the rest is read only then (docs/configuration.md)');

const SHARED_FILE_GATEWAY = unset('in the shared configuration file (gateway section, providers, capture): not used by this app');
const SHARED_FILE_QUERY = unset('in the shared configuration file (query section): not used by this app');
const INSTANCE = unset('default: the container hostname and pid, distinct per container');

const READS: Record<'ingester' | 'gateway' | 'query', Record<string, Why>> = {
  ingester: {
    NATS_URL: set,
    CLICKHOUSE_URL: set,
    CLICKHOUSE_USER: set,
    CLICKHOUSE_PASSWORD: set,
    CLICKHOUSE_DATABASE: set,
    CLICKHOUSE_CLUSTER: unset('a single ClickHouse server here (docker-compose.cluster.yml sets it)'),
    INGESTER_HOST: set,
    INGESTER_PORT: set,
    SIGHTLINE_RETENTION_DAYS: set,
    SIGHTLINE_CONTENT_RETENTION_DAYS: set,
    SIGHTLINE_NATS_REPLICAS: unset('default 1: this file runs one NATS server (docker-compose.cluster.yml sets 3)'),
    INGESTER_ACK_WAIT_MS: unset('default 30 s, used when the ingester creates the durable consumer'),
    OTEL_EXPORTER_OTLP_ENDPOINT: unset('no OTLP export unless given (docs/configuration.md)'),
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: unset('no OTLP export unless given (docs/configuration.md)'),
    OTEL_TRACES_EXPORTER: OTLP,
    OTEL_EXPORTER_OTLP_PROTOCOL: OTLP,
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: OTLP,
    SIGHTLINE_INSTANCE: INSTANCE,
  },
  gateway: {
    SIGHTLINE_ADMIN_TOKEN: set,
    SIGHTLINE_KEY_HASH_SECRET: set,
    NATS_URL: set,
    SIGHTLINE_CONFIG: set,
    GATEWAY_HOST: set,
    GATEWAY_PORT: set,
    GATEWAY_WORKERS: set,
    SIGHTLINE_SPOOL_DIR: set,
    SIGHTLINE_SPOOL_MAX_BYTES: set,
    OPENAI_BASE_URL: set,
    OPENAI_API_KEY: set,
    ANTHROPIC_BASE_URL: set,
    ANTHROPIC_API_KEY: set,
    SIGHTLINE_NATS_REPLICAS: unset('default 1: this file runs one NATS server (docker-compose.cluster.yml sets 3)'),
    GATEWAY_BODY_LIMIT: unset('the shipped file\'s default, 10mb'),
    GATEWAY_H2C_PORT: unset('no HTTP/2 cleartext listener: its port would also need publishing'),
    GATEWAY_WORKER_SLOT: unset('set by the gateway itself for each of its workers'),
    SIGHTLINE_DATA_DIR: unset('default ./data, which is /app/data: the volume'),
    SIGHTLINE_BENCH_CAPTURE_OFF: unset('benchmarks only'),
    SIGHTLINE_CONTENT_THREAD: unset('default: content is prepared in a worker thread'),
    SIGHTLINE_MODELS_REFRESH_MS: unset('default: the providers\' model lists are read again every 10 minutes'),
    SIGHTLINE_EMBEDDED_SINGLE_PROCESS: when('read by npm start (apps/sightline/src/main.ts), not by the gateway app: compose runs the apps as separate services'),
    SIGHTLINE_INSTANCE: INSTANCE,
    QUERY_HOST: SHARED_FILE_QUERY,
    QUERY_PORT: SHARED_FILE_QUERY,
  },
  query: {
    CLICKHOUSE_URL: set,
    CLICKHOUSE_USER: set,
    CLICKHOUSE_PASSWORD: set,
    CLICKHOUSE_DATABASE: set,
    CLICKHOUSE_CLUSTER: unset('a single ClickHouse server here (docker-compose.cluster.yml sets it)'),
    SIGHTLINE_ADMIN_TOKEN: set,
    SIGHTLINE_KEY_HASH_SECRET: set,
    NATS_URL: set,
    SIGHTLINE_CONFIG: set,
    QUERY_HOST: set,
    QUERY_PORT: set,
    SIGHTLINE_NATS_REPLICAS: unset('default 1: this file runs one NATS server (docker-compose.cluster.yml sets 3)'),
    QUERY_MAX_EXECUTION_TIME_S: unset('default 10 s'),
    QUERY_MAX_MEMORY_BYTES: unset('default 1 GiB'),
    QUERY_MAX_RESULT_ROWS: unset('default 100000'),
    QUERY_SEARCH_MAX_BYTES: unset('default 2 GiB'),
    QUERY_SQL_MAX_RESULT_BYTES: unset('default: the POST /v1/sql answer bound of docs/api.md'),
    SIGHTLINE_QUERY_URL: when('read by npm run sql (apps/query/src/sql-cli.ts), not by the server'),
    SIGHTLINE_DATA_DIR: unset('default ./data, which is /app/data: the volume'),
    GATEWAY_HOST: SHARED_FILE_GATEWAY,
    GATEWAY_PORT: SHARED_FILE_GATEWAY,
    GATEWAY_BODY_LIMIT: SHARED_FILE_GATEWAY,
    GATEWAY_H2C_PORT: SHARED_FILE_GATEWAY,
    OPENAI_BASE_URL: SHARED_FILE_GATEWAY,
    OPENAI_API_KEY: SHARED_FILE_GATEWAY,
    ANTHROPIC_BASE_URL: SHARED_FILE_GATEWAY,
    ANTHROPIC_API_KEY: SHARED_FILE_GATEWAY,
    SIGHTLINE_SPOOL_DIR: SHARED_FILE_GATEWAY,
    SIGHTLINE_SPOOL_MAX_BYTES: SHARED_FILE_GATEWAY,
  },
};

const APPS = Object.keys(READS) as (keyof typeof READS)[];
const setBy = (app: keyof typeof READS) => Object.keys(READS[app]).filter((k) => READS[app][k] === 'set').sort();

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) out.push(...sourceFiles(p));
    else if (p.endsWith('.ts') && !p.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/** Files that read the environment by a computed name: the helpers, whose callers name it. */
const DYNAMIC_READERS = ['packages/core/src/process.ts', 'packages/config/src/load.ts'];

/**
 * Every environment variable the products' code names: `process.env.X`, `process.env['X']`,
 * `env.X` (a ProcessEnv passed in), the helpers `envInt('X', …)` and query/limits.ts's
 * `get('X', …)`, and the `${X}` references of the shipped configuration file.
 */
function namesInSource(): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  const add = (name: string, file: string) => out.set(name, (out.get(name) ?? new Set()).add(file));
  const patterns = [/process\.env\.([A-Z][A-Z0-9_]*)/g, /process\.env\[\s*['"]([A-Z][A-Z0-9_]*)['"]\s*\]/g, /\benv\.([A-Z][A-Z0-9_]*)\b/g, /\benvInt\(\s*'([A-Z][A-Z0-9_]*)'/g, /\bget\(\s*'([A-Z][A-Z0-9_]*)'/g];
  for (const top of ['apps', 'packages']) {
    for (const w of readdirSync(join(ROOT, top))) {
      const src = join(ROOT, top, w, 'src');
      if (!existsSync(src)) continue;
      for (const abs of sourceFiles(src)) {
        const file = relative(ROOT, abs);
        const text = readFileSync(abs, 'utf8');
        for (const re of patterns) for (const m of text.matchAll(re)) add(m[1]!, file);
        if (/process\.env\[(?!\s*['"])/.test(text)) assert.ok(DYNAMIC_READERS.includes(file), `${file} reads process.env[…] by a computed name: name the variable, or add the file to DYNAMIC_READERS and its callers to the patterns`);
      }
    }
  }
  const yaml = read('config/sightline.yaml')
    .split('\n')
    .map((l) => l.replace(/(^|\s)#.*$/, ''))
    .join('\n');
  for (const m of yaml.matchAll(/\$\{([A-Z_][A-Z0-9_]*)/g)) add(m[1]!, 'config/sightline.yaml');
  return out;
}

/**
 * Loaded with `--import` (through NODE_OPTIONS) into an app: wraps process.env and records
 * each variable read by the app's own compiled code (the caller's frame is in a workspace's
 * dist/, not node_modules or Node itself), written to SIGHTLINE_ENV_SPY_DIR/<pid>.json at exit.
 */
const ENV_SPY = `import { writeFileSync } from 'node:fs';
const dir = process.env.SIGHTLINE_ENV_SPY_DIR;
const reads = new Set();
const ours = /\\/(apps|packages)\\/[^/]+\\/dist\\//;
process.env = new Proxy(process.env, {
  get(target, key) {
    if (typeof key === 'string') {
      const caller = (new Error().stack ?? '').split('\\n')[2] ?? '';
      if (ours.test(caller) && !caller.includes('/node_modules/')) reads.add(key);
    }
    return Reflect.get(target, key);
  },
});
process.on('exit', () => writeFileSync(dir + '/' + process.pid + '.json', JSON.stringify([...reads])));
`;

// ---------------------------------------------------------------------------------------------
// docs/configuration.md, "Docker Compose".

function composeSection(): string {
  const doc = read('docs/configuration.md');
  const start = doc.indexOf('\n## Docker Compose');
  assert.ok(start >= 0, 'docs/configuration.md has a "Docker Compose" section');
  const end = doc.indexOf('\n## ', start + 5);
  return doc.slice(start, end === -1 ? undefined : end);
}

/** The cells of each row of the markdown table whose header line starts with `header`. */
function tableRows(section: string, header: string): string[][] {
  const lines = section.split('\n');
  const at = lines.findIndex((l) => l.startsWith(header));
  assert.ok(at >= 0, `a table headed "${header}"`);
  const rows: string[][] = [];
  for (const l of lines.slice(at + 2)) {
    if (!l.startsWith('|')) break;
    rows.push(l.slice(1, -1).split('|').map((c) => c.trim()));
  }
  return rows;
}

const codes = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);

// ---------------------------------------------------------------------------------------------

test('compose refuses to start without SIGHTLINE_ADMIN_TOKEN; every variable it takes from the host is documented', () => {
  assert.throws(() => loadCompose({}), /SIGHTLINE_ADMIN_TOKEN/);
  assert.throws(() => loadCompose({ SIGHTLINE_ADMIN_TOKEN: '' }), /SIGHTLINE_ADMIN_TOKEN/);
  const c = loadCompose();
  assert.equal(environment(c.services['gateway']!)['SIGHTLINE_ADMIN_TOKEN'], HOST_ENV['SIGHTLINE_ADMIN_TOKEN']);
  const documented = composeSection().split('Variables compose takes from the shell or `.env`:')[1]?.split('\n\n')[0] ?? '';
  assert.deepEqual(new Set(codes(documented).filter((c) => /^[A-Z][A-Z0-9_]*$/.test(c))), hostVariables(read('docker-compose.yml')));
});

test('services, images, published ports, volumes, healthchecks and profiles are the ones docs/configuration.md lists', () => {
  const c = loadCompose();
  const rows = tableRows(composeSection(), '| service | image |');
  assert.deepEqual(rows.map((r) => codes(r[0]!)[0]).sort(), Object.keys(c.services).sort());
  for (const r of rows) {
    const name = codes(r[0]!)[0]!;
    const s = c.services[name]!;
    assert.equal(codes(r[1]!)[0], s.image ?? 'Dockerfile', `${name}: image`);
    assert.deepEqual(codes(r[2]!), s.ports ?? [], `${name}: published ports`);
    assert.deepEqual(codes(r[3]!), s.volumes ?? [], `${name}: volumes`);
    const tool = s.healthcheck?.test[1];
    assert.equal(codes(r[4]!)[0]?.split(' ')[0], tool, `${name}: healthcheck tool`);
    assert.ok(s.healthcheck!.test.some((a) => codes(r[4]!).slice(1).every((frag) => a.includes(frag))), `${name}: healthcheck endpoint ${r[4]}`);
    assert.deepEqual(codes(r[5]!), s.profiles ?? [], `${name}: profiles`);
  }
  // Every named volume is declared, and every declared one used.
  const named = new Set(Object.values(c.services).flatMap((s) => (s.volumes ?? []).map((v) => v.split(':')[0]!).filter((v) => !v.startsWith('.'))));
  assert.deepEqual(named, new Set(Object.keys(c.volumes)));
  // Bind mounts exist in the repository.
  for (const v of Object.values(c.services).flatMap((s) => s.volumes ?? []).filter((v) => v.startsWith('./'))) assert.ok(existsSync(join(ROOT, v.split(':')[0]!)), v);
  // The README names each port published on the host.
  const readme = read('README.md');
  for (const p of Object.values(c.services).flatMap((s) => s.ports ?? [])) assert.ok(readme.includes(`:${p.split(':').at(-1)}`), `README.md mentions :${p.split(':').at(-1)}`);
  // The table of what each app's service sets.
  assert.deepEqual(
    Object.fromEntries(tableRows(composeSection(), '| service | environment |').map((r) => [codes(r[0]!)[0]!, codes(r[1]!).sort()])),
    Object.fromEntries(APPS.map((a) => [a, Object.keys(environment(c.services[a]!)).sort()])),
  );
});

test('every healthcheck runs a tool its image ships, and the check would have caught the FROM-scratch NATS image', () => {
  const c = loadCompose();
  for (const [name, s] of Object.entries(c.services)) {
    assert.ok(s.healthcheck !== undefined, `${name} has a healthcheck`);
    assert.equal(healthcheckProblem(imageOf(s), s.healthcheck.test), null, name);
  }
  // What the file shipped before: `wget` in nats:2.11 (FROM scratch), and `wget` in the apps' image.
  assert.match(healthcheckProblem('nats:2.11', ['CMD', 'wget', '-qO-', 'http://127.0.0.1:8222/healthz']) ?? '', /no wget/);
  assert.match(healthcheckProblem('node:20-bookworm-slim', ['CMD', 'wget', '-qO-', 'http://127.0.0.1:8080/healthz']) ?? '', /no wget/);
  assert.match(healthcheckProblem('nats:2.11', ['CMD-SHELL', 'true']) ?? '', /no shell/);
  // Whatever waits for another service waits for its healthcheck, which exists.
  for (const [name, s] of Object.entries(c.services)) {
    for (const [dep, cond] of Object.entries(s.depends_on ?? {})) {
      assert.equal(cond.condition, 'service_healthy', `${name} waits for ${dep} to be healthy`);
      assert.ok(c.services[dep]?.healthcheck !== undefined, `${dep} has a healthcheck`);
    }
  }
});

test('the image: compiled JavaScript, production dependencies, a non-root user; the apps listen on every address of their container', () => {
  const stages = dockerfileStages();
  const runtime = stages.at(-1)!;
  assert.match(runtime.from, /^node:20-bookworm-slim$/);
  assert.ok(runtime.lines.some((l) => /^RUN npm ci\b.*--omit=dev/.test(l)), 'the runtime stage installs production dependencies only');
  assert.ok(!runtime.lines.some((l) => /^COPY\s+(apps|packages)\b/.test(l)), 'the runtime stage copies no source directory');
  const user = runtime.lines.filter((l) => l.startsWith('USER ')).at(-1);
  assert.ok(user !== undefined && !/^USER\s+(root|0)(:|$)/.test(user), `runs as ${user ?? 'root'}`);
  const cmd = JSON.parse(runtime.lines.find((l) => l.startsWith('CMD '))!.slice(4)) as string[];
  const c = loadCompose();
  assert.deepEqual(cmd, c.services['gateway']!.command);
  for (const app of APPS) {
    // The gateway with V8's single-threaded GC (docs/configuration.md, "V8 flags").
    assert.deepEqual(c.services[app]!.command, ['node', ...(app === 'gateway' ? ['--single-threaded-gc'] : []), '--conditions=production', `apps/${app}/dist/main.js`]);
    const env = environment(c.services[app]!);
    const host = { ingester: 'INGESTER_HOST', gateway: 'GATEWAY_HOST', query: 'QUERY_HOST' }[app];
    assert.equal(env[host], '0.0.0.0', `${app}: ${host}`);
  }
  // Every workspace resolves to its compiled output under the "production" condition.
  for (const top of ['apps', 'packages']) {
    for (const w of readdirSync(join(ROOT, top))) {
      const pkg = JSON.parse(read(`${top}/${w}/package.json`)) as { exports: { '.': Record<string, string> } };
      const conditions = Object.keys(pkg.exports['.']);
      assert.equal(pkg.exports['.']['production'], './dist/index.js', `${top}/${w}`);
      assert.ok(conditions.indexOf('production') < conditions.indexOf('default'), `${top}/${w}: "production" before "default"`);
    }
  }
});

test('dependencies match the image\'s Node: no package in the lock file asks for a newer major than engines and the image', () => {
  const pkg = JSON.parse(read('package.json')) as { engines: { node: string } };
  const major = Number(/^>=\s*(\d+)/.exec(pkg.engines.node)?.[1]);
  assert.equal(`node:${major}-bookworm-slim`, dockerfileStages().at(-1)!.from, 'engines and the image agree');
  // The lowest major each engines range accepts: the smallest lower bound over its `||` alternatives.
  const lowest = (range: string) => Math.min(...range.split('||').map((alt) => Number(/(?:>=?|\^|~|=)?\s*v?(\d+)/.exec(alt.trim())?.[1] ?? 0)));
  const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { engines?: { node?: string } | string[] }> };
  const newer = Object.entries(lock.packages)
    .filter(([, p]) => p.engines !== undefined && !Array.isArray(p.engines) && p.engines.node !== undefined && lowest(p.engines.node) > major)
    .map(([k, p]) => `${k} (${(p.engines as { node: string }).node})`);
  assert.deepEqual(newer, []);
});

test('the table of what each app reads names exactly the variables the code reads', () => {
  const found = namesInSource();
  // What the check covers (a vacuous pass would find nothing).
  assert.ok(found.get('NATS_URL')?.has('apps/gateway/src/main.ts'));
  assert.ok(found.get('QUERY_MAX_RESULT_ROWS')?.has('apps/query/src/limits.ts'));
  assert.ok(found.get('OPENAI_BASE_URL')?.has('config/sightline.yaml'));
  const listed = new Set(APPS.flatMap((a) => Object.keys(READS[a])));
  assert.deepEqual([...found.keys()].filter((n) => !listed.has(n)).sort(), [], 'read by the code, missing from READS: say whether compose sets it');
  assert.deepEqual([...listed].filter((n) => !found.has(n)).sort(), [], 'in READS, read by no code');
  const c = loadCompose();
  for (const app of APPS) assert.deepEqual(Object.keys(environment(c.services[app]!)).sort(), setBy(app), `${app}: compose sets exactly what READS marks "set"`);
});

// ---------------------------------------------------------------------------------------------

describe('the apps started from the image\'s command lines, with the compose environment', () => {
  let nats: NatsServer;
  let ch: ClickHouseServer;
  let mock: MockServer;
  let dir = '';
  /** A directory laid out like the image's /app (WORKDIR), linking the repository's parts. */
  let appRoot = '';
  let spyDir = '';
  /** Compose's container ports → this test's loopback ports. */
  const ports = new Map<number, number>();
  const apps = new Map<string, AppProcess>();
  const c = loadCompose();

  /** The service's compose environment, adapted to this machine (each change said here). */
  function adapted(env: Record<string, string>): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(env)) {
      if (k === 'NATS_URL') out[k] = nats.url;
      else if (k === 'CLICKHOUSE_URL') out[k] = ch.url;
      // The test server's user, instead of the one the ClickHouse image creates.
      else if (k === 'CLICKHOUSE_USER') out[k] = 'default';
      else if (k === 'CLICKHOUSE_PASSWORD') out[k] = '';
      else if (k === 'OPENAI_BASE_URL') out[k] = `${mock.url}/v1`;
      else if (k === 'ANTHROPIC_BASE_URL') out[k] = mock.url;
      else if (k.endsWith('_HOST') && v === '0.0.0.0') out[k] = '127.0.0.1';
      else if (k.endsWith('_PORT') && ports.has(Number(v))) out[k] = String(ports.get(Number(v)));
      else if (v.startsWith('/app/')) out[k] = join(appRoot, v.slice('/app/'.length));
      else out[k] = v;
    }
    return out;
  }

  /** The container's environment: the image's (Dockerfile ENV), the service's, nothing from this shell. */
  function containerEnv(service: string): Record<string, string> {
    const image: Record<string, string> = {};
    for (const l of dockerfileStages().at(-1)!.lines) {
      const m = /^ENV\s+([A-Z_][A-Z0-9_]*)=(\S+)$/.exec(l);
      if (m !== null) image[m[1]!] = m[2]!;
    }
    return {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: join(dir, 'home'),
      ...image,
      ...adapted(environment(c.services[service]!)),
      NODE_OPTIONS: `--import=${pathToFileURL(join(dir, 'env-spy.mjs')).href}`,
      SIGHTLINE_ENV_SPY_DIR: join(spyDir, service),
    };
  }

  /** Runs a healthcheck command here, its ports mapped; resolves to its exit code. */
  async function runHealthcheck(test: readonly string[], portMap: ReadonlyMap<number, number>): Promise<number | null> {
    const [, tool, ...args] = test;
    const bin = tool === 'node' ? process.execPath : tool!;
    const mapped = args.map((a) => a.replace(/127\.0\.0\.1:(\d+)/g, (_m, p: string) => `127.0.0.1:${portMap.get(Number(p)) ?? p}`));
    const child = spawn(bin, mapped, { stdio: 'ignore' });
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    const code = await new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    clearTimeout(timer);
    return code;
  }

  before(async () => {
    // The image's build stage: tsc -b emitting JavaScript into each workspace's dist/.
    const build = spawnSync('npm', ['run', 'build'], { cwd: ROOT, encoding: 'utf8', timeout: 600_000 });
    assert.equal(build.status, 0, `npm run build: ${build.stdout}${build.stderr}`);
    [nats, ch, mock] = await Promise.all([NatsServer.start(null, { monitor: true }), ClickHouseServer.start(), startMock({ chunks: 3 })]);
    dir = mkdtempSync(join(tmpdir(), 'sightline-compose-'));
    appRoot = join(dir, 'app');
    spyDir = join(dir, 'env');
    mkdirSync(join(appRoot, 'data', 'spool'), { recursive: true });
    mkdirSync(join(dir, 'home'));
    for (const part of ['package.json', 'node_modules', 'apps', 'packages', 'config', 'migrations']) symlinkSync(join(ROOT, part), join(appRoot, part));
    writeFileSync(join(dir, 'env-spy.mjs'), ENV_SPY);
    ports.set(4222, nats.port).set(8222, nats.monitorPort).set(8123, ch.httpPort);
    for (const p of [8080, 8081, 8082]) ports.set(p, await freePort());
    // In the order compose starts them (depends_on): the ingester, then the query API; the gateway needs NATS only.
    for (const service of ['ingester', 'gateway', 'query']) {
      mkdirSync(join(spyDir, service), { recursive: true });
      const [cmd, ...args] = c.services[service]!.command!;
      assert.equal(cmd, 'node');
      assert.ok(existsSync(join(appRoot, args.at(-1)!)), `${args.at(-1)} built`);
      const child = spawn(process.execPath, args, { cwd: appRoot, env: containerEnv(service), stdio: ['ignore', 'pipe', 'pipe'] });
      const app = new AppProcess(service, child);
      apps.set(service, app);
      const port = ports.get(Number(environment(c.services[service]!)[`${service === 'gateway' ? 'GATEWAY' : service === 'query' ? 'QUERY' : 'INGESTER'}_PORT`]))!;
      await waitHealthy(app, `http://127.0.0.1:${port}/healthz`, 90_000);
    }
    // The gateway's command line carries --single-threaded-gc to node: it does not ask for it.
    assert.doesNotMatch(apps.get('gateway')!.output, /single-threaded-gc/);
  });

  after(async () => {
    for (const a of apps.values()) await a.stop();
    await Promise.all([nats?.dispose(), ch?.dispose(), mock?.close()]);
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  test('every healthcheck command passes against the running services (and fails against a closed port)', async () => {
    let ran = 0;
    for (const [name, s] of Object.entries(c.services)) {
      if (s.profiles !== undefined) continue; // Grafana: not installed here
      const tool = s.healthcheck!.test[1]!;
      if (tool !== 'node' && spawnSync(tool, ['--version'], { stdio: 'ignore' }).error !== undefined) continue; // no such tool on this machine
      assert.equal(await runHealthcheck(s.healthcheck!.test, ports), 0, `${name}: ${s.healthcheck!.test.join(' ')}`);
      ran++;
    }
    assert.ok(ran >= 3, `${ran} healthchecks ran`);
    const closed = await freePort();
    assert.notEqual(await runHealthcheck(c.services['gateway']!.healthcheck!.test, new Map([[8080, closed]])), 0);
  });

  test('with authentication on as compose sets it: a key made by the admin, a request through the gateway with the gateway\'s own provider key, listed by the query API', async () => {
    const query = `http://127.0.0.1:${ports.get(8081)}`;
    const gateway = `http://127.0.0.1:${ports.get(8080)}`;
    const admin = { authorization: `Bearer ${HOST_ENV['SIGHTLINE_ADMIN_TOKEN']}`, 'content-type': 'application/json' };
    const created = await fetch(`${query}/v1/admin/keys`, { method: 'POST', headers: admin, body: JSON.stringify({ team: 'compose', name: 'first', scopes: ['gateway', 'read'] }) });
    assert.equal(created.status, 201, await created.clone().text());
    const { key } = (await created.json()) as { key: string };
    const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal((await fetch(`${gateway}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).status, 401, 'no key, no request');
    const ids: string[] = [];
    let res: Response | null = null;
    // The key reaches the gateway through NATS within a moment.
    await waitFor('the key works at the gateway', async () => {
      res = await fetch(`${gateway}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body,
      });
      return res.status === 200;
    }, 10_000);
    ids.push(res!.headers.get('x-sightline-trace-id') ?? '');
    const messages = await fetch(`${gateway}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude-haiku-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(messages.status, 200, await messages.clone().text());
    ids.push(messages.headers.get('x-sightline-trace-id') ?? '');
    // The provider saw the gateway's keys from compose's environment, never the caller's key.
    const seen = mock.lastRequests().slice(-2);
    assert.equal(seen[0]!.headers['authorization'], `Bearer ${HOST_ENV['OPENAI_API_KEY']}`);
    assert.equal(seen[1]!.headers['x-api-key'], HOST_ENV['ANTHROPIC_API_KEY']);
    for (const id of ids) {
      assert.match(id, /^[0-9a-f]{32}$/);
      await waitFor(`request ${id} listed`, async () => (await fetch(`${query}/v1/requests/${id}`, { headers: { authorization: `Bearer ${key}` } })).status === 200, 30_000);
    }
  });

  test('each app exits 0 on SIGTERM, having read exactly the variables READS lists for it (so every one compose sets)', async () => {
    for (const [name, a] of apps) assert.equal(await a.stop(), 0, `${name}: ${a.output}`);
    for (const app of APPS) {
      const files = readdirSync(join(spyDir, app));
      assert.ok(files.length > 0, `${app} recorded its reads`);
      const reads = new Set(files.flatMap((f) => JSON.parse(readFileSync(join(spyDir, app, f), 'utf8')) as string[]));
      assert.deepEqual([...reads].filter((n) => READS[app][n] === undefined).sort(), [], `${app} reads variables READS does not list`);
      assert.deepEqual(setBy(app).filter((n) => !reads.has(n)), [], `${app}: compose sets variables the app never read`);
      const required = Object.keys(READS[app]).filter((n) => { const why = READS[app][n]!; return why === 'set' || why.conditional !== true; });
      assert.deepEqual(required.filter((n) => !reads.has(n)), [], `${app}: READS lists variables the app never read`);
    }
  });
});
