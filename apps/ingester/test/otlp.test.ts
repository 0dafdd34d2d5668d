/**
 * OTLP export (issue 13, item 4): the ingester, between a real nats-server and a real
 * clickhouse-server, also exports the spans it builds to a local OTLP receiver (a real
 * HTTP server decoding OTLP/HTTP JSON and protobuf; a real gRPC server). Every captured
 * request's spans arrive, the root span with its GenAI attributes and content; spans leave
 * only after their batch is in ClickHouse; a backend that is down or never answers changes
 * nothing for ClickHouse and the acknowledgements, and what cannot be exported is counted.
 *
 * Each test plays its own gateway instance and runs its own ingester on the shared
 * durable consumer, stopped before the next test starts.
 */
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { ClickHouseServerStore, migrate, sql, table, type Sql } from '@sightline/store';
import { connectNats, ensureStream, NatsConsumer, NatsPublisher, STREAM_NAME, DURABLE_NAME } from '@sightline/bus';
import { Ingester, OtlpExport, otlpOptionsFromEnv, renderIngesterMetrics, type OtlpExportOptions } from '@sightline/app-ingester';
import type { CaptureBatchV2, WireRecord } from '@sightline/core';
import { ClickHouseServer, NatsServer, freePort, waitFor } from '../../../test/support/servers.js';
import { batchOf, contentOf, servedRecord, withContent } from '../../../test/support/records.js';
import { startGrpcReceiver, startHttpReceiver, type Receiver, type ReceivedRequest } from './otlp-receiver.js';
import type { NatsConnection } from 'nats';

let nats: NatsServer;
let ch: ClickHouseServer;
let store: ClickHouseServerStore;
let pubConn: NatsConnection;
let publisher: NatsPublisher;
let consumer: NatsConsumer;
let gateways = 0;
const T = (name: string): Sql => table('sightline', name);

async function count(q: Sql): Promise<number> {
  const rows = await store.query<{ n: string | number }>(q);
  return Number(rows[0]?.n ?? 0);
}

async function pendingAcks(): Promise<number> {
  const info = await (await pubConn.jetstreamManager()).consumers.info(STREAM_NAME, DURABLE_NAME);
  return info.num_pending + info.num_ack_pending;
}

function metricValue(page: string, name: string): number {
  const line = page.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? Number.NaN : Number(line.slice(name.length + 1));
}

/** `n` served requests of gateway `gw` with usage and content, in batches of `perBatch`. */
function batches(gw: string, n: number, perBatch: number): { batches: CaptureBatchV2[]; records: WireRecord[] } {
  const records: WireRecord[] = [];
  for (let i = 1; i <= n; i++) {
    const r = servedRecord({ seq: i, team: gw, usage: { prompt: 10 + i, completion: 20 + i }, endUser: `user-${i}` });
    records.push(withContent(r, contentOf({ request: `{"model":"gpt-4o","messages":[{"role":"user","content":"question ${i} of ${gw}"}]}`, response: `{"choices":[{"message":{"role":"assistant","content":"answer ${i}"},"finish_reason":"stop"}]}` })));
  }
  const out: CaptureBatchV2[] = [];
  for (let i = 0; i < records.length; i += perBatch) out.push(batchOf(gw, out.length + 1, records.slice(i, i + perBatch)));
  return { batches: out, records };
}

async function publishAll(bs: CaptureBatchV2[]): Promise<void> {
  for (const b of bs) await publisher.publish(Buffer.from(JSON.stringify(b)), `${b.instance}/${b.batch}`, 5000);
}

/** An ingester exporting with `opts`, run for the length of `body`. */
async function withExport(opts: OtlpExportOptions, body: (ingester: Ingester, otlp: OtlpExport) => Promise<void>): Promise<void> {
  const otlp = await OtlpExport.create(opts);
  const ingester = new Ingester({ consumer, store, name: 'ing-otlp', fetchWaitMs: 200, otlp });
  ingester.start();
  try {
    await body(ingester, otlp);
  } finally {
    await ingester.stop();
    await otlp.close(2_000);
  }
}

before(async () => {
  [nats, ch] = await Promise.all([NatsServer.start(), ClickHouseServer.start()]);
  store = new ClickHouseServerStore({ url: ch.url, database: 'sightline' });
  await migrate(store);
  pubConn = await connectNats(nats.url, 'test-pub');
  await ensureStream(await pubConn.jetstreamManager());
  publisher = new NatsPublisher(pubConn);
  consumer = await NatsConsumer.open(await connectNats(nats.url, 'test-ingester'), { ackWaitMs: 5000 });
});

after(async () => {
  await consumer.close();
  await publisher.close();
  await store.close();
  await Promise.all([nats.dispose(), ch.dispose()]);
});

/**
 * Every span ClickHouse holds for gateway `gw` reached `rx`, with the same parent; root
 * spans carry the GenAI attributes and the content of their request.
 */
async function assertAllExported(gw: string, rx: Receiver, records: WireRecord[]): Promise<void> {
  const stored = await store.query<{ trace_id: string; span_id: string; parent_span_id: string; name: string }>(
    sql`SELECT trace_id, span_id, parent_span_id, name FROM ${T('spans')} FINAL WHERE instance = ${gw} ORDER BY span_id`,
  );
  assert.ok(stored.length >= records.length * 10, `${stored.length} spans stored`);
  const got = rx.spans();
  for (const s of stored) {
    const r = got.get(s.span_id);
    assert.ok(r !== undefined, `span ${s.name} ${s.span_id} was not exported`);
    assert.equal(r.traceId, s.trace_id);
    assert.equal(r.parentSpanId, s.parent_span_id);
    assert.equal(r.name, s.name);
  }
  for (const rec of records) {
    const root = got.get(rec.rootSpanId);
    assert.ok(root !== undefined, `root span of ${rec.traceId}`);
    assert.equal(root.kind, 2, 'SERVER');
    const a = root.attributes;
    assert.equal(a['gen_ai.operation.name'], 'chat');
    assert.equal(a['gen_ai.provider.name'], 'openai');
    assert.equal(a['gen_ai.request.model'], 'gpt-4o');
    assert.equal(a['gen_ai.usage.input_tokens'], 10 + rec.seq);
    assert.equal(a['gen_ai.usage.output_tokens'], 20 + rec.seq);
    assert.equal(a['enduser.id'], `user-${rec.seq}`);
    assert.equal(a['sightline.team'], gw);
    const input = JSON.parse(String(a['gen_ai.input.messages'])) as unknown;
    assert.deepEqual(input, [{ role: 'user', parts: [{ type: 'text', content: `question ${rec.seq} of ${gw}` }] }]);
    assert.match(String(a['gen_ai.output.messages']), new RegExp(`answer ${rec.seq}\\b`));
    assert.deepEqual(a['gen_ai.response.finish_reasons'], ['stop']);
    assert.equal(root.resource['service.name'], 'sightline-gateway');
    assert.equal(root.scope, 'sightline-gateway');
  }
}

describe('export to a local OTLP receiver', () => {
  test('OTLP/HTTP JSON: every span of every request, GenAI attributes and content on the root, headers sent, and only after ClickHouse has the request', async () => {
    const gw = `gw-otlp-${++gateways}`;
    // At the moment each request arrives: are its traces already in ClickHouse?
    const notYetStored: string[] = [];
    const rx = await startHttpReceiver({
      onRequest: async (r: ReceivedRequest) => {
        const traces = [...new Set(r.spans.map((s) => s.traceId))];
        const n = await count(sql`SELECT uniqExact(trace_id) AS n FROM ${T('requests')} WHERE has(${traces}, trace_id)`);
        if (n !== traces.length) notYetStored.push(...traces);
      },
    });
    try {
      await withExport({ protocol: 'http/json', url: rx.url, headers: { authorization: 'Bearer otlp-test-token', 'x-tenant': 'sightline' }, maxExportBatchSize: 8, scheduledDelayMillis: 1 }, async (ingester, otlp) => {
        const { batches: bs, records } = batches(gw, 12, 4);
        await publishAll(bs);
        await waitFor('12 requests in ClickHouse', async () => (await count(sql`SELECT count() AS n FROM ${T('requests')} FINAL WHERE instance = ${gw}`)) === 12);
        const spans = await count(sql`SELECT count() AS n FROM ${T('spans')} FINAL WHERE instance = ${gw}`);
        await waitFor('every span exported', () => otlp.stats.exported === spans && otlp.stats.pending === 0);
        await assertAllExported(gw, rx, records);
        assert.deepEqual(notYetStored, [], 'a span reached the backend before its request was in ClickHouse');
        assert.ok(rx.requests.every((r) => r.contentType.startsWith('application/json')));
        assert.ok(rx.requests.every((r) => r.headers.authorization === 'Bearer otlp-test-token' && r.headers['x-tenant'] === 'sightline'));
        const page = renderIngesterMetrics(ingester);
        assert.equal(metricValue(page, 'sightline_ingest_otlp_spans_exported_total'), spans);
        assert.equal(metricValue(page, 'sightline_ingest_otlp_spans_failed_total'), 0);
        assert.equal(metricValue(page, 'sightline_ingest_otlp_spans_dropped_total'), 0);
      });
    } finally {
      await rx.close();
    }
  });

  test('OTLP/HTTP protobuf: the same spans and attributes, as application/x-protobuf', async () => {
    const gw = `gw-otlp-${++gateways}`;
    const rx = await startHttpReceiver();
    try {
      await withExport({ protocol: 'http/protobuf', url: rx.url, scheduledDelayMillis: 50 }, async (_ingester, otlp) => {
        const { batches: bs, records } = batches(gw, 6, 3);
        await publishAll(bs);
        await waitFor('6 requests in ClickHouse', async () => (await count(sql`SELECT count() AS n FROM ${T('requests')} FINAL WHERE instance = ${gw}`)) === 6);
        const spans = await count(sql`SELECT count() AS n FROM ${T('spans')} FINAL WHERE instance = ${gw}`);
        await waitFor('every span exported', () => otlp.stats.exported === spans && otlp.stats.pending === 0);
        await assertAllExported(gw, rx, records);
        assert.ok(rx.requests.length > 0 && rx.requests.every((r) => r.contentType === 'application/x-protobuf'), rx.requests.map((r) => r.contentType).join());
        // Content follows the team's policy: none captured, or `redacted` without a
        // redactor (withheld), sends none.
        const bare = servedRecord({ seq: 7, team: gw, usage: { prompt: 1, completion: 2 } });
        const withheld = withContent(servedRecord({ seq: 8, team: gw }), contentOf({ policy: 'redacted', request: '{"messages":[{"role":"user","content":"secret@example.com"}]}', response: '{}' }));
        await publishAll([batchOf(gw, 3, [bare, withheld])]);
        await waitFor('both roots exported', () => rx.spans().has(bare.rootSpanId) && rx.spans().has(withheld.rootSpanId));
        for (const id of [bare.rootSpanId, withheld.rootSpanId]) {
          const a = rx.spans().get(id)!.attributes;
          assert.equal(a['gen_ai.request.model'], 'gpt-4o');
          assert.equal(a['gen_ai.input.messages'], undefined);
          assert.equal(a['gen_ai.output.messages'], undefined);
        }
        assert.ok(![...rx.spans().values()].some((sp) => JSON.stringify(sp.attributes).includes('secret@example.com')));
      });
    } finally {
      await rx.close();
    }
  });

  test('OTLP/gRPC: the same spans and attributes through the TraceService', async () => {
    const gw = `gw-otlp-${++gateways}`;
    const rx = await startGrpcReceiver();
    try {
      await withExport({ protocol: 'grpc', url: rx.url, scheduledDelayMillis: 50 }, async (_ingester, otlp) => {
        const { batches: bs, records } = batches(gw, 4, 2);
        await publishAll(bs);
        await waitFor('4 requests in ClickHouse', async () => (await count(sql`SELECT count() AS n FROM ${T('requests')} FINAL WHERE instance = ${gw}`)) === 4);
        const spans = await count(sql`SELECT count() AS n FROM ${T('spans')} FINAL WHERE instance = ${gw}`);
        await waitFor('every span exported', () => otlp.stats.exported === spans && otlp.stats.pending === 0);
        await assertAllExported(gw, rx, records);
      });
    } finally {
      await rx.close();
    }
  });
});

describe('a backend that is down or does not answer', () => {
  for (const mode of ['down', 'hang'] as const) {
    test(`${mode}: ClickHouse writes and acknowledgements go on; spans past the bounded queue are dropped and counted`, async () => {
      const gw = `gw-otlp-${++gateways}`;
      // Down: a port nobody listens on. Hang: takes the request and never answers.
      const rx = mode === 'hang' ? await startHttpReceiver({ mode: 'hang' }) : null;
      const url = rx?.url ?? `http://127.0.0.1:${await freePort()}/v1/traces`;
      try {
        await withExport({ protocol: 'http/protobuf', url, maxQueueSize: 20, maxExportBatchSize: 10, scheduledDelayMillis: 20, timeoutMillis: 1_500 }, async (ingester, otlp) => {
          const { batches: bs } = batches(gw, 40, 5);
          const t0 = Date.now();
          await publishAll(bs);
          await waitFor('40 requests in ClickHouse', async () => (await count(sql`SELECT count() AS n FROM ${T('requests')} FINAL WHERE instance = ${gw}`)) === 40);
          await waitFor('every batch acknowledged', async () => (await pendingAcks()) === 0);
          // Written and acknowledged well before one export could even time out.
          assert.ok(Date.now() - t0 < 15_000, `took ${Date.now() - t0} ms`);
          assert.equal(ingester.stats.writeFailures, 0);
          // The ingester counts a batch after its acknowledgement resolves, which may be a turn after NATS has it.
          await waitFor('the ingester counted every batch', () => ingester.stats.batches >= bs.length, 5_000);
          const spans = await count(sql`SELECT count() AS n FROM ${T('spans')} FINAL WHERE instance = ${gw}`);
          // The queue holds 20 spans and nothing leaves it but by failing: most of these 400+ are dropped.
          assert.ok(otlp.stats.dropped > spans / 2, `dropped ${otlp.stats.dropped} of ${spans}`);
          assert.equal(otlp.stats.exported, 0);
          // The exports in progress fail at their timeout; everything is accounted for.
          await waitFor('the exports in flight failed', () => otlp.stats.pending === 0 && otlp.stats.failed > 0, 30_000);
          assert.equal(otlp.stats.failed + otlp.stats.dropped, spans);
          const page = renderIngesterMetrics(ingester);
          assert.equal(metricValue(page, 'sightline_ingest_otlp_spans_dropped_total'), otlp.stats.dropped);
          assert.equal(metricValue(page, 'sightline_ingest_otlp_spans_failed_total'), otlp.stats.failed);
          assert.equal(metricValue(page, 'sightline_ingest_otlp_spans_exported_total'), 0);
        });
      } finally {
        await rx?.close();
      }
    });
  }
});

test('the standard variables turn the export on and pick the protocol', () => {
  assert.equal(otlpOptionsFromEnv({}), null);
  assert.equal(otlpOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: '' }), null);
  assert.deepEqual(otlpOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }), { protocol: 'http/protobuf', maxQueueSize: undefined });
  assert.equal(otlpOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })?.protocol, 'http/json');
  assert.equal(otlpOptionsFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' })?.protocol, 'grpc');
  assert.equal(otlpOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }), null);
  assert.equal(otlpOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_BSP_MAX_QUEUE_SIZE: '100' })?.maxQueueSize, 100);
  assert.throws(() => otlpOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'thrift' }), /must be one of http\/protobuf, http\/json, grpc/);
  assert.throws(() => otlpOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_BSP_MAX_QUEUE_SIZE: '0' }), /positive integer/);
});
