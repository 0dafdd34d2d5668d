/** The dataset benchmark's result: its JSON shape and the markdown table made from it. */
import type { LoadResult, RollupResult, TableSize } from './load.js';
import type { ScenarioResult } from './measure.js';

export interface PagingResult {
  caller: string;
  /** Pages 2–100 fetched one after the other with `next_cursor` (pages 1 and 101 are measured apart). */
  pages: number;
  medianMs: number;
  p90Ms: number;
  maxMs: number;
}

/** A `--reuse --upgrade` run: the migrations it applied and the reconcile that followed. */
export interface UpgradeResult {
  at: string;
  migrations: string[];
  migrateMs: number;
  rollups: RollupResult;
}

export interface DatasetReport {
  startedAt: string;
  finishedAt: string;
  rig: {
    cpu: string;
    cores: number;
    memoryGiB: number;
    kernel: string;
    node: string;
    clickhouse: string;
    loadAverageAtMeasure: number[];
    queryLog: boolean;
  };
  dataset: {
    requests: number;
    days: number;
    seed: number;
    fromS: number;
    toS: number;
    spans: number;
    stageSpans: number;
    dataDirBytes: number;
    tables: TableSize[];
    /** How the data directory was loaded (by this run, or by the earlier one it reuses). */
    load: (LoadResult & { rollups: RollupResult }) | null;
    /** Upgrades of the data directory by `--reuse --upgrade` runs (this one's last), oldest first. */
    upgrades: UpgradeResult[];
    /** True: measured a directory an earlier `--keep` run loaded (`--reuse`). */
    reused: boolean;
  };
  scenarios: ScenarioResult[];
  paging: PagingResult[];
  /** Every scenario within its target. */
  allMet: boolean;
}

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;
const n = (x: number): string => x.toLocaleString('en-US');
const size = (b: number): string => (b >= GiB ? `${(b / GiB).toFixed(2)} GiB` : `${(b / MiB).toFixed(1)} MiB`);
const secs = (ms: number): string => `${(ms / 1000).toFixed(0)} s`;

export function markdown(r: DatasetReport): string {
  const d = r.dataset;
  const out: string[] = [];
  out.push(`# Dashboard queries over ${n(d.requests)} requests (${d.days} days)`, '');
  out.push(`Run ${r.startedAt} → ${r.finishedAt}. ${r.allMet ? 'Every query within its target.' : '**Not every query within its target** (see "met").'}`, '');
  out.push('## Rig', '');
  out.push(`- ${r.rig.cpu}, ${r.rig.cores} cores, ${r.rig.memoryGiB} GiB RAM, Linux ${r.rig.kernel}, Node ${r.rig.node}, ClickHouse ${r.rig.clickhouse} (one local server, Debian's configuration)`);
  out.push(`- load average when measuring: ${r.rig.loadAverageAtMeasure.map((x) => x.toFixed(2)).join(', ')} (other work shares this machine)`);
  out.push(`- dataset: ${n(d.requests)} requests, ${n(d.spans)} spans (${n(d.stageSpans)} in stage_spans), ${new Date(d.fromS * 1000).toISOString()} → ${new Date(d.toS * 1000).toISOString()}, seed ${d.seed}`);
  out.push(`- data directory: ${size(d.dataDirBytes)} on disk`);
  if (d.load !== null) {
    const l = d.load;
    out.push(
      `- load${d.reused ? ' (by the earlier run whose data directory this run measured again)' : ''}: migrations ${secs(l.migrateMs)}; generation ${secs(l.generateTotalMs)} in ${l.chunks} chunks (requests ${secs(l.generateMs.requests ?? 0)}, root spans ${secs(l.generateMs.roots ?? 0)}, stage spans with stage_spans ${secs(l.generateMs.stages ?? 0)}, attempt spans ${secs(l.generateMs.attempts ?? 0)}); merges settled after ${secs(l.mergeWaitMs)}`,
    );
    out.push(
      `- rollups (the ingester's \`Rollup.reconcile()\`): ${secs(l.rollups.reconcileMs)} for ${l.rollups.requestDays} days of requests and ${l.rollups.stageDays} of stages; merges settled after ${secs(l.rollups.mergeWaitMs)}. One live round at this size: a minute of every minute rollup ${l.rollups.minuteMs} ms, with its hour and day ${l.rollups.minuteWithHourAndDayMs} ms`,
    );
  }
  for (const u of d.upgrades ?? []) {
    out.push(
      `- upgrade of ${u.at} (\`--reuse --upgrade\`): migrations ${u.migrations.length === 0 ? 'none new' : u.migrations.join(', ')} in ${u.migrateMs} ms; \`Rollup.reconcile()\` ${secs(u.rollups.reconcileMs)} (${u.rollups.requestDays} days of requests and ${u.rollups.stageDays} of stages recomputed, key-less rollups of ${u.rollups.teamDays ?? 0} more days filled); merges settled after ${secs(u.rollups.mergeWaitMs)}. One live round now: a minute of every minute rollup ${u.rollups.minuteMs} ms, with its hour and day ${u.rollups.minuteWithHourAndDayMs} ms`,
    );
  }
  out.push('', '| table | rows | parts | on disk | uncompressed |', '|---|---:|---:|---:|---:|');
  for (const t of d.tables) out.push(`| ${t.table} | ${n(t.rows)} | ${t.parts} | ${size(t.bytesOnDisk)} | ${size(t.uncompressedBytes)} |`);
  out.push('', '## Queries', '');
  out.push('Each request sent through the query API (`buildQueryServer`, `app.inject`, authentication on, default read limits) ' + `${r.scenarios[0]?.runsMs.length ?? 0} times; milliseconds from inject to the parsed answer. "ClickHouse ms" and "rows read": the server time of a request's statements, summed, and the rows they read (system.query_log, mean per request).`, '');
  out.push('| query | caller | median ms | max ms | target | met | answer | statements | ClickHouse ms | rows read |', '|---|---|---:|---:|---:|---|---|---:|---:|---:|');
  for (const s of r.scenarios) {
    const p = s.profile;
    out.push(
      `| ${s.title} (\`${s.method} ${s.url.split('?')[0]}\`) | ${s.caller} | ${s.medianMs} | ${s.maxMs} | ${s.targetMs} | ${s.met ? 'yes' : '**no**'} | ${s.error ?? s.answer} | ${p?.statements ?? '–'} | ${p?.serverMs ?? '–'} | ${p === null ? '–' : n(p.readRows)} |`,
    );
  }
  if (r.paging.length > 0) {
    out.push('', '30-day listing paged page by page with `next_cursor` (pages 2–100, one run each; pages 1 and 101 are in the table above):', '', '| caller | pages | median ms | p90 ms | max ms |', '|---|---:|---:|---:|---:|');
    for (const p of r.paging) out.push(`| ${p.caller} | ${p.pages} | ${p.medianMs} | ${p.p90Ms} | ${p.maxMs} |`);
  }
  out.push('');
  return out.join('\n');
}
