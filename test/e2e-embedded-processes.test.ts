/**
 * The embedded mode's two processes (issue 15, item 2): `npm start` serves requests in one
 * process and forks a store process (ingester, chdb, query API). Checked here, with the real
 * processes, chdb and the mock provider: the store process is another process; killing it
 * with SIGKILL under load fails no request and loses no captured request (exact counts
 * through the query API once the supervisor restarted it); the key directory written
 * through its admin API is the gateway's; SIGTERM to the launcher stops both, once; a store
 * process frozen at shutdown leaves its batches in the gateway's spool, written after the
 * next start.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitFor } from './support/servers.js';
import { startApp, waitHealthy, type AppProcess } from './support/apps.js';
import { startMock, type MockServer } from '../bench/mock/server.js';

const ADMIN = 'e2e-embedded-processes-admin-token';
let mock: MockServer;
let app: AppProcess;
let dir: string;
let gatewayUrl = '';
let queryUrl = '';

function storePids(output: string): number[] {
  return [...output.matchAll(/store process started \(pid (\d+)\)/g)].map((m) => Number(m[1]));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function env(gp: number, qp: number, ip: number): Record<string, string> {
  return {
    GATEWAY_PORT: String(gp),
    QUERY_PORT: String(qp),
    INGESTER_PORT: String(ip),
    OPENAI_BASE_URL: `${mock.url}/v1`,
    OPENAI_API_KEY: 'sk-configured-provider-key',
    SIGHTLINE_ADMIN_TOKEN: ADMIN,
    SIGHTLINE_DATA_DIR: dir,
    NATS_URL: '',
    CLICKHOUSE_URL: '',
  };
}

/** Starts `npm start`; `gatewayPort` reused: the same spool directory (per gateway port), replayed at start. */
async function start(gatewayPort?: number): Promise<void> {
  const [gp, qp, ip] = [gatewayPort ?? (await freePort()), await freePort(), await freePort()];
  gatewayUrl = `http://127.0.0.1:${gp}`;
  queryUrl = `http://127.0.0.1:${qp}`;
  app = startApp('sightline', 'apps/sightline/src/main.ts', env(gp, qp, ip));
  await waitHealthy(app, `${gatewayUrl}/healthz`);
  await waitHealthy(app, `${queryUrl}/healthz`);
}

before(async () => {
  mock = await startMock({ chunks: 3 });
  dir = mkdtempSync(join(tmpdir(), 'sightline-embedded-processes-'));
  await start();
});

after(async () => {
  await app?.stop();
  await mock?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A key of its own team for each test: the query API scopes counts to the caller's team. */
async function createKey(team: string, limits?: Record<string, number>): Promise<string> {
  const r = await fetch(`${queryUrl}/v1/admin/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ team, name: team, scopes: ['gateway', 'read'], ...(limits !== undefined ? { limits } : {}) }),
  });
  assert.equal(r.status, 201, await r.clone().text());
  return ((await r.json()) as { key: string }).key;
}

/** One JSON request through the gateway; its status and trace id. */
async function send(key: string, i: number): Promise<{ status: number; traceId: string }> {
  const res = await fetch(`${gatewayUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `load ${i}` }] }),
  });
  await res.arrayBuffer();
  return { status: res.status, traceId: res.headers.get('x-sightline-trace-id') ?? '' };
}

/** The key's team's requests counted by the per-stage view since `sinceMs` (every request has a `parse` stage). */
async function counted(key: string, sinceMs: number): Promise<number> {
  const from = new Date(sinceMs - 1000).toISOString();
  const res = await fetch(`${queryUrl}/v1/stages?from=${encodeURIComponent(from)}`, { headers: { authorization: `Bearer ${key}` } });
  if (res.status !== 200) return -1;
  const body = (await res.json()) as { stages: { stage: string; count: number }[] };
  return body.stages.find((s) => s.stage === 'parse')?.count ?? 0;
}

test('the store process is a separate process; a key made through its admin API works at the gateway', async () => {
  assert.match(app.output, /bus: in-process/);
  assert.match(app.output, /store: in-process ClickHouse \(chdb\) under .* in the store process/);
  const pids = storePids(app.output);
  assert.equal(pids.length, 1, app.output);
  assert.notEqual(pids[0], app.child.pid);
  assert.ok(alive(pids[0]!));

  const key = await createKey('probe', { requests_per_minute: 1_000_000 });
  // The gateway process owns the directory: the key made in the store process authenticates there.
  const ok = await send(key, -1);
  assert.equal(ok.status, 200);
  // Limits usage is the gateway process's, read by the store process's query API.
  const b = await fetch(`${queryUrl}/v1/budget`, { headers: { authorization: `Bearer ${ADMIN}` } });
  assert.equal(b.status, 200);
  const usage = ((await b.json()) as { data: { scope: string; limit: number }[] }).data;
  assert.ok(usage.some((u) => u.scope === 'key' && u.limit === 1_000_000), JSON.stringify(usage));
});

test('SIGKILL of the store process under load: every request answered, every one captured exactly once', async () => {
  const key = await createKey('load');
  const [first] = storePids(app.output);
  const since = Date.now();
  const total = 400;
  const concurrency = 8;
  let next = 0;
  let killedAt = -1;
  const results: { status: number; traceId: string }[] = [];
  const worker = async () => {
    while (next < total) {
      const i = next++;
      if (i === 120 && killedAt < 0) {
        killedAt = i;
        process.kill(first!, 'SIGKILL');
      }
      results.push(await send(key, i));
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  assert.equal(killedAt, 120);
  assert.equal(results.length, total);
  assert.deepEqual(results.filter((r) => r.status !== 200), [], 'the gateway answers while the store process is down');
  assert.equal(new Set(results.map((r) => r.traceId)).size, total);

  // The supervisor saw the death and started another store process.
  await waitFor('a restarted store process', () => storePids(app.output).length === 2, 60_000, 100);
  const second = storePids(app.output)[1]!;
  assert.notEqual(second, first);
  assert.ok(!alive(first!));
  assert.match(app.output, /store process \d+ exited \(SIGKILL\)/);
  await waitHealthy(app, `${queryUrl}/healthz`);

  // The restarted store process mirrors the directory again: counts are read with the key.
  await waitFor(`${total} requests counted`, async () => (await counted(key, since)) >= total, 60_000, 250);
  assert.equal(await counted(key, since), total, 'each request counted once');
  for (const r of results) {
    const res = await fetch(`${queryUrl}/v1/requests/${r.traceId}`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 200, r.traceId);
    assert.equal(((await res.json()) as { requests: unknown[] }).requests.length, 1, r.traceId);
  }
  // Counted again after the walk above: a redelivered batch written twice would show by now.
  assert.equal(await counted(key, since), total, 'each request counted once');
});

test('SIGTERM stops the gateway, then the store process, once; exit 0 and nothing lost', async () => {
  const key = await createKey('term');
  const since = Date.now();
  const sent: string[] = [];
  for (let i = 0; i < 20; i++) {
    const r = await send(key, i);
    assert.equal(r.status, 200);
    sent.push(r.traceId);
  }
  const pids = storePids(app.output);
  const child = pids[pids.length - 1]!;
  const code = await app.stop();
  assert.equal(code, 0, app.output);
  assert.ok(!alive(child), 'the store process exited with the launcher');
  assert.doesNotMatch(app.output, /lost/);
  // Stopped, not died: the supervisor reports deaths only.
  assert.doesNotMatch(app.output, new RegExp(`store process ${child} exited`));
  assert.match(app.output, /shutting down/);

  // Same data directory and gateway port (a batch past the drain deadline is in its spool):
  // the 20 requests flushed at shutdown are there, once each.
  await start(Number(new URL(gatewayUrl).port));
  await waitFor('20 requests counted', async () => (await counted(key, since)) >= 20, 60_000, 250);
  assert.equal(await counted(key, since), 20);
  for (const id of sent) {
    const res = await fetch(`${queryUrl}/v1/requests/${id}`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 200, id);
  }
});

test('a store process frozen at shutdown: what it did not write goes to the spool and is written after the next start', async () => {
  const key = await createKey('frozen');
  const pids = storePids(app.output);
  const child = pids[pids.length - 1]!;
  const since = Date.now();
  // Frozen before the requests: none of their batches can be written before the shutdown.
  process.kill(child, 'SIGSTOP');
  try {
    for (let i = 0; i < 20; i++) assert.equal((await send(key, i)).status, 200);
    const code = await app.stop(90_000);
    assert.equal(code, 0, app.output);
  } finally {
    if (alive(child)) process.kill(child, 'SIGCONT');
  }
  assert.ok(!alive(child));
  assert.match(app.output, new RegExp(`store process ${child} did not exit within`));
  const moved = /(\d+) capture batch\(es\) not written by the deadline moved to the spool/.exec(app.output);
  assert.ok(moved !== null && Number(moved[1]) >= 1, app.output);
  assert.doesNotMatch(app.output, /lost/);

  // The same gateway port: its spool is replayed.
  await start(Number(new URL(gatewayUrl).port));
  await waitFor('20 requests counted', async () => (await counted(key, since)) >= 20, 60_000, 250);
  assert.equal(await counted(key, since), 20);
});
