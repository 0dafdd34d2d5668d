/**
 * The gateway against a real mock provider (bench/mock, a local HTTP server), driven by
 * the official `openai` client and by raw HTTP for bad input. Capture goes to the
 * in-process bus, which the tests read to check what was recorded.
 */
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import OpenAI from 'openai';
import { parseConfig } from '@sightline/config';
import { MemoryBus } from '@sightline/bus';
import { STAGES, type RequestRow, type SpanRow } from '@sightline/core';
import { decodeBatch, SpanBuilder } from '@sightline/spans';
import { startGateway, type GatewayHandle } from '@sightline/app-gateway';
import { startMock, type MockServer } from '../../../bench/mock/server.js';
import { waitFor, freePort } from '../../../test/support/servers.js';
import { LoggedErrors, routerFault } from '../../../test/support/gateway-faults.js';

const stageNames: readonly string[] = STAGES;
const isStage = (s: SpanRow) => stageNames.includes(s.name);

let mock: MockServer;
/** What the gateway `gw` logged as errors (a fault in its own code). */
const logged = new LoggedErrors();
let gw: GatewayHandle;
let keyed: GatewayHandle;
let bus: MemoryBus;
let keyedBus: MemoryBus;
const captured: { requests: RequestRow[]; spans: SpanRow[] } = { requests: [], spans: [] };

function config(mockUrl: string, extra = '') {
  return parseConfig(
    `
gateway: { host: 127.0.0.1, port: 0, body_limit: 2kb }
providers:
  mock: { type: openai-compatible, base_url: "${mockUrl}/v1" ${extra} }
  dead: { type: openai-compatible, base_url: "http://127.0.0.1:${deadPort}/v1", connect_timeout_ms: 2000 }
  claude: { type: anthropic, base_url: "${mockUrl}" }
routes:
  - { match: "gpt-*", provider: mock }
  - { match: "alias-fast", provider: mock, model: "gpt-4o-mini" }
  - { match: "dead-*", provider: dead }
  - { match: "claude-*", provider: claude }
capture: { flush_interval_ms: 5 }
`,
    'test.yaml',
  );
}

let deadPort = 0;

const builder = new SpanBuilder();

async function drain(b: MemoryBus): Promise<void> {
  for (const m of await b.fetch(1000, 10)) {
    const batch = decodeBatch(m.data, builder);
    captured.requests.push(...batch.requests);
    captured.spans.push(...batch.spans);
    await m.ack();
  }
}

async function capturedRequest(traceId: string): Promise<{ request: RequestRow; spans: SpanRow[] }> {
  await waitFor(`capture of ${traceId}`, async () => {
    await drain(bus);
    await drain(keyedBus);
    return captured.requests.some((r) => r.trace_id === traceId);
  }, 5000);
  return { request: captured.requests.find((r) => r.trace_id === traceId)!, spans: captured.spans.filter((s) => s.trace_id === traceId) };
}

before(async () => {
  deadPort = await freePort();
  mock = await startMock({ chunks: 4 });
  bus = new MemoryBus();
  keyedBus = new MemoryBus();
  gw = await startGateway({ config: config(mock.url), publisher: bus, instance: 'gw-test', logger: logged.logger });
  keyed = await startGateway({ config: config(mock.url, ', api_key: "sk-configured"'), publisher: keyedBus, instance: 'gw-keyed' });
});

after(async () => {
  await gw.close(2000);
  await keyed.close(2000);
  await mock.close();
});

beforeEach(() => mock.configure({ latencyMs: 0, ttftMs: 0, gapMs: 0, chunks: 4, status: undefined }));

const client = () => new OpenAI({ apiKey: 'sk-client', baseURL: `${gw.url}/v1`, maxRetries: 0 });

test('JSON completion through the gateway: body unchanged, trace id header, client key passed through', async () => {
  mock.reset();
  const { data, response } = await client().chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hello' }] }).withResponse();
  assert.equal(data.object, 'chat.completion');
  assert.equal(data.model, 'gpt-4o');
  assert.ok((data.choices[0]?.message.content ?? '').length > 0);
  const traceId = response.headers.get('x-sightline-trace-id') ?? '';
  assert.match(traceId, /^[0-9a-f]{32}$/);
  const upstream = mock.lastRequests().at(-1)!;
  assert.equal(upstream.headers.authorization, 'Bearer sk-client');
  assert.match(String(upstream.headers.traceparent), new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));

  const { request, spans } = await capturedRequest(traceId);
  assert.equal(request.http_status, 200);
  assert.equal(request.model, 'gpt-4o');
  assert.equal(request.provider, 'mock');
  assert.equal(request.stream, 0);
  assert.equal(request.input_tokens, data.usage?.prompt_tokens);
  assert.equal(request.output_tokens, data.usage?.completion_tokens);
  const root = spans.find((s) => s.is_root === 1)!;
  assert.equal(request.span_id, root.span_id);
  assert.match(String(upstream.headers.traceparent), new RegExp(`-${root.span_id}-01$`));
  const names = spans.filter(isStage).map((s) => s.name);
  for (const n of ['ingress.read', 'parse', 'auth', 'route', 'translate.request', 'upstream.send', 'upstream.wait', 'upstream.stream', 'translate.response', 'egress.write']) {
    assert.ok(names.includes(n), `stage ${n} missing from ${names.join(',')}`);
  }
  const sum = spans.filter(isStage).reduce((a, s) => a + BigInt(s.duration_ns), 0n);
  assert.equal(sum, BigInt(request.total_ns));
  assert.equal(BigInt(request.gateway_ns) + BigInt(request.upstream_ns), BigInt(request.total_ns));
});

test('streamed completion: every chunk arrives, usage captured when the client asked for it', async () => {
  const stream = await client().chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } }).withResponse();
  let text = '';
  let chunks = 0;
  let usage: OpenAI.CompletionUsage | null | undefined;
  for await (const c of stream.data) {
    chunks++;
    text += c.choices[0]?.delta.content ?? '';
    if (c.usage) usage = c.usage;
  }
  assert.ok(chunks >= 6, `expected role + 4 content + finish + usage chunks, got ${chunks}`);
  assert.ok(text.length > 0);
  const traceId = stream.response.headers.get('x-sightline-trace-id')!;
  const { request } = await capturedRequest(traceId);
  assert.equal(request.stream, 1);
  assert.equal(request.output_tokens, usage?.completion_tokens);
  assert.ok(Number(request.ttft_ns) > 0 && Number(request.ttft_ns) <= Number(request.total_ns));
});

test('events are relayed as they arrive, not held back', async () => {
  mock.configure({ ttftMs: 0, gapMs: 300, chunks: 3 });
  const t0 = Date.now();
  const s = await client().chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }], stream: true });
  const arrivals: number[] = [];
  for await (const c of s) if (c.choices[0]?.delta.content) arrivals.push(Date.now() - t0);
  assert.equal(arrivals.length, 3);
  // With a 300 ms gap upstream, the first content must not wait for the last.
  assert.ok(arrivals[2]! - arrivals[0]! >= 450, `arrivals ${arrivals.join(',')}`);
});

test('a configured provider key replaces the client key; aliases rename the model upstream', async () => {
  mock.reset();
  const c = new OpenAI({ apiKey: 'sk-client', baseURL: `${keyed.url}/v1`, maxRetries: 0 });
  const r = await c.chat.completions.create({ model: 'alias-fast', messages: [{ role: 'user', content: 'x' }] });
  assert.equal(r.model, 'gpt-4o-mini');
  const up = mock.lastRequests().at(-1)!;
  assert.equal(up.headers.authorization, 'Bearer sk-configured');
  assert.equal((up.body as { model: string }).model, 'gpt-4o-mini');
});

test('an incoming traceparent is honoured', async () => {
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const res = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
    body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] }),
  });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('x-sightline-trace-id'), traceId);
  await res.arrayBuffer();
  const { spans } = await capturedRequest(traceId);
  assert.equal(spans.find((s) => s.is_root === 1)?.parent_span_id, '00f067aa0ba902b7');
});

test('a body is read as the bytes it came as, whatever its content type says', async () => {
  // application/json exactly takes the fast path (past fastify's lifecycle); the rest go through
  // fastify's content-type parsers. All must hand the route the same bytes.
  for (const ct of ['application/json', 'application/json; charset=utf-8', 'text/plain', 'application/octet-stream']) {
    mock.reset();
    const body = JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: `typed ${ct} é` }] });
    const fast = gw.core.fastPathServed;
    const res = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': ct }, body });
    assert.equal(res.status, 200, ct);
    assert.equal(gw.core.fastPathServed - fast, ct === 'application/json' ? 1 : 0, `${ct}: the path it took`);
    await res.arrayBuffer();
    const up = mock.lastRequests().at(-1)!;
    assert.equal((up.body as { messages: { content: string }[] }).messages[0]!.content, `typed ${ct} é`, ct);
    const { request } = await capturedRequest(res.headers.get('x-sightline-trace-id')!);
    assert.equal(request.request_bytes, Buffer.byteLength(body), ct);
  }
});

test('the fast path and fastify answer alike: answers, errors, headers, records', async () => {
  // The same requests, once as the SDKs send them (the fast path) and once with a charset
  // parameter (fastify's lifecycle): everything but the ids must match.
  const cases: [string, string, string][] = [
    ['an answer', '/v1/chat/completions', JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'same' }] })],
    ['a stream', '/v1/chat/completions', JSON.stringify({ model: 'gpt-4o', stream: true, messages: [{ role: 'user', content: 'same' }] })],
    ['Anthropic, translated', '/v1/messages', JSON.stringify({ model: 'gpt-4o', max_tokens: 16, messages: [{ role: 'user', content: 'same' }] })],
    ['broken JSON', '/v1/chat/completions', '{"model": "gpt-4o", "messages": ['],
    ['broken JSON, Anthropic', '/v1/messages', '{"model": '],
    ['an unknown model', '/v1/chat/completions', JSON.stringify({ model: 'llama-9', messages: [] })],
    ['no messages', '/v1/messages', JSON.stringify({ model: 'claude-x', max_tokens: 5 })],
    ['an empty body', '/v1/embeddings', ''],
    ['embeddings', '/v1/embeddings', JSON.stringify({ model: 'gpt-4o', input: 'same' })],
    ['a provider down', '/v1/chat/completions', JSON.stringify({ model: 'dead-1', messages: [{ role: 'user', content: 'same' }] })],
  ];
  const shown = ['content-type', 'x-sightline-cache', 'retry-after'];
  for (const [what, path, body] of cases) {
    const seen: { status: number; headers: (string | null)[]; body: string; row: Partial<RequestRow> }[] = [];
    for (const ct of ['application/json', 'application/json; charset=utf-8']) {
      const fast = gw.core.fastPathServed;
      const res = await fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': ct, authorization: 'Bearer sk-client', 'anthropic-version': '2023-06-01' }, body });
      const text = await res.text();
      assert.equal(gw.core.fastPathServed - fast, ct === 'application/json' ? 1 : 0, `${what}, ${ct}: the path it took`);
      const traceId = res.headers.get('x-sightline-trace-id') ?? '';
      assert.match(traceId, /^[0-9a-f]{32}$/, what);
      const { request } = await capturedRequest(traceId);
      // Ids, times and the generated answer's own ids differ from request to request.
      const stable = text.replace(/"(id|created|system_fingerprint)":("[^"]*"|\d+)/g, '"$1":_').replace(/chatcmpl-[A-Za-z0-9_-]+|msg_[A-Za-z0-9_-]+/g, '_');
      seen.push({
        status: res.status,
        headers: shown.map((h) => res.headers.get(h)),
        body: stable,
        row: { http_status: request.http_status, error_type: request.error_type, model: request.model, provider: request.provider, route: request.route, request_bytes: request.request_bytes, response_bytes: request.response_bytes, stream: request.stream },
      });
    }
    assert.deepEqual(seen[0], seen[1], what);
  }
});

test('a fault in the route code is a 500 internal_error in the client\'s dialect on both paths, captured and logged', async () => {
  const undo = routerFault(gw, 'gpt-fault', 'a fault injected by the test');
  try {
    for (const path of ['/v1/chat/completions', '/v1/messages']) {
      for (const ct of ['application/json', 'text/plain']) {
        const what = `${path}, ${ct}`;
        const fast = gw.core.fastPathServed;
        const res = await fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': ct }, body: JSON.stringify({ model: 'gpt-fault', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }) });
        assert.equal(gw.core.fastPathServed - fast, ct === 'application/json' ? 1 : 0, `${what}: the path it took`);
        assert.equal(res.status, 500, what);
        const body = await res.json();
        if (path === '/v1/messages') assert.deepEqual(body, { type: 'error', error: { type: 'api_error', message: 'internal error in the gateway' } }, what);
        else assert.deepEqual(body, { error: { message: 'internal error in the gateway', type: 'api_error', param: null, code: 'internal_error' } }, what);
        const traceId = res.headers.get('x-sightline-trace-id')!;
        const { request } = await capturedRequest(traceId);
        assert.equal(request.http_status, 500, what);
        assert.equal(request.error_type, 'internal_error', what);
        assert.ok(logged.fault('a fault injected by the test', traceId) !== undefined, what);
      }
    }
  } finally {
    undo();
  }
  // The gateway goes on serving.
  const ok = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] }) });
  assert.equal(ok.status, 200);
  await ok.arrayBuffer();
});

test('a fault once the upstream exchange owns the response ends the connection; the request is captured and logged, and the gateway goes on serving', async () => {
  // undici's dispatch has no input that throws synchronously: the fault is injected into the running gateway's pool.
  const pool = gw.core.upstreams.get('mock')!.pool;
  const dispatch = pool.dispatch;
  let faults = 0;
  pool.dispatch = function (...args: Parameters<typeof dispatch>) {
    if (faults++ === 0) throw new Error('a fault injected by the test into the dispatch');
    return dispatch.apply(this, args);
  };
  const before = mock.stats().requests - mock.stats().models;
  try {
    const sent = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'dispatch' }] }) }).then(
      (r) => `answered ${r.status}`,
      (e: unknown) => e,
    );
    // The exchange may still write to the response, so nothing is written: the connection ends.
    assert.ok(sent instanceof TypeError, String(sent));
    await waitFor('the fault logged', () => logged.fault('a fault injected by the test into the dispatch') !== undefined, 5000);
    const entry = logged.fault('a fault injected by the test into the dispatch')!;
    const { request } = await capturedRequest(entry.fields.trace_id as string);
    assert.equal(request.http_status, 500);
    assert.equal(request.error_type, 'internal_error');
    assert.equal(mock.stats().requests - mock.stats().models, before, 'nothing reached the provider');
  } finally {
    pool.dispatch = dispatch;
  }
  const ok = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] }) });
  assert.equal(ok.status, 200);
  await ok.arrayBuffer();
  assert.equal(faults, 1);
});

test('a fault after the response (the request\'s metrics) is logged; the request is captured and the gateway goes on serving', async () => {
  const metrics = gw.core.metrics;
  const observe = metrics.observe;
  let faults = 0;
  metrics.observe = function (...args: Parameters<typeof observe>) {
    if (faults++ === 0) throw new Error('a fault injected by the test into the metrics');
    return observe.apply(this, args);
  };
  try {
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: `after ${i}` }] }) });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
      const traceId = res.headers.get('x-sightline-trace-id')!;
      const { request } = await capturedRequest(traceId);
      assert.equal(request.http_status, 200);
      assert.equal(logged.fault('a fault injected by the test into the metrics', traceId) !== undefined, i === 0, `request ${i}`);
    }
    assert.equal(faults, 2);
  } finally {
    metrics.observe = observe;
  }
});

async function post(body: string | Buffer, headers: Record<string, string> = { 'content-type': 'application/json' }) {
  const res = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers, body });
  const json = (await res.json()) as { error: { message: string; type: string; param: string | null; code: string } };
  return { status: res.status, json, traceId: res.headers.get('x-sightline-trace-id') ?? '' };
}

test('bad input gets OpenAI-shaped 4xx errors and is captured like any request', async () => {
  const cases: [string, string | Buffer, number, string, string | null][] = [
    ['malformed JSON', '{"model": "gpt-4o", "messages": [', 400, 'invalid_json', null],
    ['missing model', JSON.stringify({ messages: [] }), 400, 'invalid_request', 'model'],
    ['model not a string', JSON.stringify({ model: 5, messages: [] }), 400, 'invalid_request', 'model'],
    ['missing messages', JSON.stringify({ model: 'gpt-4o' }), 400, 'invalid_request', 'messages'],
    ['unknown model', JSON.stringify({ model: 'llama-9', messages: [] }), 404, 'model_not_found', 'model'],
    ['body over the limit', JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x'.repeat(4096) }] }), 413, 'body_too_large', null],
    ['empty body', '', 400, 'invalid_json', null],
  ];
  for (const [what, body, status, code, param] of cases) {
    const r = await post(body);
    assert.equal(r.status, status, what);
    assert.equal(r.json.error.code, code, what);
    assert.equal(r.json.error.type, 'invalid_request_error', what);
    assert.equal(r.json.error.param, param, what);
    assert.ok(r.json.error.message.length > 0, what);
    assert.match(r.traceId, /^[0-9a-f]{32}$/, what);
    const { request, spans } = await capturedRequest(r.traceId);
    assert.equal(request.http_status, status, what);
    assert.equal(request.error_type, code, what);
    assert.ok(spans.some((s) => s.is_root === 1), what);
    assert.ok(spans.some((s) => s.status_code === 'ERROR' && isStage(s)), `${what}: a failed stage span`);
    const sum = spans.filter(isStage).reduce((a, s) => a + BigInt(s.duration_ns), 0n);
    assert.equal(sum, BigInt(request.total_ns), what);
  }
});

test('the official client sees bad requests as typed errors', async () => {
  await assert.rejects(
    client().chat.completions.create({ model: 'nope-model', messages: [{ role: 'user', content: 'x' }] }),
    (e: unknown) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found',
  );
});

test('unknown paths get an OpenAI-shaped 404', async () => {
  const res = await fetch(`${gw.url}/v1/embeddingz`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
  assert.equal(res.status, 404);
  const j = (await res.json()) as { error: { code: string } };
  assert.equal(j.error.code, 'route_not_found');
});

test('an unreachable provider is a 502 in OpenAI shape, failed in upstream.connect', async () => {
  const r = await post(JSON.stringify({ model: 'dead-1', messages: [] }));
  assert.equal(r.status, 502);
  assert.equal(r.json.error.code, 'upstream_unreachable');
  const { spans } = await capturedRequest(r.traceId);
  assert.equal(spans.find((s) => s.status_code === 'ERROR' && isStage(s))?.name, 'upstream.connect');
});

test('an upstream error status is relayed with its body, its retry-after and rate-limit headers, and without keys', async () => {
  mock.configure({ status: 429 });
  await assert.rejects(client().chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] }), (e: unknown) => {
    assert.ok(e instanceof OpenAI.RateLimitError);
    assert.equal(e.message, '429 mock: forced status 429');
    assert.equal(e.code, 'rate_limit_exceeded');
    assert.equal(e.headers?.get('retry-after'), '1');
    assert.equal(e.headers?.get('x-ratelimit-remaining-requests'), '0');
    return true;
  });
  mock.configure({ status: 401 });
  const key = 'sk-proj-Leak0123456789abcdefghijklmnopqrstuvwxyz';
  await assert.rejects(new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 }).chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] }), (e: unknown) => {
    assert.ok(e instanceof OpenAI.AuthenticationError);
    assert.ok(!e.message.includes('Leak0123'), e.message);
    assert.match(e.message, /Incorrect API key provided: \[redacted\]/);
    return true;
  });
});

test('a client that disconnects mid-stream aborts the upstream request and is captured as aborted', async () => {
  mock.reset();
  mock.configure({ gapMs: 200, chunks: 20 });
  const traceId = await new Promise<string>((resolve, reject) => {
    const req = httpRequest(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      const id = String(res.headers['x-sightline-trace-id']);
      res.once('data', () => {
        req.destroy();
        resolve(id);
      });
    });
    req.on('error', () => {});
    req.end(JSON.stringify({ model: 'gpt-4o', stream: true, messages: [{ role: 'user', content: 'x' }] }));
    setTimeout(() => reject(new Error('no data')), 5000).unref();
  });
  await waitFor('mock to see the abort', () => mock.stats().aborted === 1, 5000);
  const { request, spans } = await capturedRequest(traceId);
  assert.equal(request.aborted, 1);
  assert.equal(spans.find((s) => s.is_root === 1)?.status_code, 'ERROR');
});

test('an OpenAI request for a Claude model is translated to the Anthropic provider', async () => {
  mock.reset();
  const r = await client().chat.completions.create({ model: 'claude-sonnet-4-5', messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'x' }] });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0]?.finish_reason, 'stop');
  const up = mock.lastRequests().at(-1)!;
  assert.equal(up.path, '/v1/messages');
  assert.equal((up.body as { system: string }).system, 'be brief');
  assert.equal(up.headers['x-api-key'], 'sk-client');
});

test('health and metrics', async () => {
  const h = await fetch(`${gw.url}/healthz`);
  assert.equal(h.status, 200);
  const m = await (await fetch(`${gw.url}/metrics`)).text();
  assert.match(m, /sightline_gateway_requests_total\{status="2xx"\} \d+/);
  assert.match(m, /sightline_capture_published_total \d+/);
  assert.match(m, /sightline_capture_dropped_total 0/);
  // Content capture is on (the default, full): its worker thread's late batches are counted.
  assert.match(m, /# TYPE sightline_capture_content_late_total counter\nsightline_capture_content_late_total \d+\n/);
  assert.match(m, /# TYPE sightline_capture_content_answered_by_message_total counter\nsightline_capture_content_answered_by_message_total 0\n/);
  // The thread runs at SCHED_IDLE (thread-priority.ts). It was warmed at start, but says what it
  // got only once it has loaded (seconds under tsx on a busy machine): the line is waited for.
  if (process.platform === 'linux') {
    let info = '';
    await waitFor('the content thread to report its scheduling', async () => {
      info = await (await fetch(`${gw.url}/metrics`)).text();
      return info.includes('sightline_capture_content_thread_info');
    });
    assert.match(info, /\nsightline_capture_content_thread_info\{policy="idle"\} 1\n/);
  }
});
