/**
 * The store the apps use, from the environment:
 *   CLICKHOUSE_URL (e.g. http://127.0.0.1:8123) with CLICKHOUSE_USER, CLICKHOUSE_PASSWORD,
 *   CLICKHOUSE_DATABASE (default sightline), CLICKHOUSE_CLUSTER (a cluster of remote_servers:
 *   replicated and Distributed tables, cluster.ts; CLICKHOUSE_URL may then list replicas,
 *   comma-separated); without CLICKHOUSE_URL, the in-process
 *   engine (chdb) with data under SIGHTLINE_DATA_DIR (default ./data)/clickhouse.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { dataDir } from '@sightline/core';
import { ChdbStore, ClickHouseServerStore, type Store } from './store.js';

export async function storeFromEnv(): Promise<Store> {
  const url = process.env.CLICKHOUSE_URL;
  const database = process.env.CLICKHOUSE_DATABASE || 'sightline';
  if (url !== undefined && url !== '') {
    return new ClickHouseServerStore({
      url,
      username: process.env.CLICKHOUSE_USER || undefined,
      password: process.env.CLICKHOUSE_PASSWORD,
      database,
      cluster: process.env.CLICKHOUSE_CLUSTER || null,
    });
  }
  if ((process.env.CLICKHOUSE_CLUSTER ?? '') !== '') throw new Error('CLICKHOUSE_CLUSTER needs CLICKHOUSE_URL (the in-process engine is one server)');
  const path = join(dataDir(), 'clickhouse');
  mkdirSync(path, { recursive: true });
  return ChdbStore.open({ path, database });
}
