/**
 * `POST /v1/metrics`: one query model behind every chart. This file is pure — the body's
 * schema, its checks, the SQL it compiles to (through the branded `Sql` type) and the
 * shaping of the rows — so it is tested without a server (test/metrics-compile.test.ts).
 *
 * Aggregates come from the rollups (migration 005), never from raw spans: `requests_agg_*`
 * for request metrics, `stages_agg_*` when the query is about stages (`stage` in `group_by`
 * or in `filters`), where the latency metrics are the stage's. A range is read from the
 * coarsest level that covers each part of it (splitRange): whole days from the day rollup,
 * whole hours from the hour rollup, the ragged ends from the minutes, all merged in one
 * query — so 30 days read about 30 days' rows, not 43 200 minutes'. A query that neither
 * groups nor filters by `key` reads the key-less twins of those tables instead (migration
 * 008: `requests_team_agg_*`, `stages_team_agg_*`, the same groups with the key summed out),
 * which have several times fewer rows, so several times fewer t-digest states to merge —
 * the bulk of a long range's cost (docs/benchmarks.md). Counts, token sums and
 * cost are exact; percentiles merge t-digest states, so they are estimates (docs/api.md).
 * Cost is computed in SQL per rollup row with that row's model's prices (passed in as
 * constants), so it is right whatever the grouping.
 *
 * Attribution (issue 11) — the end user, the session and tags — is not in the rollups: it
 * has too many values to roll up. A query that groups or filters by `end_user`, `session`
 * or `tag.<name>` is "raw": it reads `requests FINAL` (and, per stage, `stage_spans FINAL`
 * joined to its requests for their attribution) over at most RANGES.metricsRaw (7 days),
 * with the same limits, and computes the same metrics from the rows (percentiles with
 * quantilesTDigest over the rows instead of merged states).
 */
import { ident, join, sql, table, type Sql } from '@sightline/store';
import { QueryError } from '../errors.js';
import { RANGES } from '../limits.js';
import type { Price } from '@sightline/config';
import type { JsonSchema } from '../openapi.js';
import { ms, type Num } from './common.js';

export const METRICS = [
  'requests',
  'errors',
  'error_rate',
  'aborted',
  'streams',
  'mean_ms',
  'p50_ms',
  'p95_ms',
  'p99_ms',
  'gateway_mean_ms',
  'gateway_p50_ms',
  'gateway_p95_ms',
  'gateway_p99_ms',
  'ttft_mean_ms',
  'ttft_p50_ms',
  'ttft_p95_ms',
  'ttft_p99_ms',
  'input_tokens',
  'output_tokens',
  'cache_read_tokens',
  'cache_write_tokens',
  'cost_usd',
] as const;
export type Metric = (typeof METRICS)[number];

/** What a stage query can answer: counts and the stage's own latency. */
export const STAGE_METRICS: readonly Metric[] = ['requests', 'errors', 'error_rate', 'mean_ms', 'p50_ms', 'p95_ms', 'p99_ms'];

/** The dimensions of the rollups. */
export const DIMENSIONS = ['team', 'key', 'model', 'provider', 'dialect', 'status_class', 'stage'] as const;
export type RollupDimension = (typeof DIMENSIONS)[number];

/** Attribution (issue 11): read from raw rows, not the rollups; plus `tag.<name>`. */
export const ATTRIBUTION_DIMENSIONS = ['end_user', 'session'] as const;

/** A tag as a dimension: `tag.` and the tag's name (lower case, as the gateway stores it). */
export type TagDimension = `tag.${string}`;
export type Dimension = RollupDimension | (typeof ATTRIBUTION_DIMENSIONS)[number] | TagDimension;

/** Tag names as HTTP header names carry them (RFC 9110 token characters), lower case. */
const TAG_NAME = "[a-z0-9!#$%&'*+.^_`|~-]{1,64}";
const DIMENSION_PATTERN = `^(${[...DIMENSIONS, ...ATTRIBUTION_DIMENSIONS].join('|')}|tag\\.${TAG_NAME})$`;

function isTag(d: string): d is TagDimension {
  return d.startsWith('tag.');
}

/** Whether a dimension is attribution, which only raw rows have. */
export function isAttribution(d: Dimension): boolean {
  return isTag(d) || (ATTRIBUTION_DIMENSIONS as readonly string[]).includes(d);
}

/** Dimensions the stage rollup has (no dialect, no status class); attribution too, from raw rows. */
const STAGE_DIMENSIONS: readonly Dimension[] = ['team', 'key', 'model', 'provider', 'stage'];

export const INTERVALS = { '1m': 60, '5m': 300, '1h': 3600, '1d': 86_400 } as const;
export type Interval = keyof typeof INTERVALS;

/** The most time buckets one answer has (a day of minutes, and a little). */
export const MAX_BUCKETS = 1500;
/** The most rows (groups × buckets) one answer with an interval has. */
export const MAX_POINTS = 50_000;
/** The longest range, in days: the rollups are cheap to read per day. */
export const MAX_DAYS = 400;

/** Column of each dimension in both rollups (and in the raw sources). */
const COLUMN: Record<RollupDimension | 'end_user' | 'session', string> = { team: 'team', key: 'key_id', model: 'model', provider: 'provider', dialect: 'dialect', status_class: 'status_class', stage: 'stage', end_user: 'end_user', session: 'session_id' };

const VALUES = { type: 'array', minItems: 1, maxItems: 100, items: { type: 'string', maxLength: 256 } } as const;

/** The most dimensions one query groups by. */
export const MAX_GROUP_BY = 8;

/** The request body (validated by fastify before `planMetrics` sees it). */
export const METRICS_BODY_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['metrics'],
  properties: {
    from: { type: ['string', 'number'], description: 'Start of the range, rounded down to the minute: RFC 3339 or Unix seconds. Default 24 hours before `to`' },
    to: { type: ['string', 'number'], description: 'End of the range (exclusive), rounded up to the minute. Default now' },
    metrics: { type: 'array', minItems: 1, maxItems: METRICS.length, uniqueItems: true, items: { type: 'string', enum: [...METRICS] } },
    group_by: {
      type: 'array',
      maxItems: MAX_GROUP_BY,
      uniqueItems: true,
      items: { type: 'string', pattern: DIMENSION_PATTERN, description: `One of ${[...DIMENSIONS, ...ATTRIBUTION_DIMENSIONS].join(', ')}, or \`tag.<name>\`` },
      default: [],
      description: `Dimensions; \`end_user\`, \`session\` and \`tag.<name>\` read raw rows (a range of at most ${RANGES.metricsRaw.maxDays} days)`,
    },
    interval: { type: 'string', enum: Object.keys(INTERVALS), description: 'Adds `time` (the bucket start) to each row and fills empty buckets with zeros' },
    filters: {
      type: 'object',
      additionalProperties: false,
      description: 'Values of a filter are ORed; filters are ANDed',
      properties: {
        team: VALUES,
        key: VALUES,
        model: VALUES,
        provider: VALUES,
        dialect: VALUES,
        status_class: { ...VALUES, items: { type: 'string', pattern: '^[1-5]xx$' } },
        stage: VALUES,
        end_user: VALUES,
        session: VALUES,
      },
      patternProperties: { [`^tag\\.${TAG_NAME}$`]: VALUES },
    },
    limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100, description: 'The most groups, the largest (by `requests`) first' },
  },
} as const satisfies JsonSchema;

/** A row of the answer: dimensions as strings, metrics as numbers (`cost_usd` null without prices). */
export const METRICS_ROW_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    time: { type: 'string', description: 'Start of the bucket (RFC 3339), with `interval`' },
    ...Object.fromEntries([...DIMENSIONS, ...ATTRIBUTION_DIMENSIONS].map((d) => [d, { type: 'string' }])),
    ...Object.fromEntries(METRICS.map((m) => [m, m === 'cost_usd' ? { type: ['number', 'null'] } : { type: 'number' }])),
  },
  patternProperties: { [`^tag\\.${TAG_NAME}$`]: { type: 'string', description: "A tag's value ('' without the tag)" } },
} as const satisfies JsonSchema;

export interface MetricsBody {
  from?: string | number;
  to?: string | number;
  metrics: Metric[];
  group_by?: Dimension[];
  interval?: Interval;
  filters?: Partial<Record<Dimension, string[]>>;
  limit?: number;
}

/** A part of a range read from one level of the rollups: [fromS, toS), Unix seconds. */
export interface LevelRange {
  level: 'minute' | 'hour' | 'day';
  fromS: number;
  toS: number;
}

/**
 * A day is read from the day rollup once it ended this long ago: the ingester computes a
 * day when it has ended (apps/ingester/src/rollup.ts), where hours are computed with their
 * minutes. Until then the day is read from its hours.
 */
export const DAY_SETTLE_S = 600;

const HOUR_S = 3600;
const DAY_S = 86_400;

/**
 * [fromS, toS) (whole minutes) split by level: whole days (ended DAY_SETTLE_S before
 * `nowS`) from the day rollup, whole hours from the hour rollup, the rest from the minutes.
 * An interval shorter than a level keeps it out (5-minute buckets need minutes).
 */
export function splitRange(fromS: number, toS: number, intervalS: number | null, nowS: number): LevelRange[] {
  const out: LevelRange[] = [];
  const add = (level: LevelRange['level'], a: number, b: number) => {
    if (a < b) out.push({ level, fromS: a, toS: b });
  };
  const up = (t: number, size: number) => (t % size === 0 ? t : t - (t % size) + size);
  const down = (t: number, size: number) => t - (t % size);
  const hours = intervalS === null || intervalS % HOUR_S === 0;
  const days = intervalS === null || intervalS % DAY_S === 0;
  const hoursAndMinutes = (a: number, b: number) => {
    const h0 = up(a, HOUR_S);
    const h1 = down(b, HOUR_S);
    if (!hours || h1 <= h0) return add('minute', a, b);
    add('minute', a, h0);
    add('hour', h0, h1);
    add('minute', h1, b);
  };
  const d0 = up(fromS, DAY_S);
  const d1 = Math.min(down(toS, DAY_S), down(nowS - DAY_SETTLE_S, DAY_S));
  if (!days || d1 <= d0) {
    hoursAndMinutes(fromS, toS);
    return out;
  }
  hoursAndMinutes(fromS, d0);
  add('day', d0, d1);
  hoursAndMinutes(d1, toS);
  return out;
}

const LEVEL = {
  minute: { column: 'minute', suffix: '1m' },
  hour: { column: 'hour', suffix: '1h' },
  day: { column: 'day', suffix: '1d' },
} as const;

/**
 * Which rollup: the per-key tables (`requests_agg_*`, `stages_agg_*`, migration 005) or their
 * key-less twins (`requests_team_agg_*`, `stages_team_agg_*`, migration 008), which have
 * every column but `key_id`.
 */
export type RollupKind = 'requests' | 'stages' | 'requests_team' | 'stages_team';

/**
 * The rows of a rollup over `ranges`, each part from its level's table (with FINAL, unless
 * only distinct values are wanted), as one UNION ALL whose time column is `minute`.
 * `columns` are passed through; `where` (filters, no time) applies to every part.
 */
export function rollupSource(database: string, kind: RollupKind, ranges: readonly LevelRange[], columns: readonly string[], where: Sql | null, final = true): Sql {
  const parts = ranges.map((r) => {
    const L = LEVEL[r.level];
    const time = ident(L.column);
    const cols = [r.level === 'minute' ? time : sql`${time} AS minute`, ...columns.map((c) => ident(c))];
    return sql`SELECT ${join(cols, sql`, `)} FROM ${table(database, `${kind}_agg_${L.suffix}`)}${final ? sql` FINAL` : sql``}
  WHERE ${time} >= toDateTime(${r.fromS}, 'UTC') AND ${time} < toDateTime(${r.toS}, 'UTC')${where === null ? sql`` : sql` AND ${where}`}`;
  });
  return sql`(${join(parts, sql`
  UNION ALL
  `)})`;
}

export interface MetricsPlan {
  mode: 'requests' | 'stages';
  /**
   * Read from raw rows (`requests FINAL`, `stage_spans FINAL` joined to requests) instead of
   * the rollups: the query groups or filters by attribution (end user, session, tags).
   */
  raw: boolean;
  /** Whole minutes, Unix seconds: [fromS, toS). */
  fromS: number;
  toS: number;
  /** The range by rollup level (splitRange); unused when `raw`. */
  ranges: LevelRange[];
  metrics: Metric[];
  groupBy: Dimension[];
  /** Seconds per bucket, or null: one row per group over the whole range. */
  intervalS: number | null;
  filters: Partial<Record<Dimension, string[]>>;
  /** Names of the tags grouped or filtered by, in order: `tag.<name>` is column `tag_<index>`. */
  tags: string[];
  /** Teams the caller may read (a key: its own), or null: every team. */
  teams: string[] | null;
  /** Groups returned at most. */
  limit: number;
}

/**
 * A stage span is attributed through its request (stage_spans has no attribution): the
 * requests joined are those that started from this long before the range, so a stage that
 * began in the range belongs to a request read even if the request began a day earlier.
 */
export const RAW_STAGE_LOOKBACK_S = 86_400;

/**
 * Checks a validated body against what the rollups can answer and resolves its range.
 * `teams`: the caller's scope (auth.ts). Throws a 400 naming the field.
 */
export function planMetrics(body: MetricsBody, range: { fromNs: bigint; toNs: bigint }, teams: string[] | null, nowS: number): MetricsPlan {
  const groupBy = body.group_by ?? [];
  const filters = body.filters ?? {};
  const filtered = Object.keys(filters) as Dimension[];
  const stages = groupBy.includes('stage') || filters.stage !== undefined;
  const raw = groupBy.some(isAttribution) || filtered.some(isAttribution);
  if (stages) {
    body.metrics.forEach((m, i) => {
      if (!STAGE_METRICS.includes(m)) throw new QueryError('bad_parameter', `metric \`${m}\` is not available per stage (with \`stage\` in group_by or filters); per stage: ${STAGE_METRICS.join(', ')}`, { field: `metrics[${i}]` });
    });
    const perStage = (d: Dimension) => STAGE_DIMENSIONS.includes(d) || isAttribution(d);
    const allowed = [...STAGE_DIMENSIONS, ...ATTRIBUTION_DIMENSIONS, 'tag.<name>'].join(', ');
    groupBy.forEach((d, i) => {
      if (!perStage(d)) throw new QueryError('bad_parameter', `\`${d}\` cannot be combined with \`stage\`; per stage, group by ${allowed}`, { field: `group_by[${i}]` });
    });
    for (const d of filtered) {
      if (!perStage(d)) throw new QueryError('bad_parameter', `filter \`${d}\` cannot be combined with \`stage\`; per stage, filter by ${allowed}`, { field: `filters.${d}` });
    }
  }
  if (raw && range.toNs - range.fromNs > BigInt(RANGES.metricsRaw.maxDays) * 86_400n * 1_000_000_000n) {
    throw new QueryError(
      'bad_parameter',
      `grouping or filtering by end_user, session or tag reads raw rows, not the rollups: the range from \`from\` to \`to\` must be at most ${RANGES.metricsRaw.maxDays} days`,
      { field: 'from' },
    );
  }
  const tags: string[] = [];
  for (const d of [...groupBy, ...filtered]) if (isTag(d) && !tags.includes(d.slice(4))) tags.push(d.slice(4));
  const fromS = Number(range.fromNs / 1_000_000_000n);
  const toRaw = Number((range.toNs + 999_999_999n) / 1_000_000_000n);
  const plan: MetricsPlan = {
    mode: stages ? 'stages' : 'requests',
    raw,
    fromS: fromS - (fromS % 60),
    toS: toRaw % 60 === 0 ? toRaw : toRaw + 60 - (toRaw % 60),
    ranges: [],
    metrics: body.metrics,
    groupBy,
    intervalS: body.interval === undefined ? null : INTERVALS[body.interval],
    filters,
    tags,
    teams,
    limit: body.limit ?? 100,
  };
  plan.ranges = splitRange(plan.fromS, plan.toS, plan.intervalS, nowS);
  if (plan.intervalS !== null) {
    const n = buckets(plan).length;
    if (n > MAX_BUCKETS) throw new QueryError('bad_parameter', `interval ${body.interval} makes ${n} buckets from \`from\` to \`to\`; at most ${MAX_BUCKETS}: choose a longer interval or a shorter range`, { field: 'interval' });
  }
  return plan;
}

/** Bucket starts (Unix seconds) of a plan with an interval; buckets align to multiples of it (UTC). */
export function buckets(plan: MetricsPlan): number[] {
  if (plan.intervalS === null) return [];
  const out: number[] = [];
  for (let t = plan.fromS - (plan.fromS % plan.intervalS); t < plan.toS; t += plan.intervalS) out.push(t);
  return out;
}

/** Groups an answer with an interval keeps: every bucket of each must fit in MAX_POINTS. */
export function seriesLimit(plan: MetricsPlan): number {
  if (plan.intervalS === null) return plan.limit;
  return Math.max(1, Math.min(plan.limit, Math.floor(MAX_POINTS / Math.max(1, buckets(plan).length))));
}

/** The column of a dimension in the source (a rollup, or a raw source's select). */
function columnName(plan: MetricsPlan, d: Dimension): string {
  return isTag(d) ? `tag_${plan.tags.indexOf(d.slice(4))}` : COLUMN[d];
}

function column(plan: MetricsPlan, d: Dimension): Sql {
  return ident(columnName(plan, d));
}

/** The alias of a dimension in the answer's rows. Aliases never reuse a column's name: an alias shadows the column in every other expression. */
function aliasName(plan: MetricsPlan, d: Dimension): string {
  return isTag(d) ? `d_tag_${plan.tags.indexOf(d.slice(4))}` : `d_${d}`;
}

function dimAlias(plan: MetricsPlan, d: Dimension): Sql {
  return ident(aliasName(plan, d));
}

/** The rollup columns a plan reads: its dimensions, and what its metrics are made of. */
function sourceColumns(plan: MetricsPlan): string[] {
  const want = new Set(plan.metrics);
  const has = (...m: Metric[]) => m.some((x) => want.has(x));
  const cols = plan.groupBy.map((d) => columnName(plan, d));
  if (plan.mode === 'stages') {
    cols.push('spans');
    if (has('errors', 'error_rate')) cols.push('errors');
    if (has('mean_ms')) cols.push('duration_ns_sum');
    if (has('p50_ms', 'p95_ms', 'p99_ms')) cols.push('duration_ns_q');
  } else {
    cols.push('requests');
    if (has('errors', 'error_rate')) cols.push('errors');
    if (has('aborted')) cols.push('aborted');
    if (has('streams')) cols.push('streams');
    if (has('mean_ms')) cols.push('total_ns_sum');
    if (has('gateway_mean_ms')) cols.push('gateway_ns_sum');
    if (has('ttft_mean_ms')) cols.push('ttft_ns_sum', 'ttft_count');
    if (has('p50_ms', 'p95_ms', 'p99_ms')) cols.push('total_ns_q');
    if (has('gateway_p50_ms', 'gateway_p95_ms', 'gateway_p99_ms')) cols.push('gateway_ns_q');
    if (has('ttft_p50_ms', 'ttft_p95_ms', 'ttft_p99_ms')) cols.push('ttft_ns_q');
    for (const m of ['input_tokens', 'output_tokens', 'cache_read_tokens', 'cache_write_tokens'] as const) if (want.has(m)) cols.push(m);
    if (want.has('cost_usd')) cols.push('model', 'input_tokens', 'output_tokens', 'cache_read_tokens', 'cache_write_tokens');
  }
  return [...new Set(cols)];
}

const literals = (values: readonly string[]): Sql => join(values.map((v) => sql`${v}`), sql`, `);

/** `tag_values[indexOf(tag_keys, name)]`: the tag's value, '' without it (index 0 reads the default). */
function tagValue(name: string): Sql {
  return sql`tag_values[indexOf(tag_keys, ${name})]`;
}

/** A filter on a raw `requests` row (columns, not the aliases of the select). */
function rawRequestFilter(d: Dimension, values: readonly string[]): Sql {
  if (isTag(d)) return sql`${tagValue(d.slice(4))} IN (${literals(values)})`;
  if (d === 'status_class') return sql`intDiv(http_status, 100) * 100 IN (${join(values.map((v) => sql`${Number(v[0]) * 100}`), sql`, `)})`;
  return sql`${ident(COLUMN[d])} IN (${literals(values)})`;
}

/**
 * A raw source: one row per request (or per stage span) in the plan's range with the
 * columns the compiled query reads (`minute`, the dimensions under their rollup column
 * names, `tag_<i>` for tags, and the row's measures), filtered and team-scoped. `extra`
 * (conditions on those columns) is applied around it.
 */
function rawSource(plan: MetricsPlan, database: string, extra: Sql | null): Sql {
  const teamIn = plan.teams === null ? null : sql`team IN (${literals(plan.teams)})`;
  const tagCols = plan.tags.map((name, i) => sql`${tagValue(name)} AS ${ident(`tag_${i}`)}`);
  const filters = (Object.keys(plan.filters) as Dimension[]).map((d) => [d, plan.filters[d] ?? []] as const);
  let inner: Sql;
  if (plan.mode === 'requests') {
    const where: Sql[] = [sql`start_time >= toDateTime(${plan.fromS}, 'UTC') AND start_time < toDateTime(${plan.toS}, 'UTC')`];
    if (teamIn !== null) where.push(teamIn);
    for (const [d, values] of filters) where.push(rawRequestFilter(d, values));
    inner = sql`SELECT toStartOfMinute(start_time) AS minute, team, key_id, model, provider, dialect, toUInt16(intDiv(http_status, 100) * 100) AS status_class, end_user, session_id${
      tagCols.length > 0 ? sql`, ${join(tagCols, sql`, `)}` : sql``
    },
    http_status, aborted, stream, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_ns, gateway_ns, ttft_ns
  FROM ${table(database, 'requests')} FINAL
  WHERE ${join(where, sql` AND `)}`;
  } else {
    // The requests side holds only what the join needs, filtered by attribution first:
    // it is the side ClickHouse keeps in memory. ALL, not ANY: it has one row per key
    // (FINAL), and since ClickHouse 20 an ANY INNER JOIN also keeps one left row per key
    // (one stage of each request), where 18.16 kept them all.
    const right: Sql[] = [sql`start_time >= toDateTime(${plan.fromS - RAW_STAGE_LOOKBACK_S}, 'UTC') AND start_time < toDateTime(${plan.toS}, 'UTC')`];
    const left: Sql[] = [sql`minute >= toDateTime(${plan.fromS}, 'UTC') AND minute < toDateTime(${plan.toS}, 'UTC')`];
    if (teamIn !== null) {
      right.push(teamIn);
      left.push(teamIn);
    }
    for (const [d, values] of filters) (isAttribution(d) ? right : left).push(rawRequestFilter(d, values));
    inner = sql`SELECT minute, team, key_id, model, provider, stage, end_user, session_id${tagCols.length > 0 ? sql`, ${join(tagCols, sql`, `)}` : sql``}, duration_ns, failed
  FROM ${table(database, 'stage_spans')} FINAL
  ALL INNER JOIN (SELECT trace_id, span_id AS parent_span_id, end_user, session_id, tag_keys, tag_values FROM ${table(database, 'requests')} FINAL
    WHERE ${join(right, sql` AND `)}) AS attribution USING (trace_id, parent_span_id)
  WHERE ${join(left, sql` AND `)}`;
  }
  return extra === null ? sql`(${inner})` : sql`(SELECT * FROM (${inner}) WHERE ${extra})`;
}

/** Whether the plan needs the per-key rollups: it groups or filters by `key`. */
export function needsKey(plan: MetricsPlan): boolean {
  return plan.groupBy.includes('key') || plan.filters.key !== undefined;
}

/** The rollup a plan reads: the key-less twin unless it needs the key. */
function rollupKind(plan: MetricsPlan): RollupKind {
  return needsKey(plan) ? plan.mode : plan.mode === 'requests' ? 'requests_team' : 'stages_team';
}

function source(plan: MetricsPlan, database: string, columns: readonly string[], extra: Sql | null = null): Sql {
  if (plan.raw) return rawSource(plan, database, extra);
  const where = whereOf(plan);
  return rollupSource(database, rollupKind(plan), plan.ranges, columns, where === null ? extra : extra === null ? where : sql`${where} AND ${extra}`);
}

/** The plan's team scope and filters on a rollup (the time range is each part's: rollupSource). */
function whereOf(plan: MetricsPlan): Sql | null {
  const c: Sql[] = [];
  if (plan.teams !== null) c.push(sql`team IN (${literals(plan.teams)})`);
  for (const d of DIMENSIONS) {
    const values = plan.filters[d];
    if (values === undefined) continue;
    const lits = d === 'status_class' ? join(values.map((v) => sql`${Number(v[0]) * 100}`), sql`, `) : literals(values);
    c.push(sql`${column(plan, d)} IN (${lits})`);
  }
  return c.length === 0 ? null : join(c, sql` AND `);
}

function dimsSelect(plan: MetricsPlan): Sql[] {
  return plan.groupBy.map((d) => sql`${column(plan, d)} AS ${dimAlias(plan, d)}`);
}

/**
 * The aggregates of each metric over the source's rows: sums and merged t-digest states of
 * rollup rows, or counts and t-digests of raw rows (the same definitions as the ingester's
 * rollup, apps/ingester/src/rollup.ts).
 */
interface Aggregates {
  n: Sql;
  errors: Sql;
  aborted: Sql;
  streams: Sql;
  totalSum: Sql;
  gatewaySum: Sql;
  ttftSum: Sql;
  ttftCount: Sql;
  qTotal: Sql;
  qGateway: Sql;
  qTtft: Sql;
}

function aggregates(plan: MetricsPlan): Aggregates {
  const none = sql`0`;
  if (plan.mode === 'stages') {
    return plan.raw
      ? { n: sql`count()`, errors: sql`sum(failed)`, aborted: none, streams: none, totalSum: sql`sum(duration_ns)`, gatewaySum: none, ttftSum: none, ttftCount: none, qTotal: sql`quantilesTDigest(0.5, 0.95, 0.99)(duration_ns)`, qGateway: none, qTtft: none }
      : { n: sql`sum(spans)`, errors: sql`sum(errors)`, aborted: none, streams: none, totalSum: sql`sum(duration_ns_sum)`, gatewaySum: none, ttftSum: none, ttftCount: none, qTotal: sql`quantilesTDigestMerge(0.5, 0.95, 0.99)(duration_ns_q)`, qGateway: none, qTtft: none };
  }
  return plan.raw
    ? {
        n: sql`count()`,
        errors: sql`countIf(http_status >= 400)`,
        aborted: sql`countIf(aborted = 1)`,
        streams: sql`countIf(stream = 1)`,
        totalSum: sql`sum(total_ns)`,
        gatewaySum: sql`sum(gateway_ns)`,
        ttftSum: sql`sumIf(ttft_ns, ttft_ns > 0)`,
        ttftCount: sql`countIf(ttft_ns > 0)`,
        qTotal: sql`quantilesTDigest(0.5, 0.95, 0.99)(total_ns)`,
        qGateway: sql`quantilesTDigest(0.5, 0.95, 0.99)(gateway_ns)`,
        qTtft: sql`quantilesTDigestIf(0.5, 0.95, 0.99)(ttft_ns, ttft_ns > 0)`,
      }
    : {
        n: sql`sum(requests)`,
        errors: sql`sum(errors)`,
        aborted: sql`sum(aborted)`,
        streams: sql`sum(streams)`,
        totalSum: sql`sum(total_ns_sum)`,
        gatewaySum: sql`sum(gateway_ns_sum)`,
        ttftSum: sql`sum(ttft_ns_sum)`,
        ttftCount: sql`sum(ttft_count)`,
        qTotal: sql`quantilesTDigestMerge(0.5, 0.95, 0.99)(total_ns_q)`,
        qGateway: sql`quantilesTDigestMerge(0.5, 0.95, 0.99)(gateway_ns_q)`,
        qTtft: sql`quantilesTDigestIfMerge(0.5, 0.95, 0.99)(ttft_ns_q)`,
      };
}

/** The models with rows in the plan's range: their prices go into the cost expression. */
export function compileModels(plan: MetricsPlan, database: string): Sql {
  if (plan.raw) return sql`SELECT DISTINCT model FROM ${rawSource(plan, database, null)} LIMIT 10001`;
  return sql`SELECT DISTINCT model FROM ${rollupSource(database, needsKey(plan) ? 'requests' : 'requests_team', plan.ranges, ['model'], whereOf(plan), false)} LIMIT 10001`;
}

/**
 * The `limit + 1` largest groups over the whole range (by requests), for an answer with
 * both `interval` and `group_by`: the series the main query is then restricted to.
 */
export function compileTopGroups(plan: MetricsPlan, database: string): Sql {
  const dims = plan.groupBy.map((d) => dimAlias(plan, d));
  const columns = [...plan.groupBy.map((d) => columnName(plan, d)), plan.mode === 'stages' ? 'spans' : 'requests'];
  return sql`SELECT ${join(dimsSelect(plan), sql`, `)}, ${aggregates(plan).n} AS n FROM ${source(plan, database, columns)}
GROUP BY ${join(dims, sql`, `)} ORDER BY n DESC, ${join(dims, sql`, `)} LIMIT ${seriesLimit(plan) + 1}`;
}

/** A model's prices, for the cost expression. */
export interface ModelPrice {
  model: string;
  price: Price;
}

function priceColumn(prices: readonly ModelPrice[], pick: (p: Price) => number): Sql {
  return sql`transform(model, ${prices.map((p) => p.model)}, [${join(prices.map((p) => sql`toFloat64(${pick(p.price)})`), sql`, `)}], toFloat64(0))`;
}

/**
 * The main query: one row per group (and bucket, with an interval). `top`: the groups to
 * keep (from compileTopGroups) when there were more than the answer holds; `prices`: the
 * prices of the models in range (cost_usd only).
 */
export function compileMetrics(plan: MetricsPlan, database: string, opts: { prices?: readonly ModelPrice[]; top?: readonly MetricsDbRow[] } = {}): Sql {
  const want = new Set(plan.metrics);
  const a = aggregates(plan);
  const cols: Sql[] = [];
  if (plan.intervalS !== null) cols.push(sql`intDiv(toUInt32(minute), ${plan.intervalS}) * ${plan.intervalS} AS t`);
  cols.push(...dimsSelect(plan));
  const has = (...m: Metric[]) => m.some((x) => want.has(x));
  cols.push(sql`${a.n} AS n`);
  if (has('errors', 'error_rate')) cols.push(sql`${a.errors} AS m_errors`);
  if (has('mean_ms')) cols.push(sql`${a.totalSum} AS m_total_ns`);
  if (has('p50_ms', 'p95_ms', 'p99_ms')) cols.push(sql`${a.qTotal} AS q_total`);
  if (plan.mode === 'requests') {
    if (has('aborted')) cols.push(sql`${a.aborted} AS m_aborted`);
    if (has('streams')) cols.push(sql`${a.streams} AS m_streams`);
    if (has('gateway_mean_ms')) cols.push(sql`${a.gatewaySum} AS m_gateway_ns`);
    if (has('ttft_mean_ms')) cols.push(sql`${a.ttftSum} AS m_ttft_ns, ${a.ttftCount} AS m_ttft_n`);
    if (has('gateway_p50_ms', 'gateway_p95_ms', 'gateway_p99_ms')) cols.push(sql`${a.qGateway} AS q_gateway`);
    if (has('ttft_p50_ms', 'ttft_p95_ms', 'ttft_p99_ms')) cols.push(sql`${a.qTtft} AS q_ttft`);
    for (const m of ['input_tokens', 'output_tokens', 'cache_read_tokens', 'cache_write_tokens'] as const) {
      if (want.has(m)) cols.push(sql`sum(${ident(m)}) AS ${ident(`m_${m}`)}`);
    }
    if (want.has('cost_usd')) {
      const prices = opts.prices ?? [];
      if (prices.length === 0) {
        cols.push(sql`toFloat64(0) AS m_cost, sum(input_tokens + output_tokens) AS m_unpriced`);
      } else {
        // Non-cached input is input − cache reads − cache writes (docs/schema.md); per
        // row (a rollup row or a request), with that row's model's prices (US dollars per
        // million tokens).
        cols.push(sql`sum(greatest(toInt64(input_tokens) - toInt64(cache_read_tokens) - toInt64(cache_write_tokens), 0) * ${priceColumn(prices, (p) => p.input)}
    + cache_read_tokens * ${priceColumn(prices, (p) => p.cacheRead)} + cache_write_tokens * ${priceColumn(prices, (p) => p.cacheWrite)}
    + output_tokens * ${priceColumn(prices, (p) => p.output)}) / 1000000 AS m_cost,
  sumIf(input_tokens + output_tokens, NOT has(${prices.map((p) => p.model)}, model)) AS m_unpriced`);
      }
    }
  }
  let top: Sql | null = null;
  if (opts.top !== undefined && plan.groupBy.length > 0) {
    // The kept groups: each dimension's values, then the exact combinations in code.
    const per = plan.groupBy.map((d) => {
      const values = [...new Set(opts.top!.map((g) => String(g[aliasName(plan, d)] ?? '')))];
      return sql`${column(plan, d)} IN (${join(values.map((v) => (d === 'status_class' ? sql`${Number(v)}` : sql`${v}`)), sql`, `)})`;
    });
    top = join(per, sql` AND `);
  }
  const columns = sourceColumns(plan);
  const groupCols = [...(plan.intervalS !== null ? [sql`t`] : []), ...plan.groupBy.map((d) => dimAlias(plan, d))];
  const order = [...(plan.intervalS !== null ? [sql`t`] : []), sql`n DESC`, ...plan.groupBy.map((d) => dimAlias(plan, d))];
  return sql`SELECT ${join(cols, sql`, `)}
FROM ${source(plan, database, columns, top)}${groupCols.length > 0 ? sql`
GROUP BY ${join(groupCols, sql`, `)}` : sql``}
ORDER BY ${join(order, sql`, `)}${plan.intervalS === null && plan.groupBy.length > 0 ? sql` LIMIT ${plan.limit + 1}` : sql``}`;
}

/** A row of the answer. */
export type MetricsRow = Record<string, string | number | null>;

/** A row of compileMetrics, as the store returns it. */
export type MetricsDbRow = Record<string, Num | string | (Num | null)[] | null>;

const Q_INDEX = { p50: 0, p95: 1, p99: 2 } as const;

function percentile(q: MetricsDbRow[string] | undefined, which: keyof typeof Q_INDEX): number {
  if (!Array.isArray(q)) return 0;
  const v = q[Q_INDEX[which]];
  // An empty state answers NaN (null in JSON): no data is 0, like an empty bucket.
  return v === null || v === undefined ? 0 : ms(Number(v));
}

function dimValue(d: Dimension, v: unknown): string {
  if (d === 'status_class') return `${Math.floor(Number(v) / 100)}xx`;
  return String(v ?? '');
}

/** The metrics of one database row. */
function metricsOf(plan: MetricsPlan, r: MetricsDbRow | null): MetricsRow {
  const out: MetricsRow = {};
  const n = r === null ? 0 : Number(r.n);
  const num = (k: string) => (r === null ? 0 : Number(r[`m_${k}`] ?? 0));
  for (const m of plan.metrics) {
    switch (m) {
      case 'requests':
        out[m] = n;
        break;
      case 'error_rate':
        out[m] = n === 0 ? 0 : Math.round((num('errors') / n) * 1e6) / 1e6;
        break;
      case 'mean_ms':
        out[m] = n === 0 ? 0 : ms(num('total_ns') / n);
        break;
      case 'gateway_mean_ms':
        out[m] = n === 0 ? 0 : ms(num('gateway_ns') / n);
        break;
      case 'ttft_mean_ms':
        out[m] = num('ttft_n') === 0 ? 0 : ms(num('ttft_ns') / num('ttft_n'));
        break;
      case 'p50_ms':
      case 'p95_ms':
      case 'p99_ms':
        out[m] = percentile(r?.q_total, m.slice(0, 3) as keyof typeof Q_INDEX);
        break;
      case 'gateway_p50_ms':
      case 'gateway_p95_ms':
      case 'gateway_p99_ms':
        out[m] = percentile(r?.q_gateway, m.slice(8, 11) as keyof typeof Q_INDEX);
        break;
      case 'ttft_p50_ms':
      case 'ttft_p95_ms':
      case 'ttft_p99_ms':
        out[m] = percentile(r?.q_ttft, m.slice(5, 8) as keyof typeof Q_INDEX);
        break;
      case 'cost_usd':
        out[m] = num('unpriced') > 0 ? null : Math.round(num('cost') * 1e6) / 1e6;
        break;
      default:
        out[m] = num(m);
    }
  }
  return out;
}

/**
 * The answer's rows from the database rows: dimensions named as asked, `status_class` as
 * `5xx`, time as RFC 3339, and with an interval every bucket of every group (zeros where
 * the rollup has nothing). `truncated`: more groups existed than the answer holds.
 */
export function shapeRows(plan: MetricsPlan, rows: readonly MetricsDbRow[], top: { rows: readonly MetricsDbRow[]; truncated: boolean } | null = null): { rows: MetricsRow[]; truncated: boolean } {
  const dimsOf = (r: MetricsDbRow): MetricsRow => Object.fromEntries(plan.groupBy.map((d) => [d, dimValue(d, r[aliasName(plan, d)])]));
  const keyOf = (dims: MetricsRow): string => JSON.stringify(plan.groupBy.map((d) => dims[d]));
  if (plan.intervalS === null) {
    const truncated = plan.groupBy.length > 0 && rows.length > plan.limit;
    const kept = plan.groupBy.length > 0 ? rows.slice(0, plan.limit) : rows.length > 0 ? rows : [null];
    return { rows: kept.map((r) => ({ ...(r === null ? {} : dimsOf(r)), ...metricsOf(plan, r) })), truncated };
  }
  // The series: the top groups in their order (the main query read a superset of them), or
  // every group found, largest first; then every bucket of each.
  const series = new Map<string, { dims: MetricsRow; total: number; byTime: Map<number, MetricsDbRow> }>();
  for (const g of top?.rows ?? []) {
    const dims = dimsOf(g);
    series.set(keyOf(dims), { dims, total: Number(g.n), byTime: new Map() });
  }
  for (const r of rows) {
    const dims = dimsOf(r);
    const key = keyOf(dims);
    let s = series.get(key);
    if (s === undefined) {
      if (top !== null) continue;
      series.set(key, (s = { dims, total: 0, byTime: new Map() }));
    }
    if (top === null) s.total += Number(r.n);
    s.byTime.set(Number(r.t), r);
  }
  if (plan.groupBy.length === 0 && series.size === 0) series.set('[]', { dims: {}, total: 0, byTime: new Map() });
  const ordered = top !== null ? [...series.values()] : [...series.values()].sort((a, b) => b.total - a.total || keyOf(a.dims).localeCompare(keyOf(b.dims)));
  const limit = seriesLimit(plan);
  const kept = ordered.slice(0, limit);
  const out: MetricsRow[] = [];
  for (const t of buckets(plan)) {
    const time = new Date(t * 1000).toISOString();
    for (const s of kept) out.push({ time, ...s.dims, ...metricsOf(plan, s.byTime.get(t) ?? null) });
  }
  return { rows: out, truncated: (top?.truncated ?? false) || ordered.length > limit };
}
