/**
 * Prompts and answers end to end through the one-command start (`npm start`,
 * apps/sightline/src/main.ts): one process with the in-process bus and chdb, data in a
 * temporary directory, authentication on (the in-process key directory), against the mock
 * provider in both APIs. The same checks as e2e-content.test.ts's `full` team, through the
 * query API (chdb locks its directory: SQL would have to go through the running process),
 * and a `none` team's request stored without content.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { freePort } from './support/servers.js';
import { startApp, waitHealthy, type AppProcess } from './support/apps.js';
import { capturedRequest, checkContent, reader, sendContentMatrix, uniquePhrase } from './support/content-e2e.js';
import { startMock, type MockServer } from '../bench/mock/server.js';

const ADMIN = 'e2e-embedded-content-admin-token-0123';
let mock: MockServer;
let app: AppProcess;
let dir: string;
let gatewayUrl = '';
let queryUrl = '';

async function admin(method: string, path: string, body: unknown): Promise<Response> {
  return fetch(`${queryUrl}${path}`, { method, headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

async function createKey(team: string, scopes: string[]): Promise<string> {
  const r = await admin('POST', '/v1/admin/keys', { team, name: `${team}-${scopes.join('-')}`, scopes });
  assert.equal(r.status, 201, await r.clone().text());
  return ((await r.json()) as { key: string }).key;
}

before(async () => {
  mock = await startMock({ chunks: 4 });
  dir = mkdtempSync(join(tmpdir(), 'sightline-embedded-content-'));
  const [gp, qp, ip] = [await freePort(), await freePort(), await freePort()];
  gatewayUrl = `http://127.0.0.1:${gp}`;
  queryUrl = `http://127.0.0.1:${qp}`;
  app = startApp('sightline', 'apps/sightline/src/main.ts', {
    GATEWAY_PORT: String(gp),
    QUERY_PORT: String(qp),
    INGESTER_PORT: String(ip),
    OPENAI_BASE_URL: `${mock.url}/v1`,
    OPENAI_API_KEY: 'sk-configured-provider-key',
    ANTHROPIC_BASE_URL: mock.url,
    ANTHROPIC_API_KEY: 'sk-ant-configured-provider-key',
    SIGHTLINE_ADMIN_TOKEN: ADMIN,
    SIGHTLINE_DATA_DIR: dir,
    NATS_URL: '',
    CLICKHOUSE_URL: '',
  });
  await waitHealthy(app, `${gatewayUrl}/healthz`);
  await waitHealthy(app, `${queryUrl}/healthz`);
});

after(async () => {
  await app?.stop();
  await mock?.close();
  rmSync(dir, { recursive: true, force: true });
});

test('one command: prompts and answers of both dialects, streamed or not, translated or not, stored and served; a read key does not see them; q finds them', async () => {
  assert.match(app.output, /bus: in-process/);
  assert.match(app.output, /store: in-process ClickHouse \(chdb\)/);
  const r = await admin('PUT', '/v1/admin/teams/quiet', { content_capture: 'none' });
  assert.equal(r.status, 200, await r.clone().text());
  const [full, read, quiet] = [await createKey('loud', ['gateway', 'read', 'content']), await createKey('loud', ['read']), await createKey('quiet', ['gateway', 'read', 'content'])];
  const sent = await sendContentMatrix(gatewayUrl, full);
  await checkContent(queryUrl, full, read, sent);

  const phrase = uniquePhrase('quiet');
  const q = await new OpenAI({ apiKey: quiet, baseURL: `${gatewayUrl}/v1`, maxRetries: 0 }).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: phrase }] }).withResponse();
  const v = await capturedRequest(reader(queryUrl, quiet), q.response.headers.get('x-sightline-trace-id')!);
  assert.equal(v.content, null, 'policy none: the request is captured, its content is not');
  const found = await reader(queryUrl, ADMIN)(`/v1/requests?q=${phrase}`);
  assert.deepEqual(((await found.json()) as { data: unknown[] }).data, []);
});
