/**
 * End to end through the one-command start (`npm start`): one process with the
 * in-process bus and the in-process ClickHouse engine (chdb), data in a temporary
 * directory, against the mock provider.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './support/servers.js';
import { startApp, waitHealthy, type AppProcess } from './support/apps.js';
import { sendMixed, checkCaptured, checkStages } from './support/e2e.js';
import { startMock, type MockServer } from '../bench/mock/server.js';

let mock: MockServer;
let app: AppProcess;
let dir: string;
let gatewayUrl = '';
let queryUrl = '';

before(async () => {
  mock = await startMock({ chunks: 5 });
  dir = mkdtempSync(join(tmpdir(), 'sightline-embedded-'));
  const [gp, qp, ip] = [await freePort(), await freePort(), await freePort()];
  gatewayUrl = `http://127.0.0.1:${gp}`;
  queryUrl = `http://127.0.0.1:${qp}`;
  const env: Record<string, string> = {
    GATEWAY_PORT: String(gp),
    QUERY_PORT: String(qp),
    INGESTER_PORT: String(ip),
    OPENAI_BASE_URL: `${mock.url}/v1`,
    SIGHTLINE_DATA_DIR: dir,
    NATS_URL: '',
    CLICKHOUSE_URL: '',
  };
  app = startApp('sightline', 'apps/sightline/src/main.ts', env);
  await waitHealthy(app, `${gatewayUrl}/healthz`);
  await waitHealthy(app, `${queryUrl}/healthz`);
});

after(async () => {
  await app?.stop();
  await mock?.close();
  rmSync(dir, { recursive: true, force: true });
});

test('one command: requests are captured into the embedded store and served by the query API', async () => {
  assert.match(app.output, /bus: in-process/);
  assert.match(app.output, /store: in-process ClickHouse \(chdb\)/);
  const since = Date.now();
  const sent = await sendMixed(gatewayUrl, 4);
  await checkCaptured(queryUrl, sent);
  await checkStages(queryUrl, sent.length, since);
  assert.ok(existsSync(join(dir, 'clickhouse')), 'data lives under SIGHTLINE_DATA_DIR');
});

test('shutdown flushes capture and exits 0', async () => {
  const sent = await sendMixed(gatewayUrl, 1);
  const code = await app.stop();
  assert.equal(code, 0, app.output);
  // Restart on the same data directory: what was flushed at shutdown is there.
  const [gp, qp, ip] = [await freePort(), await freePort(), await freePort()];
  app = startApp('sightline', 'apps/sightline/src/main.ts', {
    GATEWAY_PORT: String(gp), QUERY_PORT: String(qp), INGESTER_PORT: String(ip), OPENAI_BASE_URL: `${mock.url}/v1`, SIGHTLINE_DATA_DIR: dir, NATS_URL: '', CLICKHOUSE_URL: '',
  });
  queryUrl = `http://127.0.0.1:${qp}`;
  await waitHealthy(app, `${queryUrl}/healthz`);
  await checkCaptured(queryUrl, sent);
});
