-- Sightline schema, version 3: a per-minute rollup of requests for dashboards.
--
-- Exact under redelivery by design: rows are not added up as batches arrive (a
-- SummingMergeTree or a materialized view would count a redelivered batch twice).
-- Instead the ingester, after each write, recomputes the minutes it touched from
-- `requests FINAL` and inserts the whole minute again with a newer `version`;
-- ReplacingMergeTree(version) keeps the newest computation of each group. Read with FINAL.

CREATE TABLE IF NOT EXISTS {database}.requests_1m
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
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(minute)
ORDER BY (minute, team, model, provider, dialect, status_class);
