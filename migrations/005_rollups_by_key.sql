-- Sightline schema, version 5: per-minute rollups by key, with quantile states, for the
-- dashboard API (issue 10: POST /v1/metrics, GET /v1/usage).
--
-- Exact under redelivery the way requests_1m is (migration 003): nothing is added up as
-- batches arrive. The ingester recomputes each minute it wrote to in full, from tables
-- that collapse a redelivered batch (read with FINAL), and inserts the minute again with
-- a newer `version`; ReplacingMergeTree(version) keeps the newest computation of each
-- group. Read the rollups with FINAL.
--
-- Percentiles are t-digest states (AggregateFunction(quantilesTDigest(0.5, 0.95, 0.99),
-- UInt64)), merged at query time across minutes and groups with quantilesTDigestMerge:
-- estimates, where counts, sums and tokens are exact. Checked on ClickHouse 18.16 and
-- chdb 26.x, including the -If variant used for time to first token.

-- requests_agg_1m: one row per minute × team × key × model × provider × dialect × status
-- class. Supersedes requests_1m (which the ingester still keeps, for existing SQL).
CREATE TABLE IF NOT EXISTS {database}.requests_agg_1m
(
    minute DateTime('UTC'),
    team String,
    key_id String,
    model String,
    provider String,
    dialect String,
    status_class UInt16,
    requests UInt64,
    errors UInt64,
    aborted UInt64,
    streams UInt64,
    input_tokens UInt64,
    output_tokens UInt64,
    cache_read_tokens UInt64,
    cache_write_tokens UInt64,
    total_ns_sum UInt64,
    gateway_ns_sum UInt64,
    upstream_ns_sum UInt64,
    gateway_ns_max UInt64,
    ttft_ns_sum UInt64,
    ttft_count UInt64,
    total_ns_q AggregateFunction(quantilesTDigest(0.5, 0.95, 0.99), UInt64),
    gateway_ns_q AggregateFunction(quantilesTDigest(0.5, 0.95, 0.99), UInt64),
    ttft_ns_q AggregateFunction(quantilesTDigestIf(0.5, 0.95, 0.99), UInt64, UInt8),
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(minute)
ORDER BY (minute, team, key_id, model, provider, dialect, status_class);

-- stage_spans: the stage spans again, ordered by minute instead of by trace, so that one
-- minute of them is read through the primary key (in `spans`, ordered by trace id, a
-- minute's rows are spread over its whole day). Filled by the materialized view below on
-- every insert into `spans`; older spans are copied by the ingester (reconcile in
-- apps/ingester/src/rollup.ts), a day at a time.
--
-- Keyed by the request (trace id and the root's span id, `parent_span_id`) and the stage
-- name, not by the stage's own span id: a request has one span per stage, and a batch
-- redelivered after a crash is rebuilt with the same root span id but new ids for its
-- stage spans, which this key collapses (read with FINAL).
CREATE TABLE IF NOT EXISTS {database}.stage_spans
(
    minute DateTime('UTC'),
    trace_id String,
    parent_span_id String,
    stage String,
    span_id String,
    team String,
    key_id String,
    model String,
    provider String,
    duration_ns UInt64,
    failed UInt8
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(minute)
ORDER BY (minute, trace_id, parent_span_id, stage);

-- Every child span but upstream attempts is a stage span, so stages added later (limits,
-- budget, cache) arrive without a new migration.
CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.stage_spans_mv TO {database}.stage_spans AS
SELECT toStartOfMinute(start_time) AS minute, trace_id, parent_span_id, name AS stage, span_id, team, key_id, model, provider, duration_ns, toUInt8(status_code = 'ERROR') AS failed
FROM {database}.spans
WHERE is_root = 0 AND name != 'upstream.attempt';

-- stages_agg_1m: one row per minute × team × key × model × provider × stage, the minute
-- being the stage span's own start.
CREATE TABLE IF NOT EXISTS {database}.stages_agg_1m
(
    minute DateTime('UTC'),
    team String,
    key_id String,
    model String,
    provider String,
    stage String,
    spans UInt64,
    errors UInt64,
    duration_ns_sum UInt64,
    duration_ns_q AggregateFunction(quantilesTDigest(0.5, 0.95, 0.99), UInt64),
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(minute)
ORDER BY (minute, team, key_id, model, provider, stage);

-- The same rollups per hour and per day, computed from the minutes (their states merged
-- with -MergeState) once an hour or a day has ended, and again when a late minute of it
-- changes. Long ranges read whole days and hours from these, and only their ragged ends
-- from the minutes (apps/query/src/queries/metrics.ts).

CREATE TABLE IF NOT EXISTS {database}.requests_agg_1h
(
    hour DateTime('UTC'),
    team String,
    key_id String,
    model String,
    provider String,
    dialect String,
    status_class UInt16,
    requests UInt64,
    errors UInt64,
    aborted UInt64,
    streams UInt64,
    input_tokens UInt64,
    output_tokens UInt64,
    cache_read_tokens UInt64,
    cache_write_tokens UInt64,
    total_ns_sum UInt64,
    gateway_ns_sum UInt64,
    upstream_ns_sum UInt64,
    gateway_ns_max UInt64,
    ttft_ns_sum UInt64,
    ttft_count UInt64,
    total_ns_q AggregateFunction(quantilesTDigest(0.5, 0.95, 0.99), UInt64),
    gateway_ns_q AggregateFunction(quantilesTDigest(0.5, 0.95, 0.99), UInt64),
    ttft_ns_q AggregateFunction(quantilesTDigestIf(0.5, 0.95, 0.99), UInt64, UInt8),
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, team, key_id, model, provider, dialect, status_class);

CREATE TABLE IF NOT EXISTS {database}.requests_agg_1d
(
    day DateTime('UTC'),
    team String,
    key_id String,
    model String,
    provider String,
    dialect String,
    status_class UInt16,
    requests UInt64,
    errors UInt64,
    aborted UInt64,
    streams UInt64,
    input_tokens UInt64,
    output_tokens UInt64,
    cache_read_tokens UInt64,
    cache_write_tokens UInt64,
    total_ns_sum UInt64,
    gateway_ns_sum UInt64,
    upstream_ns_sum UInt64,
    gateway_ns_max UInt64,
    ttft_ns_sum UInt64,
    ttft_count UInt64,
    total_ns_q AggregateFunction(quantilesTDigest(0.5, 0.95, 0.99), UInt64),
    gateway_ns_q AggregateFunction(quantilesTDigest(0.5, 0.95, 0.99), UInt64),
    ttft_ns_q AggregateFunction(quantilesTDigestIf(0.5, 0.95, 0.99), UInt64, UInt8),
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(day)
ORDER BY (day, team, key_id, model, provider, dialect, status_class);

CREATE TABLE IF NOT EXISTS {database}.stages_agg_1h
(
    hour DateTime('UTC'),
    team String,
    key_id String,
    model String,
    provider String,
    stage String,
    spans UInt64,
    errors UInt64,
    duration_ns_sum UInt64,
    duration_ns_q AggregateFunction(quantilesTDigest(0.5, 0.95, 0.99), UInt64),
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, team, key_id, model, provider, stage);

CREATE TABLE IF NOT EXISTS {database}.stages_agg_1d
(
    day DateTime('UTC'),
    team String,
    key_id String,
    model String,
    provider String,
    stage String,
    spans UInt64,
    errors UInt64,
    duration_ns_sum UInt64,
    duration_ns_q AggregateFunction(quantilesTDigest(0.5, 0.95, 0.99), UInt64),
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(day)
ORDER BY (day, team, key_id, model, provider, stage);

-- rollup_state: what the ingester's reconciliation has done, as (name, value) rows read
-- with min/max. `stage_spans_since`: the UTC day (20251201) stage_spans_mv began, so the
-- stage spans of that day and before are copied once; `stage_spans_copied_through`: the
-- last day copied.
CREATE TABLE IF NOT EXISTS {database}.rollup_state
(
    name String,
    value UInt64,
    updated_at DateTime('UTC')
)
ENGINE = MergeTree
ORDER BY name;

INSERT INTO {database}.rollup_state (name, value, updated_at)
SELECT 'stage_spans_since', toYYYYMMDD(toDateTime(toUInt32(now()), 'UTC')), now();
