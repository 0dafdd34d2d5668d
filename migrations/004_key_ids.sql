-- Sightline schema, version 4: the caller's key id on every request and span (issue 10).
--
-- `key_id` is the Sightline key (`key_…`) the request was authenticated with; '' for
-- requests served with authentication off, and for every row written before this version.
-- (18.16 has no ADD COLUMN IF NOT EXISTS; the runner counts an existing column as done.)

ALTER TABLE {database}.requests ADD COLUMN key_id String DEFAULT '' AFTER team;

ALTER TABLE {database}.spans ADD COLUMN key_id String DEFAULT '' AFTER team;
