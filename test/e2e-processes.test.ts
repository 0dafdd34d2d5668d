/**
 * End to end with every part real and separate: nats-server, clickhouse-server, the
 * mock provider, and gateway, ingester and query API each in its own process with the
 * environment docker-compose.yml gives them.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ClickHouseServer, NatsServer, freePort, waitFor } from './support/servers.js';
import { startApp, waitHealthy, type AppProcess } from './support/apps.js';
import { sendMixed, checkCaptured, checkStages } from './support/e2e.js';
import { startMock, type MockServer } from '../bench/mock/server.js';

let nats: NatsServer;
let ch: ClickHouseServer;
let mock: MockServer;
const apps: AppProcess[] = [];
let gatewayUrl = '';
let queryUrl = '';
let ingesterUrl = '';

before(async () => {
  [nats, ch, mock] = await Promise.all([NatsServer.start(), ClickHouseServer.start(), startMock({ chunks: 5 })]);
  const [gp, qp, ip] = [await freePort(), await freePort(), await freePort()];
  const env = {
    NATS_URL: nats.url,
    CLICKHOUSE_URL: ch.url,
    CLICKHOUSE_USER: 'default',
    CLICKHOUSE_PASSWORD: '',
    CLICKHOUSE_DATABASE: 'sightline',
    GATEWAY_PORT: String(gp),
    QUERY_PORT: String(qp),
    INGESTER_PORT: String(ip),
    OPENAI_BASE_URL: `${mock.url}/v1`,
  };
  gatewayUrl = `http://127.0.0.1:${gp}`;
  queryUrl = `http://127.0.0.1:${qp}`;
  ingesterUrl = `http://127.0.0.1:${ip}`;
  const ingester = startApp('ingester', 'apps/ingester/src/main.ts', env);
  const query = startApp('query', 'apps/query/src/main.ts', env);
  const gateway = startApp('gateway', 'apps/gateway/src/main.ts', env);
  apps.push(gateway, ingester, query);
  await Promise.all([waitHealthy(gateway, `${gatewayUrl}/healthz`), waitHealthy(ingester, `${ingesterUrl}/healthz`), waitHealthy(query, `${queryUrl}/healthz`)]);
});

after(async () => {
  for (const a of apps) await a.stop();
  await Promise.all([nats?.dispose(), ch?.dispose(), mock?.close()]);
});

test('requests through the gateway are found with their stages through the query API', async () => {
  const since = Date.now();
  const sent = await sendMixed(gatewayUrl, 5);
  assert.equal(mock.stats().openai, 10);
  await checkCaptured(queryUrl, sent);
  await checkStages(queryUrl, sent.length, since);
});

test('GATEWAY_WORKERS=2: two processes serve one port, each captured under its own instance', async () => {
  const port = await freePort();
  const gw2 = startApp('gateway x2', 'apps/gateway/src/main.ts', {
    NATS_URL: nats.url, GATEWAY_PORT: String(port), OPENAI_BASE_URL: `${mock.url}/v1`, GATEWAY_WORKERS: '2', SIGHTLINE_INSTANCE: 'gw-workers', SIGHTLINE_SPOOL_DIR: `${nats.dir}/spool`,
  });
  try {
    const url = `http://127.0.0.1:${port}`;
    await waitHealthy(gw2, `${url}/healthz`);
    await waitFor('both workers listening', () => (gw2.output.match(/listening on/g) ?? []).length === 2, 30_000);
    // Separate connections, so the primary hands them to both workers.
    const sent = await Promise.all(
      Array.from({ length: 12 }, async () => {
        const res = await fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', connection: 'close' },
          body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'w' }] }),
        });
        assert.equal(res.status, 200);
        await res.arrayBuffer();
        return res.headers.get('x-sightline-trace-id') ?? '';
      }),
    );
    const instances = new Set<string>();
    for (const id of sent) {
      await waitFor(`request ${id}`, async () => (await fetch(`${queryUrl}/v1/requests/${id}`)).status === 200, 30_000);
      const body = (await (await fetch(`${queryUrl}/v1/requests/${id}`)).json()) as { requests: { instance: string }[] };
      instances.add(body.requests[0]!.instance);
    }
    assert.equal(instances.size, 2, [...instances].join(', '));
    assert.equal(await gw2.stop(), 0, gw2.output);
  } finally {
    await gw2.stop();
  }
});

test('the ingester reports what it wrote; every app exits 0 on SIGTERM', async () => {
  const m = await (await fetch(`${ingesterUrl}/metrics`)).text();
  const requests = Number(/sightline_ingest_requests_total (\d+)/.exec(m)?.[1]);
  assert.ok(requests >= 10, `ingester wrote ${requests} requests`);
  for (const a of apps) {
    const code = await a.stop();
    assert.equal(code, 0, `${a.name} exit code; output:\n${a.output}`);
  }
});
