-- Sightline schema, version 6: prompts and completions (issue 11).
--
-- requests: attribution the caller names — the end user (OpenAI `user` / `safety_identifier`,
-- Anthropic `metadata.user_id`), the session (`x-sightline-session-id`) and tags
-- (`x-sightline-tag-<name>: <value>`, names lower-case, tag_keys[i] ↔ tag_values[i]).
-- '' and [] for requests without them and for every row written before this version.
-- (18.16 has no ADD COLUMN IF NOT EXISTS; the runner counts an existing column as done.)

ALTER TABLE {database}.requests ADD COLUMN end_user String DEFAULT '';

ALTER TABLE {database}.requests ADD COLUMN session_id String DEFAULT '';

ALTER TABLE {database}.requests ADD COLUMN tag_keys Array(String);

ALTER TABLE {database}.requests ADD COLUMN tag_values Array(String);

-- content: one row per request whose team captures content (policy `full` or `redacted`),
-- in a table of its own so that latency and cost queries never read prompts.
--
-- ORDER BY (team, start_time, trace_id, span_id):
-- - a team's phrase search and "largest prompts today" read only that team's range of the
--   day partitions in the time range, not every team's prompts (with trace_id first, every
--   granule holds every team's rows and a team-scoped scan reads all of them);
-- - one request's content is an exact key lookup once its team and start_time are known,
--   and they are, from its `requests` row (ORDER BY trace_id there): see docs/schema.md;
-- - the key is the request's identity plus columns that are functions of it, so a batch
--   written twice (redelivery) collapses to one row like `requests` (read with FINAL).
-- index_granularity 1024 (default 8192): rows are wide (up to 2 × 256 KiB), so a point
-- lookup decompresses 8 times less. Compression is ClickHouse's default (LZ4); 18.16 has
-- no per-column CODEC and no TTL (retention drops day partitions, docs/schema.md).

CREATE TABLE IF NOT EXISTS {database}.content
(
    trace_id String,
    span_id String,
    team String,
    key_id String,
    start_time DateTime('UTC'),
    start_time_unix_nano UInt64,
    model String,
    route String,
    dialect String,
    stream UInt8,
    policy String,
    request String,
    response String,
    request_bytes UInt64,
    response_bytes UInt64,
    request_truncated UInt8,
    response_truncated UInt8,
    response_partial UInt8,
    redaction_keys Array(String),
    redaction_counts Array(UInt32)
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(start_time)
ORDER BY (team, start_time, trace_id, span_id)
SETTINGS index_granularity = 1024;
