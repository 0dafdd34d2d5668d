/**
 * The new endpoints (issue 16) under the same governance as chat: keys, scopes and model
 * globs at `auth`, rate limits at `limits`, budgets at `budget` (embeddings at the input
 * price only; token counts and stored responses reserve nothing), the exact cache. The
 * in-process directory and governor, a real mock provider, the shipped prices.
 */
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { costUsd, parseConfig, priceLookup } from '@sightline/config';
import { KeyHasher, MemoryDirectory, parseKeyInput, type KeyRecord } from '@sightline/directory';
import { MemoryGovernor } from '@sightline/controls';
import { MemoryResponseCache } from '@sightline/cache';
import type { SpanRow } from '@sightline/core';
import { startGateway, type GatewayHandle } from '@sightline/app-gateway';
import { startMock, type MockServer } from '../../../bench/mock/server.js';
import { CapturedBus } from '../../../test/support/captured.js';
import { waitFor } from '../../../test/support/servers.js';

let mock: MockServer;
let gw: GatewayHandle;
const cap = new CapturedBus();
const directory = new MemoryDirectory({ hasher: new KeyHasher('apis-governance-hashing-secret') });
const governor = new MemoryGovernor({});

async function key(name: string, extra: Record<string, unknown> = {}): Promise<{ secret: string; record: KeyRecord }> {
  const now = Date.now();
  return directory.createKey(parseKeyInput({ team: `team-${name}`, name, scopes: ['gateway'], ...extra }, now), now);
}

before(async () => {
  mock = await startMock({ chunks: 3 });
  const config = parseConfig(
    `
gateway: { host: 127.0.0.1, port: 0, default_max_tokens: 100 }
providers:
  mock: { type: openai-compatible, base_url: "${mock.url}/v1", api_key: sk-x }
  claude: { type: anthropic, base_url: "${mock.url}", api_key: sk-ant-x }
routes:
  - { match: "gpt-*", provider: mock }
  - { match: "text-embedding-3-large", provider: mock, cache: { ttl: 10m } }
  - { match: "text-embedding-*", provider: mock }
  - { match: "claude-*", provider: claude }
capture: { flush_interval_ms: 5 }
`,
    'apis-governance.yaml',
  );
  gw = await startGateway({ config, publisher: cap.bus, instance: 'gw-apis-gov', directory, governor, cache: new MemoryResponseCache({}) });
});

after(async () => {
  await gw.close(2000);
  await governor.close();
  await mock.close();
});

beforeEach(() => mock.reset());

const oa = (k: string) => new OpenAI({ apiKey: k, baseURL: `${gw.url}/v1`, maxRetries: 0 });
const an = (k: string) => new Anthropic({ apiKey: k, baseURL: gw.url, maxRetries: 0 });
const failedStage = (spans: SpanRow[]) => spans.find((s) => s.status_code === 'ERROR' && s.is_root === 0)?.name;

test('keys, scopes and model globs: every new endpoint refuses as chat does, at the auth stage, before anything goes upstream', async () => {
  const reader = (await key('reader', { scopes: ['read'] })).secret;
  const claudeOnly = (await key('claude-only', { models: ['claude-*'] })).secret;
  for (const [what, call] of [
    ['responses', (k: string) => oa(k).responses.create({ model: 'gpt-4o-mini', input: 'x' })],
    ['embeddings', (k: string) => oa(k).embeddings.create({ model: 'text-embedding-3-small', input: 'x' })],
    ['stored response', (k: string) => oa(k).responses.retrieve('resp_1')],
    ['deleting one', (k: string) => oa(k).responses.delete('resp_1')],
    ['count_tokens', (k: string) => an(k).messages.countTokens({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x' }] })],
  ] as const) {
    await assert.rejects(call('sl-not-a-key'), (e: unknown) => e instanceof OpenAI.AuthenticationError || e instanceof Anthropic.AuthenticationError, `${what}: no key`);
    await assert.rejects(call(reader), (e: unknown) => e instanceof OpenAI.PermissionDeniedError || e instanceof Anthropic.PermissionDeniedError, `${what}: no gateway scope`);
    await assert.rejects(call(claudeOnly), (e: unknown) => (e instanceof OpenAI.PermissionDeniedError || e instanceof Anthropic.PermissionDeniedError) && /may not use the model/.test(e.message), `${what}: outside the key's models`);
  }
  assert.equal(mock.stats().requests, 0, 'nothing reached the provider');
  // The key's globs decide which stored responses it may read without ?model=: those of the default route (gpt-*).
  const gptOnly = (await key('gpt-only', { models: ['gpt-*'] })).secret;
  await assert.rejects(oa(gptOnly).responses.retrieve('resp_missing'), (e: unknown) => e instanceof OpenAI.NotFoundError, 'passed to the provider, which has no such response');
  const mini = (await key('mini-only', { models: ['gpt-4o-mini'] })).secret;
  const refused = await oa(mini)
    .responses.retrieve('resp_missing')
    .then(() => null, (e: unknown) => e);
  assert.ok(refused instanceof OpenAI.PermissionDeniedError && /\?model=/.test(refused.message), String(refused));
  await assert.rejects(oa(mini).responses.retrieve('resp_missing', {}, { query: { model: 'gpt-4o-mini' } }), (e: unknown) => e instanceof OpenAI.NotFoundError, 'with ?model= the key may read it');
  const { request, spans } = await cap.captured(refused.headers!.get('x-sightline-trace-id')!);
  assert.equal(request.error_type, 'permission_denied');
  assert.equal(failedStage(spans), 'auth');
});

test('the model list and lookup show only what the key may use', async () => {
  const claudeOnly = (await key('claude-list', { models: ['claude-*'] })).secret;
  const ids = (await oa(claudeOnly).models.list()).data.map((m) => m.id);
  assert.ok(ids.length > 0 && ids.every((id) => id.startsWith('claude-')), ids.join(', '));
  const all = (await oa((await key('all-list')).secret).models.list()).data.map((m) => m.id);
  assert.ok(all.includes('gpt-4o-mini') && all.includes('claude-sonnet-4-5') && all.includes('text-embedding-3-small'));
  await assert.rejects(oa(claudeOnly).models.retrieve('gpt-4o-mini'), (e: unknown) => e instanceof OpenAI.NotFoundError);
  assert.equal((await an(claudeOnly).models.retrieve('claude-sonnet-4-5')).id, 'claude-sonnet-4-5');
  await assert.rejects(oa('sl-nope').models.retrieve('gpt-4o-mini'), (e: unknown) => e instanceof OpenAI.AuthenticationError);
});

test('rate limits count the new endpoints: embeddings over the limit are a 429 at the limits stage', async () => {
  const k = (await key('rpm', { limits: { requests_per_minute: 2 } })).secret;
  const statuses: number[] = [];
  let refusedTrace = '';
  for (let i = 0; i < 3; i++) {
    const r = await fetch(`${gw.url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${k}` }, body: JSON.stringify({ model: 'text-embedding-3-small', input: `n${i}` }) });
    statuses.push(r.status);
    if (r.status === 429) refusedTrace = r.headers.get('x-sightline-trace-id')!;
    else assert.equal(r.headers.get('x-ratelimit-limit-requests'), '2');
    await r.text();
  }
  // The window is the UTC minute: when the test crosses one, the count starts again.
  if (refusedTrace === '') {
    assert.ok(new Date().getUTCSeconds() < 5, statuses.join(','));
    return;
  }
  assert.deepEqual(statuses, [200, 200, 429]);
  const { request, spans } = await cap.captured(refusedTrace);
  assert.equal(request.error_type, 'rate_limited');
  assert.equal(failedStage(spans), 'limits');
});

test('budgets: embeddings are reserved and settled at the input price only; token counts and stored responses reserve nothing', async () => {
  const budget = { usd: 1, period: 'day' as const };
  const { secret, record } = await key('budget', { budget });
  const input = 'embed me '.repeat(500);
  const { data, response } = await oa(secret).embeddings.create({ model: 'text-embedding-3-small', input, encoding_format: 'float', dimensions: 4 }).withResponse();
  const expected = costUsd(priceLookup([])('text-embedding-3-small'), data.usage.prompt_tokens, 0, 0, 0)!;
  assert.ok(expected > 0);
  const spent = async () => (await governor.usage({ key: { id: record.id, limits: null, budget } }, Date.now()))[0]!;
  await waitFor('the embeddings request settled', async () => (await spent()).reserved === 0, 5000, 10);
  assert.ok(Math.abs((await spent()).used - expected) < 2e-9, `spent ${(await spent()).used}, expected ${expected}`);
  const { spans } = await cap.captured(response.headers.get('x-sightline-trace-id')!);
  assert.ok(spans.some((s) => s.name === 'budget'), 'a budget stage');

  // A token count and a stored response read cost nothing and have no budget stage.
  const count = await an(secret).messages.countTokens({ model: 'claude-sonnet-4-5', messages: [{ role: 'user', content: 'x' }] }).withResponse();
  const made = await oa(secret).responses.create({ model: 'gpt-4o-mini', input: 'x', max_output_tokens: 50 });
  const read = await oa(secret).responses.retrieve(made.id).withResponse();
  for (const r of [count.response, read.response]) {
    const c = await cap.captured(r.headers.get('x-sightline-trace-id')!);
    assert.ok(!c.spans.some((s) => s.name === 'budget'), `no budget stage for ${c.request.route}`);
    assert.equal(c.request.input_tokens, 0);
  }
});

test('a Responses request under a budget without max_output_tokens gets one injected, passed through and translated', async () => {
  const { secret } = await key('inject', { budget: { usd: 1, period: 'day' } });
  await oa(secret).responses.create({ model: 'gpt-4o-mini', input: 'x' });
  assert.equal((mock.lastRequests().at(-1)!.body as { max_output_tokens?: number }).max_output_tokens, 100);
  await oa(secret).responses.create({ model: 'claude-sonnet-4-5', input: 'x' });
  assert.equal((mock.lastRequests().at(-1)!.body as { max_tokens?: number }).max_tokens, 100);
});

test('the exact cache serves a repeated embeddings request from memory, byte for byte', async () => {
  const body = JSON.stringify({ model: 'text-embedding-3-large', input: `cache me ${Date.now()}`, dimensions: 4 });
  const { secret } = await key('cache');
  const send = () => fetch(`${gw.url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` }, body });
  const a = await send();
  const at = await a.text();
  assert.equal(a.headers.get('x-sightline-cache'), 'miss');
  // The in-process cache stores a complete answer before the response ends.
  const b = await send();
  assert.equal(b.headers.get('x-sightline-cache'), 'hit');
  assert.equal(await b.text(), at);
  assert.equal(mock.stats().embeddings, 1);
  const { request } = await cap.captured(b.headers.get('x-sightline-trace-id')!);
  assert.equal(request.cache_hit, 1);
  assert.equal(request.route, '/v1/embeddings');
});
