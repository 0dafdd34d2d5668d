/**
 * Teams and keys end to end (issue 10), every part real and separate: nats-server,
 * clickhouse-server, the mock provider, two gateway replicas, an ingester and the query API,
 * each its own process with authentication on. Keys are created through the admin API and
 * reach both replicas through the NATS key-value bucket.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { ClickHouseServer, NatsServer, freePort, waitFor } from './support/servers.js';
import { startApp, waitHealthy, type AppProcess } from './support/apps.js';
import { startMock, type MockServer } from '../bench/mock/server.js';

const ADMIN = 'e2e-admin-token-0123456789abcdef';
let nats: NatsServer;
let ch: ClickHouseServer;
let mock: MockServer;
let dataDir: string;
const apps: AppProcess[] = [];
const gateways: string[] = [];
let queryUrl = '';

interface CreatedKey {
  id: string;
  key: string;
  team: string;
}

async function admin(method: string, path: string, body?: unknown, token = ADMIN): Promise<Response> {
  return fetch(`${queryUrl}${path}`, { method, headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body: body === undefined ? null : JSON.stringify(body) });
}

async function createKey(team: string, scopes: string[]): Promise<CreatedKey> {
  const r = await admin('POST', '/v1/admin/keys', { team, name: `${team}-e2e`, scopes, models: ['gpt-*'], expires_at: null });
  assert.equal(r.status, 201, await r.clone().text());
  return (await r.json()) as CreatedKey;
}

/** Requests answered 200, per key: what each team's numbers must add up to. */
const served = new Map<string, number>();

async function chat(gateway: string, key: string): Promise<Response> {
  const r = await fetch(`${gateway}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'x-sightline-team': 'someone-else' },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hello' }] }),
  });
  if (r.status === 200) served.set(key, (served.get(key) ?? 0) + 1);
  return r;
}

/** Milliseconds until `ok()` holds on every gateway, polling; fails past `deadlineMs`. */
async function timeUntilAll(deadlineMs: number, ok: (gateway: string) => Promise<boolean>): Promise<number> {
  const start = Date.now();
  await waitFor('every gateway replica', async () => (await Promise.all(gateways.map(ok))).every((x) => x), deadlineMs, 20);
  return Date.now() - start;
}

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'sightline-e2e-teams-'));
  [nats, ch, mock] = await Promise.all([NatsServer.start(), ClickHouseServer.start(), startMock({ chunks: 3 })]);
  const [g1, g2, qp, ip] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const env = {
    NATS_URL: nats.url,
    CLICKHOUSE_URL: ch.url,
    CLICKHOUSE_USER: 'default',
    CLICKHOUSE_PASSWORD: '',
    CLICKHOUSE_DATABASE: 'sightline',
    QUERY_PORT: String(qp),
    INGESTER_PORT: String(ip),
    OPENAI_BASE_URL: `${mock.url}/v1`,
    OPENAI_API_KEY: 'sk-configured-provider-key',
    SIGHTLINE_ADMIN_TOKEN: ADMIN,
    SIGHTLINE_DATA_DIR: dataDir,
  };
  queryUrl = `http://127.0.0.1:${qp}`;
  const ingester = startApp('ingester', 'apps/ingester/src/main.ts', env);
  const query = startApp('query', 'apps/query/src/main.ts', env);
  apps.push(ingester, query);
  for (const [i, port] of [g1, g2].entries()) {
    const gw = startApp(`gateway ${i + 1}`, 'apps/gateway/src/main.ts', { ...env, GATEWAY_PORT: String(port), SIGHTLINE_SPOOL_DIR: join(dataDir, `spool-${i}`) });
    apps.push(gw);
    gateways.push(`http://127.0.0.1:${port}`);
  }
  await Promise.all([
    waitHealthy(ingester, `http://127.0.0.1:${ip}/healthz`),
    waitHealthy(query, `${queryUrl}/healthz`),
    ...gateways.map((g, i) => waitHealthy(apps[2 + i]!, `${g}/healthz`)),
  ]);
});

after(async () => {
  for (const a of apps) await a.stop();
  await Promise.all([nats?.dispose(), ch?.dispose(), mock?.close()]);
  rmSync(dataDir, { recursive: true, force: true });
});

test('without a key or the admin token the query API is a 401; the admin token sent to a gateway is a 401', async () => {
  const r = await fetch(`${queryUrl}/v1/stages`);
  assert.equal(r.status, 401);
  assert.equal(((await r.json()) as { error: { code: string } }).error.code, 'unauthorized');
  const g = await chat(gateways[0]!, ADMIN);
  assert.equal(g.status, 401);
  const health = (await (await fetch(`${gateways[0]}/healthz`)).json()) as { authentication: string; directory: { synced: boolean } };
  assert.deepEqual([health.authentication, health.directory.synced], ['on', true]);
});

test('two teams on two replicas: keys work everywhere within 2 s, the provider never sees them, each team reads only its own rows, a revocation reaches both replicas within 2 s', async (t) => {
  const alpha = await createKey('alpha', ['gateway', 'read']);
  const beta = await createKey('beta', ['gateway', 'read']);
  const reachMs = await timeUntilAll(2000, async (g) => (await chat(g, alpha.key)).status === 200 && (await chat(g, beta.key)).status === 200);
  assert.ok(reachMs < 2000, `keys reached both replicas in ${reachMs} ms`);
  t.diagnostic(`new keys served by both replicas after ${reachMs} ms`);

  const sent: { team: string; traceId: string }[] = [];
  for (const g of gateways) {
    for (const k of [alpha, beta]) {
      const r = await chat(g, k.key);
      assert.equal(r.status, 200);
      await r.arrayBuffer();
      sent.push({ team: k.team, traceId: r.headers.get('x-sightline-trace-id')! });
    }
  }
  for (const r of mock.lastRequests()) {
    assert.ok(!JSON.stringify(r.headers).includes('sl-'), 'a Sightline key reached the provider');
    assert.equal(r.headers.authorization, 'Bearer sk-configured-provider-key');
  }

  const read = (path: string, key: CreatedKey | null) => fetch(`${queryUrl}${path}`, { headers: { authorization: `Bearer ${key === null ? ADMIN : key.key}` } });
  for (const s of sent) {
    await waitFor(`capture of ${s.traceId}`, async () => (await read(`/v1/requests/${s.traceId}`, null)).status === 200, 30_000);
    const own = s.team === 'alpha' ? alpha : beta;
    const other = s.team === 'alpha' ? beta : alpha;
    const mine = (await (await read(`/v1/requests/${s.traceId}`, own)).json()) as { requests: { team: string; attributes: Record<string, string> }[] };
    assert.equal(mine.requests[0]!.team, s.team, 'the captured team is the key\'s, not the header\'s');
    assert.equal(mine.requests[0]!.attributes['sightline.key_id'], own.id);
    assert.equal((await read(`/v1/requests/${s.traceId}`, other)).status, 404, 'another team\'s request is not found');
  }
  for (const [key, team] of [[alpha, 'alpha'], [beta, 'beta']] as const) {
    // Every request a team's key had served (polls included) is counted, none of the other's.
    const auths = async () => ((await (await read('/v1/stages', key)).json()) as { team: string; stages: { stage: string; count: number }[] });
    await waitFor(`${team}'s requests counted`, async () => (await auths()).stages.find((x) => x.stage === 'auth')?.count === served.get(key.key), 30_000);
    assert.equal((await auths()).team, team);
    assert.equal((await read(`/v1/stages?team=${team === 'alpha' ? 'beta' : 'alpha'}`, key)).status, 403);
    assert.equal((await read('/v1/capture', key)).status, 403);
    assert.equal((await read('/v1/admin/keys', key)).status, 403);
  }
  const all = (await (await read('/v1/stages?team=alpha', null)).json()) as { stages: { stage: string; count: number }[] };
  assert.equal(all.stages.find((x) => x.stage === 'auth')?.count, served.get(alpha.key), 'the admin reads any team');

  const revoked = await admin('DELETE', `/v1/admin/keys/${alpha.id}`);
  assert.equal(revoked.status, 200);
  const goneMs = await timeUntilAll(2000, async (g) => (await chat(g, alpha.key)).status === 401);
  assert.ok(goneMs < 2000, `revocation reached both replicas in ${goneMs} ms`);
  t.diagnostic(`revocation refused by both replicas after ${goneMs} ms`);
  assert.equal((await chat(gateways[1]!, beta.key)).status, 200, 'the other team is unaffected');
  assert.equal((await read('/v1/stages', alpha)).status, 401, 'a revoked key reads nothing');
});
