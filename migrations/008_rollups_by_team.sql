-- Sightline schema, version 8: the rollups of migration 005 again without the key, for
-- dashboards that neither group nor filter by key (issue 10, "Fast at a real size").
--
-- A 30-day or week chart merges one t-digest state per rollup row, and the rows of
-- migration 005 are per key: at 10 million requests a day of requests_agg_1d is ~7,500 rows
-- and of stages_agg_1d ~35,000, of which the key accounts for most (docs/benchmarks.md).
-- These tables hold the same groups with the key summed out: the counts and sums added,
-- the states merged (-MergeState). POST /v1/metrics and GET /v1/usage read them whenever
-- the request neither groups nor filters by key (apps/query/src/queries/metrics.ts).
--
-- Kept by the same machinery as the per-key rollups (apps/ingester/src/rollup.ts): each
-- time a period of a per-key rollup is recomputed, the same period of its key-less twin is
-- recomputed from it in full (from the per-key table, FINAL) and inserted with a newer
-- `version`, so a recomputation replaces the previous one (ReplacingMergeTree(version),
-- read with FINAL) and redelivered batches count once. Periods from before this version
-- are filled by the ingester's reconcile at start.

-- requests_team_agg_1m: one row per minute × team × model × provider × dialect × status
-- class; requests_agg_1m with the key summed out. (requests_1m of migration 003 has the
-- same groups but no quantile states.) A long range reads only its ragged ends from the
-- minutes, but those are up to two hours of them.
CREATE TABLE IF NOT EXISTS {database}.requests_team_agg_1m
(
    minute DateTime('UTC'),
    team String,
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
ORDER BY (minute, team, model, provider, dialect, status_class);

CREATE TABLE IF NOT EXISTS {database}.requests_team_agg_1h
(
    hour DateTime('UTC'),
    team String,
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
ORDER BY (hour, team, model, provider, dialect, status_class);

CREATE TABLE IF NOT EXISTS {database}.requests_team_agg_1d
(
    day DateTime('UTC'),
    team String,
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
ORDER BY (day, team, model, provider, dialect, status_class);

-- stages_team_agg_1m: one row per minute × team × model × provider × stage;
-- stages_agg_1m with the key summed out.
CREATE TABLE IF NOT EXISTS {database}.stages_team_agg_1m
(
    minute DateTime('UTC'),
    team String,
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
ORDER BY (minute, team, model, provider, stage);

CREATE TABLE IF NOT EXISTS {database}.stages_team_agg_1h
(
    hour DateTime('UTC'),
    team String,
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
ORDER BY (hour, team, model, provider, stage);

CREATE TABLE IF NOT EXISTS {database}.stages_team_agg_1d
(
    day DateTime('UTC'),
    team String,
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
ORDER BY (day, team, model, provider, stage);
