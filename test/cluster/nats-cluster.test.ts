/**
 * A NATS cluster under load (issue 14): three nats-server processes clustered over routes on
 * loopback, each with its own JetStream store; the capture stream and the buckets at R3
 * (SIGHTLINE_NATS_REPLICAS=3); two gateways and an ingester given all three servers in
 * NATS_URL. The server leading the capture stream is killed with SIGKILL under load and
 * restarted later: every answered request is in ClickHouse exactly once.
 *
 * Run by `npm run test:cluster` (.ci/run), not by `npm test`.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import type { NatsConnection } from 'nats';
import { ClickHouseServerStore } from '@sightline/store';
import { connectNats, ensureReplicas, ensureStream, STREAM_NAME, DEADLETTER_STREAM, DURABLE_NAME } from '@sightline/bus';
import { ClickHouseServer, NatsCluster, waitFor } from '../support/servers.js';
import { Deployment, assertExactlyOnce } from '../support/deployment.js';
import { runLoad } from '../support/load.js';
import { startMock, type MockServer } from '../../bench/mock/server.js';

let nats: NatsCluster;
let ch: ClickHouseServer;
let mock: MockServer;
let store: ClickHouseServerStore;
let deploy: Deployment;
let nc: NatsConnection;

before(async () => {
  [nats, ch, mock] = await Promise.all([NatsCluster.start(3), ClickHouseServer.start(), startMock()]);
  store = new ClickHouseServerStore({ url: ch.url, database: 'sightline' });
  deploy = new Deployment(() => ({
    NATS_URL: nats.url,
    SIGHTLINE_NATS_REPLICAS: '3',
    CLICKHOUSE_URL: ch.url,
    CLICKHOUSE_DATABASE: 'sightline',
    OPENAI_BASE_URL: `${mock.url}/v1`,
    INGESTER_ACK_WAIT_MS: '3000',
  }), 180_000); // apps compile through tsx at start: slow when the machine is busy
  // The observer: any live server of the list.
  nc = await connectNats(nats.url, 'cluster-observer');
  // JetStream in a cluster answers once its meta group has elected a leader.
  await waitFor('the JetStream meta leader', async () => {
    await (await nc.jetstreamManager()).getAccountInfo();
    return true;
  }, 30_000, 200);
});

after(async () => {
  await deploy.stop();
  await nc.close();
  await store.close();
  await Promise.all([nats.dispose(), ch.dispose(), mock.close()]);
});

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? Number.NaN : Number(line.slice(name.length + 1));
}

/** The stream's info as the cluster reports it: its leader and how its replicas stand. */
async function streamInfo(name: string) {
  return (await nc.jetstreamManager({ timeout: 10_000 })).streams.info(name);
}

test('SIGHTLINE_NATS_REPLICAS: a stream and a bucket created at R1 are raised to R3 in place, their messages kept', async () => {
  // Raising the replica count forms a new raft group: longer than the client's 5 s default on a busy machine.
  const jsm = await nc.jetstreamManager({ timeout: 30_000 });
  const js = nc.jetstream();
  const kv = await js.views.kv('sightline-test-bucket', { history: 1, replicas: 1 });
  await kv.put('k', new TextEncoder().encode('v'));
  assert.equal(await ensureReplicas(jsm, 'KV_sightline-test-bucket', 3), true);
  // The stream answers again once its new raft group has a leader and two current followers.
  await waitFor('the bucket at R3 with a leader and two current followers', async () => {
    const c = (await streamInfo('KV_sightline-test-bucket')).cluster;
    return c?.leader !== undefined && c.replicas?.length === 2 && c.replicas.every((x) => x.current);
  }, 30_000, 200);
  assert.equal(await ensureReplicas(jsm, 'KV_sightline-test-bucket', 3), false, 'a second call changes nothing');
  const b = await streamInfo('KV_sightline-test-bucket');
  assert.equal(b.config.num_replicas, 3);
  assert.equal(b.state.messages, 1);
  await jsm.streams.delete('KV_sightline-test-bucket');
  await ensureStream(jsm, { replicas: 1 });
  // Not capture batches: the stream is deleted again before any ingester reads it.
  for (let i = 0; i < 5; i++) await js.publish('sightline.spans.v1', new TextEncoder().encode(`m${i}`), { msgID: `r1-${i}` });
  assert.equal((await streamInfo(STREAM_NAME)).config.num_replicas, 1);
  await ensureStream(jsm, { replicas: 3 });
  await waitFor('the stream at R3 with a leader and two current followers', async () => {
    const c = (await streamInfo(STREAM_NAME)).cluster;
    return c?.leader !== undefined && c.replicas?.length === 2 && c.replicas.every((x) => x.current);
  }, 30_000, 200);
  const info = await streamInfo(STREAM_NAME);
  assert.equal(info.config.num_replicas, 3);
  assert.equal(info.state.messages, 5, 'the update kept the messages');
  await jsm.streams.delete(STREAM_NAME);
});

test('the capture stream leader SIGKILLed under load through two gateways, restarted later: every answered request in ClickHouse exactly once', async () => {
  const ing = await deploy.ingester();
  const [g1, g2] = await Promise.all([deploy.gateway('nc-g1'), deploy.gateway('nc-g2')]);
  const created = await streamInfo(STREAM_NAME);
  assert.equal(created.config.num_replicas, 3, 'the gateway created the stream at SIGHTLINE_NATS_REPLICAS');
  assert.equal((await streamInfo(DEADLETTER_STREAM)).config.num_replicas, 3, 'and the ingester the dead-letter stream');
  assert.equal((await (await nc.jetstreamManager()).consumers.info(STREAM_NAME, DURABLE_NAME)).cluster?.replicas?.length, 2, 'the durable consumer is replicated with its stream');

  const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'nats cluster' }] });
  const loads = [g1, g2].map((g) => runLoad({ url: `${g!.url}/v1/chat/completions`, rps: 25, durationMs: 16_000, body }));
  await delay(4000);
  const before = (await streamInfo(STREAM_NAME)).cluster?.leader ?? '';
  assert.ok(before !== '', 'the stream has a leader');
  const victim = nats.node(before);
  await victim.stop(true); // SIGKILL
  await waitFor('a new leader of the capture stream', async () => {
    const now = (await streamInfo(STREAM_NAME)).cluster?.leader ?? '';
    return now !== '' && now !== before;
  }, 20_000, 100);
  await delay(4000);
  await victim.start();
  const [r1, r2] = await Promise.all(loads);
  for (const r of [r1!, r2!]) assert.equal(r.filter((x) => x.status === 200).length, r.length, `non-200: ${JSON.stringify(r.find((x) => x.status !== 200))}`);
  assert.ok(r1!.length >= 390 && r2!.length >= 390, `load sent ${r1!.length} + ${r2!.length}`);
  await assertExactlyOnce(store, 'nc-g1', r1!);
  await assertExactlyOnce(store, 'nc-g2', r2!);
  // The restarted server caught up: three current copies again.
  await waitFor('the restarted server current again', async () => {
    const r = (await streamInfo(STREAM_NAME)).cluster?.replicas ?? [];
    return r.length === 2 && r.every((x) => x.current && !x.offline);
  }, 30_000, 200);
  assert.ok(ing.app.running && g1!.app.running && g2!.app.running, 'no app exited');
  for (const g of [g1!, g2!]) assert.equal(await metric(g.url, 'sightline_capture_dropped_total'), 0, 'no batch dropped');
});
