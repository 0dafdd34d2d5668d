import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RequestRecord, extractUsage, hasTokenDelta, keepResponseChunk, Capture, RESPONSE_KEEP_BYTES, toWire } from '@sightline/capture';
import { MemoryBus, type BusPublisher } from '@sightline/bus';
import { batchRecords, readCaptureMessage, type CaptureBatchV4 } from '@sightline/core';
import type { CaptureConfig } from '@sightline/config';
import { captureConfig, servedRecord } from '../../../test/support/records.js';

test('the published record carries the fields and marks, and the usage read from the response, not the body', () => {
  const r = servedRecord({ seq: 42 });
  r.attempts = [{ provider: 'p', model: 'gpt-4o', upstreamHost: 'h', start: r.tBuilt, end: r.tBuilt + 1, status: 503, errorType: 'upstream_error', errorMessage: 'provider p answered 503' }];
  r.responseChunks = [Buffer.from(JSON.stringify({ model: 'gpt-4o-2024-08-06', usage: { prompt_tokens: 3, completion_tokens: 4 } }))];
  const w = toWire(r);
  assert.deepEqual([w.seq, w.traceId, w.t0, w.tFinish, w.model, w.status, w.attempts], [42, r.traceId, r.t0, r.tFinish, 'gpt-4o', 200, r.attempts]);
  assert.deepEqual([w.responseModel, w.inputTokens, w.outputTokens, w.usageFound], ['gpt-4o-2024-08-06', 3, 4, true]);
  assert.ok(!('responseChunks' in w) && !JSON.stringify(w).includes('prompt_tokens'));
  // A stream cut short counts a token per delta seen.
  const cut = servedRecord();
  cut.stream = true;
  cut.partial = true;
  cut.responseChunks = [Buffer.from('data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {"choices":[{"delta":{"content":"b"}}]}\n\n')];
  assert.deepEqual([toWire(cut).outputTokens, toWire(cut).usageFound], [2, true]);
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

const cfg = captureConfig;

test('capture batches records and publishes each batch once with a message id', async () => {
  const bus = new MemoryBus();
  const cap = new Capture({ instance: 'gw-a', config: cfg(), publisher: bus });
  for (let i = 1; i <= 25; i++) cap.record(servedRecord({ seq: i }));
  const left = await cap.flush(5000);
  assert.equal(left, 0);
  assert.equal(cap.stats.published, 25);
  assert.equal(cap.stats.queued, 0);
  const msgs = await bus.fetch(100, 100);
  assert.equal(msgs.length, 3);
  const batches = msgs.map((m) => readCaptureMessage(m.data) as CaptureBatchV4);
  assert.deepEqual(batches.map((b) => [b.v, b.instance, b.batch, b.requests_count, b.records.length]), [[4, 'gw-a', '1', 10, 10], [4, 'gw-a', '2', 10, 10], [4, 'gw-a', '3', 5, 5]]);
  assert.deepEqual(msgs.map((m) => m.msgId), ['gw-a/1', 'gw-a/2', 'gw-a/3']);
  assert.deepEqual(batches.flatMap((b) => batchRecords(b).map((r) => r.seq)), Array.from({ length: 25 }, (_, i) => i + 1));
});

test('batches waiting together are published one per turn of the event loop, in order, also when each is acknowledged at once', async () => {
  const bus = new MemoryBus();
  // Each publish leaves a mark that the next turn of the event loop sets: the next publish
  // finds it set only if it came in a later turn.
  const marks: { ran: boolean }[] = [];
  const laterTurn: boolean[] = [];
  const pub: BusPublisher = {
    publish: async (d, id) => {
      if (marks.length > 0) laterTurn.push(marks[marks.length - 1]!.ran);
      const m = { ran: false };
      marks.push(m);
      setImmediate(() => (m.ran = true));
      return bus.publish(d, id);
    },
    close: async () => {},
  };
  const cap = new Capture({ instance: 'gw-t', config: cfg({ maxInFlight: 8 }), publisher: pub });
  for (let i = 1; i <= 45; i++) cap.record(servedRecord({ seq: i }));
  assert.equal(await cap.flush(5000), 0);
  assert.equal(marks.length, 5);
  assert.deepEqual(laterTurn, [true, true, true, true]);
  const msgs = await bus.fetch(100, 100);
  assert.deepEqual(msgs.map((m) => m.msgId), ['gw-t/1', 'gw-t/2', 'gw-t/3', 'gw-t/4', 'gw-t/5']);
  assert.equal(cap.stats.published, 45);
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
  for (let i = 0; i < 5; i++) cap.record(servedRecord());
  const left = await cap.flush(10_000);
  assert.equal(left, 0);
  assert.equal(cap.stats.published, 5);
  assert.equal(cap.stats.publishFailures, 3);
  assert.ok(errors.length >= 1);
  assert.equal((await bus.fetch(10, 100)).length, 1);
});

test('a flush while the publisher fails at once retries at a pace, and other timers run meanwhile', async () => {
  let tries = 0;
  const down: BusPublisher = {
    publish: async () => {
      tries++;
      throw new Error('not connected to NATS');
    },
    close: async () => {},
  };
  const cap = new Capture({ instance: 'gw-f', config: cfg(), publisher: down });
  for (let i = 0; i < 5; i++) cap.record(servedRecord());
  let ticks = 0;
  const tick = setInterval(() => ticks++, 20);
  try {
    assert.equal(await cap.close(500), 5);
  } finally {
    clearInterval(tick);
  }
  // One try each 50 ms or so, not one per microtask (tens of thousands before).
  assert.ok(tries >= 2 && tries <= 20, `tries ${tries}`);
  assert.ok(ticks >= 5, `ticks ${ticks}`);
});

test('when the queue is full, records are dropped and counted', async () => {
  const never: BusPublisher = { publish: () => Promise.reject(new Error('down')), close: async () => {} };
  const cap = new Capture({ instance: 'gw-c', config: cfg({ queueMaxRequests: 20 }), publisher: never });
  for (let i = 0; i < 50; i++) cap.record(servedRecord());
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
    const r = servedRecord();
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

test('a batch larger than the in-process bus can ever hold is refused for good and counted, not retried', async () => {
  const bus = new MemoryBus({ maxBytes: 4 * 1024 });
  const cap = new Capture({ instance: 'gw-m', config: cfg({ batchMaxRequests: 100 }), publisher: bus });
  for (let i = 0; i < 10; i++) cap.record(servedRecord()); // ~10 KB in one batch
  assert.equal(await cap.flush(5000), 0);
  assert.deepEqual([cap.stats.refused, cap.stats.dropped, cap.stats.publishFailures, bus.refused], [1, 10, 0, 1]);
  cap.record(servedRecord());
  await cap.flush(5000);
  assert.equal(cap.stats.published, 1);
});
