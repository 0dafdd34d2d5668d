/**
 * `npm run start:query`: the query API alone.
 *   QUERY_PORT (default 8081, or the configuration file's query.port), QUERY_HOST (default
 *   127.0.0.1, or query.host), QUERY_MAX_EXECUTION_TIME_S / QUERY_MAX_MEMORY_BYTES /
 *   QUERY_MAX_RESULT_ROWS (limits.ts), CLICKHOUSE_URL / CLICKHOUSE_USER / CLICKHOUSE_PASSWORD /
 *   CLICKHOUSE_DATABASE.
 */
import { onShutdown } from '@sightline/core';
import { loadConfigFromEnv } from '@sightline/config';
import { storeFromEnv } from '@sightline/store';
import { startQuery } from './start.js';
import { priceLookup } from './pricing.js';

function log(msg: string): void {
  process.stderr.write(`${new Date().toISOString()} query ${msg}\n`);
}

const config = loadConfigFromEnv();
const store = await storeFromEnv();
const q = await startQuery({ store, port: config.query.port, host: config.query.host, log, priceOf: priceLookup(config.pricing) });
log(`listening on ${q.url}, reading ${store.kind} database ${store.database}`);
onShutdown(async () => {
  await q.close();
  await store.close();
});
