/**
 * The synthetic dataset as SQL: `INSERT … SELECT … FROM numbers(…)` statements that make the
 * `requests` rows and the `spans` rows (root, stages, upstream attempts) of a range of hours
 * inside ClickHouse, with no row passing through JavaScript. Every value is a function of the
 * seed and the request number `n` (cityHash64(seed, n, c) for the c-th draw), so the two
 * statements of a chunk compute the same request twice and agree on every field: the stage
 * spans of a request add up to its `total_ns` exactly, as the ingester's do.
 *
 * Written for ClickHouse 18.16 (the oldest server Sightline supports): no WITH-bound
 * lambdas, no Map, arrays indexed from 1. Statements are built with the store's `sql` tag
 * (values bound as literals), like the product's own SQL.
 */
import { STAGES, type StageName } from '@sightline/core';
import { ident, join, sql, table, type Sql } from '@sightline/store';
import { MODELS, PROVIDER_HOSTS, KEY_SLOTS, MODEL_SLOTS, TEAM_SLOTS, type Catalogue, type Hour } from './catalogue.js';

/** The error mix (share of all requests): what fails where, with the gateway's codes (apps/gateway/src/errors.ts). */
export const ERROR_KINDS = [
  { kind: 1, errorType: 'invalid_request', status: 400, stage: 'parse', share: 0.003, message: 'invalid request body' },
  { kind: 2, errorType: 'invalid_api_key', status: 401, stage: 'auth', share: 0.002, message: 'invalid API key' },
  { kind: 3, errorType: 'model_not_found', status: 404, stage: 'route', share: 0.001, message: 'model not found' },
  { kind: 4, errorType: 'upstream_rate_limited', status: 429, stage: 'upstream.wait', share: 0.005, message: 'rate limited by the provider' },
  { kind: 5, errorType: 'upstream_timeout', status: 504, stage: 'upstream.wait', share: 0.002, message: 'the provider did not answer in time' },
  { kind: 6, errorType: 'upstream_unreachable', status: 502, stage: 'upstream.connect', share: 0.001, message: 'the provider is unreachable' },
  { kind: 7, errorType: 'upstream_error', status: 502, stage: 'upstream.stream', share: 0.003, message: 'the provider failed' },
  { kind: 8, errorType: 'client_closed', status: 499, stage: null, share: 0.003, message: 'client aborted' },
] as const;

/** Share of streamed requests. */
export const STREAM_SHARE = 0.2;

/** What one statement covers: consecutive hours, their requests numbered from hours[0].first. */
export interface Chunk {
  hours: readonly Hour[];
}

/** Hours grouped `perChunk` at a time (one INSERT each). */
export function chunks(all: readonly Hour[], perChunk = 24): Chunk[] {
  const out: Chunk[] = [];
  for (let i = 0; i < all.length; i += perChunk) out.push({ hours: all.slice(i, i + perChunk) });
  return out;
}

export function chunkRequests(c: Chunk): number {
  return c.hours.reduce((a, h) => a + h.count, 0);
}

const STAGE_INDEX = (name: string): number => {
  const i = (STAGES as readonly string[]).indexOf(name);
  if (i < 0) throw new Error(`unknown stage ${name}`);
  return i + 1;
};

/**
 * The per-request columns of a chunk, as a subquery. Layers (innermost first): position in
 * time and the caller; the model, the outcome and the token counts; each stage's duration
 * (`g_d`, one entry per stage in STAGES order, 0 where the request had no such stage), whose sum is
 * the request's total.
 */
export function requestSource(cat: Catalogue, seed: number, c: Chunk): Sql {
  const count = chunkRequests(c);
  const first = c.hours[0]?.first ?? 0;
  const cum: number[] = [];
  let acc = 0;
  for (const h of c.hours) cum.push((acc += h.count));
  const U = (k: number): Sql => sql`((cityHash64(${seed}, g_n, ${k}) % 4294967291) + 0.5) / 4294967291`;
  // Box–Muller: a standard normal draw from two uniforms.
  const Z = (k: number): Sql => sql`(sqrt(-2 * log(${U(k)})) * cos(6.283185307179586 * ${U(k + 1000)}))`;
  /** Log-normal with this median (ns) and sigma. */
  const LN = (median: number | Sql, sigma: number, k: number): Sql => sql`(${median} * exp(${sigma} * ${Z(k)}))`;
  const u64 = (e: Sql): Sql => sql`toUInt64(${e})`;
  const st = (name: string): number => STAGE_INDEX(name);

  const failedStage = sql`multiIf(g_kind = 1, ${st('parse')}, g_kind = 2, ${st('auth')}, g_kind = 3, ${st('route')}, g_kind IN (4, 5), ${st('upstream.wait')}, g_kind = 6, ${st('upstream.connect')}, g_kind = 7, ${st('upstream.stream')}, g_kind = 8, if(g_stream = 1, ${st('upstream.stream')}, ${st('upstream.wait')}), 0)`;
  let edge = 0;
  const kindCases: Sql[] = [];
  for (const e of ERROR_KINDS) {
    edge += e.share;
    kindCases.push(sql`g_ue < ${Number(edge.toFixed(6))}, ${e.kind}`);
  }

  // Durations of each stage had it run normally (ns).
  const byStage: Record<StageName, Sql> = {
    'ingress.read': sql`${LN(20_000, 0.6, 30)} + g_request_bytes * 2`,
    parse: sql`${LN(12_000, 0.5, 31)} + g_request_bytes * 3`,
    auth: LN(1_500, 0.4, 32),
    limits: LN(2_000, 0.4, 50),
    route: LN(2_500, 0.4, 33),
    cache: LN(3_000, 0.5, 51),
    budget: LN(1_500, 0.4, 52),
    'translate.request': sql`if(g_cross = 1, ${LN(30_000, 0.5, 34)} + g_request_bytes, ${LN(2_000, 0.4, 34)})`,
    'upstream.retry': LN(400e6, 0.6, 35), // failed attempt and backoff
    'upstream.connect': LN(1.5e6, 0.5, 36),
    'upstream.send': sql`${LN(35_000, 0.5, 37)} + g_request_bytes`,
    'upstream.wait': sql`${LN(sql`g_ttfb_ms * 1000000`, 0.45, 38)} + if(g_stream = 1, 0, g_gen_ns)`,
    'upstream.stream': sql`if(g_stream = 1, toFloat64(g_gen_ns), ${LN(200_000, 0.6, 40)} + g_response_bytes * 5)`,
    'translate.response': sql`if(g_cross = 1, ${LN(40_000, 0.5, 41)}, ${LN(3_000, 0.4, 41)})`,
    'egress.write': sql`${LN(25_000, 0.7, 42)} + g_response_bytes + if(${U(43)} < 0.002, ${LN(8e6, 0.5, 44)}, 0)`, // + a rare pause
  };
  const normal: Sql[] = STAGES.map((name) => byStage[name]);
  const N = STAGES.length;
  // The stage a request failed in closes when the request ends (spans.ts stageIntervals).
  const failedDuration = sql`multiIf(g_kind IN (1, 2, 3), g_n_d[g_f] + ${u64(LN(20_000, 0.5, 45))},
      g_kind = 4, ${u64(LN(80e6, 0.5, 45))},
      g_kind = 5, 60000000000 + ${u64(LN(2e6, 0.5, 45))},
      g_kind = 6, ${u64(LN(3e6, 1.0, 45))},
      ${u64(sql`g_n_d[g_f] * ${U(46)}`)} + 20000)`;
  const present = (j: number): Sql => {
    const c: Sql[] = [sql`(g_f = 0 OR ${j} <= g_f)`];
    if (j === st('upstream.retry')) c.push(sql`g_retry = 1`);
    if (j === st('upstream.connect')) c.push(sql`g_newconn = 1`);
    // Controls (limits, cache, budget) run for about half the requests: the teams that set them.
    if (j === st('limits') || j === st('cache') || j === st('budget')) c.push(sql`${U(53)} < 0.5`);
    return join(c, sql` AND `);
  };
  const presence = Array.from({ length: N }, (_, i) => sql`toUInt8(${present(i + 1)})`);
  const durations = Array.from({ length: N }, (_, i) => sql`if(g_p[${i + 1}] = 1, if(g_f = ${i + 1}, g_fd, g_n_d[${i + 1}]), toUInt64(0))`);

  const models = MODELS.map((m) => m.name);
  const hex16 = (e: Sql): Sql => sql`lower(hex(toFixedString(reinterpretAsString(${e}), 8)))`;

  return sql`(SELECT *,
    arraySum(g_d) AS g_total, arrayCumSum(g_d) AS g_off,
    g_d[${st('upstream.wait')}] + g_d[${st('upstream.stream')}] AS g_upstream,
    least(g_total, multiIf(g_kind = 0 AND g_stream = 0, g_off[${st('translate.response')}] + 10000,
      g_stream = 1 AND (g_kind = 0 OR g_kind IN (7, 8) AND g_f = ${st('upstream.stream')}), g_off[${st('upstream.wait')}] + 50000,
      toUInt64(greatest(g_total, 5000) - 5000))) AS g_ttfb,
    if(g_stream = 1 AND g_output > 0, least(g_total, g_ttfb + ${u64(LN(25e6, 0.5, 47))}), toUInt64(0)) AS g_ttft
  FROM (SELECT *,
    [${join(durations, sql`, `)}] AS g_d
  FROM (SELECT *,
    [${join(presence, sql`, `)}] AS g_p,
    [${join(normal.map(u64), sql`, `)}] AS g_n_d,
    ${failedDuration} AS g_fd
  FROM (SELECT *,
    ${failedStage} AS g_f,
    ${u64(sql`g_output_full * g_ms_per_token * 1000000 * exp(0.2 * ${Z(39)})`)} AS g_gen_ns,
    if(g_kind = 0 OR g_kind IN (7, 8) AND g_stream = 1, g_input_full, toUInt64(0)) AS g_input,
    multiIf(g_kind = 0, g_output_full, g_kind IN (7, 8) AND g_stream = 1, ${u64(sql`g_output_full * ${U(23)}`)}, toUInt64(0)) AS g_output,
    g_input_full * 4 + 250 AS g_request_bytes,
    if(g_stream = 1, g_output_full * 14 + 600, g_output_full * 4 + 450) AS g_response_bytes
  FROM (SELECT *,
    ${join(
      [
        sql`${models}[g_m + 1] AS g_model`,
        sql`${MODELS.map((m) => m.provider)}[g_m + 1] AS g_provider`,
        sql`${MODELS.map((m) => m.responseModel)}[g_m + 1] AS g_response_model`,
        sql`${MODELS.map((m) => m.ttfbMs)}[g_m + 1] AS g_ttfb_ms`,
        sql`${MODELS.map((m) => m.msPerToken)}[g_m + 1] AS g_ms_per_token`,
        sql`multiIf(${join(kindCases, sql`, `)}, 0) AS g_kind`,
        sql`toUInt8(${U(5)} < ${STREAM_SHARE}) AS g_stream`,
        sql`toUInt8(if(g_provider = 'anthropic', ${U(7)} < 0.75, ${U(7)} < 0.08)) AS g_anthropic`,
        sql`toUInt8(g_anthropic != (g_provider = 'anthropic')) AS g_cross`,
        sql`toUInt8(${U(8)} < 0.03 OR g_kind = 6) AS g_newconn`,
        sql`toUInt8(${U(9)} < 0.005 AND (g_kind = 0 OR g_kind >= 4)) AS g_retry`,
        sql`${u64(sql`least(120000, 20 + ${LN(700, 1.0, 20)})`)} AS g_input_full`,
        sql`${u64(sql`least(8000, 1 + ${LN(220, 0.9, 22)})`)} AS g_output_full`,
      ],
      sql`,
    `,
    )}
  FROM (SELECT *,
    ${cat.keys.map((k) => k.id)}[g_k + 1] AS g_key_id,
    ${cat.teams.map((t) => t.name)}[g_tm + 1] AS g_team,
    if(${U(3)} < 0.7, ${cat.keys.map((k) => k.primaryModel)}[g_k + 1], ${cat.modelTable}[1 + cityHash64(${seed}, g_n, 4) % ${MODEL_SLOTS}]) AS g_m,
    ${U(6)} AS g_ue
  FROM (SELECT
    number AS g_i, ${first} + g_i AS g_n,
    arrayFirstIndex(x -> x > g_i, ${cum}) AS g_h,
    ${cum}[g_h] - ${c.hours.map((h) => h.count)}[g_h] AS g_ho,
    toUInt64(${c.hours.map((h) => h.startS)}[g_h]) * 1000000000 + toUInt64(((g_i - g_ho) + ${U(0)}) * 3600000000000 / ${c.hours.map((h) => h.count)}[g_h]) AS g_t0,
    ${cat.teamTable}[1 + cityHash64(${seed}, g_n, 1) % ${TEAM_SLOTS}] AS g_tm,
    ${cat.keyTable}[1 + g_tm * ${KEY_SLOTS} + cityHash64(${seed}, g_n, 2) % ${KEY_SLOTS}] AS g_k,
    concat(${hex16(sql`cityHash64(${seed}, g_n, 100)`)}, ${hex16(sql`cityHash64(${seed}, g_n, 101)`)}) AS g_trace_id,
    ${hex16(sql`cityHash64(${seed}, g_n, 102)`)} AS g_span_id
  FROM numbers(${count}))))))))`;
}

/** Per-request columns the rows share, from requestSource's (after failures are applied). */
const ROW_COLUMNS = sql`g_trace_id AS trace_id, g_span_id AS span_id, concat('gw-', toString(g_n % 3 + 1)) AS instance,
    if(g_kind = 3, 'gpt-4-32k', g_model) AS model,
    if(g_kind IN (1, 2, 3), '', g_provider) AS provider,
    if(g_kind = 2, '', g_team) AS team, if(g_kind = 2, '', g_key_id) AS key_id`;

const STATUS = sql`${[200, ...ERROR_KINDS.map((e) => e.status)]}[g_kind + 1]`;
const ERROR_TYPE = sql`${['', ...ERROR_KINDS.map((e) => e.errorType)]}[g_kind + 1]`;
const ERROR_MESSAGE = sql`${['', ...ERROR_KINDS.map((e) => e.message)]}[g_kind + 1]`;
const UPSTREAM_STATUS = sql`multiIf(g_kind = 0, 200, g_kind = 4, 429, g_kind = 7, if(g_stream = 1, 200, 500), g_kind = 8, if(g_stream = 1, 200, 0), 0)`;
const CACHE_READ = (seed: number) =>
  sql`if(g_input = 0, toUInt64(0), if(g_provider = 'anthropic', if(cityHash64(${seed}, g_n, 24) % 100 < 35, toUInt64(g_input * 0.6), toUInt64(0)), if(cityHash64(${seed}, g_n, 24) % 100 < 20, intDiv(toUInt64(g_input * 0.5), 128) * 128, toUInt64(0))))`;
const CACHE_WRITE = (seed: number) => sql`if(g_provider = 'anthropic' AND g_input > 0 AND cityHash64(${seed}, g_n, 25) % 100 < 5, toUInt64(g_input * 0.3), toUInt64(0))`;
const FEATURES = ['chat', 'summarize', 'search', 'classify', 'extract'];

/** `INSERT INTO requests … SELECT` for one chunk (INSERT … SELECT matches columns by position: one list makes both). */
export function insertRequests(database: string, cat: Catalogue, seed: number, c: Chunk): Sql {
  const columns: [string, Sql][] = [
    ['trace_id', sql`trace_id`],
    ['span_id', sql`span_id`],
    ['instance', sql`instance`],
    ['seq', sql`intDiv(g_n, 3) + 1`],
    ['start_time', sql`toDateTime(intDiv(g_t0, 1000000000), 'UTC')`],
    ['start_time_unix_nano', sql`g_t0`],
    ['method', sql`'POST'`],
    ['route', sql`if(g_anthropic = 1, '/v1/messages', '/v1/chat/completions')`],
    ['dialect', sql`if(g_anthropic = 1, 'anthropic', 'openai')`],
    ['model', sql`model`],
    ['response_model', sql`if(g_kind = 0 OR g_kind IN (7, 8) AND g_stream = 1, g_response_model, '')`],
    ['provider', sql`provider`],
    ['upstream_model', sql`if(g_kind IN (1, 2, 3), '', g_model)`],
    ['team', sql`team`],
    ['key_id', sql`key_id`],
    ['stream', sql`g_stream`],
    ['http_status', STATUS],
    ['upstream_status', UPSTREAM_STATUS],
    ['error_type', ERROR_TYPE],
    ['aborted', sql`toUInt8(g_kind = 8)`],
    ['total_ns', sql`g_total`],
    ['gateway_ns', sql`g_total - g_upstream`],
    ['upstream_ns', sql`g_upstream`],
    ['ttfb_ns', sql`g_ttfb`],
    ['ttft_ns', sql`g_ttft`],
    ['input_tokens', sql`g_input`],
    ['output_tokens', sql`g_output`],
    ['cache_read_tokens', CACHE_READ(seed)],
    ['cache_write_tokens', CACHE_WRITE(seed)],
    ['request_bytes', sql`g_request_bytes`],
    ['response_bytes', sql`if(g_kind = 0 OR g_output > 0, g_response_bytes, toUInt64(200))`],
    ['usage_partial', sql`toUInt8(g_kind IN (7, 8) AND g_stream = 1)`],
    ['end_user', sql`if(cityHash64(${seed}, g_n, 48) % 100 < 40, concat('user-', toString(cityHash64(${seed}, g_n, 49) % 5000)), '')`],
    ['session_id', sql`if(cityHash64(${seed}, g_n, 50) % 100 < 30, concat('sess-', toString(cityHash64(${seed}, intDiv(g_n, 8), 51) % 1000000)), '')`],
    ['tag_keys', sql`if(cityHash64(${seed}, g_n, 52) % 100 < 50, ['feature'], emptyArrayString())`],
    ['tag_values', sql`if(cityHash64(${seed}, g_n, 52) % 100 < 50, [${FEATURES}[1 + cityHash64(${seed}, g_n, 53) % ${FEATURES.length}]], emptyArrayString())`],
  ];
  return sql`INSERT INTO ${table(database, 'requests')} (${join(columns.map(([name]) => ident(name)), sql`, `)})
SELECT ${join(columns.map(([, e]) => e), sql`,
  `)}
FROM (SELECT *, ${ROW_COLUMNS} FROM ${requestSource(cat, seed, c)})`;
}

/** The three statements that make a chunk's spans. */
export const SPAN_PARTS = ['roots', 'stages', 'attempts'] as const;
export type SpanPart = (typeof SPAN_PARTS)[number];

/**
 * `INSERT INTO spans … SELECT` for one chunk and one part: per request its root span
 * (`roots`); one span per stage it went through, in STAGES order (`stages`, which the
 * materialized view `stage_spans_mv` copies into `stage_spans`, migration 005); its final
 * upstream attempt when it got past routing, and the failed first attempt when it was
 * retried (`attempts`). Three statements rather than one: ClickHouse evaluates every branch
 * of an `if` for every row, so one statement would build the root's attributes for all
 * twelve spans of a request.
 */
export function insertSpans(database: string, cat: Catalogue, seed: number, c: Chunk, part: SpanPart): Sql {
  const hosts = MODELS.map((m) => PROVIDER_HOSTS[m.provider]);
  const host = sql`${hosts}[g_m + 1]`;
  const opt = (cond: Sql, key: string, value: Sql) => ({ key: sql`if(${cond}, [${key}], emptyArrayString())`, value: sql`if(${cond}, [${value}], emptyArrayString())` });
  const childId = (k: Sql): Sql => sql`lower(hex(toFixedString(reinterpretAsString(cityHash64(${seed}, g_n, ${k})), 8)))`;
  // The final attempt starts after a failed one (upstream.retry), else where the retry would have.
  const retried = STAGE_INDEX('upstream.retry');
  const streamEnd = STAGE_INDEX('upstream.stream');
  const upstreamStages = STAGES.flatMap((st, i) => (st.startsWith('upstream.') ? [i + 1] : []));

  let rows: { from: Sql; id: Sql; parent: Sql; name: Sql; kind: Sql; isRoot: Sql; start: Sql; duration: Sql; status: Sql; message: Sql; keys: Sql; values: Sql };
  if (part === 'roots') {
    const base: [string, Sql][] = [
      ['gen_ai.operation.name', sql`'chat'`],
      ['gen_ai.provider.name', sql`provider`],
      ['gen_ai.request.model', sql`model`],
      ['http.request.method', sql`'POST'`],
      ['http.route', sql`if(g_anthropic = 1, '/v1/messages', '/v1/chat/completions')`],
      ['http.response.status_code', sql`toString(${STATUS})`],
      ['sightline.dialect', sql`if(g_anthropic = 1, 'anthropic', 'openai')`],
      ['sightline.stream', sql`if(g_stream = 1, 'true', 'false')`],
      ['sightline.team', sql`team`],
      ['sightline.key_id', sql`key_id`],
      ['sightline.seq', sql`toString(intDiv(g_n, 3) + 1)`],
      ['sightline.gateway_ns', sql`toString(g_total - g_upstream)`],
      ['sightline.upstream_ns', sql`toString(g_upstream)`],
    ];
    const extra = [
      opt(sql`provider != ''`, 'server.address', host),
      opt(sql`g_kind = 0 OR g_kind IN (7, 8) AND g_stream = 1`, 'gen_ai.response.model', sql`g_response_model`),
      opt(sql`g_input > 0`, 'gen_ai.usage.input_tokens', sql`toString(g_input)`),
      opt(sql`g_input > 0`, 'gen_ai.usage.output_tokens', sql`toString(g_output)`),
      opt(sql`g_kind != 0`, 'error.type', ERROR_TYPE),
      opt(sql`g_kind = 8`, 'sightline.aborted', sql`'true'`),
      opt(sql`g_kind IN (7, 8) AND g_stream = 1`, 'sightline.usage.partial', sql`'true'`),
      opt(sql`g_retry = 1`, 'sightline.attempts', sql`'2'`),
    ];
    const failed = sql`(${STATUS} >= 500 OR g_kind = 8)`;
    rows = {
      from: sql``,
      id: sql`span_id`,
      parent: sql`''`,
      name: sql`concat('chat ', model)`,
      kind: sql`'server'`,
      isRoot: sql`toUInt8(1)`,
      start: sql`g_t0`,
      duration: sql`g_total`,
      status: sql`if(${failed}, 'ERROR', 'UNSET')`,
      message: sql`if(${failed}, ${ERROR_MESSAGE}, '')`,
      keys: sql`arrayConcat([${join(base.map(([k]) => sql`${k}`), sql`, `)}], ${join(extra.map((o) => o.key), sql`, `)})`,
      values: sql`arrayConcat([${join(base.map(([, v]) => v), sql`, `)}], ${join(extra.map((o) => o.value), sql`, `)})`,
    };
  } else if (part === 'stages') {
    // No lambda over g_p: 18.16 prunes the columns a lambda captures from subqueries.
    const list = Array.from({ length: STAGES.length }, (_, i) => sql`if(g_p[${i + 1}] = 1, [toUInt8(${i + 1})], emptyArrayUInt8())`);
    rows = {
      from: sql`ARRAY JOIN arrayConcat(${join(list, sql`, `)}) AS j`,
      id: childId(sql`j`),
      parent: sql`span_id`,
      name: sql`${[...STAGES]}[j]`,
      kind: sql`if(has(${upstreamStages}, j), 'client', 'internal')`,
      isRoot: sql`toUInt8(0)`,
      start: sql`toUInt64(g_t0 + g_off[j] - g_d[j])`,
      duration: sql`g_d[j]`,
      status: sql`if(j = g_f, 'ERROR', 'UNSET')`,
      message: sql`if(j = g_f, ${ERROR_MESSAGE}, '')`,
      keys: sql`emptyArrayString()`,
      values: sql`emptyArrayString()`,
    };
  } else {
    // j = 1: the final attempt (every request that got past routing); j = 2: the failed first one.
    const upstreamStatus = UPSTREAM_STATUS;
    const errorType = sql`if(g_kind IN (5, 6) OR g_kind = 8 AND g_stream = 0, ${ERROR_TYPE}, '')`;
    const finalFailed = sql`(${upstreamStatus} >= 500 OR ${upstreamStatus} = 0 AND g_kind != 0)`;
    const end = sql`if(g_f = 0 OR g_f >= ${streamEnd}, g_off[${streamEnd}], g_total)`;
    rows = {
      from: sql`ARRAY JOIN arrayConcat(if(g_kind IN (1, 2, 3), emptyArrayUInt8(), [toUInt8(1)]), if(g_retry = 1, [toUInt8(2)], emptyArrayUInt8())) AS j`,
      id: childId(sql`20 + j`),
      parent: sql`span_id`,
      name: sql`'upstream.attempt'`,
      kind: sql`'client'`,
      isRoot: sql`toUInt8(0)`,
      start: sql`if(j = 1, g_t0 + g_off[${retried}], toUInt64(g_t0 + g_off[${retried}] - g_d[${retried}]))`,
      duration: sql`if(j = 1, toUInt64(${end} - g_off[${retried}]), toUInt64(g_d[${retried}] * 0.7))`,
      status: sql`if(j = 2 OR ${finalFailed}, 'ERROR', 'UNSET')`,
      message: sql`multiIf(j = 2, 'provider error (503)', ${finalFailed}, ${ERROR_MESSAGE}, '')`,
      keys: sql`if(j = 2, ['sightline.attempt', 'gen_ai.provider.name', 'gen_ai.request.model', 'server.address', 'http.response.status_code', 'error.type'],
    arrayConcat(['sightline.attempt', 'gen_ai.provider.name', 'gen_ai.request.model', 'server.address'],
      if(${upstreamStatus} > 0, ['http.response.status_code'], emptyArrayString()), if(${errorType} != '', ['error.type'], emptyArrayString())))`,
      values: sql`if(j = 2, ['1', provider, model, ${host}, '503', 'upstream_error'],
    arrayConcat([if(g_retry = 1, '2', '1'), provider, model, ${host}],
      if(${upstreamStatus} > 0, [toString(${upstreamStatus})], emptyArrayString()), if(${errorType} != '', [${errorType}], emptyArrayString())))`,
    };
  }
  const columns: [string, Sql][] = [
    ['trace_id', sql`trace_id`],
    ['span_id', rows.id],
    ['parent_span_id', rows.parent],
    ['name', rows.name],
    ['kind', rows.kind],
    ['is_root', rows.isRoot],
    ['start_time', sql`toDateTime(intDiv(${rows.start}, 1000000000), 'UTC')`],
    ['start_time_unix_nano', rows.start],
    ['duration_ns', rows.duration],
    ['status_code', rows.status],
    ['status_message', rows.message],
    ['model', sql`model`],
    ['provider', sql`provider`],
    ['team', sql`team`],
    ['key_id', sql`key_id`],
    ['instance', sql`instance`],
    ['attr_keys', rows.keys],
    ['attr_values', rows.values],
  ];
  return sql`INSERT INTO ${table(database, 'spans')} (${join(columns.map(([name]) => ident(name)), sql`, `)})
SELECT ${join(columns.map(([, e]) => e), sql`,
  `)}
FROM (SELECT *, ${ROW_COLUMNS} FROM ${requestSource(cat, seed, c)})
${rows.from}`;
}
