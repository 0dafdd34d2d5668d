/**
 * The model catalogue behind `GET /v1/models` (models.ts): read from each provider's own
 * models endpoint once the gateway listens, refreshed in the background, bounded by a
 * timeout and a body limit, failures tolerated (the gateway starts and serves, a provider
 * keeps its last list), Anthropic's pages followed. Real local HTTP servers play the
 * providers, each answering its models endpoint as the test says.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { parseConfig } from '@sightline/config';
import { startGateway, type GatewayHandle } from '@sightline/app-gateway';
import { CapturedBus } from '../../../test/support/captured.js';
import { freePort, waitFor } from '../../../test/support/servers.js';

/** A provider whose models endpoint answers what `answer` says; counts and records what it was asked. */
interface FakeProvider {
  url: string;
  asked: { path: string; headers: IncomingHttpHeaders }[];
  answer: (path: string) => { status: number; body: string } | 'hang';
  server: Server;
}

async function provider(answer: FakeProvider['answer']): Promise<FakeProvider> {
  const p: FakeProvider = { url: '', asked: [], answer, server: createServer() };
  p.server.on('request', (req, res) => {
    p.asked.push({ path: req.url ?? '', headers: req.headers });
    const a = p.answer(req.url ?? '');
    if (a === 'hang') return; // never answers; the gateway's timeout must end it
    res.writeHead(a.status, { 'content-type': 'application/json' });
    res.end(a.body);
  });
  await new Promise<void>((resolve) => p.server.listen(0, '127.0.0.1', resolve));
  p.url = `http://127.0.0.1:${(p.server.address() as AddressInfo).port}`;
  return p;
}

const list = (...ids: string[]) => ({ status: 200, body: JSON.stringify({ object: 'list', data: ids.map((id, i) => ({ id, object: 'model', created: 1700000000 + i, owned_by: 'x' })) }) });

let ok: FakeProvider;
let hang: FakeProvider;
let huge: FakeProvider;
let notJson: FakeProvider;
let keyless: FakeProvider;
let paged: FakeProvider;
let flaky: FakeProvider;
let deadPort = 0;
let gw: GatewayHandle;
let startMs = 0;
let flakyState: 'down' | 'up' | 'down-again' = 'down';
const cap = new CapturedBus();
const log: string[] = [];

before(async () => {
  ok = await provider(() => list('ok-a', 'ok-b', 'other-c'));
  hang = await provider(() => 'hang');
  huge = await provider(() => ({ status: 200, body: JSON.stringify({ data: [{ id: 'huge-a', pad: 'x'.repeat(64 * 1024) }] }) }));
  notJson = await provider(() => ({ status: 200, body: '<html>models</html>' }));
  keyless = await provider(() => list('keyless-a'));
  // Anthropic: two pages, the second after the first's last id.
  paged = await provider((path) =>
    path.includes('after_id=claude-b')
      ? { status: 200, body: JSON.stringify({ data: [{ type: 'model', id: 'claude-c', display_name: 'Claude C', created_at: '2025-01-03T00:00:00Z' }], has_more: false, first_id: 'claude-c', last_id: 'claude-c' }) }
      : { status: 200, body: JSON.stringify({ data: [{ type: 'model', id: 'claude-a', display_name: 'Claude A', created_at: '2025-01-01T00:00:00Z' }, { type: 'model', id: 'claude-b', display_name: 'Claude B', created_at: '2025-01-02T00:00:00Z' }], has_more: true, first_id: 'claude-a', last_id: 'claude-b' }) },
  );
  flaky = await provider(() => (flakyState === 'up' ? list('flaky-a') : { status: 503, body: '{"error":{"message":"down"}}' }));
  deadPort = await freePort();
  const config = parseConfig(
    `
gateway: { host: 127.0.0.1, port: 0 }
providers:
  ok: { type: openai-compatible, base_url: "${ok.url}/v1" }
  hang: { type: openai-compatible, base_url: "${hang.url}/v1" }
  huge: { type: openai-compatible, base_url: "${huge.url}/v1" }
  notjson: { type: openai-compatible, base_url: "${notJson.url}/v1" }
  dead: { type: openai-compatible, base_url: "http://127.0.0.1:${deadPort}/v1" }
  keyless: { type: openai, base_url: "${keyless.url}/v1" }
  paged: { type: anthropic, base_url: "${paged.url}", api_key: sk-ant-paged }
  flaky: { type: openai-compatible, base_url: "${flaky.url}/v1" }
routes:
  - { match: "ok-*", provider: ok }
  - { match: "alias", provider: ok, model: ok-b }
  - { match: "hang-*", provider: hang }
  - { match: "huge-*", provider: huge }
  - { match: "keyless-*", provider: keyless }
  - { match: "dead-*", provider: dead }
  - { match: "claude-*", provider: paged }
  - { match: "flaky-*", provider: flaky }
capture: { flush_interval_ms: 5 }
`,
    'models.yaml',
  );
  const t = Date.now();
  gw = await startGateway({ config, publisher: cap.bus, instance: 'gw-models', models: { timeoutMs: 500, maxBytes: 16 * 1024, refreshMs: 100 }, log: (m) => log.push(m) });
  startMs = Date.now() - t;
});

after(async () => {
  await gw.close(2000);
  for (const p of [ok, hang, huge, notJson, keyless, paged, flaky]) {
    p.server.closeAllConnections();
    await new Promise<void>((resolve) => p.server.close(() => resolve()));
  }
});

const oa = () => new OpenAI({ apiKey: 'sk-x', baseURL: `${gw.url}/v1`, maxRetries: 0 });

test('the gateway starts within the timeout though providers hang, refuse, send too much or no JSON; each failure is logged', async () => {
  assert.ok(startMs < 3000, `started in ${startMs} ms`);
  assert.equal((await fetch(`${gw.url}/healthz`)).status, 200);
  for (const name of ['hang', 'huge', 'notjson', 'dead']) assert.ok(log.some((l) => l.includes(`models of provider ${name}`)), `${name} failure logged: ${log.join(' | ')}`);
  assert.ok(log.some((l) => /provider huge .*larger than 16384 bytes/.test(l)));
  assert.ok(log.some((l) => /provider notjson .*not JSON/.test(l)));
});

test('the list: route names, then the models a route sends to the provider that offers them; an openai provider without a key and hanging ones are not listed', async () => {
  const ids = (await oa().models.list()).data.map((m) => m.id);
  assert.deepEqual(ids, ['alias', 'ok-a', 'ok-b', 'claude-a', 'claude-b', 'claude-c']);
  assert.equal(keyless.asked.length, 0, 'an openai provider without a key is not asked');
  const alias = await oa().models.retrieve('alias');
  assert.deepEqual(alias, { id: 'alias', object: 'model', created: 1700000001, owned_by: 'ok' }, 'a renaming route shows its upstream model\'s details');
  const ok0 = ok.asked[0]!;
  assert.equal(ok0.path, '/v1/models');
});

test('Anthropic pages are followed with the provider key and version; details kept in both shapes', async () => {
  assert.deepEqual(paged.asked.slice(0, 2).map((a) => a.path), ['/v1/models?limit=1000', '/v1/models?limit=1000&after_id=claude-b']);
  assert.equal(paged.asked[0]!.headers['x-api-key'], 'sk-ant-paged');
  assert.equal(paged.asked[0]!.headers['anthropic-version'], '2023-06-01');
  const c = await new Anthropic({ apiKey: 'x', baseURL: gw.url, maxRetries: 0 }).models.retrieve('claude-c');
  assert.deepEqual(c, { type: 'model', id: 'claude-c', display_name: 'Claude C', created_at: '2025-01-03T00:00:00Z' });
  assert.deepEqual(await oa().models.retrieve('claude-c'), { id: 'claude-c', object: 'model', created: Date.parse('2025-01-03T00:00:00Z') / 1000, owned_by: 'paged' });
});

test('lookup is consistent with the list: a known list without the model is a 404; an unknown list answers what the route serves', async () => {
  await assert.rejects(oa().models.retrieve('ok-z'), (e: unknown) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(oa().models.retrieve('other-c'), (e: unknown) => e instanceof OpenAI.NotFoundError, 'offered, but no route sends it anywhere');
  assert.deepEqual(await oa().models.retrieve('dead-1'), { id: 'dead-1', object: 'model', created: 0, owned_by: 'dead' });
  assert.deepEqual(await oa().models.retrieve('hang-1'), { id: 'hang-1', object: 'model', created: 0, owned_by: 'hang' });
});

test('refreshed in the background: a provider that comes up is listed, and keeps its list when it fails again', async () => {
  assert.ok(!(await oa().models.list()).data.some((m) => m.id === 'flaky-a'));
  flakyState = 'up';
  await waitFor('flaky listed', async () => (await oa().models.list()).data.some((m) => m.id === 'flaky-a'), 5000);
  flakyState = 'down-again';
  const asked = flaky.asked.length;
  await waitFor('two more refreshes', () => flaky.asked.length >= asked + 2, 5000);
  assert.ok((await oa().models.list()).data.some((m) => m.id === 'flaky-a'), 'the last list is kept');
  assert.ok(log.some((l) => /provider flaky \(HTTP 503\); keeping its last list/.test(l)));
});
