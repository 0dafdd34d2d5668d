/**
 * Rate limits and budgets at the gateway (issue 12): the `limits` and `budget` stages with
 * the in-process governor (the cross-replica behaviour is tested end to end and in
 * packages/controls), against a real mock provider with the shipped prices.
 */
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { parseConfig } from '@sightline/config';
import { KeyHasher, MemoryDirectory, type TeamSettings } from '@sightline/directory';
import { MemoryGovernor } from '@sightline/controls';
import { MemoryResponseCache } from '@sightline/cache';
import { startGateway, type GatewayHandle } from '@sightline/app-gateway';
import { startMock, type MockServer } from '../../../bench/mock/server.js';
import { CapturedBus } from '../../../test/support/captured.js';
import { gatewayKey } from '../../../test/support/keys.js';

let mock: MockServer;
let gw: GatewayHandle;
const cap = new CapturedBus();
const directory = new MemoryDirectory({ hasher: new KeyHasher('limits-test-hashing-secret') });
const governor = new MemoryGovernor({});

const key = (team: string, extra: Record<string, unknown> = {}, settings: TeamSettings | null = null): Promise<string> => gatewayKey(directory, team, extra, settings);

before(async () => {
  mock = await startMock({ chunks: 3 });
  const config = parseConfig(
    `
gateway: { host: 127.0.0.1, port: 0, default_max_tokens: 100 }
providers:
  mock: { type: openai-compatible, base_url: "${mock.url}/v1", api_key: sk-x }
  claude: { type: anthropic, base_url: "${mock.url}", api_key: sk-ant-x }
routes:
  - { match: "gpt-4o-mini", provider: mock, cache: { ttl: 10m } }
  - { match: "gpt-*", provider: mock }
  - { match: "claude-*", provider: claude }
  - { match: "unpriced-*", provider: mock }
capture: { flush_interval_ms: 5 }
`,
    'limits.yaml',
  );
  gw = await startGateway({ config, publisher: cap.bus, instance: 'gw-limits', directory, governor, cache: new MemoryResponseCache({}) });
});

after(async () => {
  await gw.close(2000);
  await governor.close();
  await mock.close();
});

beforeEach(() => mock.reset());

const oa = (k: string) => new OpenAI({ apiKey: k, baseURL: `${gw.url}/v1`, maxRetries: 0 });
const an = (k: string) => new Anthropic({ apiKey: k, baseURL: gw.url, maxRetries: 0 });

test('requests per minute: the limit is served, the rest refused with 429 in each dialect, with retry-after and the x-ratelimit headers', async () => {
  const k = await key('rpm-team', { limits: { requests_per_minute: 3 } });
  const results: number[] = [];
  let last: Headers | null = null;
  for (let i = 0; i < 5; i++) {
    const r = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${k}` }, body: JSON.stringify({ model: 'gpt-4.1', messages: [{ role: 'user', content: `n${i}` }] }) });
    results.push(r.status);
    if (r.status === 200) {
      assert.equal(r.headers.get('x-ratelimit-limit-requests'), '3');
      assert.match(r.headers.get('x-ratelimit-reset-requests') ?? '', /^\d+(ms|s|m\d+s)$/);
    } else last = r.headers;
    await r.text();
  }
  // The window is the UTC minute: when the test crosses one, the count starts again.
  const served = results.filter((s) => s === 200).length;
  assert.ok(served === 3 || (served > 3 && served <= 5 && new Date().getUTCSeconds() < 5), results.join(','));
  if (last !== null) {
    assert.ok(Number(last.get('retry-after')) >= 1);
    assert.equal(last.get('x-ratelimit-remaining-requests'), '0');
  }
  await assert.rejects(oa(k).chat.completions.create({ model: 'gpt-4.1', messages: [{ role: 'user', content: 'x' }] }), (e: unknown) => e instanceof OpenAI.RateLimitError && e.code === 'rate_limit_exceeded');
  await assert.rejects(an(k).messages.create({ model: 'gpt-4.1', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }), (e: unknown) => e instanceof Anthropic.RateLimitError && /Rate limit reached/.test(e.message));
  const r = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${k}` }, body: JSON.stringify({ model: 'gpt-4.1', messages: [] }) });
  const { request, spans } = await cap.captured(r.headers.get('x-sightline-trace-id')!);
  assert.equal(request.error_type, 'rate_limited');
  assert.equal(spans.find((s) => s.status_code === 'ERROR' && s.is_root === 0)?.name, 'limits');
});

test('a budget: requests are reserved at their upper bound, a spent budget is a 429 insufficient_quota naming scope, limit, spend and reset; the client without max_tokens gets one injected', async () => {
  // gpt-4o-mini at the shipped price; the mock's answers cost a few millionths of a dollar.
  const k = await key('budget-team', { budget: { usd: 0.0005, period: 'day' } });
  let refused: unknown = null;
  for (let i = 0; i < 200 && refused === null; i++) {
    try {
      await oa(k).chat.completions.create({ model: 'gpt-4.1-mini', messages: [{ role: 'user', content: `spend ${i} ${'x'.repeat(400)}` }] });
    } catch (e) {
      refused = e;
    }
  }
  assert.ok(refused instanceof OpenAI.RateLimitError, String(refused));
  assert.equal(refused.code, 'insufficient_quota');
  assert.match(refused.message, /key budget of \$0\.0005 is spent .* resets at \d{4}-\d{2}-\d{2}T00:00:00\.000Z/);
  const injected = mock.lastRequests().find((r) => typeof r.body === 'object' && r.body !== null && 'max_tokens' in r.body);
  assert.ok(injected !== undefined, 'the mock saw the injected max_tokens');
  assert.equal((injected.body as { max_tokens: number }).max_tokens, 100);
  const [usage] = await governor.usage({ key: { id: directory.keys({ team: 'budget-team' })[0]!.id, limits: null, budget: { usd: 0.0005, period: 'day' } } }, Date.now());
  assert.ok(usage !== undefined && usage.used <= 0.0005 + 1e-12, `spent ${usage?.used}`);
});

test('a model without a price under a budget is refused rather than counted wrong', async () => {
  const k = await key('unpriced-team', { budget: { usd: 1, period: 'month' } });
  await assert.rejects(oa(k).chat.completions.create({ model: 'unpriced-1', messages: [{ role: 'user', content: 'x' }] }), (e: unknown) => e instanceof OpenAI.RateLimitError && /has no price/.test(e.message));
});

test('a team limit holds across the team\'s keys; a cache hit counts against requests per minute and costs nothing', async () => {
  const a = await key('shared', {}, { limits: { requests_per_minute: 4 }, budget: { usd: 5, period: 'day' } });
  const b = await key('shared');
  const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `cached ${Date.now()}` }] };
  const statuses: string[] = [];
  for (const k of [a, b, a, b, a]) {
    const r = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${k}` }, body: JSON.stringify(body) });
    statuses.push(`${r.status}:${r.headers.get('x-sightline-cache') ?? '-'}`);
    await r.text();
  }
  assert.equal(mock.stats().openai, 1, 'one miss, then hits');
  const served = statuses.filter((s) => s.startsWith('200')).length;
  assert.ok(served === 4 || new Date().getUTCSeconds() < 5, statuses.join(' '));
  assert.ok(statuses.includes('429:-') || served > 4, statuses.join(' '));
});
