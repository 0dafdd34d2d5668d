-- Sightline schema, version 1: one row per span and one row per request.
-- `{database}` is replaced by the migration runner with the configured database name.
-- Works on ClickHouse 18.16 (Debian) and 26.x (chdb): no TTL, DateTime64, Map or
-- LowCardinality; 64-bit nanosecond values are UInt64.
--
-- ReplacingMergeTree keyed by the span (or request) identity: a batch redelivered by
-- JetStream after a crash writes identical rows again, which merges collapse; queries
-- that must be exact before a merge read with FINAL (docs/schema.md).

CREATE TABLE IF NOT EXISTS {database}.spans
(
    trace_id String,
    span_id String,
    parent_span_id String,
    name String,
    kind String,
    is_root UInt8,
    start_time DateTime('UTC'),
    start_time_unix_nano UInt64,
    duration_ns UInt64,
    status_code String,
    status_message String,
    model String,
    provider String,
    team String,
    instance String,
    attr_keys Array(String),
    attr_values Array(String)
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(start_time)
ORDER BY (trace_id, span_id);

CREATE TABLE IF NOT EXISTS {database}.requests
(
    trace_id String,
    span_id String,
    instance String,
    seq UInt64,
    start_time DateTime('UTC'),
    start_time_unix_nano UInt64,
    method String,
    route String,
    dialect String,
    model String,
    response_model String,
    provider String,
    upstream_model String,
    team String,
    stream UInt8,
    http_status UInt16,
    upstream_status UInt16,
    error_type String,
    aborted UInt8,
    total_ns UInt64,
    gateway_ns UInt64,
    upstream_ns UInt64,
    ttfb_ns UInt64,
    ttft_ns UInt64,
    input_tokens UInt64,
    output_tokens UInt64,
    cache_read_tokens UInt64,
    cache_write_tokens UInt64,
    request_bytes UInt64,
    response_bytes UInt64
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(start_time)
ORDER BY (trace_id, span_id);
