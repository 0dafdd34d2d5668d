-- Sightline schema, version 2: capture health.
--
-- requests.usage_partial: the stream was cut short (client left, provider failed), so
-- the token counts are what had been seen by then (docs/schema.md).
--
-- ingest_batches: a ledger with one row per write of a capture batch: when the gateway
-- published it and when the ingester wrote it (ingest lag). A batch redelivered after a
-- crash is written again and gets a second row, on purpose: the ledger shows
-- redeliveries; readers take the first write per (instance, batch) — the moment the
-- batch became visible — as the query API does.

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
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(written_at)
ORDER BY (instance, batch, written_at_unix_nano);
