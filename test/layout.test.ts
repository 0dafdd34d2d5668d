/**
 * The repository's layout holds (docs/architecture.md, "Repository"): apps over packages
 * and nothing back up, no import cycle, every workspace import declared, and each side
 * loading only its own code — the gateway process never loads the ingester's span
 * building (the OpenTelemetry SDK) nor the store.
 *
 * The import graph is read with TypeScript's own scanner (`ts.preProcessFile`): every
 * `import`, `import type`, `export … from` and `import()` of the .ts files in each
 * workspace's `src` directory (tests may import across sides; the products may not).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { NatsServer, freePort, waitFor } from './support/servers.js';
import { ROOT, startApp, waitHealthy } from './support/apps.js';
import { sendMixed } from './support/e2e.js';
import { startMock } from '../bench/mock/server.js';

interface Workspace {
  name: string;
  /** `packages/core`, `apps/gateway`. */
  dir: string;
  dependencies: ReadonlySet<string>;
}

function workspaces(): Map<string, Workspace> {
  const out = new Map<string, Workspace>();
  for (const top of ['packages', 'apps']) {
    for (const d of readdirSync(join(ROOT, top))) {
      const file = join(ROOT, top, d, 'package.json');
      if (!existsSync(file)) continue;
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name: string; dependencies?: Record<string, string> };
      out.set(pkg.name, { name: pkg.name, dir: `${top}/${d}`, dependencies: new Set(Object.keys(pkg.dependencies ?? {})) });
    }
  }
  return out;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) out.push(...sourceFiles(p));
    else if (p.endsWith('.ts') && !p.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

interface Graph {
  /** File (relative to the root) → files it imports. */
  files: Map<string, Set<string>>;
  /** Workspace name → workspaces its source imports. */
  packages: Map<string, Set<string>>;
  /** Imports of a workspace by a file whose package.json does not declare it. */
  undeclared: string[];
}

function importGraph(): Graph {
  const ws = workspaces();
  const files = new Map<string, Set<string>>();
  const packages = new Map<string, Set<string>>();
  const undeclared: string[] = [];
  for (const w of ws.values()) {
    packages.set(w.name, new Set());
    const src = join(ROOT, w.dir, 'src');
    if (!existsSync(src)) continue;
    for (const abs of sourceFiles(src)) {
      const from = relative(ROOT, abs);
      const edges = new Set<string>();
      files.set(from, edges);
      for (const { fileName: spec } of ts.preProcessFile(readFileSync(abs, 'utf8'), true, true).importedFiles) {
        let target: string | null = null;
        if (spec.startsWith('.')) {
          const base = resolve(dirname(abs), spec.replace(/\.js$/, '.ts'));
          target = [base, `${base}.ts`, join(base, 'index.ts')].find((p) => existsSync(p) && statSync(p).isFile()) ?? null;
          assert.ok(target !== null, `${from}: cannot resolve ${spec}`);
        } else if (spec.startsWith('@sightline/')) {
          const dep = ws.get(spec);
          assert.ok(dep !== undefined, `${from}: no workspace named ${spec}`);
          if (!w.dependencies.has(spec)) undeclared.push(`${from} imports ${spec}`);
          target = join(ROOT, dep.dir, 'src', 'index.ts');
        }
        if (target === null) continue; // node: built-ins and npm packages
        const to = relative(ROOT, target);
        edges.add(to);
        const owner = [...ws.values()].find((o) => to.startsWith(`${o.dir}/`));
        if (owner !== undefined && owner.name !== w.name) packages.get(w.name)!.add(owner.name);
      }
    }
  }
  return { files, packages, undeclared };
}

/** A cycle in `graph` as the path that closes it, or null (depth-first search). */
function findCycle(graph: ReadonlyMap<string, ReadonlySet<string>>): string[] | null {
  const done = new Set<string>();
  const onPath = new Set<string>();
  const path: string[] = [];
  const visit = (n: string): string[] | null => {
    if (done.has(n)) return null;
    if (onPath.has(n)) return [...path.slice(path.indexOf(n)), n];
    onPath.add(n);
    path.push(n);
    for (const m of graph.get(n) ?? []) {
      const c = visit(m);
      if (c !== null) return c;
    }
    path.pop();
    onPath.delete(n);
    done.add(n);
    return null;
  };
  for (const n of graph.keys()) {
    const c = visit(n);
    if (c !== null) return c;
  }
  return null;
}

/** Workspaces `name` depends on, directly or not, through its source's imports. */
function closure(graph: Graph, name: string): Set<string> {
  const seen = new Set<string>();
  const todo = [name];
  while (todo.length > 0) {
    for (const d of graph.packages.get(todo.pop()!) ?? []) {
      if (!seen.has(d)) {
        seen.add(d);
        todo.push(d);
      }
    }
  }
  return seen;
}

test('the cycle finder finds a cycle, and the path that closes it', () => {
  const g = new Map([['a', new Set(['b'])], ['b', new Set(['c'])], ['c', new Set(['b'])]]);
  assert.deepEqual(findCycle(g), ['b', 'c', 'b']);
  assert.equal(findCycle(new Map([['a', new Set(['b'])], ['b', new Set<string>()]])), null);
});

test('the import graph of packages and apps has no cycle, between files or between workspaces', () => {
  const g = importGraph();
  // What the check covers: every workspace's source (a vacuous pass would find nothing).
  assert.ok(g.files.size > 40, `${g.files.size} files`);
  assert.ok(g.files.get('packages/capture/src/capture.ts')?.has('packages/capture/src/sink.ts'));
  assert.deepEqual(findCycle(g.files), null);
  assert.deepEqual(findCycle(g.packages), null);
});

test('packages never import apps, and every workspace import is declared in the importer\'s package.json', () => {
  const g = importGraph();
  for (const [from, tos] of g.files) {
    if (!from.startsWith('packages/')) continue;
    for (const to of tos) assert.ok(!to.startsWith('apps/'), `${from} imports ${to}`);
  }
  assert.deepEqual(g.undeclared, []);
});

test('each side depends only on its own: the gateway neither on span building nor on the store; capture not on the OpenTelemetry SDK', () => {
  const g = importGraph();
  const gateway = closure(g, '@sightline/app-gateway');
  assert.ok(gateway.has('@sightline/capture') && gateway.has('@sightline/core'));
  assert.ok(!gateway.has('@sightline/spans'), 'the gateway reaches @sightline/spans');
  assert.ok(!gateway.has('@sightline/store'), 'the gateway reaches @sightline/store');
  assert.ok(closure(g, '@sightline/app-ingester').has('@sightline/spans'));
  const capture = JSON.parse(readFileSync(join(ROOT, 'packages/capture/package.json'), 'utf8')) as { dependencies: Record<string, string> };
  assert.deepEqual(Object.keys(capture.dependencies).filter((d) => d.startsWith('@opentelemetry/')), []);
});

test('a running gateway that served and captured requests has not loaded the OpenTelemetry SDK, span building or the store', async () => {
  const [nats, mock] = await Promise.all([NatsServer.start(), startMock({ chunks: 3 })]);
  const dir = mkdtempSync(join(tmpdir(), 'sightline-layout-'));
  const log = join(dir, 'modules.txt');
  const port = await freePort();
  const gw = startApp('gateway', 'apps/gateway/src/main.ts', { NATS_URL: nats.url, GATEWAY_PORT: String(port), OPENAI_BASE_URL: `${mock.url}/v1`, SIGHTLINE_SPOOL_DIR: join(dir, 'spool'), SIGHTLINE_MODULE_LOG: log }, [
    '--import',
    './test/support/module-log.ts',
  ]);
  try {
    const url = `http://127.0.0.1:${port}`;
    await waitHealthy(gw, `${url}/healthz`);
    await sendMixed(url, 2);
    // Capture ran to the end: the records were serialised and NATS acknowledged them.
    await waitFor('4 requests published', async () => /^sightline_capture_published_total 4$/m.test(await (await fetch(`${url}/metrics`)).text()));
    assert.equal(await gw.stop(), 0, gw.output);
    const loaded = readFileSync(log, 'utf8').split('\n').filter((l) => l !== '');
    // The log sees ES modules (our source, through tsx) and CommonJS ones (undici).
    for (const seen of ['/packages/capture/src/wire.ts', '/packages/capture/src/capture.ts', '/apps/gateway/src/server.ts', '/node_modules/undici/']) {
      assert.ok(loaded.some((u) => u.includes(seen)), `${seen} not in the module log`);
    }
    for (const never of ['/@opentelemetry/sdk-trace-base/', '/packages/spans/', '/packages/store/', '/node_modules/chdb/', '/@clickhouse/client']) {
      assert.deepEqual(loaded.filter((u) => u.includes(never)), [], `the gateway loaded ${never}`);
    }
  } finally {
    await gw.stop();
    await Promise.all([nats.dispose(), mock.close()]);
    rmSync(dir, { recursive: true, force: true });
  }
});
