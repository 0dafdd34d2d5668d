/**
 * `npm --prefix bench run dataset -- [--requests 10000000] [--days 30]`: loads a synthetic
 * dataset into a real clickhouse-server and measures the dashboard's typical queries through
 * the query API (issue 10, "Fast at a real size"; docs/benchmarks.md, "Dashboard queries at
 * 10 million requests").
 *
 * 1. starts clickhouse-server on a data directory of its own (server.ts) and applies the
 *    migrations with the product's runner;
 * 2. generates the requests and their spans inside ClickHouse (generate.ts), then computes
 *    the rollups with the ingester's `Rollup.reconcile()` (load.ts);
 * 3. sends each dashboard request to the query API `--repeat` times (measure.ts) and writes
 *    bench/results/dataset-<UTC date>.json and .md.
 *
 * Flags: --requests N (default 10,000,000), --days D (30), --seed S (1), --repeat R (5),
 * --dir DIR (data directory; default a new one under the temporary directory), --keep (leave
 * it, and the server's data, in place for --reuse), --reuse DIR (measure a directory loaded by
 * an earlier --keep run, without loading), --upgrade (with --reuse: first apply the migrations
 * that directory lacks and run `Rollup.reconcile()`, timed, as an ingester of this version
 * does at start on an older database), --out DIR (bench/results), --only id,… (scenarios).
 * Exit code 0 when every query met its target, 1 when one did not, 2 on a failure.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ClickHouseServerStore, migrate, sql, table, type Store } from '@sightline/store';
import { catalogue, hours } from './catalogue.js';
import { applyMigrations, generate, rollups, tableSizes, waitForMerges, type LoadResult, type RollupResult } from './load.js';
import { cursorAt, measure, median, positionBefore, positionFromEnd, send, startApi, type Api, type ScenarioResult } from './measure.js';
import { markdown, type DatasetReport, type PagingResult, type UpgradeResult } from './report.js';
import { listingParams, listingScenario, listingUrl, metricsScenarios, slowestTodayScenario, todayP99Scenario } from './scenarios.js';
import { DatasetClickHouse } from './server.js';

const USAGE = `usage: npm --prefix bench run dataset -- [--requests N] [--days D] [--seed S] [--repeat R]
       [--dir DIR] [--keep] [--reuse DIR [--upgrade]] [--out DIR] [--only id,...]`;

const META = 'sightline-dataset.json';

interface Meta {
  requests: number;
  days: number;
  seed: number;
  fromS: number;
  toS: number;
  load: (LoadResult & { rollups: RollupResult }) | null;
  /** Upgrades by later `--reuse --upgrade` runs, oldest first. */
  upgrades?: UpgradeResult[];
}

const log = (m: string): void => {
  process.stderr.write(`[dataset ${new Date().toISOString().slice(11, 19)}] ${m}\n`);
};

function flags() {
  const { values } = parseArgs({
    options: {
      requests: { type: 'string', default: '10000000' },
      days: { type: 'string', default: '30' },
      seed: { type: 'string', default: '1' },
      repeat: { type: 'string', default: '5' },
      dir: { type: 'string' },
      keep: { type: 'boolean', default: false },
      reuse: { type: 'string' },
      upgrade: { type: 'boolean', default: false },
      out: { type: 'string', default: fileURLToPath(new URL('../../results/', import.meta.url)) },
      only: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const int = (name: string, v: string, min: number, max: number): number => {
    const x = Number(v.replace(/_/g, ''));
    if (!Number.isInteger(x) || x < min || x > max) throw new Error(`--${name} must be an integer from ${min} to ${max}, got ${v}`);
    return x;
  };
  if (values.upgrade && values.reuse === undefined) throw new Error('--upgrade needs --reuse DIR');
  return {
    upgrade: values.upgrade,
    requests: int('requests', values.requests, 1000, 1_000_000_000),
    // The listing's range is 30 days (its limit is 31): fewer days shorten every range.
    days: int('days', values.days, 2, 31),
    seed: int('seed', values.seed, 0, 2 ** 31),
    repeat: int('repeat', values.repeat, 1, 100),
    dir: values.dir,
    keep: values.keep || values.reuse !== undefined,
    reuse: values.reuse,
    out: values.out,
    only: values.only?.split(',').map((s) => s.trim()) ?? null,
  };
}

function duBytes(dir: string): number {
  const r = spawnSync('du', ['-sb', dir], { encoding: 'utf8' });
  return Number(r.stdout.split('\t')[0] ?? 0) || 0;
}

async function count(store: Store, name: string): Promise<number> {
  const [r] = await store.query<{ n: string }>(sql`SELECT count() AS n FROM ${table(store.database, name)}`);
  return Number(r?.n ?? 0);
}

async function main(): Promise<number> {
  const f = flags();
  const startedAt = new Date().toISOString();
  const dir = f.reuse !== undefined ? resolve(f.reuse) : f.dir !== undefined ? resolve(f.dir) : mkdtempSync(join(tmpdir(), 'sightline-dataset-'));
  // The directory is removed at the end (without --keep): never one that held anything else.
  if (f.reuse === undefined && f.dir !== undefined && existsSync(dir) && readdirSync(dir).length > 0) throw new Error(`--dir ${dir} is not empty; give a new or empty directory`);
  mkdirSync(dir, { recursive: true });
  const reused = f.reuse !== undefined;
  if (reused && !existsSync(join(dir, META))) throw new Error(`${dir} holds no loaded dataset (${META} missing)`);
  log(`data directory ${dir}`);

  let ch: DatasetClickHouse | null = null;
  let stopping = false;
  const cleanup = async () => {
    if (stopping) return;
    stopping = true;
    await ch?.stop();
    if (!f.keep) rmSync(dir, { recursive: true, force: true });
    else log(`kept ${dir} (measure it again with --reuse ${dir}; remove it when done)`);
  };
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      log(`${sig}: stopping clickhouse-server (pid ${ch?.pid ?? '–'})`);
      void cleanup().finally(() => process.exit(2));
    });
  }

  try {
    ch = await DatasetClickHouse.start(dir);
    log(`clickhouse-server pid ${ch.pid} on ${ch.url}${ch.queryLog ? '' : ' (query log off: the users file was not recognised)'}`);
    // Loading statements run for minutes: no client timeout short of an hour.
    const loader = new ClickHouseServerStore({ url: ch.url, requestTimeoutMs: 3_600_000 });
    const [ver] = await loader.query<{ v: string }>(sql`SELECT version() AS v`);

    let meta: Meta;
    if (reused) {
      meta = JSON.parse(readFileSync(join(dir, META), 'utf8')) as Meta;
      log(`reusing ${meta.requests.toLocaleString('en-US')} requests over ${meta.days} days`);
      if (f.upgrade) {
        const t0 = process.hrtime.bigint();
        const applied = (await migrate(loader)).applied;
        const migrateMs = Math.round(Number(process.hrtime.bigint() - t0) / 1e6);
        log(`upgrade: migrations ${applied.length === 0 ? 'none new' : applied.join(', ')} in ${migrateMs} ms; reconciling`);
        const roll = await rollups(loader, meta.toS - 60, log);
        meta.upgrades = [...(meta.upgrades ?? []), { at: new Date().toISOString(), migrations: applied, migrateMs, rollups: roll }];
        writeFileSync(join(dir, META), JSON.stringify(meta, null, 2));
      }
    } else {
      const toS = Math.floor(Date.now() / 60_000) * 60;
      const cat = catalogue(f.seed);
      const plan = hours(f.requests, f.days, toS);
      const migrateMs = await applyMigrations(loader);
      log(`migrations applied in ${migrateMs} ms; generating ${f.requests.toLocaleString('en-US')} requests over ${f.days} days`);
      const gen = await generate(loader, cat, f.seed, plan, log);
      log(`generated in ${(gen.generateTotalMs / 1000).toFixed(0)} s; ${(duBytes(dir) / 1024 ** 3).toFixed(2)} GiB on disk; waiting for merges`);
      const mergeWaitMs = await waitForMerges(loader, 30 * 60_000, log);
      const roll = await rollups(loader, toS - 60, log);
      meta = { requests: f.requests, days: f.days, seed: f.seed, fromS: toS - f.days * 86_400, toS, load: { migrateMs, ...gen, mergeWaitMs, rollups: roll } };
      writeFileSync(join(dir, META), JSON.stringify(meta, null, 2));
    }

    const tables = await tableSizes(loader);
    const cat = catalogue(meta.seed);
    const biggest = cat.teams[0]!.name;
    const smallest = cat.teams[cat.teams.length - 1]!.name;
    const query = new ClickHouseServerStore({ url: ch.url });
    const api = await startApi(query, [biggest, smallest]);
    const want = (id: string) => f.only === null || f.only.includes(id);
    const results: ScenarioResult[] = [];
    const paging: PagingResult[] = [];
    const loadAtMeasure = loadavg();

    for (const s of metricsScenarios(meta.toS, biggest)) if (want(s.id)) results.push(await measure(api, loader, s, f.repeat, log));

    if (want('slowest-today')) {
      for (const team of [biggest, smallest]) {
        const p99 = await measure(api, loader, todayP99Scenario(meta.toS, team), f.repeat, log);
        results.push(p99);
        const threshold = await todayP99(api, meta.toS, team);
        results.push(await measure(api, loader, slowestTodayScenario(meta.toS, team, threshold), f.repeat, log));
      }
    }

    if (want('listing')) {
      for (const caller of ['admin', biggest, smallest]) {
        const team = caller === 'admin' ? null : caller;
        const first = listingScenario('listing-first-page', '30-day listing, first page', caller, meta.toS, null);
        results.push(await measure(api, loader, first, f.repeat, log));
        const { cursor, last, pages } = await pageThrough(api, caller, meta.toS, 100);
        paging.push(pages);
        log(`paged ${pages.pages} pages as ${caller}: median ${pages.medianMs} ms, max ${pages.maxMs} ms`);
        if (cursor !== null) results.push(await measure(api, loader, listingScenario('listing-page-101', '30-day listing, page 101 (after 100 pages)', caller, meta.toS, cursor), f.repeat, log));
        else log(`the listing of ${caller} has fewer than 101 pages`);
        if (last === null) continue;
        const middle = await positionBefore(loader, team, meta.toS - 15 * 86_400);
        if (middle !== null) results.push(await measure(api, loader, listingScenario('listing-middle', '30-day listing, a page 15 days back', caller, meta.toS, cursorAt(api, last, middle)), f.repeat, log));
        const end = await positionFromEnd(loader, team, meta.toS - 30 * 86_400, meta.toS, 100);
        if (end !== null) results.push(await measure(api, loader, listingScenario('listing-near-end', '30-day listing, near the end (100 requests left)', caller, meta.toS, cursorAt(api, last, end)), f.repeat, log));
      }
    }
    await api.app.close();

    const report: DatasetReport = {
      startedAt,
      finishedAt: new Date().toISOString(),
      rig: {
        cpu: cpus()[0]?.model ?? 'unknown',
        cores: cpus().length,
        memoryGiB: Math.round(totalmem() / 1024 ** 3),
        kernel: release(),
        node: process.version,
        clickhouse: ver?.v ?? 'unknown',
        loadAverageAtMeasure: loadAtMeasure,
        queryLog: ch.queryLog,
      },
      dataset: {
        requests: meta.requests,
        days: meta.days,
        seed: meta.seed,
        fromS: meta.fromS,
        toS: meta.toS,
        spans: await count(loader, 'spans'),
        stageSpans: await count(loader, 'stage_spans'),
        dataDirBytes: duBytes(dir),
        tables,
        load: meta.load,
        upgrades: meta.upgrades ?? [],
        reused,
      },
      scenarios: results,
      paging,
      allMet: results.every((r) => r.met),
    };
    await loader.close();
    await query.close();
    mkdirSync(f.out, { recursive: true });
    const stamp = report.startedAt.slice(0, 16).replace(/:/g, '-');
    const base = join(f.out, `dataset-${stamp}`);
    writeFileSync(`${base}.json`, `${JSON.stringify(report, null, 2)}\n`);
    const md = markdown(report);
    writeFileSync(`${base}.md`, md);
    process.stdout.write(md);
    log(`wrote ${base}.json and .md`);
    return report.allMet ? 0 : 1;
  } finally {
    await cleanup();
  }
}

/** The team's p99 today, in whole milliseconds (the slowest-requests threshold). */
async function todayP99(api: Api, toS: number, team: string): Promise<number> {
  const a = await send(api, todayP99Scenario(toS, team));
  const rows = (a.json as { rows?: { p99_ms?: number }[] }).rows ?? [];
  return Math.max(1, Math.floor(rows[0]?.p99_ms ?? 1));
}

/**
 * Pages 1–`pages` of the 30-day listing with `next_cursor`: the cursor to page `pages` + 1
 * (null when the listing is shorter), the last cursor the API gave (null: one page only), and
 * the times of pages 2 onwards.
 */
async function pageThrough(api: Api, caller: string, toS: number, pages: number): Promise<{ cursor: string | null; last: string | null; pages: PagingResult }> {
  const params = listingParams(toS);
  let cursor: string | null = null;
  let last: string | null = null;
  const times: number[] = [];
  for (let i = 0; i < pages; i++) {
    const a = await send(api, { caller, method: 'GET', url: listingUrl(cursor === null ? params : { ...params, cursor }) });
    if (a.status !== 200) throw new Error(`page ${i + 1} as ${caller}: HTTP ${a.status} ${JSON.stringify(a.json).slice(0, 200)}`);
    if (i > 0) times.push(a.ms);
    cursor = (a.json as { next_cursor: string | null }).next_cursor;
    if (cursor === null) break;
    last = cursor;
  }
  const sorted = [...times].sort((a, b) => a - b);
  const r1 = (x: number) => Math.round(x * 10) / 10;
  return {
    cursor,
    last,
    pages: { caller, pages: times.length, medianMs: r1(median(times)), p90Ms: r1(sorted[Math.floor(sorted.length * 0.9)] ?? Number.NaN), maxMs: r1(sorted[sorted.length - 1] ?? Number.NaN) },
  };
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    log(`failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    process.exit(2);
  },
);
