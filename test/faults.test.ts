/**
 * Capture under faults, with every part a real process: nats-server, clickhouse-server,
 * the mock provider, and the gateway and ingester apps. Each test runs a bounded load on
 * loopback through the gateway, injects one fault, and ends with exact row counts:
 * every answered request is in `requests` exactly once.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClickHouseServerStore, sql, table } from '@sightline/store';
import { connectNats, DURABLE_NAME, STREAM_NAME } from '@sightline/bus';
import { ClickHouseServer, NatsServer, freePort, waitFor } from './support/servers.js';
import { startApp, waitHealthy, type AppProcess } from './support/apps.js';
import { runLoad, type LoadResult } from './support/load.js';
import { startMock, type MockServer } from '../bench/mock/server.js';

let nats: NatsServer;
let ch: ClickHouseServer;
let mock: MockServer;
let store: ClickHouseServerStore;
let spoolRoot: string;
const running: AppProcess[] = [];

before(async () => {
  [nats, ch, mock] = await Promise.all([NatsServer.start(), ClickHouseServer.start(), startMock()]);
  store = new ClickHouseServerStore({ url: ch.url, database: 'sightline' });
  spoolRoot = mkdtempSync(join(tmpdir(), 'sightline-faults-'));
});

after(async () => {
  for (const a of running) await a.stop();
  await store.close();
  await Promise.all([nats.dispose(), ch.dispose(), mock.close()]);
  rmSync(spoolRoot, { recursive: true, force: true });
});

function baseEnv(): Record<string, string> {
  return {
    NATS_URL: nats.url,
    CLICKHOUSE_URL: ch.url,
    CLICKHOUSE_DATABASE: 'sightline',
    OPENAI_BASE_URL: `${mock.url}/v1`,
    INGESTER_ACK_WAIT_MS: '3000',
  };
}

interface Gateway {
  app: AppProcess;
  url: string;
  instance: string;
}

async function startGateway(instance: string, spool = join(spoolRoot, instance)): Promise<Gateway> {
  const port = await freePort();
  const app = startApp(`gateway ${instance}`, 'apps/gateway/src/main.ts', { ...baseEnv(), GATEWAY_PORT: String(port), SIGHTLINE_INSTANCE: instance, SIGHTLINE_SPOOL_DIR: spool });
  running.push(app);
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(app, `${url}/healthz`);
  return { app, url, instance };
}

async function startIngester(): Promise<{ app: AppProcess; url: string }> {
  const port = await freePort();
  const app = startApp('ingester', 'apps/ingester/src/main.ts', { ...baseEnv(), INGESTER_PORT: String(port) });
  running.push(app);
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(app, `${url}/healthz`);
  return { app, url };
}

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? Number.NaN : Number(line.slice(name.length + 1));
}

async function counts(instance: string): Promise<{ final: number; distinct: number }> {
  const pattern = `${instance}-%`;
  const rows = await store.query<{ final: string | number }>(sql`SELECT count() AS final FROM ${table('sightline', 'requests')} FINAL WHERE instance LIKE ${pattern}`);
  const d = await store.query<{ distinct: string | number }>(sql`SELECT uniqExact(trace_id) AS distinct FROM ${table('sightline', 'requests')} WHERE instance LIKE ${pattern}`);
  return { final: Number(rows[0]?.final ?? 0), distinct: Number(d[0]?.distinct ?? 0) };
}

/** Every answered request is in ClickHouse, once; and nothing else is. */
async function assertExactlyOnce(instance: string, answered: LoadResult[]): Promise<void> {
  const n = answered.length;
  await waitFor(`${n} requests of ${instance} in ClickHouse`, async () => (await counts(instance)).final >= n, 90_000, 250);
  const c = await counts(instance);
  assert.equal(c.final, n, 'requests visible (FINAL)');
  assert.equal(c.distinct, n, 'distinct trace ids');
  const ids = answered.map((r) => r.traceId);
  const found = await store.query<{ trace_id: string }>(sql`SELECT DISTINCT trace_id FROM ${table('sightline', 'requests')} WHERE has(${ids}, trace_id)`);
  assert.equal(found.length, n, 'the answered requests themselves are the ones stored');
}

let gw: Gateway;
let ing: { app: AppProcess; url: string };

/** 16 s of load through the gateway; `server` is down from 3 s to 13 s of it. */
async function loadThroughOutage(server: { stop(): Promise<unknown>; start(): Promise<unknown> }): Promise<LoadResult[]> {
  const load = runLoad({ url: `${gw.url}/v1/chat/completions`, rps: 30, durationMs: 16_000 });
  await delay(3000);
  await server.stop();
  await delay(10_000);
  await server.start();
  return load;
}

test('NATS stopped for 10 s under load: every request answered, every request captured once', async () => {
  gw = await startGateway('f-nats');
  ing = await startIngester();
  const results = await loadThroughOutage(nats);
  assert.equal(results.filter((r) => r.status === 200).length, results.length, `non-200: ${JSON.stringify(results.find((r) => r.status !== 200))}`);
  assert.ok((await metric(gw.url, 'sightline_capture_spooled_total')) > 0, 'batches went through the spool');
  await assertExactlyOnce('f-nats', results);
  assert.equal(await metric(gw.url, 'sightline_capture_dropped_total'), 0);
});

test('ClickHouse stopped for 10 s under load: nothing lost, nothing doubled', async () => {
  gw = await startGateway('f-ch');
  const results = await loadThroughOutage(ch);
  assert.equal(results.filter((r) => r.status === 200).length, results.length);
  await assertExactlyOnce('f-ch', results);
  assert.ok((await metric(ing.url, 'sightline_ingest_write_failures_total')) > 0, 'the ingester saw the outage');
});

/** Messages the durable consumer delivered to an ingester that has not acknowledged them yet. */
async function unacknowledged(): Promise<number> {
  const nc = await connectNats(nats.url, 'faults-observer', { maxReconnectAttempts: 0 });
  try {
    return (await (await nc.jetstreamManager()).consumers.info(STREAM_NAME, DURABLE_NAME)).num_ack_pending;
  } finally {
    await nc.close();
  }
}

test('the ingester killed with SIGKILL under load, then restarted: what it held is redelivered, nothing lost, nothing doubled', async () => {
  gw = await startGateway('f-ingkill');
  const load = runLoad({ url: `${gw.url}/v1/chat/completions`, rps: 30, durationMs: 12_000 });
  // Batches arrive every ~50 ms at this rate, and a fetch holds them until it ends (up to
  // 1 s) and they are written: killed while it holds some, the ingester leaves them to be
  // redelivered (after the consumer's ack wait, 3 s here) to the next one.
  await delay(4000);
  await waitFor('batches delivered to the ingester and not yet acknowledged', async () => (await unacknowledged()) > 0, 10_000, 20);
  await ing.app.stop(0); // SIGKILL
  await delay(2000);
  ing = await startIngester();
  const results = await load;
  assert.equal(results.filter((r) => r.status === 200).length, results.length);
  await assertExactlyOnce('f-ingkill', results);
  // The restarted ingester received what the killed one held (it has no other source of redeliveries).
  assert.ok((await metric(ing.url, 'sightline_ingest_redelivered_total')) > 0, 'a redelivery happened');
});

test('two ingesters on one durable consumer share the work without duplicates', async () => {
  const second = await startIngester();
  gw = await startGateway('f-two');
  const results = await runLoad({ url: `${gw.url}/v1/chat/completions`, rps: 40, durationMs: 8000 });
  await assertExactlyOnce('f-two', results);
  const writers = await store.query<{ ingester: string }>(sql`SELECT DISTINCT ingester FROM ${table('sightline', 'ingest_batches')} WHERE instance LIKE ${'f-two-%'}`);
  assert.equal(writers.length, 2, 'both ingesters wrote batches');
  await second.app.stop();
});

test('the gateway sent SIGTERM under load: in-flight requests complete, their spans arrive, exit 0', async () => {
  mock.configure({ latencyMs: 400 });
  gw = await startGateway('f-term');
  const load = runLoad({ url: `${gw.url}/v1/chat/completions`, rps: 30, durationMs: 5000 });
  await delay(3000);
  const exitCode = await gw.app.stop();
  const results = await load;
  mock.configure({ latencyMs: 0 });
  assert.equal(exitCode, 0, gw.app.output);
  const answered = results.filter((r) => r.status === 200);
  assert.ok(answered.length >= 60, `answered ${answered.length}`);
  // Requests sent after the listener closed were refused (never accepted, status 0), or, on a
  // connection already open, answered 503 shutting_down and captured; none was cut.
  assert.ok(results.every((r) => r.status === 200 || r.status === 503 || r.status === 0));
  const refused = results.filter((r) => r.status === 503);
  await assertExactlyOnce('f-term', [...answered, ...refused]);
  const errors = await store.query<{ error_type: string; n: string | number }>(
    sql`SELECT error_type, count() AS n FROM ${table('sightline', 'requests')} FINAL WHERE instance LIKE ${'f-term-%'} AND http_status != 200 GROUP BY error_type`,
  );
  assert.deepEqual(
    errors.map((e) => [e.error_type, Number(e.n)]),
    refused.length === 0 ? [] : [['shutting_down', refused.length]],
  );
});

test('the gateway killed with SIGKILL while its spool holds batches, restarted with NATS up: the spool is replayed', async () => {
  const spool = join(spoolRoot, 'f-spool');
  gw = await startGateway('f-spool', spool);
  await nats.stop();
  const results = await runLoad({ url: `${gw.url}/v1/chat/completions`, rps: 50, durationMs: 3000 });
  assert.equal(results.filter((r) => r.status === 200).length, results.length);
  await waitFor('every answered request in the spool', async () => (await metric(gw.url, 'sightline_capture_spooled_total')) === results.length, 20_000, 100);
  gw.app.child.kill('SIGKILL');
  await gw.app.exited;
  await nats.start();
  const again = await startGateway('f-spool', spool);
  await assertExactlyOnce('f-spool', results);
  await waitFor('the spool empties', async () => (await metric(again.url, 'sightline_capture_spool_batches')) === 0, 20_000, 100);
  assert.equal(await metric(again.url, 'sightline_capture_replayed_total'), results.length);
});
