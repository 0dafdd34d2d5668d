/**
 * The Grafana dashboard (deploy/grafana/): the committed JSON is what deploy/grafana/dashboard.ts
 * makes, its panels use the provisioned data source, and every SQL query of it runs on both
 * ClickHouse engines (a real clickhouse-server 18.16 and chdb 26.x) over migrated tables
 * with rows made by the real span builder and rolled up by the ingester's Rollup, giving the
 * numbers computed here from the same rows.
 *
 * Grafana's ClickHouse plugin expands its macros in the backend before the query reaches
 * ClickHouse; expandMacros() below does what grafana/clickhouse-datasource pkg/macros/macros.go
 * does for the macros the dashboard may use, and refuses any other.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { ChdbStore, ClickHouseServerStore, migrate, type Sql, type Store } from '@sightline/store';
import { toWire } from '@sightline/capture';
import { SpanBuilder } from '@sightline/spans';
import { Rollup } from '@sightline/app-ingester';
import { SHIPPED_PRICES, costUsd, priceLookup } from '@sightline/config';
// The package exports no way to run text as SQL (only migrations may): a test may.
import { trustedSql } from '../packages/store/src/sql.js';
import { ClickHouseServer } from './support/servers.js';
import { ROOT } from './support/apps.js';
import { servedRecord } from './support/records.js';
import { DASHBOARD_FILE, DATASOURCE, dashboard, dashboardJson, type Panel } from '../deploy/grafana/dashboard.js';

interface TimeRange {
  fromS: number;
  toS: number;
}

/**
 * The plugin's macros (pkg/macros/macros.go): `$__timeFilter(col)` →
 * `col >= toDateTime(from) AND col <= toDateTime(to)` in Unix seconds, `$__fromTime` /
 * `$__toTime` → `toDateTime(s)`, `$__interval_s` → the interval in whole seconds, at least 1.
 * Others (e.g. `$__timeInterval`, which needs toStartOfInterval, absent from ClickHouse
 * 18.16) throw, so a panel using one fails here rather than in a user's Grafana.
 */
export function expandMacros(text: string, range: TimeRange, intervalS: number): string {
  return text.replace(/\$__(\w+)(?:\(([^)]*)\))?/g, (_all, name: string, args: string | undefined) => {
    const argv = args === undefined ? [] : args.split(',').map((a) => a.trim());
    switch (name) {
      case 'timeFilter':
        assert.equal(argv.length, 1, '$__timeFilter takes one column');
        return `${argv[0]} >= toDateTime(${range.fromS}) AND ${argv[0]} <= toDateTime(${range.toS})`;
      case 'fromTime':
        return `toDateTime(${range.fromS})`;
      case 'toTime':
        return `toDateTime(${range.toS})`;
      case 'interval_s':
        return String(Math.max(Math.floor(intervalS), 1));
      default:
        throw new Error(`macro $__${name} is not one this dashboard may use`);
    }
  });
}

test('the macro expansion matches the plugin, and refuses macros ClickHouse 18.16 cannot run', () => {
  const range = { fromS: 1_751_371_200, toS: 1_751_374_800 };
  assert.equal(
    expandMacros('WHERE $__timeFilter(minute) GROUP BY intDiv(toUInt32(minute), $__interval_s)', range, 60),
    'WHERE minute >= toDateTime(1751371200) AND minute <= toDateTime(1751374800) GROUP BY intDiv(toUInt32(minute), 60)',
  );
  assert.equal(expandMacros('$__interval_s', range, 0.2), '1');
  assert.throws(() => expandMacros('SELECT $__timeInterval(minute)', range, 60), /timeInterval/);
});

test('the committed dashboard is the generated one, on the provisioned data source', () => {
  assert.equal(readFileSync(join(ROOT, DASHBOARD_FILE), 'utf8'), dashboardJson(), `run npm run grafana:dashboard and commit ${DASHBOARD_FILE}`);
  const ds = parse(readFileSync(join(ROOT, 'deploy/grafana/provisioning/datasources/clickhouse.yaml'), 'utf8')) as {
    datasources: { uid: string; type: string; jsonData: { host: string; port: number; protocol: string; defaultDatabase: string } }[];
  };
  assert.deepEqual(ds.datasources.map((d) => ({ uid: d.uid, type: d.type })), [{ ...DATASOURCE }]);
  assert.deepEqual(ds.datasources[0]!.jsonData, { ...ds.datasources[0]!.jsonData, host: 'clickhouse', port: 8123, protocol: 'http', defaultDatabase: 'sightline' });
  const provider = parse(readFileSync(join(ROOT, 'deploy/grafana/provisioning/dashboards/sightline.yaml'), 'utf8')) as { providers: { options: { path: string } }[] };
  assert.equal(provider.providers[0]!.options.path, '/etc/grafana/dashboards');
  const d = dashboard();
  assert.deepEqual(
    d.panels.map((p) => p.title),
    ['Requests by model', 'Error rate', 'Latency p50 / p99', "Gateway's own time p50 / p99", 'Tokens', 'Cost by model', 'By team, model and provider'],
  );
  for (const p of d.panels) {
    assert.equal(p.targets.length, 1, p.title);
    const t = p.targets[0]!;
    assert.deepEqual(p.datasource, DATASOURCE);
    assert.deepEqual(t.datasource, DATASOURCE);
    assert.equal(t.format, p.type === 'timeseries' ? 0 : 1, `${p.title}: time series (0) or table (1)`);
    assert.ok(!t.rawSql.includes('${') && !/\$(?!__)/.test(t.rawSql), `${p.title}: no Grafana template variable in the SQL`);
  }
});

// ---------------------------------------------------------------------------------------------
// The fixture: requests over a few minutes of 2025-07-01, and one request for every name of
// the shipped price table (plus a model without a price), so the cost SQL is checked against
// the query API's prices for each of them.

/**
 * Text as SQL for the store. At run time trustedSql makes the very class '@sightline/store'
 * uses (tsx loads the one source file); the compiler sees two declarations of it (the
 * package's dist/ types and this source file), hence the cast.
 */
const raw = (text: string): Sql => trustedSql(text) as unknown as Sql;

const BASE_MS = Date.UTC(2025, 6, 1, 12, 0, 0);
const ORIGIN_NS = BigInt(BASE_MS) * 1_000_000n - 1_000_000_000n;
const RANGE: TimeRange = { fromS: BASE_MS / 1000 - 3600, toS: BASE_MS / 1000 + 3600 };

interface Spec {
  team: string;
  model: string;
  provider: string;
  status: number;
  /** Milliseconds after BASE_MS. */
  offsetMs: number;
  totalMs: number;
  tokens: { input: number; output: number; cacheRead: number; cacheWrite: number };
}

function spec(o: Partial<Spec> & Pick<Spec, 'offsetMs'>): Spec {
  return { team: 'alpha', model: 'gpt-4o-mini', provider: 'openai', status: 200, totalMs: 160, tokens: { input: 120, output: 40, cacheRead: 20, cacheWrite: 0 }, ...o };
}

/** A name each shipped price entry matches: the exact names, and each glob with a suffix. */
const PRICED_MODELS = SHIPPED_PRICES.prices.flatMap((p) => p.match.map((m) => m.replace('*', '-20990101')));

const SPECS: Spec[] = [
  // 12:00: gpt-4o-mini, 4 served, one 500; 160 ms each.
  ...Array.from({ length: 5 }, (_, i) => spec({ offsetMs: 1_000 + i * 5_000, status: i === 4 ? 500 : 200 })),
  // 12:00 and 12:01: Claude for team beta, with cache reads and writes; 200–260 ms.
  ...Array.from({ length: 4 }, (_, i) =>
    spec({ team: 'beta', model: 'claude-sonnet-4-5-20250929', provider: 'anthropic', offsetMs: 30_000 + i * 15_000, totalMs: 200 + i * 20, tokens: { input: 2_000, output: 300, cacheRead: 1_200, cacheWrite: 400 } }),
  ),
  // 12:02: a 429 and two slow gpt-4o requests.
  spec({ model: 'gpt-4o', offsetMs: 125_000, status: 429, tokens: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 } }),
  ...Array.from({ length: 2 }, (_, i) => spec({ model: 'gpt-4o', offsetMs: 130_000 + i * 1_000, totalMs: 900 + i * 100 })),
  // 12:07: every shipped price, and a model without one.
  ...[...PRICED_MODELS, 'mystery-model'].map((model, i) =>
    spec({ team: 'gamma', model, provider: model.startsWith('claude') ? 'anthropic' : 'openai', offsetMs: 420_000 + i * 100, tokens: { input: 1_000 + i, output: 500, cacheRead: 100, cacheWrite: 50 } }),
  ),
];

/** The `requests` row of each spec, as the ingester builds it. */
interface RequestRow {
  start_time_unix_nano: string | bigint;
  team: string;
  model: string;
  provider: string;
  http_status: number;
  total_ns: number | string | bigint;
  gateway_ns: number | string | bigint;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
}

let seq = 0;
function build(builder: SpanBuilder, s: Spec): { spans: object[]; request: RequestRow } {
  const t0 = 1000 + s.offsetMs;
  const r = servedRecord({ seq: ++seq, t0, team: s.team, provider: s.provider });
  r.model = s.model;
  r.upstreamModel = s.model;
  r.tFinish = t0 + s.totalMs;
  r.status = s.status;
  r.upstreamStatus = s.status;
  r.errorType = s.status >= 400 ? 'upstream_error' : '';
  const w = toWire(r);
  w.inputTokens = s.tokens.input;
  w.outputTokens = s.tokens.output;
  w.cacheReadTokens = s.tokens.cacheRead;
  w.cacheWriteTokens = s.tokens.cacheWrite;
  w.usageFound = s.tokens.input + s.tokens.output > 0;
  const b = builder.build(w, 'gw-grafana', ORIGIN_NS);
  return { spans: b.spans, request: b.request as unknown as RequestRow };
}

// ---------------------------------------------------------------------------------------------
// What each panel must show, computed from the request rows.

const priceOf = priceLookup([]);

interface Req {
  startS: number;
  team: string;
  model: string;
  provider: string;
  error: boolean;
  totalMs: number;
  gatewayMs: number;
  input: number;
  output: number;
  cost: number;
}

function toReq(r: RequestRow): Req {
  const input = Number(r.input_tokens);
  const output = Number(r.output_tokens);
  const cacheRead = Number(r.cache_read_tokens);
  const cacheWrite = Number(r.cache_write_tokens);
  return {
    startS: Number(BigInt(r.start_time_unix_nano) / 1_000_000_000n),
    team: r.team,
    model: r.model,
    provider: r.provider,
    error: Number(r.http_status) >= 400,
    totalMs: Number(r.total_ns) / 1e6,
    gatewayMs: Number(r.gateway_ns) / 1e6,
    input,
    output,
    // The dashboard counts a model without a shipped price as 0 (the API answers null).
    cost: costUsd(priceOf(r.model), input, output, cacheRead, cacheWrite) ?? 0,
  };
}

/** `YYYY-MM-DD hh:mm:ss`, as ClickHouse writes a DateTime in JSON. */
function dateTime(s: number): string {
  return new Date(s * 1000).toISOString().slice(0, 19).replace('T', ' ');
}

function groupBy<T>(items: readonly T[], key: (t: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const t of items) {
    const k = key(t);
    out.set(k, [...(out.get(k) ?? []), t]);
  }
  return out;
}

const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);

type Row = Record<string, string | number | null>;
const n = (v: string | number | null | undefined): number => Number(v);

function assertClose(actual: number, expected: number, what: string): void {
  assert.ok(Math.abs(actual - expected) <= 1e-9 * Math.max(1, Math.abs(expected)), `${what}: ${actual} != ${expected}`);
}

/** A t-digest percentile: an estimate, so within the bucket's range, and exact when all are equal. */
function assertPercentile(actual: number, values: readonly number[], what: string): void {
  // The digest keeps its centroids as Float32: about 7 significant digits.
  const slack = (v: number) => 1e-6 * Math.max(1, Math.abs(v));
  const min = Math.min(...values);
  const max = Math.max(...values);
  assert.ok(actual >= min - slack(min) && actual <= max + slack(max), `${what}: ${actual} outside [${min}, ${max}]`);
  if (min === max) assert.ok(Math.abs(actual - min) <= slack(min), `${what}: ${actual} != ${min}`);
}

/** Checks one panel's answer against the requests; returns how many rows it compared. */
function checkPanel(panel: Panel, rows: Row[], reqs: readonly Req[], intervalS: number): number {
  const bucket = (r: Req) => dateTime(Math.floor(r.startS / intervalS) * intervalS);
  const byTime = groupBy(reqs, bucket);
  const times = [...byTime.keys()].sort();
  const ordered = (got: Row[], keys: string[]) =>
    assert.deepEqual(
      got.map((r) => keys.map((k) => String(r[k])).join('|')),
      got.map((r) => keys.map((k) => String(r[k])).join('|')).sort(),
      `${panel.title}: ordered by ${keys.join(', ')}`,
    );
  switch (panel.title) {
    case 'Requests by model':
    case 'Cost by model': {
      const expected = groupBy(reqs, (r) => `${bucket(r)}|${r.model}`);
      assert.deepEqual(rows.map((r) => `${r['time']}|${r['model']}`).sort(), [...expected.keys()].sort(), panel.title);
      ordered(rows, ['time', 'model']);
      for (const r of rows) {
        const group = expected.get(`${r['time']}|${r['model']}`)!;
        if (panel.title === 'Requests by model') assert.equal(n(r['requests']), group.length, `${panel.title} ${r['time']} ${r['model']}`);
        else assertClose(n(r['cost_usd']), sum(group.map((g) => g.cost)), `cost of ${r['model']} at ${r['time']}`);
      }
      return rows.length;
    }
    case 'Error rate':
    case 'Latency p50 / p99':
    case "Gateway's own time p50 / p99":
    case 'Tokens': {
      assert.deepEqual(rows.map((r) => String(r['time'])), times, `${panel.title}: one row per interval, in order`);
      for (const r of rows) {
        const group = byTime.get(String(r['time']))!;
        const where: string = `${panel.title} at ${r['time']}`;
        if (panel.title === 'Error rate') assertClose(n(r['error_rate']), (100 * group.filter((g) => g.error).length) / group.length, where);
        else if (panel.title === 'Tokens') {
          assert.equal(n(r['input_tokens']), sum(group.map((g) => g.input)), where);
          assert.equal(n(r['output_tokens']), sum(group.map((g) => g.output)), where);
        } else {
          const total = panel.title.startsWith('Latency');
          const [p50, p99] = total ? ['p50_ms', 'p99_ms'] : ['gateway_p50_ms', 'gateway_p99_ms'];
          const values = group.map((g) => (total ? g.totalMs : g.gatewayMs));
          assertPercentile(n(r[p50]), values, `${where} p50`);
          assertPercentile(n(r[p99]), values, `${where} p99`);
          assert.ok(n(r[p50]) <= n(r[p99]), `${where}: p50 <= p99`);
        }
      }
      return rows.length;
    }
    case 'By team, model and provider': {
      const expected = groupBy(reqs, (r) => `${r.team}|${r.model}|${r.provider}`);
      assert.deepEqual(rows.map((r) => `${r['team']}|${r['model']}|${r['provider']}`).sort(), [...expected.keys()].sort());
      for (let i = 1; i < rows.length; i++) assert.ok(n(rows[i - 1]!['requests']) >= n(rows[i]!['requests']), 'most requests first');
      for (const r of rows) {
        const g = expected.get(`${r['team']}|${r['model']}|${r['provider']}`)!;
        const where: string = `${r['team']} ${r['model']} ${r['provider']}`;
        assert.equal(n(r['requests']), g.length, where);
        assertClose(n(r['error_rate']), (100 * g.filter((x) => x.error).length) / g.length, where);
        assertPercentile(n(r['p50_ms']), g.map((x) => x.totalMs), `${where} p50`);
        assertPercentile(n(r['p99_ms']), g.map((x) => x.totalMs), `${where} p99`);
        assertPercentile(n(r['gateway_p99_ms']), g.map((x) => x.gatewayMs), `${where} gateway p99`);
        assert.equal(n(r['input_tokens']), sum(g.map((x) => x.input)), where);
        assert.equal(n(r['output_tokens']), sum(g.map((x) => x.output)), where);
        assertClose(n(r['cost_usd']), sum(g.map((x) => x.cost)), `${where} cost`);
      }
      return rows.length;
    }
    default:
      throw new Error(`no check for the panel "${panel.title}": add one`);
  }
}

function suite(name: string, open: () => Promise<{ store: Store; done: () => Promise<void> }>) {
  describe(name, () => {
    let store: Store;
    let done: () => Promise<void>;
    let reqs: Req[] = [];

    before(async () => {
      ({ store, done } = await open());
      await migrate(store);
      const builder = new SpanBuilder();
      const built = SPECS.map((s) => build(builder, s));
      await store.insert('spans', built.flatMap((b) => b.spans));
      await store.insert('requests', built.map((b) => b.request));
      // The ingester's reconciliation rolls the day up, as for rows it did not write itself.
      const r = await new Rollup(store).reconcile({ nowS: BASE_MS / 1000 + 600 });
      assert.deepEqual(r.requestDays, [20250701]);
      reqs = built.map((b) => toReq(b.request));
    });
    after(async () => {
      await done?.();
    });

    for (const intervalS of [60, 300]) {
      test(`every panel's SQL runs and gives the numbers of the rows (interval ${intervalS} s)`, async () => {
        assert.equal(reqs.length, SPECS.length);
        for (const panel of dashboard().panels) {
          const text = expandMacros(panel.targets[0]!.rawSql, RANGE, intervalS);
          const rows = await store.query<Row>(raw(text));
          assert.ok(checkPanel(panel, rows, reqs, intervalS) > 0, `${panel.title}: no rows`);
        }
      });
    }

    test('the cost SQL prices every shipped model as the query API does, and a model without a price as 0', async () => {
      const panel = dashboard().panels.find((p) => p.title === 'Cost by model')!;
      const rows = await store.query<Row>(raw(expandMacros(panel.targets[0]!.rawSql, RANGE, 3600)));
      const cost = new Map(rows.map((r) => [String(r['model']), n(r['cost_usd'])]));
      for (const model of PRICED_MODELS) {
        const expected = sum(reqs.filter((x) => x.model === model).map((x) => x.cost));
        assert.ok(expected > 0, `${model} has a shipped price`);
        assertClose(cost.get(model) ?? NaN, expected, model);
      }
      assert.equal(cost.get('mystery-model'), 0);
    });

    test('outside the time range, no rows', async () => {
      const before = { fromS: RANGE.fromS - 7 * 86_400, toS: RANGE.fromS - 6 * 86_400 };
      for (const panel of dashboard().panels) {
        assert.deepEqual(await store.query<Row>(raw(expandMacros(panel.targets[0]!.rawSql, before, 60))), [], panel.title);
      }
    });
  });
}

suite('clickhouse-server 18.16', async () => {
  const server = await ClickHouseServer.start();
  const store = new ClickHouseServerStore({ url: server.url, database: 'sightline' });
  return {
    store,
    done: async () => {
      await store.close();
      await server.dispose();
    },
  };
});

suite('chdb', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sightline-grafana-'));
  const store = await ChdbStore.open({ path: dir, database: 'sightline' });
  return {
    store,
    done: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
