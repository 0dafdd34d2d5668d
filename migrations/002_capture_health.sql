-- Sightline schema, version 2: capture health.
--
-- requests.usage_partial: the stream was cut short (client left, provider failed), so
-- the token counts are what had been seen by then (docs/schema.md).
--
-- ingest_batches: one row per capture batch written, with when the gateway published it
-- and when the ingester wrote it: ingest lag, and per-instance batch accounting.
-- ReplacingMergeTree on (instance, batch): a redelivered batch writes the same key again
-- and is counted once.

ALTER TABLE {database}.requests ADD COLUMN usage_partial UInt8;

CREATE TABLE IF NOT EXISTS {database}.ingest_batches
(
    instance String,
    batch UInt64,
    ingester String,
    published_at_unix_nano UInt64,
    written_at_unix_nano UInt64,
    written_at DateTime('UTC'),
    requests UInt32,
    spans UInt32
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(written_at)
ORDER BY (instance, batch);
