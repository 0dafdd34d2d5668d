/**
 * `npm run start:query`: the query API alone.
 *   QUERY_PORT (default 8081, or the configuration file's query.port), QUERY_HOST (default
 *   127.0.0.1, or query.host), QUERY_MAX_EXECUTION_TIME_S / QUERY_MAX_MEMORY_BYTES /
 *   QUERY_MAX_RESULT_ROWS, QUERY_SEARCH_MAX_BYTES (limits.ts), CLICKHOUSE_URL / CLICKHOUSE_USER / CLICKHOUSE_PASSWORD /
 *   CLICKHOUSE_DATABASE.
 */
import { join } from 'node:path';
import { dataDir, onShutdown } from '@sightline/core';
import { authFromEnv } from '@sightline/directory';
import { NatsGovernor } from '@sightline/controls';
import { natsReplicasFromEnv } from '@sightline/bus';
import { loadConfigFromEnv, priceLookup } from '@sightline/config';
import { storeFromEnv } from '@sightline/store';
import { startQuery } from './start.js';

function log(msg: string): void {
  process.stderr.write(`${new Date().toISOString()} query ${msg}\n`);
}

const config = loadConfigFromEnv();
const natsUrl = process.env.NATS_URL;
if ((process.env.SIGHTLINE_ADMIN_TOKEN ?? '') !== '' && (natsUrl === undefined || natsUrl === '')) {
  throw new Error('NATS_URL is required with SIGHTLINE_ADMIN_TOKEN: keys are shared with the gateways through NATS');
}
const auth = authFromEnv({ natsUrl, snapshotFile: join(dataDir(), 'directory', `query-port-${config.query.port}.json`), log });
await auth?.directory.ready;
if (auth === null) log('WARNING: authentication is off (SIGHTLINE_ADMIN_TOKEN is not set): every caller reads every team\'s data');
const store = await storeFromEnv();
// What keys and teams have left of their limits and budgets (GET /v1/budget), from the same bucket the gateways use.
const governor = auth === null ? null : new NatsGovernor({ url: natsUrl!, replicas: natsReplicasFromEnv(), log });
await governor?.ready;
const q = await startQuery({ store, port: config.query.port, host: config.query.host, log, priceOf: priceLookup(config.pricing, { shipped: config.pricingDefaults }), auth, governor });
log(`listening on ${q.url}, reading ${store.kind} database ${store.database}; authentication ${auth === null ? 'off' : 'on'}`);
onShutdown(async () => {
  await q.close();
  await store.close();
  await auth?.directory.close();
  await governor?.close();
});
