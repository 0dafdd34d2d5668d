/**
 * The query API over both engines (a real clickhouse-server 18.16 and chdb 26.x), with
 * rows made by the real span builder: waterfalls and attempts, stage percentiles,
 * capture health (served vs captured per instance and minute), ingest lag, and errors.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ChdbStore, ClickHouseServerStore, migrate, type Store } from '@sightline/store';
import { RequestRecord, toWire } from '@sightline/capture';
import { SpanBuilder } from '@sightline/spans';
import { newTraceId, type IngestBatchRow } from '@sightline/core';
import { buildQueryServer, startQuery, DEFAULT_READ_LIMITS } from '@sightline/app-query';
import { loadConfigFile, priceLookup } from '@sightline/config';
import { Rollup } from '@sightline/app-ingester';
import type { FastifyInstance } from 'fastify';
import { ClickHouseServer } from '../../../test/support/servers.js';
import { servedRecord } from '../../../test/support/records.js';
import { checked, type Checked } from './checked.js';

/**
 * A fixed clock: every row is stamped in the minute 2025-06-01 12:00 UTC, 20 s in, and every
 * query names its range, so no test depends on when (or across which minute) it runs.
 */
const BASE_MS = Date.UTC(2025, 5, 1, 12, 0, 20);
const BASE_S = BASE_MS / 1000;
const BASE_NS = BigInt(BASE_MS) * 1_000_000n;
const MINUTE_S = BASE_S - (BASE_S % 60);
const ORIGIN_NS = BASE_NS - 1_000_000_000n;
const iso = (ms: number) => new Date(ms).toISOString();
/** A range around the fixed minute, as query parameters. */
const RANGE = `from=${iso(BASE_MS - 120_000)}&to=${iso(BASE_MS + 120_000)}`;

/**
 * Request `seq` of the fixture. Marks are milliseconds since the gateway's monotonic origin
 * (ORIGIN_NS below, passed to the span builder): it starts at BASE_MS + seq ms.
 */
function record(seq: number, opts: { retried?: boolean } = {}): RequestRecord {
  return servedRecord({ seq, t0: 1000 + seq, provider: 'p', team: 'search', retried: opts.retried === true, usage: { prompt: 100, completion: 50, cached: 20 } });
}

function suite(name: string, open: () => Promise<{ store: Store; done: () => Promise<void> }>) {
  describe(name, () => {
    let store: Store;
    let done: () => Promise<void>;
    let app: FastifyInstance;
    /** `app.inject`, each answer checked against /openapi.json (checked.ts). */
    let api: Checked;
    const builder = new SpanBuilder();
    let retriedTrace = '';
    /** One trace id sent by 2,000 requests (a client reusing its `traceparent`), an hour later. */
    const crowdedTrace = newTraceId();

    before(async () => {
      ({ store, done } = await open());
      await migrate(store);
      app = buildQueryServer({ store, priceOf: priceLookup([{ match: ['gpt-4o*'], inputPerMTok: 2.5, outputPerMTok: 10, cacheReadPerMTok: 1.25, cacheWritePerMTok: 2.5 }]) });
      api = await checked(app);
      // Requests 1..10 served, 4 and 7 never captured; 2 delivered twice.
      const built = [1, 2, 3, 5, 6, 8, 9, 10].map((seq) => builder.build(toWire(record(seq, { retried: seq === 3 })), 'gw-q', ORIGIN_NS));
      retriedTrace = built[2]!.request.trace_id;
      const requests = built.map((b) => b.request);
      const spans = built.flatMap((b) => b.spans);
      await store.insert('spans', spans);
      await store.insert('requests', requests);
      await store.insert('requests', [built[1]!.request]);
      await store.insert('spans', built[1]!.spans);
      const written = BASE_NS + 1_000_000_000n;
      const ledger: IngestBatchRow[] = [
        { instance: 'gw-q', batch: '1', ingester: 'i', published_at_unix_nano: String(written - 40_000_000n), written_at_unix_nano: String(written), written_at: BASE_S + 1, requests: 4, spans: 40 },
        { instance: 'gw-q', batch: '2', ingester: 'i', published_at_unix_nano: String(written - 10_000_000n), written_at_unix_nano: String(written), written_at: BASE_S + 1, requests: 4, spans: 40 },
        // batch 2 again, later (a redelivery): lag counts the first, visible write
        { instance: 'gw-q', batch: '2', ingester: 'i', published_at_unix_nano: String(written - 10_000_000n), written_at_unix_nano: String(written + 5_000_000_000n), written_at: BASE_S + 6, requests: 4, spans: 40 },
      ];
      await store.insert('ingest_batches', ledger);
      const crowd = Array.from({ length: 2000 }, (_, i) => {
        const r = record(i + 1, { retried: i % 2 === 0 });
        r.traceId = crowdedTrace;
        r.model = 'crowd';
        return builder.build(toWire(r), 'gw-crowd', ORIGIN_NS + 3_600_000_000_000n);
      });
      await store.insert('requests', crowd.map((b) => b.request));
      await store.insert('spans', crowd.flatMap((b) => b.spans));
    });
    after(async () => {
      await app.close();
      await done();
    });

    test('capture health: served from request numbers, captured once, gaps are missing', async () => {
      const res = await api.inject({ url: `/v1/capture?${RANGE}` });
      assert.equal(res.statusCode, 200);
      const body = res.json() as { instances: { instance: string; served: number; captured: number; missing: number; minutes: { minute: string; served: number; captured: number }[] }[]; lag: { batches: number; p50_ms: number; max_ms: number } };
      const inst = body.instances.find((i) => i.instance === 'gw-q')!;
      assert.equal(inst.served, 10);
      assert.equal(inst.captured, 8);
      assert.equal(inst.missing, 2);
      assert.deepEqual(inst.minutes.map((m) => [m.minute, m.served, m.captured]), [[iso(MINUTE_S * 1000), 10, 8]]);
      assert.equal(body.lag.batches, 2);
      assert.ok(Math.abs(body.lag.max_ms - 40) < 1, `max lag ${body.lag.max_ms}`);
    });

    test('a request with a retry: waterfall of stages, and each attempt listed', async () => {
      const res = await api.inject({ url: `/v1/requests/${retriedTrace}` });
      assert.equal(res.statusCode, 200);
      const body = res.json() as { total: number; omitted: number; requests: { total_ns: number; waterfall: { stage: string; duration_ns: number }[]; attempts: { attempt: number; status: number; ok: boolean }[] }[] };
      assert.equal(body.requests.length, 1);
      assert.deepEqual([body.total, body.omitted], [1, 0]);
      const r = body.requests[0]!;
      assert.ok(r.waterfall.some((w) => w.stage === 'upstream.retry'));
      assert.ok(!r.waterfall.some((w) => w.stage === 'upstream.attempt'));
      assert.equal(r.waterfall.reduce((a, w) => a + w.duration_ns, 0), r.total_ns);
      assert.deepEqual(r.attempts.map((a) => [a.attempt, a.status, a.ok]), [[1, 500, false], [2, 200, true]]);
    });

    test('a trace id reused by 2,000 requests: a bounded list, oldest first, and the count left out, within a second', async () => {
      const t0 = performance.now();
      const res = await api.inject({ url: `/v1/requests/${crowdedTrace}` });
      const elapsedMs = performance.now() - t0;
      assert.equal(res.statusCode, 200);
      const body = res.json() as { total: number; omitted: number; requests: { seq: number; total_ns: number; waterfall: { stage: string; duration_ns: number }[]; attempts: { ok: boolean }[] }[] };
      assert.equal(body.requests.length, 100);
      assert.equal(body.total, 2000);
      assert.equal(body.omitted, 1900);
      assert.deepEqual(body.requests.map((r) => r.seq), Array.from({ length: 100 }, (_, i) => i + 1));
      // Each listed request got its own spans: retried ones (odd seq) two attempts, the others one.
      for (const r of body.requests) {
        assert.equal(r.waterfall.reduce((a, w) => a + w.duration_ns, 0), r.total_ns, `seq ${r.seq}`);
        assert.equal(r.attempts.length, r.seq % 2 === 1 ? 2 : 1, `seq ${r.seq}`);
        assert.equal(r.waterfall.filter((w) => w.stage === 'parse').length, 1, `seq ${r.seq}`);
      }
      assert.ok(elapsedMs < 1000, `answered in ${Math.round(elapsedMs)} ms`);
    });

    test('a request stored twice is returned once', async () => {
      const res = await api.inject({ url: `/v1/stages?model=gpt-4o&${RANGE}` });
      const body = res.json() as { stages: { stage: string; count: number; p50_ns: number }[] };
      const parse = body.stages.find((s) => s.stage === 'parse')!;
      assert.equal(parse.count, 8, 'each request counted once');
      assert.ok(!body.stages.some((s) => s.stage === 'upstream.attempt'), 'attempt spans are not stages');
      assert.equal(body.stages.find((s) => s.stage === 'upstream.retry')?.count, 1);
      assert.ok(Math.abs(parse.p50_ns - 10_000) <= 2, `parse p50 ${parse.p50_ns}`);
    });

    test('usage and cost per team and model come from the rollup, each request counted once', async () => {
      const rollup = new Rollup(store);
      await rollup.recompute(MINUTE_S);
      await rollup.recompute(MINUTE_S); // recomputing is idempotent
      const res = await api.inject({ url: `/v1/usage?${RANGE}&group_by=team,model` });
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json() as { rows: { team: string; model: string; requests: number; input_tokens: number; output_tokens: number; cache_read_tokens: number; cost_usd: number | null }[]; total: { requests: number; cost_usd: number | null } };
      const row = body.rows.find((r) => r.team === 'search' && r.model === 'gpt-4o')!;
      assert.equal(row.requests, 8);
      assert.equal(row.input_tokens, 800);
      assert.equal(row.output_tokens, 400);
      assert.equal(row.cache_read_tokens, 160);
      // 8 × (80 × 2.5 + 20 × 1.25 + 50 × 10) / 1e6
      assert.ok(Math.abs((row.cost_usd ?? 0) - 0.0058) < 1e-9, String(row.cost_usd));
      const bad = await api.inject({ url: '/v1/usage?group_by=colour' });
      assert.equal(bad.statusCode, 400);
    });

    test('with the shipped configuration (no pricing entries), usage and metrics report cost from the shipped table', async () => {
      await new Rollup(store).recompute(MINUTE_S);
      const cfg = loadConfigFile(fileURLToPath(new URL('../../../config/sightline.yaml', import.meta.url)), { env: () => undefined });
      assert.deepEqual(cfg.pricing, []);
      const shippedApi = await checked(buildQueryServer({ store, priceOf: priceLookup(cfg.pricing, { shipped: cfg.pricingDefaults }) }));
      // 8 × (80 × $2.50 + 20 × $1.25 cached + 50 × $10) / 1e6 at the shipped gpt-4o price.
      const usage = (await shippedApi.inject({ url: `/v1/usage?${RANGE}&group_by=model&model=gpt-4o` })).json() as { rows: { model: string; cost_usd: number | null }[] };
      assert.equal(usage.rows.length, 1);
      assert.ok(Math.abs((usage.rows[0]!.cost_usd ?? Number.NaN) - 0.0058) < 1e-9, String(usage.rows[0]!.cost_usd));
      const range = { from: iso(BASE_MS - 120_000), to: iso(BASE_MS + 120_000) };
      const res = await shippedApi.inject({ method: 'POST', url: '/v1/metrics', payload: { ...range, metrics: ['requests', 'cost_usd'], filters: { model: ['gpt-4o'] } } });
      assert.equal(res.statusCode, 200, res.body);
      const rows = (res.json() as { rows: { requests: number; cost_usd: number | null }[] }).rows;
      assert.equal(rows.length, 1);
      assert.equal(rows[0]!.requests, 8);
      assert.ok(Math.abs((rows[0]!.cost_usd ?? Number.NaN) - 0.0058) < 1e-6, String(rows[0]!.cost_usd));
      // pricing_defaults: false and no entries: no prices, so cost is null where there were tokens.
      const unpriced = await checked(buildQueryServer({ store, priceOf: priceLookup(cfg.pricing, { shipped: false }) }));
      const none = (await unpriced.inject({ url: `/v1/usage?${RANGE}&group_by=model&model=gpt-4o` })).json() as { rows: { cost_usd: number | null }[] };
      assert.equal(none.rows[0]?.cost_usd, null);
    });

    test('a query stopped by a limit is a 422 that says how to narrow it, never a 500', async () => {
      const limits = { maxExecutionTimeS: 10, maxMemoryBytes: 1024 ** 3, maxResultRows: 2 };
      const rows = buildQueryServer({ store, limits });
      const memory = buildQueryServer({ store, limits: { ...limits, maxResultRows: 100_000, maxMemoryBytes: 1024 ** 2 } });
      const [rowsApi, memoryApi] = [await checked(rows), await checked(memory)];
      try {
        const res = await rowsApi.inject({ url: `/v1/stages?${RANGE}` });
        assert.equal(res.statusCode, 422, res.body);
        const b = res.json() as { error: { code: string; message: string } };
        assert.equal(b.error.code, 'query_too_large');
        assert.match(b.error.message, /more rows than the query API returns \(2\); ask for a shorter range \(from\/to\) or filter by model, provider or team/);
        const mem = await memoryApi.inject({ url: `/v1/requests/${crowdedTrace}` });
        assert.equal(mem.statusCode, 422, mem.body);
        assert.match((mem.json() as { error: { message: string } }).error.message, /more memory than the query API allows \(1 MiB\); .* with SQL/);
        const metrics = await rowsApi.inject({ url: '/metrics' });
        assert.match(metrics.body, /^sightline_query_limited_total 1$/m);
        assert.match(metrics.body, /^sightline_query_failures_total 0$/m);
        assert.match(metrics.body, /^sightline_query_store_reads_resent_total \d+$/m);
        // The same queries within the default limits answer.
        assert.equal((await api.inject({ url: `/v1/stages?${RANGE}` })).statusCode, 200);
      } finally {
        await rows.close();
        await memory.close();
      }
    });

    test('each endpoint caps its range (400 past it): stages and capture 31 days, usage 400', async () => {
      const day = 86_400_000;
      const span = (days: number) => `from=${iso(BASE_MS - days * day)}&to=${iso(BASE_MS)}`;
      for (const [path, max] of [['/v1/stages', 31], ['/v1/capture', 31], ['/v1/usage', 400]] as const) {
        assert.equal((await api.inject({ url: `${path}?${span(max)}` })).statusCode, 200, path);
        const res = await api.inject({ url: `${path}?${span(max + 1)}` });
        assert.equal(res.statusCode, 400, path);
        assert.match((res.json() as { error: { message: string } }).error.message, new RegExp(`at most ${max} days`));
      }
      assert.equal((await api.inject({ url: `/v1/stages?${span(400)}` })).statusCode, 400);
    });

    test('the query API listens on loopback unless told otherwise (QUERY_HOST)', async () => {
      const q = await startQuery({ store, port: 0, limits: DEFAULT_READ_LIMITS });
      try {
        const addr = q.app.server.address();
        assert.equal(typeof addr === 'object' && addr !== null ? addr.address : addr, '127.0.0.1');
        assert.equal((await fetch(`${q.url}/healthz`)).status, 200);
      } finally {
        await q.close();
      }
      const shipped = fileURLToPath(new URL('../../../config/sightline.yaml', import.meta.url));
      assert.equal(loadConfigFile(shipped, { env: () => undefined }).query.host, '127.0.0.1');
      assert.equal(loadConfigFile(shipped, { env: (n) => (n === 'QUERY_HOST' ? '0.0.0.0' : undefined) }).query.host, '0.0.0.0');
    });

    test('bad parameters are 400s with a message; unknown ids are 404s', async () => {
      for (const url of ['/v1/requests/xyz', '/v1/stages?from=tomorrow', '/v1/stages?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z', '/v1/capture?to=nope', `/v1/stages?model=${'m'.repeat(300)}`]) {
        const res = await api.inject({ url });
        assert.equal(res.statusCode, 400, url);
        const b = res.json() as { error: { code: string; message: string } };
        assert.equal(b.error.code, 'bad_parameter');
        assert.ok(b.error.message.length > 10);
      }
      const nf = await api.inject({ url: `/v1/requests/${newTraceId()}` });
      assert.equal(nf.statusCode, 404);
      assert.equal((nf.json() as { error: { code: string } }).error.code, 'not_found');
    });
  });
}

suite('clickhouse-server', async () => {
  const server = await ClickHouseServer.start();
  const store = new ClickHouseServerStore({ url: server.url, database: 'sightline' });
  return { store, done: async () => { await store.close(); await server.dispose(); } };
});

suite('chdb', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sightline-q-'));
  const store = await ChdbStore.open({ path: dir });
  return { store, done: async () => { await store.close(); rmSync(dir, { recursive: true, force: true }); } };
});
