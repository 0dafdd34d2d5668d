/**
 * Routing under provider failures, against real local mock providers: retries,
 * fallback, circuit breakers, idle-stream timeouts. Plus the Anthropic endpoint driven by
 * the official @anthropic-ai/sdk, /v1/models, and the HTTP/2 cleartext listener.
 */
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { connect as h2connect } from 'node:http2';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { parseConfig } from '@sightline/config';
import { MemoryBus } from '@sightline/bus';
import { STAGES, ATTEMPT_SPAN, type RequestRow, type SpanRow } from '@sightline/core';
import { decodeBatch, SpanBuilder } from '@sightline/spans';
import { startGateway, type GatewayHandle } from '@sightline/app-gateway';
import { startMock, type MockServer } from '../../../bench/mock/server.js';
import { waitFor, freePort } from '../../../test/support/servers.js';

let a: MockServer;
let b: MockServer;
let slow: MockServer;
let late: MockServer;
let revived: MockServer | null = null;
let deadPort = 0;
let gw: GatewayHandle;
const bus = new MemoryBus();
const requests: RequestRow[] = [];
const spans: SpanRow[] = [];
const stageNames: readonly string[] = STAGES;
const builder = new SpanBuilder();

async function captured(traceId: string): Promise<{ request: RequestRow; spans: SpanRow[] }> {
  await waitFor(`capture of ${traceId}`, async () => {
    for (const m of await bus.fetch(1000, 10)) {
      const batch = decodeBatch(m.data, builder);
      requests.push(...batch.requests);
      spans.push(...batch.spans);
      await m.ack();
    }
    return requests.some((r) => r.trace_id === traceId);
  }, 5000);
  return { request: requests.find((r) => r.trace_id === traceId)!, spans: spans.filter((s) => s.trace_id === traceId) };
}

before(async () => {
  [a, b, slow, late] = await Promise.all([startMock(), startMock(), startMock({ gapMs: 3000, chunks: 3 }), startMock({ latencyMs: 2000 })]);
  deadPort = await freePort();
  const config = parseConfig(
    `
gateway: { host: 127.0.0.1, port: 0, h2c_port: 0 }
providers:
  a: { type: openai-compatible, base_url: "${a.url}/v1" }
  b: { type: openai-compatible, base_url: "${b.url}/v1" }
  dead: { type: openai-compatible, base_url: "http://127.0.0.1:${deadPort}/v1", connect_timeout_ms: 1000 }
  slow: { type: openai-compatible, base_url: "${slow.url}/v1", body_timeout_ms: 300 }
  late: { type: openai-compatible, base_url: "${late.url}/v1", headers_timeout_ms: 300 }
  late2: { type: openai-compatible, base_url: "${late.url}/v1" }
  claude: { type: anthropic, base_url: "${a.url}" }
routes:
  - { match: "retry-model", targets: [ { provider: a, model: gpt-4o } ], retries: 1, retry_backoff_ms: 10 }
  - { match: "fallback-model", targets: [ { provider: a, model: gpt-4o }, { provider: b, model: gpt-4o-b } ], retries: 0 }
  - { match: "breaker-model", targets: [ { provider: dead } ], retries: 0 }
  - { match: "client-error-model", targets: [ { provider: b } ], retries: 0 }
  - { match: "slow-model", provider: slow }
  - { match: "late-model", provider: late, retries: 0 }
  - { match: "deadline-model", provider: late2, retries: 0, timeout_ms: 400 }
  - { match: "claude-*", provider: claude }
  - { match: ["gpt-4o", "gpt-4o-mini"], provider: a }
breaker: { failure_threshold: 2, cooldown_ms: 400 }
capture: { flush_interval_ms: 5 }
`,
    'routing.yaml',
  );
  gw = await startGateway({ config, publisher: bus, instance: 'gw-routing' });
});

after(async () => {
  await gw.close(2000);
  await Promise.all([a.close(), b.close(), slow.close(), late.close(), revived?.close()]);
});

beforeEach(() => {
  a.reset();
  b.reset();
});

const openai = () => new OpenAI({ apiKey: 'sk-x', baseURL: `${gw.url}/v1`, maxRetries: 0 });

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${gw.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name));
  return line === undefined ? Number.NaN : Number(line.slice(line.lastIndexOf(' ') + 1));
}

test('a 500 then a 200 is retried on the same target; both attempts are spans', async () => {
  a.failNext(1, 500);
  const { data, response } = await openai().chat.completions.create({ model: 'retry-model', messages: [{ role: 'user', content: 'x' }] }).withResponse();
  assert.equal(data.object, 'chat.completion');
  assert.equal(a.stats().openai, 2);
  // The retry sends the request built for the first attempt again (exchange.ts): the model
  // renamed for the target, the trace context the same.
  const [first, second] = a.lastRequests().filter((q) => q.path === '/v1/chat/completions');
  assert.equal((first!.body as { model: string }).model, 'gpt-4o');
  assert.deepEqual(second!.body, first!.body);
  assert.equal(second!.headers.traceparent, first!.headers.traceparent);
  const { request, spans: s } = await captured(response.headers.get('x-sightline-trace-id')!);
  assert.equal(request.http_status, 200);
  const attempts = s.filter((x) => x.name === ATTEMPT_SPAN).sort((x, y) => Number(BigInt(x.start_time_unix_nano) - BigInt(y.start_time_unix_nano)));
  assert.equal(attempts.length, 2);
  const attr = (x: SpanRow, k: string) => x.attr_values[x.attr_keys.indexOf(k)];
  assert.equal(attr(attempts[0]!, 'http.response.status_code'), '500');
  assert.equal(attempts[0]!.status_code, 'ERROR');
  assert.equal(attr(attempts[1]!, 'http.response.status_code'), '200');
  const stages = s.filter((x) => stageNames.includes(x.name));
  assert.ok(stages.some((x) => x.name === 'upstream.retry'));
  assert.ok(!stages.some((x) => x.status_code === 'ERROR'), 'a request that succeeded after a retry has no failed stage');
  assert.equal(stages.reduce((t, x) => t + BigInt(x.duration_ns), 0n), BigInt(request.total_ns));
});

test('a 429 falls back to the next target at once', async () => {
  a.failNext(1, 429);
  const r = await openai().chat.completions.create({ model: 'fallback-model', messages: [{ role: 'user', content: 'x' }] });
  assert.equal(r.model, 'gpt-4o-b', 'answered by the second target');
  assert.equal(a.stats().openai, 1);
  assert.equal(b.stats().openai, 1);
  // Each target gets the request built for it: the second its own model.
  assert.equal((a.lastRequests().at(-1)!.body as { model: string }).model, 'gpt-4o');
  assert.equal((b.lastRequests().at(-1)!.body as { model: string }).model, 'gpt-4o-b');
});

test('when every target fails, the last provider error reaches the client in its dialect', async () => {
  a.failNext(1, 503);
  b.failNext(1, 503);
  await assert.rejects(openai().chat.completions.create({ model: 'fallback-model', messages: [{ role: 'user', content: 'x' }] }), (e: unknown) => e instanceof OpenAI.InternalServerError && e.status === 503);
});

test('a connection refused opens the breaker after its threshold and closes it after the cool-down', async () => {
  const send = () => fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'breaker-model', messages: [] }) });
  const r1 = await send();
  const r2 = await send();
  assert.deepEqual([r1.status, r2.status], [502, 502]);
  assert.equal(((await r1.json()) as { error: { code: string } }).error.code, 'upstream_unreachable');
  assert.equal(await metric('sightline_gateway_breaker_open{target="dead/*"}'), 1);
  const r3 = await send();
  assert.equal(r3.status, 503);
  assert.equal(((await r3.json()) as { error: { code: string } }).error.code, 'no_healthy_target');
  // The provider comes back on the same port; after the cool-down one probe goes through and closes the breaker.
  revived = await startMock({ port: deadPort });
  await waitFor('the breaker to let a probe through and close', async () => (await send()).status === 200, 5000, 100);
  assert.equal(await metric('sightline_gateway_breaker_open{target="dead/*"}'), 0);
  assert.equal(await metric('sightline_gateway_breaker_opens_total{target="dead/*"}'), 1);
});

test("a client's 4xx never opens the breaker", async () => {
  b.failNext(5, 400);
  for (let i = 0; i < 5; i++) {
    await assert.rejects(openai().chat.completions.create({ model: 'client-error-model', messages: [{ role: 'user', content: 'x' }] }), (e: unknown) => e instanceof OpenAI.BadRequestError);
  }
  assert.equal(await metric('sightline_gateway_breaker_opens_total{target="b/*"}'), 0);
  const ok = await openai().chat.completions.create({ model: 'client-error-model', messages: [{ role: 'user', content: 'x' }] });
  assert.equal(ok.object, 'chat.completion');
});

test('a stalled stream hits the idle timeout and is captured as such', async () => {
  const s = await openai().chat.completions.create({ model: 'slow-model', messages: [{ role: 'user', content: 'x' }], stream: true }).withResponse();
  const traceId = s.response.headers.get('x-sightline-trace-id')!;
  await assert.rejects(async () => {
    for await (const _ of s.data) {
      // consume until the gateway cuts the stream
    }
  });
  const { request, spans: sp } = await captured(traceId);
  assert.equal(request.error_type, 'upstream_idle_timeout');
  assert.equal(sp.find((x) => x.status_code === 'ERROR' && stageNames.includes(x.name))?.name, 'upstream.stream');
});

test('no response headers within headers_timeout_ms is a 504, failed in upstream.wait', async () => {
  const started = Date.now();
  const res = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'late-model', messages: [] }) });
  assert.equal(res.status, 504);
  assert.ok(Date.now() - started < 1500, 'answered at the first-byte timeout, not when the provider finally answered');
  assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'upstream_timeout');
  const { spans: sp } = await captured(res.headers.get('x-sightline-trace-id')!);
  assert.equal(sp.find((x) => x.status_code === 'ERROR' && stageNames.includes(x.name))?.name, 'upstream.wait');
});

test("a route's total timeout cuts a slow request with a 504", async () => {
  const started = Date.now();
  const res = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'deadline-model', messages: [] }) });
  assert.equal(res.status, 504);
  assert.ok(Date.now() - started < 1500);
  const body = (await res.json()) as { error: { code: string; message: string } };
  assert.equal(body.error.code, 'upstream_timeout');
  assert.match(body.error.message, /400 ms/);
});

test('Anthropic clients: JSON and streamed messages through /v1/messages', async () => {
  const client = new Anthropic({ apiKey: 'sk-ant-x', baseURL: gw.url, maxRetries: 0 });
  const msg = await client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 64, messages: [{ role: 'user', content: 'hello' }] });
  assert.equal(msg.type, 'message');
  assert.equal(msg.stop_reason, 'end_turn');
  assert.ok(msg.usage.output_tokens > 0);
  const upstream = a.lastRequests().at(-1)!;
  assert.equal(upstream.path, '/v1/messages');
  // The caller's key reaches the provider in the form the caller sent it (x-api-key or bearer).
  assert.match(String(upstream.headers['x-api-key'] ?? upstream.headers.authorization), /sk-ant-x/);
  assert.ok(typeof upstream.headers['anthropic-version'] === 'string');

  const stream = client.messages.stream({ model: 'claude-sonnet-4-5', max_tokens: 64, messages: [{ role: 'user', content: 'hello' }] });
  let text = '';
  stream.on('text', (t) => (text += t));
  const final = await stream.finalMessage();
  assert.ok(text.length > 0);
  assert.equal(final.stop_reason, 'end_turn');
  assert.ok(final.usage.output_tokens > 0);
});

test('Anthropic clients get Anthropic-shaped errors', async () => {
  const client = new Anthropic({ apiKey: 'sk-ant-x', baseURL: gw.url, maxRetries: 0 });
  await assert.rejects(client.messages.create({ model: 'nope', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }), (e: unknown) => e instanceof Anthropic.NotFoundError);
  const res = await fetch(`${gw.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'claude-x', messages: [] }) });
  assert.equal(res.status, 400);
  const body = (await res.json()) as { type: string; error: { type: string; message: string } };
  assert.equal(body.type, 'error');
  assert.equal(body.error.type, 'invalid_request_error');
  assert.match(body.error.message, /max_tokens/);
});

test('/v1/models lists the configured model names in either dialect', async () => {
  const list = await openai().models.list();
  const ids = list.data.map((m) => m.id);
  assert.ok(ids.includes('gpt-4o') && ids.includes('retry-model'));
  const ant = (await (await fetch(`${gw.url}/v1/models`, { headers: { 'anthropic-version': '2023-06-01' } })).json()) as { data: { type: string; id: string }[] };
  assert.ok(ant.data.every((m) => m.type === 'model'));
});

test('the HTTP/2 cleartext listener serves the same API', async () => {
  assert.ok(gw.h2cUrl !== null);
  const session = h2connect(gw.h2cUrl);
  const post = (model: string) =>
    new Promise<{ status: number; traceId: string; body: string }>((resolve, reject) => {
      const req = session.request({ ':method': 'POST', ':path': '/v1/chat/completions', 'content-type': 'application/json' });
      let status = 0;
      let traceId = '';
      let body = '';
      req.on('response', (h) => {
        status = Number(h[':status']);
        traceId = String(h['x-sightline-trace-id']);
      });
      req.setEncoding('utf8');
      req.on('data', (d: string) => (body += d));
      req.on('end', () => resolve({ status, traceId, body }));
      req.on('error', reject);
      req.end(JSON.stringify({ model, messages: [{ role: 'user', content: 'h2' }] }));
    });
  try {
    const { status, traceId, body } = await post('gpt-4o');
    assert.equal(status, 200);
    assert.match(traceId, /^[0-9a-f]{32}$/);
    assert.equal((JSON.parse(body) as { object: string }).object, 'chat.completion');
    const { request } = await captured(traceId);
    assert.equal(request.http_status, 200);
    // An error is written on the HTTP/2 response as on HTTP/1.1's, in the client's dialect.
    const refused = await post('llama-9');
    assert.equal(refused.status, 404);
    assert.equal((JSON.parse(refused.body) as { error: { code: string } }).error.code, 'model_not_found');
    assert.equal((await captured(refused.traceId)).request.error_type, 'model_not_found');
  } finally {
    session.close();
  }
});
