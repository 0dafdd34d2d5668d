import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RequestRecord, Capture, toWire } from '@sightline/capture';
import { SpanBuilder, stageIntervals, decodeBatch, BadBatchError } from '@sightline/spans';
import { MemoryBus } from '@sightline/bus';
import { STAGES, ATTEMPT_SPAN, messageRecords, readCaptureMessage } from '@sightline/core';
import type { CaptureConfig } from '@sightline/config';
import { batchOf, captureConfig, refusedRecord, servedRecord } from '../../../test/support/records.js';

test('stages partition the request: contiguous, ordered, summing to the total', () => {
  const r = servedRecord();
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
  const r = servedRecord();
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
  const r = servedRecord();
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

test('span builder: one root and one child per stage, ids and timings consistent', () => {
  const r = servedRecord();
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
  const r = servedRecord();
  r.traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  r.parentSpanId = '00f067aa0ba902b7';
  const { spans } = new SpanBuilder().buildRecord(r, 'gw');
  const root = spans.find((s) => s.is_root === 1)!;
  assert.equal(root.trace_id, '4bf92f3577b34da6a3ce929d0e0e4736');
  assert.equal(root.parent_span_id, '00f067aa0ba902b7');
});

const cfg: CaptureConfig = captureConfig();

test('what the gateway publishes decodes into each request\'s row and spans: root, stages and attempt', async () => {
  const bus = new MemoryBus();
  const cap = new Capture({ instance: 'gw-a', config: cfg, publisher: bus });
  const sent = Array.from({ length: 25 }, (_, i) => servedRecord({ seq: i + 1 }));
  for (const r of sent) cap.record(r);
  assert.equal(await cap.flush(5000), 0);
  const builder = new SpanBuilder();
  const batches = (await bus.fetch(100, 100)).map((m) => decodeBatch(m.data, builder));
  assert.deepEqual(batches.map((b) => [b.v, b.instance, b.batch, b.requests.length]), [[4, 'gw-a', '1', 10], [4, 'gw-a', '2', 10], [4, 'gw-a', '3', 5]]);
  const requests = batches.flatMap((b) => b.requests);
  assert.deepEqual(requests.map((r) => r.trace_id), sent.map((r) => r.traceId));
  assert.ok(requests.every((r) => r.instance === 'gw-a' && r.http_status === 200));
  const spans = batches.flatMap((b) => b.spans);
  assert.equal(spans.length, 25 * 12); // root, 10 stages, 1 attempt
  assert.equal(spans.filter((s) => s.is_root === 1).length, 25);
  assert.equal(spans.filter((s) => s.name === ATTEMPT_SPAN).length, 25);
});

test('a v4 batch (records by position, numbers as their doubles, content texts after each record) gives the rows the same records give as v3 (all JSON) and as v2 (by name)', async () => {
  const bus = new MemoryBus();
  const cap = new Capture({ instance: 'gw-v3', config: cfg, publisher: bus });
  const sent = [servedRecord({ seq: 1, usage: { prompt: 5, completion: 7, cached: 2 }, tags: { env: 'prod' }, endUser: 'u"1' }), servedRecord({ seq: 2, retried: true }), refusedRecord({ seq: 3 })];
  sent[1]!.t0 += 0.123456789;
  Object.assign(sent[1]!, { stream: true, partial: true, aborted: true, newConnection: true, failedStage: 'upstream.stream', tLimits: sent[1]!.t0 + 0.0211, tFirstToken: sent[1]!.t0 + 100.0005, errorMessage: 'gone \u2713 "quoted"' });
  sent[2]!.cacheHit = true;
  for (const r of sent) cap.record(r);
  assert.equal(await cap.flush(5000), 0);
  const [m] = await bus.fetch(1, 100);
  const v4 = readCaptureMessage(m!.data) as { v: number; records: { s: unknown[]; n: string; f: number }[] };
  assert.equal(v4.v, 4);
  assert.deepEqual(v4.records.map((r) => [r.s.length, Buffer.from(r.n, 'base64').length, r.f]), [[20, 184, 0], [20, 184, 2 | 4 | 8 | 16], [20, 184, 1]]);
  // The same records as a v3 gateway published them (read back, a v4 record has a v3 record's shape)…
  const v3 = { ...v4, v: 3 };
  // …and by name, as a v2 gateway did.
  const v2 = { ...v4, v: 2, records: sent.map((r) => JSON.parse(JSON.stringify(toWire(r))) as unknown) };
  const a = decodeBatch(m!.data, new SpanBuilder());
  const c = decodeBatch(Buffer.from(JSON.stringify(v3)), new SpanBuilder());
  const b = decodeBatch(Buffer.from(JSON.stringify(v2)), new SpanBuilder());
  assert.equal(a.v, 4);
  assert.equal(c.v, 3);
  assert.equal(b.v, 2);
  assert.deepEqual(a.requests, b.requests);
  assert.deepEqual(a.spans, b.spans);
  assert.deepEqual(c.requests, b.requests);
  assert.deepEqual(c.spans, b.spans);
  assert.equal(a.requests[0]!.input_tokens, 5);
  assert.equal(a.spans.length, b.spans.length);
});

test('what is not a well-formed batch is a BadBatchError naming the problem; v1 rows pass through', () => {
  const builder = new SpanBuilder();
  const enc = (x: unknown): Uint8Array => Buffer.from(typeof x === 'string' ? x : JSON.stringify(x));
  const refused = (x: unknown): BadBatchError => {
    try {
      decodeBatch(enc(x), builder);
    } catch (e) {
      assert.ok(e instanceof BadBatchError, String(e));
      assert.equal(e.code, 'SL_BAD_BATCH');
      return e;
    }
    assert.fail(`decoded: ${JSON.stringify(x)}`);
  };
  assert.match(refused('not json').message, /^not JSON/);
  assert.match(refused({ v: 5, instance: 'gw', batch: '1' }).message, /unknown capture batch version 5/);
  // v3 records: by position, or not at all.
  const v3 = (record: unknown) => ({ v: 3, instance: 'gw', batch: '1', requests_count: 1, published_at_unix_nano: '1', origin_unix_nano: '1', records: [record] });
  const n = Buffer.alloc(184).toString('base64');
  const strings = ['0af7651916cd43dd8448eb211c80319c', '', 'b7ad6b7169203331', null, null, 'POST', '/v1/chat/completions', 'openai', 'm', 'm', 'openai', 'h', 't', '', '', '', '', '', null, null];
  const tail = { responseModel: '', inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, usageFound: false, content: null };
  assert.ok(decodeBatch(enc(v3({ s: strings, n, f: 0, ...tail })), builder).requests.length === 1, 'a well-formed v3 record decodes');
  assert.match(refused(v3(toWire(servedRecord()))).message, /^record 0: not a v3 record/);
  assert.match(refused(v3({ s: strings, n: Buffer.alloc(176).toString('base64'), f: 0, ...tail })).message, /^record 0: not a v3 record/);
  assert.match(refused(v3({ s: strings.slice(1), n, f: 0, ...tail })).message, /^record 0: not a v3 record/);
  assert.match(refused(v3({ s: strings, n, f: 0.5, ...tail })).message, /^record 0: not a v3 record/);
  assert.equal(refused(v3({ s: [42, ...strings.slice(1)], n, f: 0, ...tail })).message, 'record 0: traceId is not a string');
  assert.equal(refused(v3({ s: strings, n, f: 0, ...tail, inputTokens: 'many' })).message, 'record 0: inputTokens is not a finite number');
  // v4 records: a JSON line, then the content's texts by their UTF-8 lengths.
  const v4 = (records: string): string => `{"v":4,"instance":"gw","batch":"1","requests_count":1,"published_at_unix_nano":"1","origin_unix_nano":"1","records":[${records}]}`;
  const line = (content: unknown): string => JSON.stringify({ s: strings, n, f: 0, ...tail, content });
  const c = { policy: 'full', request: 7, requestBytes: 7, requestTruncated: false, response: 3, responseBytes: 3, responseTruncated: false, redactions: {} };
  const good = v4(`${line(c)}\nhéllo\nök, ${line(null)}\n`);
  assert.deepEqual(messageRecords(enc(good)).map((r) => [r.content?.request, r.content?.response]), [['héllo\n', 'ök'], [undefined, undefined]], 'the texts are read by their lengths; a newline in them is text');
  assert.equal(decodeBatch(enc(good), builder).requests.length, 2);
  assert.equal(decodeBatch(enc(v4('')), builder).requests.length, 0, 'an empty list');
  assert.match(refused(v4(line(null))).message, /^record 0: no newline after its JSON/);
  assert.match(refused(v4(`${line({ ...c, request: 99 })}\nhéllo\nök`)).message, /^record 0: content.request is not a length of the bytes that follow/);
  assert.match(refused(v4(`${line({ ...c, response: -1 })}\nhéllo\nök`)).message, /^record 0: content.response is not a length/);
  assert.match(refused(v4(`${line(c)}\nhéllo\nökX`)).message, /^record 0: not followed by `,` or the message's end/);
  assert.match(refused(v4(`${line(null)}\n, {nope}\n`)).message, /^record 1: not JSON/);
  assert.match(refused('{"v":4,oops,"records":[]}').message, /^v4 header is not JSON/);
  assert.match(refused('{"v":4,"instance":"gw"}').message, /^a v4 message needs a records list/);
  const b = batchOf('gw', 1, [servedRecord(), servedRecord()]);
  (b.records[1] as unknown as Record<string, unknown>).t0 = 'yesterday';
  assert.equal(refused(b).message, 'record 1: t0 is not a finite number');
  const noTrace = batchOf('gw', 2, [servedRecord()]);
  noTrace.records[0]!.traceId = 'x';
  assert.equal(refused(noTrace).message, 'record 0: traceId is not 32 lowercase hex digits');

  const built = builder.buildRecord(servedRecord(), 'gw-old');
  const v1 = { v: 1, instance: 'gw-old', batch: '9', requests_count: 1, published_at_unix_nano: '123', requests: [built.request], spans: built.spans };
  const d = decodeBatch(enc(v1), builder);
  assert.deepEqual([d.v, d.instance, d.batch, d.published_at_unix_nano], [1, 'gw-old', '9', '123']);
  assert.deepEqual(d.requests, [built.request]);
  assert.deepEqual(d.spans, built.spans);
});

test('a record built twice (a redelivered batch) gives the same span ids; ids within a record are distinct', async () => {
  const { SpanBuilder: Builder, childSpanId } = await import('@sightline/spans');
  const { toWire } = await import('@sightline/capture');
  const r = servedRecord();
  r.attempts = [{ provider: 'openai', model: 'gpt-4o', upstreamHost: 'http://x', start: r.t0 + 0.03, end: r.t0 + 0.4, status: 500, errorType: 'upstream_error', errorMessage: 'x' }];
  r.tAttempt = r.t0 + 0.45;
  const w = toWire(r);
  const a = new Builder().build(w, 'gw', 0n);
  const b = new Builder().build(JSON.parse(JSON.stringify(w)) as typeof w, 'gw', 0n);
  assert.deepEqual(a.spans.map((s) => s.span_id), b.spans.map((s) => s.span_id));
  const ids = a.spans.map((s) => s.span_id);
  assert.equal(new Set(ids).size, ids.length);
  assert.ok(ids.includes(r.rootSpanId));
  for (const id of ids) assert.match(id, /^[0-9a-f]{16}$/);
  // Derived ids look random and differ between roots.
  assert.notEqual(childSpanId('0000000000000001', 1), childSpanId('0000000000000002', 1));
  assert.notEqual(childSpanId('ffffffffffffffff', 1), 'ffffffffffffffff');
});

test('control stages appear when they applied; a cache hit has no upstream stages and still adds up', async () => {
  const { stageIntervals: intervals } = await import('@sightline/spans');
  const base = { t0: 1000, tBody: 1000.01, tParsed: 1000.02, tAuth: 1000.03, tLimits: -1, tRouted: 1000.04, tCache: -1, tBudget: -1, tBuilt: 1000.05, tAttempt: 0, tConnected: 0, tSent: 1000.06, tFirstByte: 1010, tLastByte: 1020, tEnd: 1020.01, tFinish: 1020.02, newConnection: false, failedStage: null, cacheHit: false } as const;
  const names = (r: Parameters<typeof intervals>[0]) => intervals(r).map((s) => s.name);
  assert.ok(!names(base).includes('limits') && !names(base).includes('cache') && !names(base).includes('budget'));
  const controlled = { ...base, tLimits: 1000.035, tCache: 1000.042, tBudget: 1000.045 };
  assert.deepEqual(names(controlled).slice(0, 8), ['ingress.read', 'parse', 'auth', 'limits', 'route', 'cache', 'budget', 'translate.request']);
  const hit = { ...base, tCache: 1000.042, cacheHit: true, tBuilt: 0, tSent: 0, tFirstByte: 0, tLastByte: 0, tEnd: 1000.043 };
  const s = intervals(hit);
  assert.deepEqual(s.map((x) => x.name), ['ingress.read', 'parse', 'auth', 'route', 'cache', 'egress.write']);
  assert.ok(s.every((x) => !x.failed));
  assert.equal(s[0]!.start, hit.t0);
  assert.equal(s.at(-1)!.end, hit.tFinish);
  for (let i = 1; i < s.length; i++) assert.equal(s[i]!.start, s[i - 1]!.end, 'no gaps');
  // A control that refuses leaves its own mark unset, like every stage a request fails in.
  const refusedByLimits = { ...base, tLimits: 0, failedStage: 'limits' as const, tRouted: 0, tBuilt: 0, tSent: 0, tFirstByte: 0, tLastByte: 0, tEnd: 1000.036 };
  assert.deepEqual(intervals(refusedByLimits).filter((x) => x.failed).map((x) => x.name), ['limits']);
});
