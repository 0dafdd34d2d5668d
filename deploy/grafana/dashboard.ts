/**
 * The Grafana dashboard "Sightline overview" (deploy/grafana/dashboards/sightline-overview.json),
 * made by code so that its cost panels price tokens with the table the query API uses
 * (SHIPPED_PRICES) and stay in step with it: `npm run grafana:dashboard` rewrites the file,
 * and test/grafana.test.ts fails while the file differs from what this module makes.
 *
 * The panels are the query API's overview (issue 13): requests, error rate, p50/p99 latency,
 * the gateway's own p50/p99, tokens, and cost over time by model, plus a table by team,
 * model and provider. Every query reads the per-minute rollup `requests_agg_1m` with FINAL
 * (docs/schema.md, "Rollups") and runs on ClickHouse 18.16 and on chdb 26.x: the test runs
 * each of them on both, with the data source plugin's macros expanded as the plugin does.
 *
 * Macros used, from grafana/clickhouse-datasource pkg/macros/macros.go:
 * - `$__timeFilter(minute)` → `minute >= toDateTime(<from s>) AND minute <= toDateTime(<to s>)`;
 * - `$__interval_s` → the panel's interval in whole seconds (at least 1).
 * Not `$__timeInterval(col)`: it expands to `toStartOfInterval`, which ClickHouse 18.16 lacks;
 * buckets are `intDiv(toUInt32(minute), $__interval_s) * $__interval_s` instead.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { SHIPPED_PRICES, type PriceConfig } from '@sightline/config';

/** The provisioned data source (deploy/grafana/provisioning/datasources/clickhouse.yaml). */
export const DATASOURCE = { type: 'grafana-clickhouse-datasource', uid: 'sightline-clickhouse' } as const;

/** Where the generated dashboard lives, relative to the repository root. */
export const DASHBOARD_FILE = 'deploy/grafana/dashboards/sightline-overview.json';

/** One query of a panel, in the ClickHouse plugin's shape (format 0: time series, 1: table). */
export interface Target {
  refId: string;
  datasource: typeof DATASOURCE;
  editorType: 'sql';
  queryType: 'timeseries' | 'table';
  format: 0 | 1;
  rawSql: string;
}

export interface Panel {
  id: number;
  type: 'timeseries' | 'table';
  title: string;
  description: string;
  gridPos: { h: number; w: number; x: number; y: number };
  datasource: typeof DATASOURCE;
  /** The rollup is per minute: a finer interval would only repeat its points. */
  interval: string;
  fieldConfig: { defaults: Record<string, unknown>; overrides: unknown[] };
  options: Record<string, unknown>;
  targets: Target[];
}

export interface Dashboard {
  uid: string;
  title: string;
  description: string;
  tags: string[];
  timezone: string;
  editable: boolean;
  graphTooltip: number;
  refresh: string;
  schemaVersion: number;
  version: number;
  time: { from: string; to: string };
  templating: { list: unknown[] };
  annotations: { list: unknown[] };
  links: unknown[];
  panels: Panel[];
}

const SOURCE = 'sightline.requests_agg_1m FINAL';
const BUCKET = `toDateTime(intDiv(toUInt32(minute), $__interval_s) * $__interval_s, 'UTC') AS time`;

/** A ClickHouse string literal (backslash and quote escaped). */
function quote(s: string): string {
  return `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

/** A `*` glob as a LIKE pattern: `%` for `*`, LIKE's own `%`, `_` and `\` escaped. */
function likePattern(glob: string): string {
  return glob
    .split('*')
    .map((part) => part.replace(/[\\%_]/g, (c) => `\\${c}`))
    .join('%');
}

/** The condition for one price entry's names: exact names with IN, globs with LIKE. */
function matchCondition(patterns: readonly string[]): string {
  const exact = patterns.filter((p) => !p.includes('*'));
  const conds: string[] = [];
  if (exact.length === 1) conds.push(`model = ${quote(exact[0]!)}`);
  else if (exact.length > 1) conds.push(`model IN (${exact.map(quote).join(', ')})`);
  for (const glob of patterns.filter((p) => p.includes('*'))) conds.push(`model LIKE ${quote(likePattern(glob))}`);
  return conds.join(' OR ');
}

/** A price as SQL: finite, in plain decimal notation. */
function num(n: number): string {
  if (!Number.isFinite(n) || n < 0) throw new Error(`not a price: ${n}`);
  return String(n);
}

/**
 * `WITH multiIf(…) AS price_index`: the 1-based position of the first price entry whose
 * names match the row's model (first match wins, as in packages/config/src/pricing.ts), 0
 * for a model without a price; the four price arrays are indexed by it (index 0 gives 0).
 */
export function priceIndexSql(prices: readonly PriceConfig[] = SHIPPED_PRICES.prices): string {
  const branches = prices.map((p, i) => `${matchCondition(p.match)}, ${i + 1}`);
  return `WITH multiIf(\n    ${branches.join(',\n    ')},\n    0) AS price_index`;
}

/**
 * US dollars of the rows summed, each row priced by its model: non-cached input (input
 * minus cache reads and writes, which `input_tokens` includes: docs/schema.md), cache reads,
 * cache writes and output, per million tokens. The same arithmetic as costUsd() and the query
 * API's cost_usd, per rollup row.
 */
export function costSql(prices: readonly PriceConfig[] = SHIPPED_PRICES.prices): string {
  const column = (pick: (p: PriceConfig) => number) => `[${prices.map((p) => num(pick(p))).join(', ')}][price_index]`;
  return `sum((greatest(toInt64(input_tokens) - toInt64(cache_read_tokens) - toInt64(cache_write_tokens), 0) * ${column((p) => p.inputPerMTok)}
    + cache_read_tokens * ${column((p) => p.cacheReadPerMTok)}
    + cache_write_tokens * ${column((p) => p.cacheWritePerMTok)}
    + output_tokens * ${column((p) => p.outputPerMTok)}) / 1000000)`;
}

function target(rawSql: string, kind: 'timeseries' | 'table'): Target {
  return { refId: 'A', datasource: DATASOURCE, editorType: 'sql', queryType: kind, format: kind === 'timeseries' ? 0 : 1, rawSql };
}

function timeseries(id: number, title: string, description: string, unit: string, gridPos: Panel['gridPos'], rawSql: string, extra: Record<string, unknown> = {}): Panel {
  return {
    id,
    type: 'timeseries',
    title,
    description,
    gridPos,
    datasource: DATASOURCE,
    interval: '1m',
    fieldConfig: { defaults: { unit, custom: { lineWidth: 1, fillOpacity: 10, spanNulls: false }, ...extra }, overrides: [] },
    options: { legend: { displayMode: 'list', placement: 'bottom', showLegend: true }, tooltip: { mode: 'multi', sort: 'desc' } },
    targets: [target(rawSql, 'timeseries')],
  };
}

/** The dashboard, ready for JSON. */
export function dashboard(): Dashboard {
  const byModel = { displayName: '${__field.labels.model}' };
  const panels: Panel[] = [
    timeseries(
      1,
      'Requests by model',
      'Requests per interval, by the model the client asked for.',
      'short',
      { h: 8, w: 12, x: 0, y: 0 },
      `SELECT ${BUCKET}, model, sum(requests) AS requests
FROM ${SOURCE}
WHERE $__timeFilter(minute)
GROUP BY time, model
ORDER BY time, model`,
      byModel,
    ),
    timeseries(
      2,
      'Error rate',
      'Share of requests answered with a status of 400 or more.',
      'percent',
      { h: 8, w: 12, x: 12, y: 0 },
      `SELECT ${BUCKET}, 100 * sum(errors) / sum(requests) AS error_rate
FROM ${SOURCE}
WHERE $__timeFilter(minute)
GROUP BY time
ORDER BY time`,
    ),
    timeseries(
      3,
      'Latency p50 / p99',
      'Request duration, headers in to the last byte out (t-digest estimates merged from the per-minute states).',
      'ms',
      { h: 8, w: 12, x: 0, y: 8 },
      `SELECT time, q[1] / 1000000 AS p50_ms, q[3] / 1000000 AS p99_ms
FROM (
  SELECT ${BUCKET}, quantilesTDigestMerge(0.5, 0.95, 0.99)(total_ns_q) AS q
  FROM ${SOURCE}
  WHERE $__timeFilter(minute)
  GROUP BY time
)
ORDER BY time`,
    ),
    timeseries(
      4,
      "Gateway's own time p50 / p99",
      'Request duration minus the time spent waiting on the provider: what the gateway itself adds.',
      'ms',
      { h: 8, w: 12, x: 12, y: 8 },
      `SELECT time, q[1] / 1000000 AS gateway_p50_ms, q[3] / 1000000 AS gateway_p99_ms
FROM (
  SELECT ${BUCKET}, quantilesTDigestMerge(0.5, 0.95, 0.99)(gateway_ns_q) AS q
  FROM ${SOURCE}
  WHERE $__timeFilter(minute)
  GROUP BY time
)
ORDER BY time`,
    ),
    timeseries(
      5,
      'Tokens',
      'Input tokens (cached ones included) and output tokens per interval, as the providers reported them.',
      'short',
      { h: 8, w: 12, x: 0, y: 16 },
      `SELECT ${BUCKET}, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens
FROM ${SOURCE}
WHERE $__timeFilter(minute)
GROUP BY time
ORDER BY time`,
    ),
    timeseries(
      6,
      'Cost by model',
      `US dollars per interval at the prices shipped with Sightline (as of ${SHIPPED_PRICES.asOf}); models without a shipped price count 0, and the configuration file's own \`pricing\` entries are not applied here (the query API applies them).`,
      'currencyUSD',
      { h: 8, w: 12, x: 12, y: 16 },
      `${priceIndexSql()}
SELECT ${BUCKET}, model, ${costSql()} AS cost_usd
FROM ${SOURCE}
WHERE $__timeFilter(minute)
GROUP BY time, model
ORDER BY time, model`,
      byModel,
    ),
    {
      id: 7,
      type: 'table',
      title: 'By team, model and provider',
      description: 'The time range in one row per team, model and provider (cost as in "Cost by model").',
      gridPos: { h: 10, w: 24, x: 0, y: 24 },
      datasource: DATASOURCE,
      interval: '1m',
      fieldConfig: { defaults: {}, overrides: [] },
      options: { showHeader: true, sortBy: [{ displayName: 'requests', desc: true }] },
      targets: [
        target(
          // The inner aliases differ from the column names: ClickHouse would otherwise read
          // `input_tokens` inside the cost expression as the alias, a sum inside a sum.
          `SELECT team, model, provider, n AS requests, 100 * n_errors / n AS error_rate, q[1] / 1000000 AS p50_ms, q[3] / 1000000 AS p99_ms,
  g[3] / 1000000 AS gateway_p99_ms, n_input AS input_tokens, n_output AS output_tokens, cost AS cost_usd
FROM (
  ${priceIndexSql().replace(/\n/g, '\n  ')}
  SELECT team, model, provider, sum(requests) AS n, sum(errors) AS n_errors,
    quantilesTDigestMerge(0.5, 0.95, 0.99)(total_ns_q) AS q, quantilesTDigestMerge(0.5, 0.95, 0.99)(gateway_ns_q) AS g,
    sum(input_tokens) AS n_input, sum(output_tokens) AS n_output,
    ${costSql().replace(/\n/g, '\n  ')} AS cost
  FROM ${SOURCE}
  WHERE $__timeFilter(minute)
  GROUP BY team, model, provider
)
ORDER BY requests DESC, team, model, provider`,
          'table',
        ),
      ],
    },
  ];
  return {
    uid: 'sightline-overview',
    title: 'Sightline overview',
    description: 'Requests, errors, latency, tokens and cost from the per-minute rollup (docs/schema.md).',
    tags: ['sightline'],
    timezone: 'utc',
    editable: false,
    graphTooltip: 1,
    refresh: '1m',
    schemaVersion: 39,
    version: 1,
    time: { from: 'now-6h', to: 'now' },
    templating: { list: [] },
    annotations: { list: [] },
    links: [],
    panels,
  };
}

/** The file's text: stable key order and a final newline, so a rerun changes nothing. */
export function dashboardJson(): string {
  return `${JSON.stringify(dashboard(), null, 2)}\n`;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const file = fileURLToPath(new URL(`../../${DASHBOARD_FILE}`, import.meta.url));
  writeFileSync(file, dashboardJson());
  process.stdout.write(`wrote ${file}\n`);
}
