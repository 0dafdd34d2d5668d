/**
 * The metrics query's checks, SQL and row shaping (queries/metrics.ts), without a server:
 * what a body plans to, which table and conditions it compiles to, how cost is priced
 * per model, and how buckets are filled. The same queries run on both engines in
 * dashboard.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { QueryError } from '@sightline/app-query';
import { buckets, compileMetrics, compileModels, compileTopGroups, planMetrics, seriesLimit, shapeRows, splitRange, DAY_SETTLE_S, MAX_BUCKETS, type MetricsBody, type MetricsDbRow } from '../src/queries/metrics.js';

const T0 = Date.UTC(2025, 6, 1, 12, 0, 0);
const ns = (ms: number) => BigInt(ms) * 1_000_000n;
const range = { fromNs: ns(T0 + 20_000), toNs: ns(T0 + 5 * 60_000 + 1) };
/** The clock of these plans: long after the fixture, so every day in it has ended. */
const NOW_S = (T0 + 30 * 86_400_000) / 1000;

function plan(body: Partial<MetricsBody>, teams: string[] | null = null) {
  return planMetrics({ metrics: ['requests'], ...body }, range, teams, NOW_S);
}

function refused(fn: () => unknown, field: string, message: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof QueryError, String(e));
    assert.equal(e.status, 400);
    assert.equal(e.field, field);
    assert.match(e.message, message);
    return true;
  });
}

test('a plan: whole minutes (from down, to up), the mode from the stage, buckets aligned to the interval', () => {
  const p = plan({ interval: '5m' });
  assert.equal(p.mode, 'requests');
  assert.equal(p.fromS, (T0 + 0) / 1000, 'from rounded down to 12:00');
  assert.equal(p.toS, (T0 + 6 * 60_000) / 1000, 'to rounded up to 12:06');
  assert.deepEqual(buckets(p).map((t) => new Date(t * 1000).toISOString().slice(11, 16)), ['12:00', '12:05']);
  assert.equal(plan({ group_by: ['stage'] }).mode, 'stages');
  assert.equal(plan({ filters: { stage: ['parse'] } }).mode, 'stages');
  assert.equal(plan({}).limit, 100);
});

test('what the stage rollup cannot answer is a 400 naming the field', () => {
  refused(() => plan({ group_by: ['stage'], metrics: ['requests', 'cost_usd'] }), 'metrics[1]', /cost_usd.*not available per stage/);
  refused(() => plan({ group_by: ['stage', 'dialect'] }), 'group_by[1]', /dialect.*cannot be combined with `stage`/);
  refused(() => plan({ filters: { stage: ['parse'], status_class: ['5xx'] } }), 'filters.status_class', /status_class/);
  const day = { fromNs: ns(T0), toNs: ns(T0 + 2 * 86_400_000) };
  refused(() => planMetrics({ metrics: ['requests'], interval: '1m' }, day, null, NOW_S), 'interval', new RegExp(`2880 buckets.*at most ${MAX_BUCKETS}`));
  assert.equal(buckets(planMetrics({ metrics: ['requests'], interval: '1h' }, day, null, NOW_S)).length, 48);
});

test('a range is read from the coarsest level that covers each part: ended days, whole hours, minutes at the ends', () => {
  const at = (d: number, h: number, m = 0) => (Date.UTC(2025, 6, d, h, m) / 1000);
  const show = (r: ReturnType<typeof splitRange>) => r.map((x) => `${x.level} ${new Date(x.fromS * 1000).toISOString().slice(8, 16)}–${new Date(x.toS * 1000).toISOString().slice(8, 16)}`);
  // A week from mid-hour to mid-hour, long ago.
  assert.deepEqual(show(splitRange(at(1, 10, 30), at(8, 14, 15), null, NOW_S)), [
    'minute 01T10:30–01T11:00', 'hour 01T11:00–02T00:00', 'day 02T00:00–08T00:00', 'hour 08T00:00–08T14:00', 'minute 08T14:00–08T14:15',
  ]);
  // Today's day has not ended (and yesterday only just): hours, not days.
  assert.deepEqual(show(splitRange(at(6, 0), at(8, 3, 10), null, at(8, 0, 5))), ['day 06T00:00–07T00:00', 'hour 07T00:00–08T03:00', 'minute 08T03:00–08T03:10']);
  assert.deepEqual(show(splitRange(at(6, 0), at(8, 3, 10), null, at(8, 0, 0) + DAY_SETTLE_S)), ['day 06T00:00–08T00:00', 'hour 08T00:00–08T03:00', 'minute 08T03:00–08T03:10']);
  // An interval keeps out the levels it is finer than.
  assert.deepEqual(show(splitRange(at(1, 10, 30), at(3, 2), 3600, NOW_S)), ['minute 01T10:30–01T11:00', 'hour 01T11:00–03T02:00']);
  assert.deepEqual(show(splitRange(at(1, 10, 30), at(1, 12), 300, NOW_S)), ['minute 01T10:30–01T12:00']);
  // Compiled: one UNION ALL of the levels, each with FINAL, its own time range and the filters.
  const p = planMetrics({ metrics: ['requests', 'p99_ms'], group_by: ['team'], filters: { model: ['m'] } }, { fromNs: BigInt(at(1, 10, 30)) * 1_000_000_000n, toNs: BigInt(at(8, 14, 15)) * 1_000_000_000n }, null, NOW_S);
  const text = compileMetrics(p, 'db').text;
  assert.equal(text.match(/UNION ALL/g)?.length, 4);
  assert.match(text, /SELECT day AS minute, team, requests, total_ns_q FROM db\.requests_team_agg_1d FINAL\n  WHERE day >= toDateTime\(1751414400, 'UTC'\) AND day < toDateTime\(1751932800, 'UTC'\) AND model IN \('m'\)/);
  assert.match(text, /SELECT hour AS minute, team, requests, total_ns_q FROM db\.requests_team_agg_1h FINAL/);
});

test('request metrics compile to the request rollup with FINAL, the team scope and each filter as IN lists', () => {
  const p = plan({ metrics: ['requests', 'errors', 'p99_ms', 'ttft_p50_ms'], group_by: ['model', 'status_class'], filters: { status_class: ['5xx', '4xx'], model: ["it's"] } }, ['alpha']);
  const text = compileMetrics(p, 'sightline').text;
  assert.match(text, /FROM sightline\.requests_team_agg_1m FINAL\n  WHERE minute >= toDateTime\(1751371200, 'UTC'\) AND minute < toDateTime\(1751371560, 'UTC'\) AND team IN \('alpha'\)/);
  assert.doesNotMatch(text, /UNION ALL/, 'six minutes: the minute rollup alone');
  assert.match(text, /status_class IN \(500, 400\)/);
  assert.match(text, /model IN \('it\\'s'\)/, 'values are bound as literals');
  assert.match(text, /quantilesTDigestMerge\(0\.5, 0\.95, 0\.99\)\(total_ns_q\) AS q_total/);
  assert.match(text, /quantilesTDigestIfMerge\(0\.5, 0\.95, 0\.99\)\(ttft_ns_q\) AS q_ttft/);
  assert.doesNotMatch(text, /gateway_ns_q/, 'only what was asked for is merged');
  assert.match(text, /GROUP BY d_model, d_status_class\nORDER BY n DESC, d_model, d_status_class LIMIT 101/);
  // No alias reuses a column name (an alias would shadow the column in the other expressions).
  for (const [, alias] of text.matchAll(/ AS ([a-z_]+)/g)) assert.ok(/^(d_|m_|q_|n$|t$)/.test(alias!), alias);
});

test('stage queries read the stage rollup; an interval adds the bucket; the top groups restrict the series', () => {
  const p = plan({ metrics: ['requests', 'p50_ms', 'errors'], group_by: ['stage'], interval: '1m', limit: 3 });
  const top = compileTopGroups(p, 'db').text;
  assert.match(top, /SELECT stage AS d_stage, sum\(spans\) AS n FROM \(SELECT minute, stage, spans FROM db\.stages_team_agg_1m FINAL/);
  assert.match(top, /LIMIT 4$/);
  const text = compileMetrics(p, 'db', { top: [{ d_stage: 'parse', n: 1 }, { d_stage: 'upstream.wait', n: 1 }] }).text;
  assert.match(text, /intDiv\(toUInt32\(minute\), 60\) \* 60 AS t/);
  assert.match(text, /quantilesTDigestMerge\(0\.5, 0\.95, 0\.99\)\(duration_ns_q\)/);
  assert.match(text, /AND stage IN \('parse', 'upstream\.wait'\)/);
  assert.match(text, /GROUP BY t, d_stage\nORDER BY t, n DESC, d_stage$/);
  assert.equal(seriesLimit(p), 3);
  assert.equal(seriesLimit(planMetrics({ metrics: ['requests'], interval: '1m', group_by: ['model'], limit: 1000 }, { fromNs: ns(T0), toNs: ns(T0 + 86_400_000) }, null, NOW_S)), Math.floor(50_000 / 1440));
});

test('cost is priced per rollup row with its model\'s prices, so it is right without model in group_by', () => {
  const p = plan({ metrics: ['cost_usd'], group_by: ['team'] });
  assert.match(compileModels(p, 'db').text, /SELECT DISTINCT model FROM \(SELECT minute, model FROM db\.requests_team_agg_1m\n  WHERE/);
  const prices = [
    { model: 'gpt-4o', price: { input: 2.5, output: 10, cacheRead: 1.25, cacheWrite: 2.5 } },
    { model: 'claude-x', price: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 } },
  ];
  const text = compileMetrics(p, 'db', { prices }).text;
  assert.match(text, /transform\(model, \['gpt-4o', 'claude-x'\], \[toFloat64\(2\.5\), toFloat64\(3\)\], toFloat64\(0\)\)/);
  assert.match(text, /output_tokens \* transform\(model, \['gpt-4o', 'claude-x'\], \[toFloat64\(10\), toFloat64\(15\)\]/);
  assert.match(text, /sumIf\(input_tokens \+ output_tokens, NOT has\(\['gpt-4o', 'claude-x'\], model\)\) AS m_unpriced/);
  // No prices at all: every token is unpriced.
  assert.match(compileMetrics(p, 'db').text, /toFloat64\(0\) AS m_cost, sum\(input_tokens \+ output_tokens\) AS m_unpriced/);
});

test('without `key` in group_by or filters the key-less rollups are read (migration 008); with it, the per-key ones', () => {
  const long = { fromNs: ns(T0 - 3 * 86_400_000 + 600_000), toNs: ns(T0 + 600_000) };
  const tables = (text: string) => [...new Set([...text.matchAll(/FROM db\.([a-z_0-9]+)/g)].map((m) => m[1]))].sort();
  const keyless = planMetrics({ metrics: ['requests', 'p99_ms', 'cost_usd'], group_by: ['team', 'model'] }, long, ['alpha'], NOW_S);
  assert.deepEqual(tables(compileMetrics(keyless, 'db').text), ['requests_team_agg_1d', 'requests_team_agg_1h', 'requests_team_agg_1m']);
  assert.deepEqual(tables(compileTopGroups(keyless, 'db').text), ['requests_team_agg_1d', 'requests_team_agg_1h', 'requests_team_agg_1m']);
  assert.deepEqual(tables(compileModels(keyless, 'db').text), ['requests_team_agg_1d', 'requests_team_agg_1h', 'requests_team_agg_1m']);
  assert.doesNotMatch(compileMetrics(keyless, 'db').text, /key_id/);
  for (const body of [{ group_by: ['key'] }, { filters: { key: ['key_a'] } }] as Partial<MetricsBody>[]) {
    const p = planMetrics({ metrics: ['requests', 'p99_ms', 'cost_usd'], ...body }, long, null, NOW_S);
    assert.deepEqual(tables(compileMetrics(p, 'db').text), ['requests_agg_1d', 'requests_agg_1h', 'requests_agg_1m'], JSON.stringify(body));
    assert.deepEqual(tables(compileModels(p, 'db').text), ['requests_agg_1d', 'requests_agg_1h', 'requests_agg_1m'], JSON.stringify(body));
  }
  const stages = planMetrics({ metrics: ['requests', 'p99_ms'], group_by: ['stage', 'model'] }, long, null, NOW_S);
  assert.deepEqual(tables(compileMetrics(stages, 'db').text), ['stages_team_agg_1d', 'stages_team_agg_1h', 'stages_team_agg_1m']);
  const stagesByKey = planMetrics({ metrics: ['requests', 'p99_ms'], group_by: ['stage', 'key'] }, long, null, NOW_S);
  assert.deepEqual(tables(compileMetrics(stagesByKey, 'db').text), ['stages_agg_1d', 'stages_agg_1h', 'stages_agg_1m']);
});

test('rows: dimensions as asked, status class as 5xx, cost null with unpriced tokens, every bucket filled with zeros', () => {
  const p = plan({ metrics: ['requests', 'error_rate', 'p50_ms', 'cost_usd'], group_by: ['status_class'], interval: '1m' });
  const t = (min: number) => (T0 + min * 60_000) / 1000;
  const rows: MetricsDbRow[] = [
    { t: t(1), d_status_class: 200, n: '4', m_errors: '0', q_total: [1_500_000, 2e6, 3e6], m_cost: 0.5, m_unpriced: '0' },
    { t: t(3), d_status_class: 500, n: '2', m_errors: '2', q_total: [null, null, null], m_cost: 0, m_unpriced: '10' },
    { t: t(4), d_status_class: 200, n: '1', m_errors: '0', q_total: [1e6, 1e6, 1e6], m_cost: 0.1234567, m_unpriced: '0' },
  ];
  const { rows: out, truncated } = shapeRows(p, rows);
  assert.equal(truncated, false);
  assert.equal(out.length, 6 * 2, 'six buckets (12:00 to 12:05) for each of two series');
  assert.deepEqual(out.slice(0, 2), [
    { time: '2025-07-01T12:00:00.000Z', status_class: '2xx', requests: 0, error_rate: 0, p50_ms: 0, cost_usd: 0 },
    { time: '2025-07-01T12:00:00.000Z', status_class: '5xx', requests: 0, error_rate: 0, p50_ms: 0, cost_usd: 0 },
  ]);
  assert.deepEqual(out[2], { time: '2025-07-01T12:01:00.000Z', status_class: '2xx', requests: 4, error_rate: 0, p50_ms: 1.5, cost_usd: 0.5 });
  assert.deepEqual(out[7], { time: '2025-07-01T12:03:00.000Z', status_class: '5xx', requests: 2, error_rate: 1, p50_ms: 0, cost_usd: null });
  assert.equal(out[8]!.cost_usd, 0.123457);

  // With the top groups: their order, and the truncation they found.
  const top = shapeRows(p, rows, { rows: [{ d_status_class: 500, n: 2 }], truncated: true });
  assert.equal(top.truncated, true);
  assert.deepEqual([...new Set(top.rows.map((r) => r.status_class))], ['5xx']);

  // Without an interval or groups: one row, zeros when nothing matched.
  assert.deepEqual(shapeRows(plan({ metrics: ['requests', 'p99_ms'] }), []).rows, [{ requests: 0, p99_ms: 0 }]);
  const grouped = plan({ metrics: ['requests'], group_by: ['model'], limit: 1 });
  assert.deepEqual(shapeRows(grouped, [{ d_model: 'a', n: 3 }, { d_model: 'b', n: 1 }]), { rows: [{ model: 'a', requests: 3 }], truncated: true });
});

test('attribution reads raw rows: requests FINAL (per stage, stage spans joined to their requests), tag names bound as literals', () => {
  const p = plan({ metrics: ['requests', 'p99_ms', 'ttft_p50_ms'], group_by: ["tag.o'neil", 'end_user'], filters: { session: ['s'], 'tag.env': ['prod'] } }, ['alpha']);
  assert.equal(p.raw, true);
  assert.deepEqual(p.tags, ["o'neil", 'env']);
  const text = compileMetrics(p, 'db').text;
  assert.ok(!/_agg_/.test(text), 'no rollup is read');
  assert.match(text, /FROM db\.requests FINAL/);
  assert.match(text, /tag_values\[indexOf\(tag_keys, 'o\\'neil'\)\] AS tag_0/);
  assert.match(text, /tag_values\[indexOf\(tag_keys, 'env'\)\] IN \('prod'\)/);
  assert.match(text, /session_id IN \('s'\)/);
  assert.match(text, /team IN \('alpha'\)/);
  assert.match(text, /quantilesTDigest\(0\.5, 0\.95, 0\.99\)\(total_ns\) AS q_total, quantilesTDigestIf\(0\.5, 0\.95, 0\.99\)\(ttft_ns, ttft_ns > 0\) AS q_ttft/);
  assert.match(text, /SELECT tag_0 AS d_tag_0, end_user AS d_end_user, count\(\) AS n/);
  // Shaped back under the names asked for.
  assert.deepEqual(shapeRows(p, [{ d_tag_0: 'x', d_end_user: 'u', n: 2, q_total: [1e6, 1e6, 1e6], q_ttft: [0, 0, 0] }]).rows, [{ "tag.o'neil": 'x', end_user: 'u', requests: 2, p99_ms: 1, ttft_p50_ms: 0 }]);

  const stages = compileMetrics(plan({ group_by: ['stage', 'end_user'] }), 'db').text;
  assert.match(stages, /FROM db\.stage_spans FINAL\n  ALL INNER JOIN \(SELECT trace_id, span_id AS parent_span_id, end_user, session_id, tag_keys, tag_values FROM db\.requests FINAL/);
  assert.match(stages, /count\(\) AS n/);
  // Attribution per stage is allowed; what the stage rows lack is not, and the range is a week at most.
  refused(() => plan({ group_by: ['stage', 'end_user', 'status_class'] }), 'group_by[2]', /per stage, group by .*end_user, session, tag\.<name>/);
  refused(() => planMetrics({ metrics: ['requests'], group_by: ['session'] }, { fromNs: 0n, toNs: 8n * 86_400n * 1_000_000_000n }, null, NOW_S), 'from', /at most 7 days/);
  assert.equal(plan({ group_by: ['model'] }).raw, false);
});
