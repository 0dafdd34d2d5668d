import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RequestRecord, SpanBuilder, stageIntervals, extractUsage, hasTokenDelta, keepResponseChunk, Capture, RESPONSE_KEEP_BYTES, decodeBatch } from '@sightline/capture';
import { MemoryBus, type BusPublisher } from '@sightline/bus';
import { newSpanId, newTraceId, now, STAGES, ATTEMPT_SPAN } from '@sightline/core';
import type { CaptureConfig } from '@sightline/config';

function fullRecord(): RequestRecord {
  const r = new RequestRecord();
  const t = now();
  r.seq = 7;
  r.traceId = newTraceId();
  r.rootSpanId = newSpanId();
  r.t0 = t;
  r.tBody = t + 0.01;
  r.tParsed = t + 0.02;
  r.tAuth = t + 0.021;
  r.tRouted = t + 0.022;
  r.tBuilt = t + 0.03;
  r.tConnected = t + 0.5;
  r.tSent = t + 0.51;
  r.tFirstByte = t + 100;
  r.tLastByte = t + 150;
  r.tEnd = t + 150.01;
  r.tFirstWrite = t + 100.001;
  r.tFinish = t + 150.05;
  r.method = 'POST';
  r.route = '/v1/chat/completions';
  r.model = 'gpt-4o';
  r.upstreamModel = 'gpt-4o';
  r.provider = 'openai';
  r.team = 'search';
  r.status = 200;
  r.upstreamStatus = 200;
  return r;
}

test('stages partition the request: contiguous, ordered, summing to the total', () => {
  const r = fullRecord();
  r.newConnection = true;
  const st = stageIntervals(r);
  assert.deepEqual(st.map((s) => s.name), ['ingress.read', 'parse', 'auth', 'route', 'translate.request', 'upstream.connect', 'upstream.send', 'upstream.wait', 'upstream.stream', 'translate.response', 'egress.write']);
  assert.equal(st[0]!.start, r.t0);
  assert.equal(st.at(-1)!.end, r.tFinish);
  for (let i = 1; i < st.length; i++) assert.equal(st[i]!.start, st[i - 1]!.end);
  assert.ok(st.every((s) => !s.failed));

  r.newConnection = false;
  const reused = stageIntervals(r);
  assert.ok(!reused.some((s) => s.name === 'upstream.connect'));
  assert.equal(reused.find((s) => s.name === 'upstream.send')?.start, r.tBuilt);
});

test('a request that failed in parse closes parse at the error reply and flags it', () => {
  const r = new RequestRecord();
  r.t0 = 1000;
  r.tBody = 1001;
  r.tEnd = 1002;
  r.tFinish = 1003;
  const st = stageIntervals(r);
  assert.deepEqual(st.map((s) => [s.name, s.start, s.end, s.failed]), [
    ['ingress.read', 1000, 1001, false],
    ['parse', 1001, 1002, true],
    ['egress.write', 1002, 1003, false],
  ]);
  r.failedStage = 'route';
  r.tParsed = 1001.5;
  r.tAuth = 1001.6;
  const st2 = stageIntervals(r);
  assert.equal(st2.find((s) => s.failed)?.name, 'route');
});

test('a stream cut short records the tokens seen so far and says so', () => {
  const r = fullRecord();
  r.stream = true;
  r.partial = true;
  r.aborted = true;
  r.responseChunks = [Buffer.from('data: {"model":"m","choices":[{"delta":{"role":"assistant","content":""}}]}\n\ndata: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {"choices":[{"delta":{"content":"b"}}]}\n\ndata: {"choices":[{"delta":{"content":"c"}}]}\n\n')];
  const { request } = new SpanBuilder().buildRecord(r, 'gw');
  assert.equal(request.output_tokens, 3);
  assert.equal(request.usage_partial, 1);
  assert.equal(request.aborted, 1);
});

test('a stream aborted by the client ends in a failed upstream.stream', () => {
  const r = fullRecord();
  r.stream = true;
  r.tLastByte = 0;
  r.tEnd = 0;
  r.aborted = true;
  const st = stageIntervals(r);
  const last = st.at(-1)!;
  assert.equal(last.name, 'upstream.stream');
  assert.equal(last.failed, true);
  assert.equal(last.end, r.tFinish);
});

test('usage from OpenAI and Anthropic, JSON and SSE', () => {
  const oj = Buffer.from(JSON.stringify({ model: 'gpt-4o-2024', usage: { prompt_tokens: 11, completion_tokens: 22, prompt_tokens_details: { cached_tokens: 3 } } }));
  assert.deepEqual(extractUsage([oj], false), { responseModel: 'gpt-4o-2024', inputTokens: 11, outputTokens: 22, cacheReadTokens: 3, cacheWriteTokens: 0, found: true, deltas: 0, anthropic: false });
  const os = ['data: {"model":"m1","choices":[{"delta":{"content":"hé"}}]}\n\n', 'data: {"model":"m1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":6}}\n\n', 'data: [DONE]\n\n'];
  const u = extractUsage(os.map((s) => Buffer.from(s)), true);
  assert.equal(u.inputTokens, 5);
  assert.equal(u.outputTokens, 6);
  assert.equal(u.responseModel, 'm1');
  const as = [
    'event: message_start\ndata: {"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":9,"output_tokens":1,"cache_read_input_tokens":4,"cache_creation_input_tokens":2}}}\n\n',
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}\n\n',
  ];
  const a = extractUsage(as.map((s) => Buffer.from(s)), true);
  // Anthropic's input_tokens (9) exclude cache reads (4) and writes (2); stored input includes them.
  assert.deepEqual(a, { responseModel: 'claude-x', inputTokens: 15, outputTokens: 15, cacheReadTokens: 4, cacheWriteTokens: 2, found: true, deltas: 0, anthropic: true });
  assert.equal(u.deltas, 1);
  assert.equal(extractUsage([Buffer.from('<html>bad gateway')], false).found, false);
});

test('usage from a JSON body is found by its keys: escaped look-alikes in content are ignored, a body cut in the middle still has it', () => {
  const body = {
    id: 'x',
    model: 'gpt-4o-2024',
    choices: [{ message: { role: 'assistant', content: 'he wrote "usage": {"prompt_tokens": 999} and "model": "fake"' } }],
    usage: { prompt_tokens: 12, completion_tokens: 34, prompt_tokens_details: { cached_tokens: 5, nested: { a: '}' } } },
  };
  const text = JSON.stringify(body, null, 1); // whitespace around colons and braces
  const u = extractUsage([Buffer.from(text)], false);
  assert.deepEqual([u.responseModel, u.inputTokens, u.outputTokens, u.cacheReadTokens, u.found], ['gpt-4o-2024', 12, 34, 5, true]);
  // What keepResponseChunk keeps of a long body: the first chunk and the tail.
  const big = Buffer.from(JSON.stringify({ ...body, choices: [{ message: { role: 'assistant', content: 'y'.repeat(200_000) } }] }));
  const r = new RequestRecord();
  for (let i = 0; i < big.length; i += 1000) keepResponseChunk(r, big.subarray(i, i + 1000));
  assert.ok(r.responseKept < big.length);
  const cut = extractUsage(r.responseChunks, false);
  assert.deepEqual([cut.responseModel, cut.inputTokens, cut.outputTokens], ['gpt-4o-2024', 12, 34]);
  // Anthropic's shape, and an error body without usage.
  const a = extractUsage([Buffer.from('{"id":"m","type":"message","model":"claude-x","content":[{"type":"text","text":"\\"usage\\":{}"}],"usage":{"input_tokens":7,"output_tokens":8,"cache_read_input_tokens":2}}')], false);
  assert.deepEqual([a.responseModel, a.inputTokens, a.outputTokens, a.cacheReadTokens], ['claude-x', 9, 8, 2]);
  assert.equal(extractUsage([Buffer.from('{"error":{"message":"no","type":"invalid_request_error"}}')], false).found, false);
});

test('stream deltas are counted from their text, with or without spaces, tool calls included', () => {
  const events = [
    'data: {"model": "m2", "choices": [{"delta": {"role": "assistant", "content": ""}}]}',
    'data: {"choices": [{"delta": {"content": "a"}}]}',
    'data:{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}',
    'data: {"choices": [{"delta": {}, "finish_reason": "stop"}]}',
    'data: [DONE]',
  ];
  const u = extractUsage([Buffer.from(events.join('\n\n') + '\n\n')], true);
  assert.equal(u.responseModel, 'm2');
  assert.equal(u.deltas, 2);
  assert.equal(u.found, false);
});

test('first-token detection ignores the empty role chunk', () => {
  assert.equal(hasTokenDelta(Buffer.from('data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n')), false);
  assert.equal(hasTokenDelta(Buffer.from('data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n')), true);
  assert.equal(hasTokenDelta(Buffer.from('data: {"delta":{"tool_calls":[{"function":{"arguments":"{\\""}}]}}\n\n')), true);
  assert.equal(hasTokenDelta(Buffer.from('event: content_block_delta\ndata: {"delta":{"type":"text_delta","text":"x"}}\n\n')), true);
});

test('kept response bytes are bounded and keep the first and last chunks', () => {
  const r = new RequestRecord();
  const first = Buffer.from('FIRST');
  keepResponseChunk(r, first);
  for (let i = 0; i < 100; i++) keepResponseChunk(r, Buffer.alloc(4096, 0x61));
  const last = Buffer.from('LAST');
  keepResponseChunk(r, last);
  assert.ok(r.responseKept <= RESPONSE_KEEP_BYTES);
  assert.equal(r.responseChunks?.[0], first);
  assert.equal(r.responseChunks?.at(-1), last);
  assert.equal(r.responseBytes, 5 + 100 * 4096 + 4);
});

test('span builder: one root and one child per stage, ids and timings consistent', () => {
  const r = fullRecord();
  r.responseChunks = [Buffer.from(JSON.stringify({ model: 'gpt-4o-2024-08-06', usage: { prompt_tokens: 3, completion_tokens: 4 } }))];
  const b = new SpanBuilder();
  const { request, spans } = b.buildRecord(r, 'gw-test');
  const root = spans.find((s) => s.is_root === 1)!;
  assert.equal(root.trace_id, r.traceId);
  assert.equal(root.parent_span_id, '');
  assert.equal(root.name, 'chat gpt-4o');
  assert.equal(request.span_id, root.span_id);
  const stageNames: readonly string[] = STAGES;
  const children = spans.filter((s) => stageNames.includes(s.name));
  assert.equal(children.length, 10);
  const attempts = spans.filter((s) => s.name === ATTEMPT_SPAN);
  assert.equal(attempts.length, 1);
  assert.equal(attempts[0]!.parent_span_id, root.span_id);
  assert.equal(spans.length, 12);
  assert.ok(children.every((c) => c.parent_span_id === root.span_id && c.trace_id === r.traceId));
  const sum = children.reduce((a, c) => a + BigInt(c.duration_ns), 0n);
  assert.equal(sum, BigInt(root.duration_ns));
  assert.equal(request.total_ns, root.duration_ns);
  const wait = BigInt(children.find((c) => c.name === 'upstream.wait')!.duration_ns);
  const streamNs = BigInt(children.find((c) => c.name === 'upstream.stream')!.duration_ns);
  assert.equal(BigInt(request.upstream_ns), wait + streamNs);
  assert.equal(BigInt(request.gateway_ns) + BigInt(request.upstream_ns), BigInt(request.total_ns));
  assert.equal(request.input_tokens, 3);
  assert.equal(request.output_tokens, 4);
  assert.equal(request.response_model, 'gpt-4o-2024-08-06');
  assert.equal(request.seq, '7');
  const attrs = Object.fromEntries(root.attr_keys.map((k, i) => [k, root.attr_values[i]]));
  assert.equal(attrs['gen_ai.request.model'], 'gpt-4o');
  assert.equal(attrs['gen_ai.provider.name'], 'openai');
  assert.equal(attrs['gen_ai.usage.output_tokens'], '4');
  assert.equal(attrs['gen_ai.operation.name'], 'chat');
});

test('an incoming traceparent makes the root a child of the caller span', () => {
  const r = fullRecord();
  r.traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  r.parentSpanId = '00f067aa0ba902b7';
  const { spans } = new SpanBuilder().buildRecord(r, 'gw');
  const root = spans.find((s) => s.is_root === 1)!;
  assert.equal(root.trace_id, '4bf92f3577b34da6a3ce929d0e0e4736');
  assert.equal(root.parent_span_id, '00f067aa0ba902b7');
});

const cfg = (over: Partial<CaptureConfig> = {}): CaptureConfig => ({
  enabled: true, batchMaxRequests: 10, batchMaxBytes: 512 * 1024, flushIntervalMs: 5, queueMaxRequests: 100, maxInFlight: 2, publishTimeoutMs: 1000, spoolDir: null, spoolMaxBytes: 1024 ** 3, ...over,
});

test('capture batches records and publishes each batch once with a message id', async () => {
  const bus = new MemoryBus();
  const cap = new Capture({ instance: 'gw-a', config: cfg(), publisher: bus });
  for (let i = 0; i < 25; i++) cap.record(fullRecord());
  const left = await cap.flush(5000);
  assert.equal(left, 0);
  assert.equal(cap.stats.published, 25);
  assert.equal(cap.stats.queued, 0);
  const msgs = await bus.fetch(100, 100);
  assert.equal(msgs.length, 3);
  const builder = new SpanBuilder();
  const batches = msgs.map((m) => decodeBatch(m.data, builder));
  assert.deepEqual(batches.map((b) => b.requests.length), [10, 10, 5]);
  assert.deepEqual(msgs.map((m) => m.msgId), ['gw-a/1', 'gw-a/2', 'gw-a/3']);
  assert.equal(batches.reduce((a, b) => a + b.spans.length, 0), 25 * 12); // root, 10 stages, 1 attempt
});

test('a failing publisher is retried until it succeeds; nothing is lost', async () => {
  const bus = new MemoryBus();
  let failures = 3;
  const flaky: BusPublisher = {
    publish: async (d, id, t) => {
      if (failures-- > 0) throw new Error('nats down');
      return bus.publish(d, id);
    },
    close: async () => {},
  };
  const errors: unknown[] = [];
  const cap = new Capture({ instance: 'gw-b', config: cfg({ maxInFlight: 1 }), publisher: flaky, onError: (e) => errors.push(e) });
  for (let i = 0; i < 5; i++) cap.record(fullRecord());
  const left = await cap.flush(10_000);
  assert.equal(left, 0);
  assert.equal(cap.stats.published, 5);
  assert.equal(cap.stats.publishFailures, 3);
  assert.ok(errors.length >= 1);
  assert.equal((await bus.fetch(10, 100)).length, 1);
});

test('when the queue is full, records are dropped and counted', async () => {
  const never: BusPublisher = { publish: () => Promise.reject(new Error('down')), close: async () => {} };
  const cap = new Capture({ instance: 'gw-c', config: cfg({ queueMaxRequests: 20 }), publisher: never });
  for (let i = 0; i < 50; i++) cap.record(fullRecord());
  assert.equal(cap.stats.recorded, 50);
  assert.equal(cap.stats.dropped, 30);
  const left = await cap.close(300);
  assert.equal(left, 20);
});

test('batches stay under the byte bound, and a batch NATS refuses for good is dropped without blocking the rest', async () => {
  const bus = new MemoryBus();
  let refuseNext = true;
  const pub: BusPublisher = {
    publish: async (d, id) => {
      assert.ok(d.length <= 40 * 1024, `batch of ${d.length} bytes`);
      if (refuseNext) {
        refuseNext = false;
        throw Object.assign(new Error('maximum payload exceeded'), { code: 'MAX_PAYLOAD_EXCEEDED' });
      }
      await bus.publish(d, id);
    },
    close: async () => {},
  };
  const cap = new Capture({ instance: 'gw-b', config: cfg({ batchMaxRequests: 1000, batchMaxBytes: 40 * 1024, maxInFlight: 1 }), publisher: pub });
  for (let i = 0; i < 60; i++) {
    // ~1.9 and ~2.9 KB records (a non-ASCII message: the bound counts bytes, not characters).
    const r = fullRecord();
    r.errorMessage = (i % 2 === 0 ? 'e' : 'é').repeat(1000);
    cap.record(r);
  }
  await cap.flush(5000);
  assert.equal(cap.stats.refused, 1);
  assert.ok(cap.stats.dropped > 0 && cap.stats.dropped < 60);
  assert.equal(cap.stats.published + cap.stats.dropped, 60);
  const msgs = await bus.fetch(1000, 50);
  assert.ok(msgs.length >= 2, 'several batches');
});
