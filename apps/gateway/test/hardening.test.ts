/**
 * The gateway against misbehaving providers and hostile input (issue 9): a retried 5xx whose
 * body fails, error bodies and SSE lines without end, JSON nested without end, bodies with
 * secrets in them. Real mock providers (bench/mock) on loopback; capture read from the
 * in-process bus.
 */
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { parseConfig } from '@sightline/config';
import { STAGES, ATTEMPT_SPAN } from '@sightline/core';
import { startGateway, type GatewayHandle } from '@sightline/app-gateway';
import { startMock, type MockServer } from '../../../bench/mock/server.js';
import { CapturedBus, attr } from '../../../test/support/captured.js';
import { loopDelaySeconds } from '../src/metrics.js';

const stageNames: readonly string[] = STAGES;
let flaky: MockServer;
let healthy: MockServer;
let gw: GatewayHandle;
const cap = new CapturedBus();
const logged: string[] = [];
const errors: { fields: Record<string, unknown>; msg: string }[] = [];

before(async () => {
  [flaky, healthy] = await Promise.all([startMock(), startMock()]);
  const config = parseConfig(
    `
gateway: { host: 127.0.0.1, port: 0, upstream_body_limit: 1mb, sse_event_limit: 64kb, json_depth_limit: 64 }
providers:
  flaky: { type: openai-compatible, base_url: "${flaky.url}/v1" }
  flaky_claude: { type: anthropic, base_url: "${flaky.url}" }
  healthy: { type: openai-compatible, base_url: "${healthy.url}/v1" }
routes:
  - { match: "retry-model", provider: flaky, retries: 1, retry_backoff_ms: 10 }
  - { match: "flaky-*", provider: flaky, retries: 0 }
  - { match: "claude-*", provider: flaky_claude, retries: 0 }
  - { match: "gpt-*", provider: healthy }
breaker: { failure_threshold: 2, cooldown_ms: 60000 }
capture: { flush_interval_ms: 5 }
`,
    'hardening.yaml',
  );
  gw = await startGateway({ config, publisher: cap.bus, instance: 'gw-hardening', log: (m) => logged.push(m), logger: { error: (fields, msg) => errors.push({ fields, msg }) } });
});

after(async () => {
  await gw.close(2000);
  await Promise.all([flaky.close(), healthy.close()]);
});

beforeEach(() => {
  flaky.reset();
  healthy.reset();
});

const openai = () => new OpenAI({ apiKey: 'sk-test', baseURL: `${gw.url}/v1`, maxRetries: 0 });
const anthropic = () => new Anthropic({ apiKey: 'sk-ant-test', baseURL: gw.url, maxRetries: 0 });

function post(path: string, body: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
}

test('a 5xx whose body then fails, retried with success: captured without a failed stage, counted once by the breaker', async () => {
  flaky.misbehaveNext(1, { kind: 'reset-mid-error-body', status: 500 });
  // The breaker opens at two failures: were the one failed attempt counted twice, the retry
  // would find the target's breaker open and the client would get an error.
  const { data, response } = await openai().chat.completions.create({ model: 'retry-model', messages: [{ role: 'user', content: 'x' }] }).withResponse();
  assert.equal(data.object, 'chat.completion');
  assert.equal(flaky.stats().openai, 2);
  const { request, spans } = await cap.captured(response.headers.get('x-sightline-trace-id')!);
  assert.equal(request.http_status, 200);
  assert.equal(request.error_type, '');
  const stages = spans.filter((s) => stageNames.includes(s.name));
  assert.deepEqual(stages.filter((s) => s.status_code === 'ERROR').map((s) => s.name), [], 'no failed stage after a successful retry');
  const root = spans.find((s) => s.is_root === 1)!;
  assert.notEqual(root.status_code, 'ERROR');
  const attempts = spans.filter((s) => s.name === ATTEMPT_SPAN).sort((x, y) => Number(BigInt(x.start_time_unix_nano) - BigInt(y.start_time_unix_nano)));
  assert.equal(attempts.length, 2);
  assert.equal(attempts[0]!.status_code, 'ERROR');
  assert.equal(attr(attempts[0]!, 'http.response.status_code'), '500');
  assert.notEqual(attempts[1]!.status_code, 'ERROR');
});

/** Resident set size now, after a collection when the test runs with --expose-gc. */
function rss(): number {
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage().rss;
}

/** Requests to the healthy provider, one after another, until `until` settles; returns how many were answered 200. */
async function healthyTraffic(until: Promise<unknown>): Promise<{ ok: number; failed: number }> {
  let done = false;
  void until.finally(() => (done = true));
  let ok = 0;
  let failed = 0;
  for (let i = 0; i < 10_000 && !done; i++) {
    const r = await post('/v1/chat/completions', JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }));
    await r.arrayBuffer();
    if (r.status === 200) ok++;
    else failed++;
  }
  return { ok, failed };
}

test('a 500 with a 1 GiB body: the client gets an upstream_error in its dialect, memory stays flat, other requests are served', async () => {
  const before = rss();
  flaky.misbehaveNext(2, { kind: 'huge-error-body', status: 500, bytes: 1024 ** 3 });
  const openaiCall = post('/v1/chat/completions', JSON.stringify({ model: 'flaky-1', messages: [{ role: 'user', content: 'x' }] }));
  const anthropicCall = post('/v1/messages', JSON.stringify({ model: 'claude-1', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }), { 'anthropic-version': '2023-06-01' });
  const both = Promise.all([openaiCall, anthropicCall]);
  const [traffic, [o, a]] = await Promise.all([healthyTraffic(both), both]);
  assert.equal(o.status, 502);
  const ob = (await o.json()) as { error: { code: string; type: string; message: string } };
  assert.equal(ob.error.code, 'upstream_error');
  assert.match(ob.error.message, /larger than/);
  assert.equal(a.status, 502);
  const ab = (await a.json()) as { type: string; error: { type: string } };
  assert.deepEqual([ab.type, ab.error.type], ['error', 'api_error']);
  assert.ok(traffic.ok > 0 && traffic.failed === 0, `healthy provider served throughout: ${JSON.stringify(traffic)}`);
  const grown = rss() - before;
  assert.ok(grown < 64 * 1024 * 1024, `RSS grew by ${(grown / 1048576).toFixed(1)} MiB`);
  const { request, spans } = await cap.captured(o.headers.get('x-sightline-trace-id')!);
  assert.equal(request.error_type, 'upstream_error');
  assert.equal(spans.find((s) => s.status_code === 'ERROR' && stageNames.includes(s.name))?.name, 'upstream.stream');
  const metrics = await (await fetch(`${gw.url}/metrics`)).text();
  assert.match(metrics, /sightline_gateway_errors_total\{type="upstream_error"\} [1-9]/);
  // The event loop's delay is sampled (issue 15): a number, and samples were taken.
  assert.match(metrics, /sightline_gateway_event_loop_delay_seconds\{quantile="0.99"\} \d/);
  assert.ok(Number(/sightline_gateway_event_loop_delay_seconds_count (\d+)/.exec(metrics)?.[1]) > 0);
  // The delay, not the time between samples: Node's histogram holds the 10 ms sampling
  // interval too, so half the samples of this mostly idle loop would read 10 ms or more.
  const p50 = Number(/sightline_gateway_event_loop_delay_seconds\{quantile="0.5"\} (\S+)/.exec(metrics)?.[1]);
  assert.ok(p50 >= 0 && p50 < 0.009, `event-loop delay p50 ${p50} s`);
});

test('the event-loop delay is reported without the sampling interval', () => {
  assert.equal(loopDelaySeconds(10_000_000), 0);
  assert.equal(loopDelaySeconds(9_200_000), 0, 'a sample that came early is not late');
  assert.equal(loopDelaySeconds(10_250_000), 0.00025);
  assert.equal(loopDelaySeconds(1_010_000_000), 1);
});

test('an SSE line that never ends: the stream ends with an error in the client\'s dialect, memory stays flat', async () => {
  const before = rss();
  flaky.misbehaveNext(1, { kind: 'endless-sse-line', bytes: 1024 ** 3 });
  const s = await openai().chat.completions.create({ model: 'flaky-1', messages: [{ role: 'user', content: 'x' }], stream: true }).withResponse();
  const traceId = s.response.headers.get('x-sightline-trace-id')!;
  const consumed = (async () => {
    for await (const _ of s.data) {
      // the gateway ends the stream with an error event
    }
  })();
  const [traffic] = await Promise.all([healthyTraffic(consumed.catch(() => undefined)), assert.rejects(consumed, (e: unknown) => e instanceof OpenAI.APIError && /larger than/.test(e.message))]);
  assert.ok(traffic.failed === 0, `healthy provider served throughout: ${JSON.stringify(traffic)}`);
  const grown = rss() - before;
  assert.ok(grown < 64 * 1024 * 1024, `RSS grew by ${(grown / 1048576).toFixed(1)} MiB`);
  const { request, spans } = await cap.captured(traceId);
  assert.equal(request.error_type, 'upstream_error');
  assert.equal(spans.find((s) => s.status_code === 'ERROR' && stageNames.includes(s.name))?.name, 'upstream.stream');
});

test('an SSE line that never ends, translated for an Anthropic client: an Anthropic error event', async () => {
  flaky.misbehaveNext(1, { kind: 'endless-sse-line', bytes: 1024 ** 3 });
  // flaky-* is an openai-compatible provider: the Anthropic client's stream is translated.
  const stream = anthropic().messages.stream({ model: 'flaky-1', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] });
  await assert.rejects(stream.finalMessage(), (e: unknown) => e instanceof Anthropic.APIError && /larger than/.test(e.message));
});

test('malformed JSON holding a secret: the error and the capture keep the position, not the bytes', async () => {
  // V8's messages quote up to ~10 characters around the fault, or the whole body when short.
  for (const body of ['{"k": sk-SECRET}', '{"model":"gpt-4o-mini","api_key":"sk-SECRET" x}', '{"SECRET":']) {
    const r = await post('/v1/chat/completions', body);
    assert.equal(r.status, 400);
    const text = await r.text();
    assert.ok(!text.includes('SECRET'), `error body echoes the request: ${text}`);
    assert.match(text, /not valid JSON/);
    const { request, spans } = await cap.captured(r.headers.get('x-sightline-trace-id')!);
    const everything = JSON.stringify({ request, spans });
    assert.ok(!everything.includes('SECRET'), 'nothing of the body is captured');
    assert.equal(request.error_type, 'invalid_json');
  }
});

test('a long path keeps its query string out of the captured route', async () => {
  const r = await post(`/v1/chat/completions/${'x'.repeat(150)}?api_key=sk-querysecret&pad=${'y'.repeat(40)}`, '{}');
  assert.equal(r.status, 404);
  const { request } = await cap.captured(r.headers.get('x-sightline-trace-id')!);
  assert.ok(!request.route.includes('querysecret'), request.route);
  assert.ok(request.route.length <= 200);
});

/** A JSON schema nested `depth` levels, as text (JSON.stringify itself overflows the stack far down). */
function nested(depth: number): string {
  return '{"type":"object","properties":{"a":'.repeat(depth) + '{"type":"object"}' + '}}'.repeat(depth);
}

test('input nested deeper than the limit is a 400 in the client\'s dialect, at any depth', async () => {
  for (const depth of [100, 5000, 50_000]) {
    const body = `{"model":"gpt-4o-mini","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"t","input_schema":${nested(depth)}}]}`;
    const r = await post('/v1/messages', body, { 'anthropic-version': '2023-06-01' });
    assert.equal(r.status, 400, `depth ${depth}`);
    const b = (await r.json()) as { type: string; error: { type: string; message: string } };
    assert.equal(b.error.type, 'invalid_request_error');
    assert.match(b.error.message, /nested deeper than 64/);
    const o = await post('/v1/chat/completions', `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}],"metadata":${nested(depth)}}`);
    assert.equal(o.status, 400);
    assert.equal(((await o.json()) as { error: { code: string } }).error.code, 'invalid_request');
  }
  // Within the limit, the translated request goes through.
  const ok = await post('/v1/messages', `{"model":"gpt-4o-mini","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"t","input_schema":${nested(20)}}]}`, { 'anthropic-version': '2023-06-01' });
  assert.equal(ok.status, 200);
});

test('an internal error is a 500 in the client\'s dialect, and is logged without the body or the key', async () => {
  const router = gw.core.router;
  const match = router.match.bind(router);
  // Nothing in the gateway throws on purpose: make the route lookup fail to reach the handler's catch-all.
  router.match = () => {
    throw new TypeError('route table is broken');
  };
  try {
    const r = await post('/v1/messages', JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 5, messages: [{ role: 'user', content: 'PROMPT-SECRET' }] }), { 'anthropic-version': '2023-06-01', 'x-api-key': 'sk-ant-KEYSECRET' });
    assert.equal(r.status, 500);
    const b = (await r.json()) as { type: string; error: { type: string } };
    assert.deepEqual([b.type, b.error.type], ['error', 'api_error']);
  } finally {
    router.match = match;
  }
  assert.equal(errors.length, 1);
  const e = errors[0]!;
  assert.match(JSON.stringify(e.fields), /route table is broken/);
  assert.equal(e.fields.route, '/v1/messages');
  const text = JSON.stringify(e);
  assert.ok(!text.includes('PROMPT-SECRET') && !text.includes('KEYSECRET'), text);
});
