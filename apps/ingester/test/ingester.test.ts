/**
 * The ingester between a real nats-server and a real clickhouse-server: builds rows and
 * spans from the gateways' records, writes, acks after the write, dead-letters what
 * ClickHouse refuses or what is not a batch, keeps redelivered batches from counting
 * twice, still reads v1 batches, and waits out a ClickHouse outage, counting each message it
 * gives back.
 *
 * Each test plays its own gateway instance (and team) and counts only its own rows, so
 * every test passes alone and in any order.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ClickHouseServerStore, ident, migrate, sql, table, type Sql } from '@sightline/store';
import { connectNats, ensureStream, MemoryBus, NatsConsumer, NatsPublisher, DEADLETTER_STREAM, STREAM_NAME, DURABLE_NAME, type BusConsumer, type BusMessage } from '@sightline/bus';
import { Ingester, Rollup, Retention, renderIngesterMetrics } from '@sightline/app-ingester';
import { SpanBuilder } from '@sightline/spans';
import type { CaptureBatchV1, CaptureBatchV2 } from '@sightline/core';
import { ClickHouseServer, NatsServer, waitFor } from '../../../test/support/servers.js';
import { batchOf, refusedRecord, servedRecord, unixNanoAgo } from '../../../test/support/records.js';
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
/** Messages the shared ingester gave back (nak), counted on the bus side of it (countNaks). */
let naks = 0;

/** `c` as the ingester sees it, with every nak of a message it fetched counted in `naks`. */
function countNaks(c: BusConsumer): BusConsumer {
  return {
    fetch: async (max, expiresMs) =>
      (await c.fetch(max, expiresMs)).map((m): BusMessage => ({
        data: m.data,
        msgId: m.msgId,
        deliveries: m.deliveries,
        ack: () => m.ack(),
        nak: (delayMs) => {
          naks++;
          m.nak(delayMs);
        },
      })),
    deadLetter: (m, reason) => c.deadLetter(m, reason),
    close: () => c.close(),
  };
}

async function count(q: Sql): Promise<number> {
  const rows = await store.query<{ n: string | number }>(q);
  return Number(rows[0]?.n ?? 0);
}

let gateways = 0;

/** One test's gateway: its own instance name and team, its own batch and request numbers. */
class Gateway {
  readonly instance = `gw-ing-${++gateways}`;
  #batch = 0;
  #seq = 0;

  /** A v2 batch of `n` requests (refused in parse, status 400), published `agoMs` ago. */
  batch(n: number, agoMs = 0): CaptureBatchV2 {
    const recs = Array.from({ length: n }, () => refusedRecord({ seq: ++this.#seq, team: this.instance }));
    return batchOf(this.instance, ++this.#batch, recs, agoMs);
  }

  /** A v1 batch (prebuilt rows), as gateways before the record format published it. */
  batchV1(n: number): CaptureBatchV1 {
    const b: CaptureBatchV1 = { v: 1, instance: this.instance, batch: String(++this.#batch), requests_count: n, published_at_unix_nano: unixNanoAgo(), requests: [], spans: [] };
    for (let i = 0; i < n; i++) {
      const built = builder.buildRecord(refusedRecord({ seq: ++this.#seq, team: this.instance }), this.instance);
      b.requests.push(built.request);
      b.spans.push(...built.spans);
    }
    return b;
  }

  /** This instance's requests as readers see them (FINAL: a redelivered batch counts once). */
  requests(): Promise<number> {
    return count(sql`SELECT count() AS n FROM ${table('sightline', 'requests')} FINAL WHERE instance = ${this.instance}`);
  }

  /** Rows in the batch ledger for this instance (a batch written twice has two). */
  ledgerRows(batch?: string): Promise<number> {
    if (batch === undefined) return count(sql`SELECT count() AS n FROM ${table('sightline', 'ingest_batches')} WHERE instance = ${this.instance}`);
    return count(sql`SELECT count() AS n FROM ${table('sightline', 'ingest_batches')} WHERE instance = ${this.instance} AND batch = ${Number(batch)}`);
  }
}

async function publish(b: CaptureBatchV2 | CaptureBatchV1 | string, id?: string): Promise<void> {
  const data = Buffer.from(typeof b === 'string' ? b : JSON.stringify(b));
  await publisher.publish(data, id ?? (typeof b === 'string' ? `raw-${Math.random()}` : `${b.instance}/${b.batch}`), 5000);
}

async function pendingAcks(): Promise<number> {
  const jsm = await pubConn.jetstreamManager();
  const info = await jsm.consumers.info(STREAM_NAME, DURABLE_NAME);
  return info.num_pending + info.num_ack_pending;
}

/** The value of an unlabelled metric in a Prometheus text page. */
function metricValue(page: string, name: string): number {
  const line = page.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? Number.NaN : Number(line.slice(name.length + 1));
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
  ingester = new Ingester({ consumer: countNaks(consumer), store, name: 'ing-test', fetchWaitMs: 200, maxDeliveries: 2, rollup });
  ingester.start();
});

after(async () => {
  await ingester.stop();
  await consumer.close();
  await publisher.close();
  await store.close();
  await Promise.all([nats.dispose(), ch.dispose()]);
});

test('batches are written, then acknowledged; the ledger records each batch and the lag is measured from the publish', async () => {
  const gw = new Gateway();
  // Published 5 s ago (as if they had waited in a spool): the lag must show it.
  await publish(gw.batch(3, 5_000));
  await publish(gw.batch(2, 5_000));
  await waitFor('5 requests in ClickHouse', async () => (await gw.requests()) === 5);
  await waitFor('no message left unacknowledged', async () => (await pendingAcks()) === 0);
  assert.equal(await gw.ledgerRows(), 2);
  // Every write before the acks above is done, so the last lag is one of these two batches'.
  assert.ok(ingester.stats.lastLagMs >= 5_000 && ingester.stats.lastLagMs < 60_000, `last lag ${ingester.stats.lastLagMs} ms`);
});

test('a batch delivered twice is counted once', async () => {
  const gw = new Gateway();
  await publish(gw.batch(5));
  const b = gw.batch(4);
  await publish(b, 'first-delivery');
  await publish(b, 'second-delivery-after-the-dedup-window');
  await waitFor('both deliveries written', async () => (await gw.ledgerRows(b.batch)) === 2);
  await waitFor('the other batch written', async () => (await gw.ledgerRows()) === 3);
  assert.equal(await gw.requests(), 9);
  assert.equal(await count(sql`SELECT uniqExact(trace_id) AS n FROM ${table('sightline', 'requests')} WHERE instance = ${gw.instance}`), 9);
  assert.equal(await count(sql`SELECT uniqExact(instance, batch) AS n FROM ${table('sightline', 'ingest_batches')} WHERE instance = ${gw.instance}`), 2);
});

test('what is not a batch, and what ClickHouse keeps refusing, goes to the dead-letter subject; the rest is written', async () => {
  const gw = new Gateway();
  const jsm = await pubConn.jetstreamManager();
  const deadBefore = (await jsm.streams.info(DEADLETTER_STREAM)).state.messages;
  const before = ingester.stats.deadLettered;
  // v1 rows ClickHouse refuses (a duration that is not a number).
  const refused = gw.batchV1(1);
  (refused.spans[0] as unknown as Record<string, unknown>).duration_ns = 'not a number';
  // A v2 record of the wrong shape: refused before ClickHouse sees it.
  const malformed = gw.batch(2);
  (malformed.records[1] as unknown as Record<string, unknown>).t0 = 'yesterday';
  const good = gw.batch(2);
  await publish('this is not json');
  await publish(refused);
  await publish(malformed);
  await publish(good);
  await waitFor('good batch written', async () => (await gw.requests()) === 2);
  await waitFor('three dead letters', () => ingester.stats.deadLettered === before + 3, 20_000);
  assert.equal((await jsm.streams.info(DEADLETTER_STREAM)).state.messages, deadBefore + 3);
  await waitFor('nothing left unacknowledged', async () => (await pendingAcks()) === 0);
  for (const id of [refused.requests[0]!.trace_id, malformed.records[0]!.traceId, malformed.records[1]!.traceId]) {
    assert.equal(await count(sql`SELECT count() AS n FROM ${table('sightline', 'requests')} FINAL WHERE trace_id = ${id}`), 0);
  }
});

test('v1 batches (prebuilt rows, e.g. left in a spool by an earlier gateway) are still written', async () => {
  const gw = new Gateway();
  const old = gw.batchV1(3);
  await publish(old);
  await waitFor('3 requests in ClickHouse', async () => (await gw.requests()) === 3);
  const spans = await count(sql`SELECT count() AS n FROM ${table('sightline', 'spans')} WHERE has(${old.requests.map((r) => r.trace_id)}, trace_id)`);
  assert.equal(spans, old.spans.length);
});

test('rows built from v2 records carry the gateway\'s clock: start times within a second of the publish', async () => {
  const b = new Gateway().batch(1);
  await publish(b);
  const id = b.records[0]!.traceId;
  await waitFor('request written', async () => (await count(sql`SELECT count() AS n FROM ${table('sightline', 'requests')} WHERE trace_id = ${id}`)) === 1);
  const rows = await store.query<{ start_time_unix_nano: string; spans: string; seq: string }>(
    sql`SELECT toString(r.start_time_unix_nano) AS start_time_unix_nano, toString(r.seq) AS seq, (SELECT count() FROM ${table('sightline', 'spans')} WHERE trace_id = ${id}) AS spans FROM ${table('sightline', 'requests')} AS r WHERE r.trace_id = ${id}`,
  );
  const startMs = Number(BigInt(rows[0]!.start_time_unix_nano) / 1_000_000n);
  assert.ok(Math.abs(startMs - Number(BigInt(b.published_at_unix_nano) / 1_000_000n)) < 1_000, `start ${startMs} vs published ${b.published_at_unix_nano}`);
  assert.equal(rows[0]!.seq, String(b.records[0]!.seq));
  // A request refused in parse: the root and its three stages (ingress.read, parse, egress.write).
  assert.equal(Number(rows[0]!.spans), 4);
});

test('while ClickHouse is down nothing is acknowledged; after it is back everything is written once, and every redelivery was given back', async () => {
  const gw = new Gateway();
  const failuresBefore = ingester.stats.writeFailures;
  const { givenBack: givenBefore, redelivered: againBefore } = ingester.stats;
  const naksBefore = naks;
  await ch.stop();
  try {
    await publish(gw.batch(3));
    await publish(gw.batch(3));
    await waitFor('a failed write', () => ingester.stats.writeFailures > failuresBefore, 10_000);
    assert.ok((await pendingAcks()) >= 2, 'batches stay on the stream');
  } finally {
    await ch.start();
  }
  await waitFor('all written after the restart', async () => (await gw.requests()) === 6, 30_000);
  await waitFor('acknowledged', async () => (await pendingAcks()) === 0, 10_000);
  assert.equal(await count(sql`SELECT uniqExact(trace_id) AS n FROM ${table('sightline', 'requests')} WHERE instance = ${gw.instance}`), 6);
  // Each failed write gave its batches back (nak) and they came back as redeliveries: counted
  // per message, as many as the bus saw given back, and no redelivery it had not given back
  // (what the bench's end-of-run gate checks).
  const givenBack = ingester.stats.givenBack - givenBefore;
  const again = ingester.stats.redelivered - againBefore;
  assert.equal(givenBack, naks - naksBefore, 'given back = messages nak\'ed');
  assert.ok(givenBack >= 2, `both batches failed to write at least once and were given back (${givenBack})`);
  assert.ok(again >= 1 && again <= givenBack, `redelivered ${again}, given back ${givenBack}`);
  const page = renderIngesterMetrics(ingester);
  assert.equal(metricValue(page, 'sightline_ingest_given_back_total'), ingester.stats.givenBack);
  assert.equal(metricValue(page, 'sightline_ingest_redelivered_total'), ingester.stats.redelivered);
});

test('the per-minute rollups match the raw tables exactly, redeliveries included', async () => {
  const gw = new Gateway();
  const b = gw.batch(5);
  await publish(b, 'rollup-1');
  await publish(b, 'rollup-1-redelivered');
  await waitFor('both writes', async () => (await gw.ledgerRows(b.batch)) === 2);
  // The gateway's team is its instance name: the rollups have no instance column.
  const team = gw.instance;
  const rolled = (t: string, col = 'requests') => count(sql`SELECT sum(${ident(col)}) AS n FROM ${table('sightline', t)} FINAL WHERE team = ${team}`);
  await waitFor('rollups caught up', async () => {
    await rollup.flush();
    return (await rolled('requests_1m')) === 5 && (await rolled('requests_agg_1m')) === 5 && (await rolled('stages_agg_1m', 'spans')) === 15;
  }, 20_000);
  assert.equal(await gw.requests(), 5);
  const errors = await count(sql`SELECT sum(errors) AS n FROM ${table('sightline', 'requests_1m')} FINAL WHERE team = ${team}`);
  assert.equal(errors, await count(sql`SELECT countIf(http_status >= 400) AS n FROM ${table('sightline', 'requests')} FINAL WHERE team = ${team}`));
  assert.equal(errors, 5);
  assert.equal(await rolled('requests_agg_1m', 'errors'), 5);
  // Each refused request has three stage spans (ingress.read, parse failed, egress.write).
  const stages = await store.query<{ stage: string; spans: string; errors: string }>(
    sql`SELECT stage, sum(spans) AS spans, sum(errors) AS errors FROM ${table('sightline', 'stages_agg_1m')} FINAL WHERE team = ${team} GROUP BY stage ORDER BY stage`,
  );
  assert.deepEqual(stages.map((r) => [r.stage, Number(r.spans), Number(r.errors)]), [['egress.write', 5, 0], ['ingress.read', 5, 0], ['parse', 5, 5]]);
  assert.equal(rollup.failed, 0);
});

test('hours are rolled up with their minutes; a day once it has ended, from its hours', async () => {
  const gw = new Gateway();
  const team = gw.instance;
  const built = gw.batchV1(3);
  await store.insert('spans', built.spans);
  await store.insert('requests', built.requests);
  const startS = built.requests[0]!.start_time;
  // A clock that can be moved to tomorrow.
  let nowMs = startS * 1000;
  const r = new Rollup(store, 60_000, () => {}, () => nowMs);
  const sum = (t: string, col = 'requests') => count(sql`SELECT sum(${ident(col)}) AS n FROM ${table('sightline', t)} FINAL WHERE team = ${team}`);
  r.touch(built.requests.map((q) => q.start_time));
  await r.flush();
  assert.deepEqual([await sum('requests_agg_1m'), await sum('requests_agg_1h'), await sum('requests_agg_1d')], [3, 3, 0], 'today has not ended');
  assert.deepEqual([await sum('stages_agg_1m', 'spans'), await sum('stages_agg_1h', 'spans'), await sum('stages_agg_1d', 'spans')], [9, 9, 0]);
  nowMs = (startS - (startS % 86400) + 86400) * 1000 + 1000;
  await r.flush();
  assert.deepEqual([await sum('requests_agg_1d'), await sum('stages_agg_1d', 'spans')], [3, 9], 'the day, once it ended');
  // The percentile states merged up the levels agree.
  const q = (t: string) => store.query<{ q: number[] }>(sql`SELECT quantilesTDigestMerge(0.5, 0.95, 0.99)(total_ns_q) AS q FROM ${table('sightline', t)} FINAL WHERE team = ${team}`);
  assert.deepEqual((await q('requests_agg_1d'))[0]!.q, (await q('requests_agg_1m'))[0]!.q);
  r.stop();
});

test('a minute touched while the rollup waits for a day to end is rolled up within the interval, not when the day ends', async () => {
  const gw = new Gateway();
  const team = gw.instance;
  const sum = () => count(sql`SELECT sum(requests) AS n FROM ${table('sightline', 'requests_agg_1m')} FINAL WHERE team = ${team}`);
  const r = new Rollup(store, 100);
  const first = gw.batchV1(2);
  await store.insert('spans', first.spans);
  await store.insert('requests', first.requests);
  r.touch(first.requests.map((q) => q.start_time));
  await waitFor('the first round', async () => (await sum()) === 2);
  // Idle now: the round recomputed an hour, so its day waits, and the next wake-up is when
  // the day ends (hours away). A minute touched now must not wait for that.
  await r.flush();
  const second = gw.batchV1(3);
  await store.insert('spans', second.spans);
  await store.insert('requests', second.requests);
  r.touch(second.requests.map((q) => q.start_time));
  await waitFor('the minute touched later rolled up', async () => (await sum()) === 5, 10_000);
  assert.equal(r.failed, 0);
  r.stop();
});

test('reconcile copies stage spans from before the rollups existed and recomputes days the rollups miss, once', async () => {
  const gw = new Gateway();
  const team = gw.instance;
  // Rows written straight to the tables three days ago, as if by an ingester that died
  // before its rollup round (or before migration 005): no rollup has them.
  const built = gw.batchV1(4);
  const day = Math.floor(Date.now() / 1000) - 3 * 86400;
  const dayNum = Number(new Date(day * 1000).toISOString().slice(0, 10).replaceAll('-', ''));
  for (const r of built.requests) r.start_time = day;
  for (const s of built.spans) s.start_time = day;
  await store.insert('spans', built.spans);
  await store.insert('requests', built.requests);
  // Older than the view that fills stage_spans: not there.
  await store.command(sql`ALTER TABLE ${table('sightline', 'stage_spans')} DROP PARTITION ${dayNum}`);
  const agg = (t: string, col: string) => count(sql`SELECT sum(${ident(col)}) AS n FROM ${table('sightline', t)} FINAL WHERE team = ${team}`);
  assert.equal(await agg('requests_agg_1m', 'requests'), 0);

  const r = await new Rollup(store).reconcile();
  assert.ok(r.copiedDays.includes(dayNum), JSON.stringify(r));
  assert.ok(r.requestDays.includes(dayNum), JSON.stringify(r));
  assert.ok(r.stageDays.includes(dayNum), JSON.stringify(r));
  assert.equal(await agg('requests_agg_1m', 'requests'), 4);
  assert.equal(await agg('requests_1m', 'requests'), 4);
  assert.equal(await agg('stages_agg_1m', 'spans'), 12);
  assert.equal(await count(sql`SELECT count() AS n FROM ${table('sightline', 'stage_spans')} FINAL WHERE team = ${team}`), 12);
  for (const level of ['1h', '1d']) {
    assert.equal(await agg(`requests_agg_${level}`, 'requests'), 4, level);
    assert.equal(await agg(`stages_agg_${level}`, 'spans'), 12, level);
  }

  // Done once: the next start finds nothing to do for that day.
  const again = await new Rollup(store).reconcile();
  assert.deepEqual([again.copiedDays, again.requestDays.includes(dayNum), again.stageDays.includes(dayNum)], [[], false, false]);
  assert.equal(await agg('requests_agg_1m', 'requests'), 4);
});

/**
 * One team's rows of a rollup level, grouped without the key: from the per-key table (the
 * key summed out here) or from its key-less twin (migration 008). Every column, the
 * percentile states finalized, so the two must be equal.
 */
async function withoutKey(kind: 'requests' | 'stages', level: '1m' | '1h' | '1d', team: string, twin: boolean): Promise<Record<string, unknown>[]> {
  const col = ident({ '1m': 'minute', '1h': 'hour', '1d': 'day' }[level]);
  const name = `${kind}_${twin ? 'team_' : ''}agg_${level}`;
  const dims = kind === 'requests' ? sql`team, model, provider, dialect, status_class` : sql`team, model, provider, stage`;
  const measures =
    kind === 'requests'
      ? sql`sum(requests) AS n, sum(errors) AS e, sum(aborted) AS a, sum(streams) AS s, sum(input_tokens) AS it, sum(output_tokens) AS ot, sum(cache_read_tokens) AS cr,
  sum(cache_write_tokens) AS cw, sum(total_ns_sum) AS tns, sum(gateway_ns_sum) AS gns, sum(upstream_ns_sum) AS uns, max(gateway_ns_max) AS gmax, sum(ttft_ns_sum) AS fns,
  sum(ttft_count) AS fn, quantilesTDigestMerge(0.5, 0.95, 0.99)(total_ns_q) AS qt, quantilesTDigestMerge(0.5, 0.95, 0.99)(gateway_ns_q) AS qg,
  quantilesTDigestIfMerge(0.5, 0.95, 0.99)(ttft_ns_q) AS qf`
      : sql`sum(spans) AS n, sum(errors) AS e, sum(duration_ns_sum) AS dns, quantilesTDigestMerge(0.5, 0.95, 0.99)(duration_ns_q) AS qd`;
  return store.query<Record<string, unknown>>(
    sql`SELECT toUInt32(${col}) AS t, ${dims}, ${measures} FROM ${table('sightline', name)} FINAL WHERE team = ${team} GROUP BY t, ${dims} ORDER BY t, ${dims}`,
  );
}

/** Asserts that every key-less rollup of `team` equals its per-key rollup summed over keys; returns the request count of each level. */
async function twinsMatch(team: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const kind of ['requests', 'stages'] as const) {
    for (const level of ['1m', '1h', '1d'] as const) {
      const perKey = await withoutKey(kind, level, team, false);
      const twin = await withoutKey(kind, level, team, true);
      assert.deepEqual(twin, perKey, `${kind} ${level}`);
      out[`${kind}_${level}`] = twin.reduce((n, r) => n + Number(r.n), 0);
    }
  }
  return out;
}

test('the key-less rollups equal the per-key ones summed over keys at every level, a redelivered batch counted once', async () => {
  const gw = new Gateway();
  const team = gw.instance;
  // Two keys and two models in one team, durations 151–156 ms (a served record's marks run to 150.05 ms).
  const recs = Array.from({ length: 6 }, (_, i) => {
    const r = servedRecord({ seq: 1000 + i, team });
    r.keyId = i % 2 === 0 ? 'key_xxxxxxxxxxxxxxxx' : 'key_yyyyyyyyyyyyyyyy';
    r.model = i < 4 ? 'gpt-4o' : 'gpt-4o-mini';
    r.tFinish = r.t0 + 151 + i;
    return r;
  });
  const b = batchOf(gw.instance, 1, recs);
  await publish(b, 'twins-1');
  await publish(b, 'twins-1-redelivered');
  await waitFor('both writes', async () => (await gw.ledgerRows(b.batch)) === 2);
  const sum = (t: string, col = 'requests') => count(sql`SELECT sum(${ident(col)}) AS n FROM ${table('sightline', t)} FINAL WHERE team = ${team}`);
  await waitFor('rollups caught up', async () => {
    await rollup.flush();
    return (await sum('requests_team_agg_1h')) === 6 && (await sum('stages_team_agg_1h', 'spans')) === (await sum('stages_agg_1h', 'spans'));
  }, 20_000);
  // The day too (computed early here; rounds wait for the day to end).
  const startS = Math.floor(Date.now() / 1000);
  const minutes = await store.query<{ m: number | string }>(sql`SELECT DISTINCT toUInt32(minute) AS m FROM ${table('sightline', 'requests_agg_1m')} FINAL WHERE team = ${team}`);
  for (const { m } of minutes) await rollup.recomputeRange(Number(m), Number(m) + 60);
  assert.ok(minutes.length >= 1 && Number(minutes[0]!.m) <= startS);
  const counts = await twinsMatch(team);
  assert.deepEqual([counts.requests_1m, counts.requests_1h, counts.requests_1d], [6, 6, 6], 'each request once at every level');
  // Ten stage spans per served request (test/support/records.ts), each once under FINAL.
  const stageSpans = await count(sql`SELECT count() AS n FROM ${table('sightline', 'stage_spans')} FINAL WHERE team = ${team}`);
  assert.equal(stageSpans, 6 * 10);
  assert.deepEqual([counts.stages_1m, counts.stages_1h, counts.stages_1d], [stageSpans, stageSpans, stageSpans]);
  // The twin has one row per group without the key: 2 models here, where the per-key day has 2 keys × 2 models.
  assert.equal(await count(sql`SELECT count() AS n FROM ${table('sightline', 'requests_team_agg_1d')} FINAL WHERE team = ${team}`), 2);
  assert.equal(await count(sql`SELECT count() AS n FROM ${table('sightline', 'requests_agg_1d')} FINAL WHERE team = ${team}`), 4);
  assert.equal(rollup.failed, 0);
});

test('reconcile fills key-less rollups that miss periods (as after the upgrade to migration 008) from the per-key ones, once', async () => {
  const gw = new Gateway();
  const team = gw.instance;
  const built = gw.batchV1(4);
  const day = Math.floor(Date.now() / 1000) - 4 * 86400;
  const dayNum = Number(new Date(day * 1000).toISOString().slice(0, 10).replaceAll('-', ''));
  for (const r of built.requests) r.start_time = day;
  for (const s of built.spans) s.start_time = day;
  await store.insert('spans', built.spans);
  await store.insert('requests', built.requests);
  await new Rollup(store).recomputeRange(day - (day % 60), day - (day % 60) + 60);
  assert.deepEqual(await twinsMatch(team), { requests_1m: 4, requests_1h: 4, requests_1d: 4, stages_1m: 12, stages_1h: 12, stages_1d: 12 });
  // The twins lose this team's rows (an ingester of an older version wrote the per-key ones).
  const twins = ['requests_team_agg_1m', 'requests_team_agg_1h', 'requests_team_agg_1d', 'stages_team_agg_1m', 'stages_team_agg_1h', 'stages_team_agg_1d'];
  for (const t of twins) await store.command(sql`ALTER TABLE ${table('sightline', t)} DELETE WHERE team = ${team}`);
  await waitFor('the deletes done', async () => {
    let n = 0;
    for (const t of twins) n += await count(sql`SELECT count() AS n FROM ${table('sightline', t)} WHERE team = ${team}`);
    return n === 0;
  }, 20_000);
  await assert.rejects(twinsMatch(team), /requests 1m/);

  const r = await new Rollup(store).reconcile();
  assert.ok(r.teamDays.includes(dayNum), JSON.stringify(r));
  assert.ok(!r.requestDays.includes(dayNum) && !r.stageDays.includes(dayNum), 'the per-key rollups were right: only the twins recomputed');
  assert.deepEqual(await twinsMatch(team), { requests_1m: 4, requests_1h: 4, requests_1d: 4, stages_1m: 12, stages_1h: 12, stages_1d: 12 });

  // Done once: the next start finds nothing to do for that day, and nothing counts twice.
  const again = await new Rollup(store).reconcile();
  assert.equal(again.teamDays.includes(dayNum), false, JSON.stringify(again));
  assert.deepEqual(await twinsMatch(team), { requests_1m: 4, requests_1h: 4, requests_1d: 4, stages_1m: 12, stages_1h: 12, stages_1d: 12 });
});

test('retention drops daily partitions older than the setting, and nothing newer', async () => {
  const gw = new Gateway();
  const old = gw.batchV1(2);
  const recent = gw.batchV1(3);
  const tenDaysAgo = Math.floor(Date.now() / 1000) - 10 * 86400;
  for (const r of old.requests) r.start_time = tenDaysAgo;
  for (const s of old.spans) s.start_time = tenDaysAgo;
  await store.insert('requests', [...old.requests, ...recent.requests]);
  await store.insert('spans', [...old.spans, ...recent.spans]);
  const rows = () => count(sql`SELECT count() AS n FROM ${table('sightline', 'requests')} WHERE instance = ${gw.instance}`);
  assert.equal(await rows(), 5);
  const dropped = await new Retention(store, 7).run();
  assert.ok(dropped >= 2, `dropped ${dropped}`);
  assert.equal(await rows(), 3, 'the recent rows stay');
  assert.equal(await count(sql`SELECT count() AS n FROM ${table('sightline', 'spans')} WHERE has(${old.requests.map((r) => r.trace_id)}, trace_id)`), 0);
  assert.equal(await new Retention(store, 7).run(), 0, 'nothing more to drop');
  assert.equal(await new Retention(store, 0).run(), 0, '0 keeps everything');
});

test('a message delivered again after an ingester died holding it is counted as redelivered, and written once', async () => {
  const gw = new Gateway();
  const bus = new MemoryBus({ ackWaitMs: 2_000 });
  const b = gw.batch(2);
  await bus.publish(Buffer.from(JSON.stringify(b)), `${b.instance}/${b.batch}`);
  // A first ingester takes the message and dies before acknowledging it.
  assert.equal((await bus.fetch(10, 100)).length, 1);
  const second = new Ingester({ consumer: bus, store, name: 'ing-second', fetchWaitMs: 100 });
  second.start();
  try {
    await waitFor('the batch written by the second ingester', async () => (await gw.requests()) === 2);
    await waitFor('acknowledged', () => bus.pending === 0);
    assert.equal(second.stats.redelivered, 1);
    assert.equal(metricValue(renderIngesterMetrics(second), 'sightline_ingest_redelivered_total'), 1);
  } finally {
    await second.stop();
    await bus.close();
  }
});

test('lag observations beyond the bound, waiting for a scrape, are dropped and counted', async () => {
  const gw = new Gateway();
  const bus = new MemoryBus();
  const lone = new Ingester({ consumer: bus, store, name: 'ing-unscraped', fetchWaitMs: 100, maxLagObservations: 2 });
  lone.start();
  try {
    for (let i = 0; i < 3; i++) {
      const b = gw.batch(1);
      await bus.publish(Buffer.from(JSON.stringify(b)), `${b.instance}/${b.batch}`);
    }
    await waitFor('3 batches written', () => lone.stats.batches === 3);
    assert.equal(lone.stats.lagObservationsDropped, 1);
    let page = renderIngesterMetrics(lone);
    assert.equal(metricValue(page, 'sightline_ingest_lag_observations_dropped_total'), 1);
    assert.equal(metricValue(page, 'sightline_ingest_lag_seconds_histogram_count'), 2);
    // The scrape emptied the buffer: the next observation is kept.
    const b = gw.batch(1);
    await bus.publish(Buffer.from(JSON.stringify(b)), `${b.instance}/${b.batch}`);
    await waitFor('4 batches written', () => lone.stats.batches === 4);
    page = renderIngesterMetrics(lone);
    assert.equal(metricValue(page, 'sightline_ingest_lag_observations_dropped_total'), 1);
    assert.equal(metricValue(page, 'sightline_ingest_lag_seconds_histogram_count'), 3);
  } finally {
    await lone.stop();
    await bus.close();
  }
});

test('a batch written twice (redelivered after a write whose acknowledgement was lost) counts once, stage spans included', async () => {
  const gw = new Gateway();
  const b = gw.batch(3);
  await publish(b);
  await waitFor('first write', async () => (await gw.requests()) === 3);
  // The same batch again, as the stream redelivers it when the ack never arrived.
  await publish(b, `${b.instance}/${b.batch}/again`);
  await waitFor('second write', async () => (await gw.ledgerRows()) === 2);
  const spans = (final: boolean) => count(final ? sql`SELECT count() AS n FROM ${table('sightline', 'spans')} FINAL WHERE instance = ${gw.instance}` : sql`SELECT count() AS n FROM ${table('sightline', 'spans')} WHERE instance = ${gw.instance}`);
  // Both writes happened (two ledger rows); ClickHouse may already have merged the copies.
  assert.ok((await spans(false)) >= 3 * 4);
  // A request refused in parse has a root and three stage spans: 3 requests, 12 spans, once.
  assert.equal(await spans(true), 3 * 4, 'the duplicate spans collapse: their ids are the same');
  assert.equal(await gw.requests(), 3);
});
