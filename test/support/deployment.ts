/**
 * Sightline's apps as separate processes over given NATS and ClickHouse URLs (a cluster's
 * lists, or single servers), for the fault tests: gateways, ingesters and the query API,
 * each stopped by its process id; and the exact-count check those tests end with.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql, table, type Store } from '@sightline/store';
import { freePort, waitFor } from './servers.js';
import { startApp, waitHealthy, type AppProcess } from './apps.js';
import type { LoadResult } from './load.js';

export interface RunningApp {
  app: AppProcess;
  url: string;
}

export class Deployment {
  readonly running: AppProcess[] = [];
  readonly spoolRoot = mkdtempSync(join(tmpdir(), 'sightline-deploy-'));

  /**
   * `env`: what every app gets (NATS_URL, CLICKHOUSE_URL, …), read when each app starts;
   * `healthTimeoutMs`: how long an app may take to report healthy (an ingester applies the
   * migrations first).
   */
  constructor(
    readonly env: () => Record<string, string>,
    readonly healthTimeoutMs = 60_000,
  ) {}

  async #start(name: string, entry: string, portVar: string, extra: Record<string, string>): Promise<RunningApp> {
    const port = await freePort();
    const app = startApp(name, entry, { ...this.env(), [portVar]: String(port), ...extra });
    this.running.push(app);
    const url = `http://127.0.0.1:${port}`;
    await waitHealthy(app, `${url}/healthz`, this.healthTimeoutMs);
    return { app, url };
  }

  /** A gateway whose requests carry `instance` (rows: `instance LIKE '<instance>-%'`). */
  gateway(instance: string): Promise<RunningApp> {
    return this.#start(`gateway ${instance}`, 'apps/gateway/src/main.ts', 'GATEWAY_PORT', { SIGHTLINE_INSTANCE: instance, SIGHTLINE_SPOOL_DIR: join(this.spoolRoot, instance) });
  }

  ingester(): Promise<RunningApp> {
    return this.#start('ingester', 'apps/ingester/src/main.ts', 'INGESTER_PORT', {});
  }

  query(): Promise<RunningApp> {
    return this.#start('query', 'apps/query/src/main.ts', 'QUERY_PORT', {});
  }

  async stop(): Promise<void> {
    for (const a of this.running) await a.stop();
    rmSync(this.spoolRoot, { recursive: true, force: true });
  }
}

/** Rows of `requests` of a gateway instance: visible with FINAL, and distinct trace ids. */
export async function counts(store: Store, instance: string): Promise<{ final: number; distinct: number }> {
  const pattern = `${instance}-%`;
  const rows = await store.query<{ final: string | number }>(sql`SELECT count() AS final FROM ${table(store.database, 'requests')} FINAL WHERE instance LIKE ${pattern}`);
  const d = await store.query<{ distinct: string | number }>(sql`SELECT uniqExact(trace_id) AS distinct FROM ${table(store.database, 'requests')} WHERE instance LIKE ${pattern}`);
  return { final: Number(rows[0]?.final ?? 0), distinct: Number(d[0]?.distinct ?? 0) };
}

/** Every answered request of `instance` is in ClickHouse, once; and nothing else is. */
export async function assertExactlyOnce(store: Store, instance: string, answered: LoadResult[], timeoutMs = 90_000): Promise<void> {
  const n = answered.length;
  await waitFor(`${n} requests of ${instance} in ClickHouse`, async () => (await counts(store, instance)).final >= n, timeoutMs, 250);
  const c = await counts(store, instance);
  assert.equal(c.final, n, `${instance}: requests visible (FINAL)`);
  assert.equal(c.distinct, n, `${instance}: distinct trace ids`);
  const ids = answered.map((r) => r.traceId);
  const found = await store.query<{ trace_id: string }>(sql`SELECT DISTINCT trace_id FROM ${table(store.database, 'requests')} WHERE has(${ids}, trace_id)`);
  assert.equal(found.length, n, `${instance}: the answered requests themselves are the ones stored`);
}
