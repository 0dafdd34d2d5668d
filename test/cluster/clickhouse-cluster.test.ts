/**
 * A ClickHouse cluster under load (issue 14): a ZooKeeper and two clickhouse-server
 * processes as the two replicas of one shard (CLICKHOUSE_CLUSTER=sightline). The migrations
 * are applied on the cluster; a gateway and two ingesters (given both replicas in
 * CLICKHOUSE_URL) run under load while the replica every app uses first is stopped for 10 s
 * and restarted: every request is in ClickHouse exactly once, read through the Distributed
 * tables, the rollups count each once, and the two replicas agree afterwards.
 *
 * Run by `npm run test:cluster` (.ci/run), not by `npm test`.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { ClickHouseServerStore, migrate, readMigrations, sql, table, type Store } from '@sightline/store';
import { ClickHouseCluster, NatsServer, ZooKeeperServer, waitFor } from '../support/servers.js';
import { Deployment, assertExactlyOnce } from '../support/deployment.js';
import { runLoad } from '../support/load.js';
import { startMock, type MockServer } from '../../bench/mock/server.js';

const DB = 'sightline';
let zk: ZooKeeperServer;
let chc: ClickHouseCluster;
let nats: NatsServer;
let mock: MockServer;
/** The apps' view: both replicas, the cluster's Distributed tables. */
let store: ClickHouseServerStore;
/** Each replica alone, for its local tables. */
let replicas: ClickHouseServerStore[];
let deploy: Deployment;

before(async () => {
  zk = await ZooKeeperServer.start();
  [chc, nats, mock] = await Promise.all([ClickHouseCluster.start(zk, 'sightline', 2), NatsServer.start(), startMock()]);
  store = new ClickHouseServerStore({ url: chc.url, database: DB, cluster: 'sightline' });
  replicas = chc.replicas.map((r) => new ClickHouseServerStore({ url: r.url, database: DB }));
  deploy = new Deployment(() => ({
    NATS_URL: nats.url,
    CLICKHOUSE_URL: chc.url,
    CLICKHOUSE_CLUSTER: 'sightline',
    CLICKHOUSE_DATABASE: DB,
    OPENAI_BASE_URL: `${mock.url}/v1`,
    INGESTER_ACK_WAIT_MS: '3000',
  }), 180_000);
});

after(async () => {
  await deploy.stop();
  await Promise.all([store.close(), ...replicas.map((r) => r.close())]);
  await Promise.all([chc.dispose(), nats.dispose(), mock.close()]);
  await zk.dispose();
});

async function one<T>(s: Store, q: ReturnType<typeof sql>): Promise<T> {
  const rows = await s.query<T>(q);
  assert.equal(rows.length, 1);
  return rows[0]!;
}

test('migrations on the cluster: replicated local tables and Distributed tables on both replicas, recorded once for the cluster', async () => {
  const r = await migrate(store);
  const files = readMigrations().length;
  assert.equal(r.applied.length, files, r.applied.join(', '));
  for (const [i, rep] of replicas.entries()) {
    const tables = await rep.query<{ name: string; engine: string }>(sql`SELECT name, engine FROM system.tables WHERE database = ${DB}`);
    const engine = new Map(tables.map((t) => [t.name, t.engine]));
    for (const t of ['requests', 'spans', 'stage_spans', 'content', 'ingest_batches', 'requests_1m', 'requests_agg_1m', 'requests_agg_1h', 'requests_agg_1d', 'stages_agg_1m', 'stages_agg_1h', 'stages_agg_1d',
      'requests_team_agg_1m', 'requests_team_agg_1h', 'requests_team_agg_1d', 'stages_team_agg_1m', 'stages_team_agg_1h', 'stages_team_agg_1d', 'rollup_state']) {
      assert.equal(engine.get(t), 'Distributed', `replica ${i + 1}: ${t}`);
      assert.match(engine.get(`${t}_local`) ?? '', /^Replicated/, `replica ${i + 1}: ${t}_local`);
    }
    assert.equal(engine.get('stage_spans_mv'), 'MaterializedView');
    assert.equal(engine.get('schema_migrations'), 'ReplicatedMergeTree');
    // The columns later migrations added reached the local tables and the Distributed ones.
    const cols = await rep.query<{ table: string }>(sql`SELECT table FROM system.columns WHERE database = ${DB} AND name = 'cache_hit'`);
    assert.deepEqual(cols.map((c) => c.table).sort(), ['requests', 'requests_local']);
  }
  // Recorded once, seen from the other replica: a runner there applies nothing.
  await waitFor('the record replicated', async () => Number((await one<{ n: string }>(replicas[1]!, sql`SELECT count() AS n FROM ${table(DB, 'schema_migrations')}`)).n) === files, 30_000, 200);
  const again = await migrate(new ClickHouseServerStore({ url: chc.replicas[1]!.url, database: DB, cluster: 'sightline' }));
  assert.deepEqual(again.applied, []);
  assert.equal(again.skipped.length, files);
  // A block sent again (a retried insert) is dropped by the replicated table behind the
  // Distributed one: block deduplication, since 18.16 has no insert_deduplication_token.
  const ledger = [1, 2, 3].map((batch) => ({ instance: 'dedup', batch, ingester: 'i', published_at_unix_nano: '1', written_at_unix_nano: '2', written_at: 1_764_547_200, requests: 1, spans: 1 }));
  await store.insert('ingest_batches', ledger);
  await store.insert('ingest_batches', ledger);
  assert.equal(Number((await one<{ n: string }>(store, sql`SELECT count() AS n FROM ${table(DB, 'ingest_batches')} WHERE instance = 'dedup'`)).n), 3, 'the second, identical block was dropped');
  // A database made for one server is refused, not taken for a cluster's.
  const solo = new ClickHouseServerStore({ url: chc.replicas[0]!.url, database: 'solo' });
  await migrate(solo);
  await assert.rejects(migrate(new ClickHouseServerStore({ url: chc.url, database: 'solo', cluster: 'sightline' })), /created for a single server/);
  await solo.close();
  // One row of rollup_state for the cluster, not one per node.
  assert.equal(Number((await one<{ n: string }>(store, sql`SELECT count() AS n FROM ${table(DB, 'rollup_state')} WHERE name = 'stage_spans_since'`)).n), 1);
});

/** Rows and a checksum of a local table on one replica. */
async function local(rep: Store, name: string): Promise<string> {
  const r = await one<{ n: string; h: string }>(rep, sql`SELECT count() AS n, sum(cityHash64(*)) AS h FROM ${table(DB, `${name}_local`)}`);
  return `${r.n}/${r.h}`;
}

test('the first replica stopped for 10 s under load, then restarted: every request once through the Distributed tables, rollups exact, the replicas agree', async () => {
  const [, , gw] = await Promise.all([deploy.ingester(), deploy.ingester(), deploy.gateway('chc-g1')]);
  const q = await deploy.query();
  const load = runLoad({ url: `${gw.url}/v1/chat/completions`, rps: 30, durationMs: 20_000 });
  await delay(4000);
  await chc.replicas[0]!.stop(); // the replica every app uses first
  const down = BigInt(Date.now()) * 1_000_000n;
  await delay(10_000);
  const up = BigInt(Date.now()) * 1_000_000n;
  await chc.replicas[0]!.start();
  const results = await load;
  assert.equal(results.filter((r) => r.status === 200).length, results.length, `non-200: ${JSON.stringify(results.find((r) => r.status !== 200))}`);
  assert.ok(results.length >= 590, `load sent ${results.length}`);
  await assertExactlyOnce(store, 'chc-g1', results, 120_000);
  // Capture went on through the other replica while the first was down (it did not wait for it).
  const during = await one<{ n: string }>(store, sql`SELECT count() AS n FROM ${table(DB, 'ingest_batches')} WHERE written_at_unix_nano > ${down + 1_000_000_000n} AND written_at_unix_nano < ${up}`);
  assert.ok(Number(during.n) > 0, 'batches written while the first replica was down');

  // The replicas agree, table by table (replication is asynchronous: wait for it).
  for (const t of ['requests', 'spans', 'stage_spans', 'ingest_batches']) {
    await waitFor(`${t}_local equal on both replicas`, async () => (await local(replicas[0]!, t)) === (await local(replicas[1]!, t)), 60_000, 250);
  }
  for (const rep of replicas) {
    const n = Number((await one<{ n: string }>(rep, sql`SELECT count() AS n FROM ${table(DB, 'requests_local')} FINAL WHERE instance LIKE ${'chc-g1-%'}`)).n);
    assert.equal(n, results.length, 'each replica holds every request');
  }

  // The rollups count each request once (ReplacingMergeTree(version), read with FINAL, on
  // the shard the rows hash to), once recomputed after the replicas caught up.
  const total = async () => Number((await one<{ n: string }>(store, sql`SELECT count() AS n FROM ${table(DB, 'requests')} FINAL`)).n);
  const rolled = async () => Number((await one<{ n: string }>(store, sql`SELECT sum(requests) AS n FROM ${table(DB, 'requests_agg_1m')} FINAL`)).n);
  assert.equal(await total(), results.length);
  await waitFor('requests_agg_1m to count every request once', async () => (await rolled()) === results.length, 90_000, 500);
  const stages = async () => Number((await one<{ n: string }>(store, sql`SELECT sum(spans) AS n FROM ${table(DB, 'stages_agg_1m')} FINAL WHERE stage = 'upstream.wait'`)).n);
  await waitFor('stages_agg_1m to count every request\'s upstream.wait once', async () => (await stages()) === results.length, 90_000, 500);

  // The query API reads the Distributed tables: a request from the outage is found, once.
  for (const r of [results[0]!, results[Math.floor(results.length / 2)]!, results.at(-1)!]) {
    const res = await fetch(`${q.url}/v1/requests/${r.traceId}`);
    assert.equal(res.status, 200);
    const body = (await res.json()) as { requests: unknown[] };
    assert.equal(body.requests.length, 1);
  }
});
