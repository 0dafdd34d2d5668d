/**
 * The ingester between a real nats-server and a real clickhouse-server: builds rows and
 * spans from the gateways' records, writes, acks after the write, dead-letters what
 * ClickHouse refuses or what is not a batch, keeps redelivered batches from counting
 * twice, still reads v1 batches, and waits out a ClickHouse outage.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ClickHouseServerStore, migrate, sql, table, type Sql } from '@sightline/store';
import { connectNats, ensureStream, NatsConsumer, NatsPublisher, DEADLETTER_STREAM, STREAM_NAME, DURABLE_NAME } from '@sightline/bus';
import { Ingester, Rollup, Retention } from '@sightline/app-ingester';
import { RequestRecord, SpanBuilder, toWire, type WireRecord } from '@sightline/capture';
import { markToUnixNano, newSpanId, newTraceId, now, type CaptureBatchV1 } from '@sightline/core';
import { ClickHouseServer, NatsServer, waitFor } from '../../../test/support/servers.js';
import type { NatsConnection } from 'nats';

let nats: NatsServer;
let ch: ClickHouseServer;
let store: ClickHouseServerStore;
let pubConn: NatsConnection;
let publisher: NatsPublisher;
let consumer: NatsConsumer;
let ingester: Ingester;
let rollup: Rollup;
const builder = new SpanBuilder();
let batchNo = 0;

/** A v2 message, as gateways publish it (capture/src/wire.ts). */
interface BatchV2 {
  v: 2;
  instance: string;
  batch: string;
  requests_count: number;
  published_at_unix_nano: string;
  origin_unix_nano: string;
  records: WireRecord[];
}

function records(n: number): RequestRecord[] {
  batchNo++;
  return Array.from({ length: n }, (_, i) => {
    const r = new RequestRecord();
    const t = now();
    r.traceId = newTraceId();
    r.rootSpanId = newSpanId();
    r.seq = batchNo * 1000 + i;
    r.t0 = t;
    r.tBody = t + 0.1;
    r.tEnd = t + 0.2;
    r.tFinish = t + 0.3;
    r.status = 400;
    return r;
  });
}

const publishedAt = (): string => (BigInt(Date.now()) * 1_000_000n).toString();

function batch(n: number, instance = 'gw-ing'): BatchV2 {
  const recs = records(n).map(toWire);
  return { v: 2, instance, batch: String(batchNo), requests_count: n, published_at_unix_nano: publishedAt(), origin_unix_nano: markToUnixNano(0).toString(), records: recs };
}

/** A v1 message (prebuilt rows), as earlier gateways published it. */
function batchV1(n: number, instance = 'gw-ing'): CaptureBatchV1 {
  const b: CaptureBatchV1 = { v: 1, instance, batch: String(batchNo + 1), requests_count: n, published_at_unix_nano: publishedAt(), requests: [], spans: [] };
  for (const r of records(n)) {
    const built = builder.buildRecord(r, instance);
    b.requests.push(built.request);
    b.spans.push(...built.spans);
  }
  return b;
}

async function publish(b: BatchV2 | CaptureBatchV1 | string, id?: string): Promise<void> {
  const data = Buffer.from(typeof b === 'string' ? b : JSON.stringify(b));
  await publisher.publish(data, id ?? (typeof b === 'string' ? `raw-${Math.random()}` : `${b.instance}/${b.batch}`), 5000);
}

async function count(q: Sql): Promise<number> {
  const rows = await store.query<{ n: string | number }>(q);
  return Number(rows[0]?.n ?? 0);
}

const requestsFinal = () => count(sql`SELECT count() AS n FROM ${table('sightline', 'requests')} FINAL WHERE instance = 'gw-ing'`);

async function pendingAcks(): Promise<number> {
  const jsm = await pubConn.jetstreamManager();
  const info = await jsm.consumers.info(STREAM_NAME, DURABLE_NAME);
  return info.num_pending + info.num_ack_pending;
}

before(async () => {
  [nats, ch] = await Promise.all([NatsServer.start(), ClickHouseServer.start()]);
  store = new ClickHouseServerStore({ url: ch.url, database: 'sightline' });
  await migrate(store);
  pubConn = await connectNats(nats.url, 'test-pub');
  await ensureStream(await pubConn.jetstreamManager());
  publisher = new NatsPublisher(pubConn);
  consumer = await NatsConsumer.open(await connectNats(nats.url, 'test-ingester'), { ackWaitMs: 2000 });
  rollup = new Rollup(store, 100);
  ingester = new Ingester({ consumer, store, name: 'ing-test', fetchWaitMs: 200, maxDeliveries: 2, rollup });
  ingester.start();
});

after(async () => {
  await ingester.stop();
  await consumer.close();
  await publisher.close();
  await store.close();
  await Promise.all([nats.dispose(), ch.dispose()]);
});

test('batches are written, then acknowledged; the ledger records each batch', async () => {
  await publish(batch(3));
  await publish(batch(2));
  await waitFor('5 requests in ClickHouse', async () => (await requestsFinal()) === 5);
  await waitFor('no message left unacknowledged', async () => (await pendingAcks()) === 0);
  assert.equal(await count(sql`SELECT count() AS n FROM ${table('sightline', 'ingest_batches')} WHERE instance = 'gw-ing'`), 2);
  assert.ok(ingester.stats.lastLagMs >= 0);
});

test('a batch delivered twice is counted once', async () => {
  const b = batch(4);
  await publish(b, 'first-delivery');
  await publish(b, 'second-delivery-after-the-dedup-window');
  await waitFor('both deliveries written', async () => (await count(sql`SELECT count() AS n FROM ${table('sightline', 'ingest_batches')} WHERE instance = 'gw-ing' AND batch = ${Number(b.batch)}`)) === 2);
  assert.equal(await requestsFinal(), 9);
  assert.equal(await count(sql`SELECT uniqExact(trace_id) AS n FROM ${table('sightline', 'requests')} WHERE instance = 'gw-ing'`), 9);
  assert.equal(await count(sql`SELECT uniqExact(instance, batch) AS n FROM ${table('sightline', 'ingest_batches')} WHERE instance = 'gw-ing'`), 3);
});

test('what is not a batch, and what ClickHouse keeps refusing, goes to the dead-letter subject; the rest is written', async () => {
  const before = ingester.stats.deadLettered;
  // v1 rows ClickHouse refuses (a duration that is not a number).
  const refused = batchV1(1);
  (refused.spans[0] as unknown as Record<string, unknown>).duration_ns = 'not a number';
  // A v2 record of the wrong shape: refused before ClickHouse sees it.
  const malformed = batch(2);
  (malformed.records[1] as unknown as Record<string, unknown>).t0 = 'yesterday';
  const good = batch(2);
  await publish('this is not json');
  await publish(refused);
  await publish(malformed);
  await publish(good);
  await waitFor('good batch written', async () => (await requestsFinal()) === 11);
  await waitFor('three dead letters', () => ingester.stats.deadLettered === before + 3, 20_000);
  const jsm = await pubConn.jetstreamManager();
  assert.equal((await jsm.streams.info(DEADLETTER_STREAM)).state.messages, 3);
  await waitFor('nothing left unacknowledged', async () => (await pendingAcks()) === 0);
  for (const id of [refused.requests[0]!.trace_id, malformed.records[0]!.traceId, malformed.records[1]!.traceId]) {
    assert.equal(await count(sql`SELECT count() AS n FROM ${table('sightline', 'requests')} FINAL WHERE trace_id = ${id}`), 0);
  }
});

test('v1 batches (prebuilt rows, e.g. left in a spool by an earlier gateway) are still written', async () => {
  const old = batchV1(3);
  await publish(old);
  await waitFor('3 more requests in ClickHouse', async () => (await requestsFinal()) === 14);
  const spans = await count(sql`SELECT count() AS n FROM ${table('sightline', 'spans')} WHERE has(${old.requests.map((r) => r.trace_id)}, trace_id)`);
  assert.equal(spans, old.spans.length);
});

test('rows built from v2 records carry the gateway\'s clock: start times within a second of the publish', async () => {
  const b = batch(1);
  await publish(b);
  const id = b.records[0]!.traceId;
  await waitFor('request written', async () => (await count(sql`SELECT count() AS n FROM ${table('sightline', 'requests')} WHERE trace_id = ${id}`)) === 1);
  const rows = await store.query<{ start_time_unix_nano: string; spans: string; seq: string }>(
    sql`SELECT toString(r.start_time_unix_nano) AS start_time_unix_nano, toString(r.seq) AS seq, (SELECT count() FROM ${table('sightline', 'spans')} WHERE trace_id = ${id}) AS spans FROM ${table('sightline', 'requests')} AS r WHERE r.trace_id = ${id}`,
  );
  const startMs = Number(BigInt(rows[0]!.start_time_unix_nano) / 1_000_000n);
  assert.ok(Math.abs(startMs - Number(BigInt(b.published_at_unix_nano) / 1_000_000n)) < 1_000, `start ${startMs} vs published ${b.published_at_unix_nano}`);
  assert.equal(rows[0]!.seq, String(b.records[0]!.seq));
  assert.ok(Number(rows[0]!.spans) >= 3, 'root and stage spans were built');
});

test('while ClickHouse is down nothing is acknowledged; after it is back everything is written once', async () => {
  await ch.stop();
  const b1 = batch(3);
  const b2 = batch(3);
  await publish(b1);
  await publish(b2);
  await waitFor('a failed write', () => ingester.stats.writeFailures > 0, 10_000);
  assert.ok((await pendingAcks()) >= 2, 'batches stay on the stream');
  await ch.start();
  await waitFor('all written after the restart', async () => (await requestsFinal()) === 21, 30_000);
  await waitFor('acknowledged', async () => (await pendingAcks()) === 0, 10_000);
  assert.equal(await count(sql`SELECT uniqExact(trace_id) AS n FROM ${table('sightline', 'requests')} WHERE instance = 'gw-ing'`), 21);
});

test('the per-minute rollup matches the requests table exactly, redeliveries included', async () => {
  const b = batch(5);
  await publish(b, 'rollup-1');
  await publish(b, 'rollup-1-redelivered');
  await waitFor('both writes', async () => (await count(sql`SELECT count() AS n FROM ${table('sightline', 'ingest_batches')} WHERE instance = 'gw-ing' AND batch = ${Number(b.batch)}`)) === 2);
  await rollup.flush();
  await waitFor('rollup caught up', async () => {
    await rollup.flush();
    const raw = await count(sql`SELECT count() AS n FROM ${table('sightline', 'requests')} FINAL WHERE instance = 'gw-ing'`);
    const rolled = await count(sql`SELECT sum(requests) AS n FROM ${table('sightline', 'requests_1m')} FINAL`);
    return raw > 0 && raw === rolled;
  }, 20_000);
  const errors = await count(sql`SELECT sum(errors) AS n FROM ${table('sightline', 'requests_1m')} FINAL`);
  assert.equal(errors, await count(sql`SELECT countIf(http_status >= 400) AS n FROM ${table('sightline', 'requests')} FINAL`));
  assert.equal(rollup.failed, 0);
});

test('retention drops daily partitions older than the setting, and nothing newer', async () => {
  const old = batchV1(2);
  const day = 86400;
  const tenDaysAgo = Math.floor(Date.now() / 1000) - 10 * day;
  for (const r of old.requests) r.start_time = tenDaysAgo;
  for (const s of old.spans) s.start_time = tenDaysAgo;
  await store.insert('requests', old.requests);
  await store.insert('spans', old.spans);
  const before = await count(sql`SELECT count() AS n FROM ${table('sightline', 'requests')}`);
  const dropped = await new Retention(store, 7).run();
  assert.ok(dropped >= 2, `dropped ${dropped}`);
  const after = await count(sql`SELECT count() AS n FROM ${table('sightline', 'requests')}`);
  assert.equal(after, before - 2);
  assert.equal(await new Retention(store, 7).run(), 0, 'nothing more to drop');
  assert.equal(await new Retention(store, 0).run(), 0, '0 keeps everything');
});
