/**
 * The exact cache at the gateway (issue 12): two gateways ("replicas") sharing one cache
 * through a real nats-server; a real mock provider. The same request twice — on different
 * replicas — reaches the provider once and gets the same answer, JSON and stream, captured
 * as a hit; `no-cache` and `no-store` are honoured; another team never gets the hit.
 */
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '@sightline/config';
import { NatsResponseCache } from '@sightline/cache';
import { startGateway, type GatewayHandle } from '@sightline/app-gateway';
import { startMock, type MockServer } from '../../../bench/mock/server.js';
import { CapturedBus } from '../../../test/support/captured.js';
import { NatsServer, waitFor } from '../../../test/support/servers.js';

let nats: NatsServer;
let mock: MockServer;
const gws: GatewayHandle[] = [];
const caches: NatsResponseCache[] = [];
const cap = new CapturedBus();

before(async () => {
  [nats, mock] = await Promise.all([NatsServer.start(), startMock({ chunks: 4 })]);
  const config = parseConfig(
    `
gateway: { host: 127.0.0.1, port: 0 }
providers:
  mock: { type: openai-compatible, base_url: "${mock.url}/v1" }
  claude: { type: anthropic, base_url: "${mock.url}" }
routes:
  - { match: "gpt-*", provider: mock, cache: { ttl: 10m } }
  - { match: "claude-*", provider: claude, cache: { ttl: 10m } }
  - { match: "nocache-*", provider: mock }
capture: { flush_interval_ms: 5 }
`,
    'cache.yaml',
  );
  for (let i = 0; i < 2; i++) {
    const cache = new NatsResponseCache({ url: nats.url });
    await cache.ready;
    caches.push(cache);
    gws.push(await startGateway({ config, publisher: cap.bus, instance: `gw-cache-${i}`, cache }));
  }
});

after(async () => {
  for (const g of gws) await g.close(2000);
  for (const c of caches) await c.close();
  await mock.close();
  await nats.dispose();
});

beforeEach(() => mock.reset());

let n = 0;
function post(gw: GatewayHandle, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-sightline-team': 'alpha', ...headers }, body: JSON.stringify(body) });
}

/** Sends `body` to replica 0, waits until replica 1 holds the new entry (bounded), then repeats it there. */
async function twice(path: string, body: unknown, headers: Record<string, string> = {}): Promise<[Response, string, Response, string]> {
  const held = caches[1]!.status().entries;
  const first = await post(gws[0]!, path, body, headers);
  const firstText = await first.text();
  await waitFor('the entry shared with the other replica', () => caches[1]!.status().entries > held, 5000, 10);
  const second = await post(gws[1]!, path, body, headers);
  return [first, firstText, second, await second.text()];
}

test('JSON: the repeat on another replica is a hit, byte for byte, and the provider saw the request once', async () => {
  const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `cache me ${++n}` }] };
  const [a, at, b, bt] = await twice('/v1/chat/completions', body);
  assert.equal(a.headers.get('x-sightline-cache'), 'miss');
  assert.equal(b.headers.get('x-sightline-cache'), 'hit');
  assert.equal(mock.stats().openai, 1);
  assert.equal(bt, at);
  assert.equal(b.headers.get('content-type'), a.headers.get('content-type'));
  const calls = mock.stats().openai;
  // Once more, now surely shared: no provider call at all.
  const c = await post(gws[1]!, '/v1/chat/completions', body);
  assert.equal(await c.text(), at);
  assert.equal(mock.stats().openai, calls);
  const { request, spans } = await cap.captured(c.headers.get('x-sightline-trace-id')!);
  assert.equal(request.cache_hit, 1);
  assert.equal(request.input_tokens + request.output_tokens, 0, 'a hit spends no tokens');
  const names = spans.filter((s) => s.is_root === 0).map((s) => s.name);
  assert.ok(names.includes('cache'));
  assert.ok(!names.some((x) => x.startsWith('upstream.')), names.join(','));
});

test('streams are stored whole and replayed as SSE byte for byte (both dialects)', async () => {
  for (const [path, body] of [
    ['/v1/chat/completions', { model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: `stream ${++n}` }] }],
    ['/v1/messages', { model: 'claude-3-5-haiku', max_tokens: 20, stream: true, messages: [{ role: 'user', content: `stream ${++n}` }] }],
  ] as const) {
    const headers: Record<string, string> = path === '/v1/messages' ? { 'anthropic-version': '2023-06-01' } : {};
    const [, at, b, bt] = await twice(path, body, headers);
    assert.equal(b.headers.get('x-sightline-cache'), 'hit');
    assert.match(b.headers.get('content-type') ?? '', /text\/event-stream/);
    assert.equal(bt, at);
    assert.match(bt, path === '/v1/messages' ? /event: message_stop/ : /data: \[DONE\]/);
  }
});

test('no-cache reaches the provider; no-store is not kept; another team never gets the hit', async () => {
  const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `directives ${++n}` }] };
  await twice('/v1/chat/completions', body);
  const before = mock.stats().openai;
  const fresh = await post(gws[0]!, '/v1/chat/completions', body, { 'cache-control': 'no-cache' });
  await fresh.text();
  assert.equal(fresh.headers.get('x-sightline-cache'), 'miss');
  assert.equal(mock.stats().openai, before + 1);
  const other = await post(gws[0]!, '/v1/chat/completions', body, { 'x-sightline-team': 'beta' });
  await other.text();
  assert.equal(other.headers.get('x-sightline-cache'), 'miss', 'the team is part of the key');
  const unstored = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `no-store ${++n}` }] };
  await (await post(gws[0]!, '/v1/chat/completions', unstored, { 'cache-control': 'no-store' })).text();
  const again = await post(gws[0]!, '/v1/chat/completions', unstored);
  await again.text();
  assert.equal(again.headers.get('x-sightline-cache'), 'miss');
  const plain = await post(gws[0]!, '/v1/chat/completions', { model: 'nocache-1', messages: [{ role: 'user', content: 'x' }] });
  await plain.text();
  assert.equal(plain.headers.get('x-sightline-cache'), null, 'routes without a cache say nothing');
});

test('errors are not cached', async () => {
  mock.configure({ status: 500 });
  try {
    const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `error ${++n}` }] };
    for (let i = 0; i < 2; i++) {
      const r = await post(gws[0]!, '/v1/chat/completions', body);
      await r.text();
      assert.equal(r.headers.get('x-sightline-cache'), 'miss');
    }
  } finally {
    mock.configure({ status: undefined });
  }
});
