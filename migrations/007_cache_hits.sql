-- Sightline schema, version 7: requests answered from the exact cache (issue 12).
--
-- `cache_hit` is 1 when the gateway answered from its cache: nothing went upstream and the
-- request's tokens are 0 (a hit costs nothing against budgets). Routes without a cache, and
-- rows written before this version, have 0. The root span carries `sightline.cache`
-- (`hit` or `miss`) when the route caches.
-- (18.16 has no ADD COLUMN IF NOT EXISTS; the runner counts an existing column as done.)

ALTER TABLE {database}.requests ADD COLUMN cache_hit UInt8 DEFAULT 0;
