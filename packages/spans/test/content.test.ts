/**
 * Content in the ingester's decoding (packages/spans/src/content.ts, genai.ts, decode.ts):
 * content rows, personal-data redaction through the injected function (a stand-in here),
 * the GenAI attributes on the root span and never in span rows, attribution, and the bad
 * input of issue 11.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { CONTENT_ATTRIBUTES, SpanBuilder, decodeBatch, genAiContentAttributes, prepareContent, redactJsonStrings, type Json } from '@sightline/spans';
import { batchOf, contentOf, refusedRecord, servedRecord, withContent } from '../../../test/support/records.js';
import { badContentRecords, openaiSse, redactEmails } from '../../../test/support/content.js';

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const enc = (x: unknown): Uint8Array => Buffer.from(JSON.stringify(x));

test('redaction replaces inside JSON strings only: the JSON stays valid, everything else byte for byte', () => {
  const counts = new Map<string, number>();
  const text = '{ "to": "mail bob@example.com",\n  "n": 1.0, "big": 12345678901234567890,\n  "esc": "line\\nalice@example.org \\"q\\"", "carol@example.net": true, "plain": "nothing" }';
  const out = redactJsonStrings(text, redactEmails, counts);
  const parsed = JSON.parse(out) as Record<string, Json>;
  assert.equal(parsed.to, 'mail [EMAIL]');
  assert.equal(parsed.esc, 'line\n[EMAIL] "q"');
  assert.ok('[EMAIL]' in parsed, 'keys are redacted too');
  assert.ok(out.includes('"n": 1.0, "big": 12345678901234567890,\n'), 'numbers and layout untouched');
  assert.ok(out.includes('"plain": "nothing" }'));
  assert.ok(!out.includes('@example'));
  assert.deepEqual([...counts], [['email', 3]]);

  // Nothing to replace: the very same text.
  assert.equal(redactJsonStrings('{"a":"b"}', redactEmails, new Map()), '{"a":"b"}');
  // Cut inside a string (the capture bound): the cut string is redacted as it is.
  const cut = redactJsonStrings('{"a":"x@example.com","b":"tell dave@example.com and eve@exam', redactEmails, counts);
  assert.equal(cut, '{"a":"[EMAIL]","b":"tell [EMAIL] and eve@exam');
  // Not JSON (an SSE text that could not be assembled): redacted whole.
  assert.equal(redactJsonStrings('data: {"a":"x@example.com"}\n\n', redactEmails, new Map()), 'data: {"a":"[EMAIL]"}\n\n');
});

test('a streamed answer is assembled, then redacted as one message: an address split across two deltas is found', () => {
  const sse = openaiSse(['write to bob@exa', 'mple.com today']);
  const c = contentOf({ policy: 'redacted', request: '{"model":"gpt-4o","messages":[{"role":"user","content":"I am alice@example.org, key [OPENAI_KEY]"}]}', response: sse, redactions: { openai: 1 } });
  const p = prepareContent('openai', true, c, redactEmails);
  const answer = JSON.parse(p.response) as { choices: { message: { content: string } }[]; object: string };
  assert.equal(answer.object, 'chat.completion');
  assert.equal(answer.choices[0]!.message.content, 'write to [EMAIL] today');
  assert.ok(!p.request.includes('alice@') && p.request.includes('I am [EMAIL], key [OPENAI_KEY]'));
  assert.deepEqual([...p.redactions].sort(), [['email', 2], ['openai', 1]]);
  assert.equal(p.responsePartial, false);
  // The span attributes are made from the redacted text.
  assert.ok(!JSON.stringify(p.attributes).includes('@example'));
  assert.ok(p.attributes['gen_ai.output.messages']!.includes('write to [EMAIL] today'));
  // Policy full: nothing personal is touched (the gateway already replaced secrets).
  const full = prepareContent('openai', true, { ...c, policy: 'full' }, null);
  assert.ok(full.request.includes('alice@example.org'));
  assert.deepEqual([...full.redactions], [['openai', 1]]);
  assert.throws(() => prepareContent('openai', false, c, null), /needs a personal-data redactor/);
});

test('GenAI attributes follow the conventions\' shapes in both dialects', () => {
  const openaiReq: Json = {
    model: 'gpt-4o',
    messages: [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'https://x.test/a.png' } }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }, { id: 'call_2', type: 'function', function: { name: 'g', arguments: '{oops' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
    ],
    tools: [{ type: 'function', function: { name: 'f', description: 'weather', parameters: { type: 'object' } } }],
  };
  const a = genAiContentAttributes('openai', openaiReq, { choices: [{ message: { role: 'assistant', content: 'done' }, finish_reason: 'tool_calls' }] });
  assert.deepEqual(JSON.parse(a['gen_ai.input.messages']!), [
    { role: 'system', parts: [{ type: 'text', content: 'be brief' }] },
    { role: 'user', parts: [{ type: 'text', content: 'look' }, { type: 'uri', modality: 'image', uri: 'https://x.test/a.png' }] },
    { role: 'assistant', parts: [{ type: 'tool_call', id: 'call_1', name: 'f', arguments: { a: 1 } }, { type: 'tool_call', id: 'call_2', name: 'g', arguments: '{oops' }] },
    { role: 'tool', parts: [{ type: 'tool_call_response', id: 'call_1', response: 'sunny' }] },
  ]);
  assert.equal(a['gen_ai.system_instructions'], undefined, 'OpenAI system messages are part of the history');
  assert.deepEqual(JSON.parse(a['gen_ai.tool.definitions']!), [{ type: 'function', name: 'f', description: 'weather', parameters: { type: 'object' } }]);
  assert.deepEqual(JSON.parse(a['gen_ai.output.messages']!), [{ role: 'assistant', parts: [{ type: 'text', content: 'done' }], finish_reason: 'tool_call' }]);
  assert.deepEqual(a['gen_ai.response.finish_reasons'], ['tool_call']);

  const anthropicReq: Json = {
    model: 'claude-x',
    system: [{ type: 'text', text: 'you are terse' }],
    messages: [
      { role: 'user', content: 'weather?' },
      { role: 'assistant', content: [{ type: 'thinking', thinking: 'hmm', signature: 's' }, { type: 'tool_use', id: 'toolu_1', name: 'w', input: { city: 'Paris' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: '12C' }] }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: '[base64 image/png 5242880 bytes]' } }] },
    ],
    tools: [{ name: 'w', input_schema: { type: 'object' } }, { type: 'web_search_20250305', name: 'web_search' }],
  };
  const b = genAiContentAttributes('anthropic', anthropicReq, { role: 'assistant', content: [{ type: 'text', text: 'cold' }], stop_reason: 'max_tokens' });
  assert.deepEqual(JSON.parse(b['gen_ai.system_instructions']!), [{ type: 'text', content: 'you are terse' }]);
  assert.deepEqual(JSON.parse(b['gen_ai.input.messages']!), [
    { role: 'user', parts: [{ type: 'text', content: 'weather?' }] },
    { role: 'assistant', parts: [{ type: 'reasoning', content: 'hmm' }, { type: 'tool_call', id: 'toolu_1', name: 'w', arguments: { city: 'Paris' } }] },
    { role: 'user', parts: [{ type: 'tool_call_response', id: 'toolu_1', response: [{ type: 'text', text: '12C' }] }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: '[base64 image/png 5242880 bytes]' } }] },
  ]);
  assert.deepEqual(JSON.parse(b['gen_ai.tool.definitions']!), [{ type: 'function', name: 'w', parameters: { type: 'object' } }, { type: 'web_search_20250305', name: 'web_search' }]);
  assert.deepEqual(b['gen_ai.response.finish_reasons'], ['length']);
  // A body that is not JSON (cut at the bound) gives no input attributes, and no error.
  assert.deepEqual(genAiContentAttributes('openai', undefined, undefined), {});
});

test('decoded records carry content rows, attribution on the request row and the root span, and no content in span rows', () => {
  const exporter = new InMemorySpanExporter();
  const builder = new SpanBuilder({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const r = servedRecord({ team: 'search', endUser: 'user-42', sessionId: 'sess-9', tags: { feature: 'summarise', env: 'prod' } });
  r.stream = true;
  r.keyId = 'key_abc';
  const request = '{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"unique phrase 7f3a"}]}';
  const sse = openaiSse(['the ', 'answer']);
  const plain = servedRecord({ team: 'search' });
  const d = decodeBatch(enc(batchOf('gw', 1, [withContent(r, contentOf({ request, response: sse, redactions: { openai: 2 } })), plain])), builder);
  assert.equal(d.content.length, 1, 'one row per record with content');
  const row = d.content[0]!;
  const req = d.requests[0]!;
  assert.deepEqual(
    [row.trace_id, row.span_id, row.team, row.key_id, row.start_time, row.start_time_unix_nano, row.stream, row.policy, row.dialect, row.model, row.route],
    [req.trace_id, req.span_id, 'search', 'key_abc', req.start_time, req.start_time_unix_nano, 1, 'full', 'openai', 'gpt-4o', '/v1/chat/completions'],
  );
  assert.equal(row.request, request);
  assert.equal((JSON.parse(row.response) as { choices: { message: { content: string } }[] }).choices[0]!.message.content, 'the answer');
  assert.deepEqual([row.request_bytes, row.response_bytes, row.request_truncated, row.response_truncated, row.response_partial], [Buffer.byteLength(request), Buffer.byteLength(sse), 0, 0, 0]);
  assert.deepEqual([row.redaction_keys, row.redaction_counts], [['openai'], [2]]);
  assert.deepEqual([req.end_user, req.session_id, req.tag_keys, req.tag_values], ['user-42', 'sess-9', ['feature', 'env'], ['summarise', 'prod']]);
  assert.deepEqual([d.requests[1]!.end_user, d.requests[1]!.tag_keys], ['', []]);

  // Span rows: attribution yes, content no.
  for (const s of d.spans) for (const k of s.attr_keys) assert.ok(!CONTENT_ATTRIBUTES.has(k), `${k} in a span row`);
  const rootRow = d.spans.find((s) => s.is_root === 1 && s.trace_id === r.traceId)!;
  const rowAttrs = Object.fromEntries(rootRow.attr_keys.map((k, i) => [k, rootRow.attr_values[i]]));
  assert.equal(rowAttrs['enduser.id'], 'user-42');
  assert.equal(rowAttrs['gen_ai.conversation.id'], 'sess-9');
  assert.equal(rowAttrs['sightline.tag.feature'], 'summarise');
  assert.ok(!JSON.stringify(d.spans).includes('unique phrase 7f3a'));
  // The span itself carries the content, for any OpenTelemetry tool.
  const root = exporter.getFinishedSpans().find((s) => s.spanContext().traceId === r.traceId && s.parentSpanContext === undefined)!;
  assert.deepEqual(JSON.parse(root.attributes['gen_ai.input.messages'] as string), [{ role: 'user', parts: [{ type: 'text', content: 'unique phrase 7f3a' }] }]);
  assert.deepEqual(JSON.parse(root.attributes['gen_ai.output.messages'] as string), [{ role: 'assistant', parts: [{ type: 'text', content: 'the answer' }], finish_reason: 'stop' }]);
  assert.deepEqual(root.attributes['gen_ai.response.finish_reasons'], ['stop']);
  assert.equal(root.attributes['sightline.tag.env'], 'prod');
});

test('policy redacted: personal data replaced everywhere in what is decoded; without a redactor the content is withheld, the request kept', () => {
  const r = servedRecord({ endUser: 'alice@example.org', tags: { owner: 'bob@example.com' } });
  const c = contentOf({ policy: 'redacted', request: '{"messages":[{"role":"user","content":"carol@example.net"}],"user":"alice@example.org"}', response: '{"choices":[{"message":{"role":"assistant","content":"hi dave@example.com"},"finish_reason":"stop"}]}' });
  const data = enc(batchOf('gw', 1, [withContent(r, c)]));
  const red = decodeBatch(data, new SpanBuilder(), { redactPersonal: redactEmails });
  assert.equal(red.content.length, 1);
  assert.equal(red.contentWithheld, 0);
  assert.ok(!JSON.stringify(red).includes('@example'), 'no address in rows or spans');
  assert.equal(red.requests[0]!.end_user, '[EMAIL]');
  assert.deepEqual(red.requests[0]!.tag_values, ['[EMAIL]']);
  assert.deepEqual([red.content[0]!.redaction_keys, red.content[0]!.redaction_counts], [['email'], [3]]);

  const withheld = decodeBatch(data, new SpanBuilder());
  assert.deepEqual(withheld.content, []);
  assert.equal(withheld.contentWithheld, 1);
  assert.equal(withheld.requests.length, 1);
  assert.ok(!JSON.stringify(withheld).includes('@example'));
  assert.equal(withheld.requests[0]!.end_user, '[REDACTED]');
  // A redactor that throws withholds too, and never loses the batch.
  const broken = decodeBatch(data, new SpanBuilder(), { redactPersonal: () => { throw new Error('boom'); } });
  assert.deepEqual([broken.content.length, broken.contentWithheld, broken.requests.length], [0, 1, 1]);
});

test('bad input: non-UTF-8, a 10 MiB prompt cut at the bound, 5,000 messages, a cut stream, tool JSON that is not JSON — each decoded, none throws', () => {
  const bad = badContentRecords();
  const exporter = new InMemorySpanExporter();
  const d = decodeBatch(enc(batchOf('gw', 1, bad.map((b) => b.record))), new SpanBuilder({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
  assert.equal(d.content.length, bad.length);
  assert.equal(d.contentWithheld, 0);
  const roots = exporter.getFinishedSpans().filter((s) => s.parentSpanContext === undefined);
  for (const [i, b] of bad.entries()) {
    const row = d.content[i]!;
    assert.equal(row.request, b.request, b.name);
    assert.equal(row.request_truncated, b.requestTruncated ? 1 : 0, b.name);
    assert.equal(row.response_partial, b.responsePartial ? 1 : 0, b.name);
    assert.equal(row.request_bytes, b.record.content!.requestBytes, b.name);
    assert.ok(!LONE_SURROGATE.test(row.request) && !LONE_SURROGATE.test(row.response), `${b.name}: a lone surrogate would be stored`);
  }
  const byName = (n: string): number => bad.findIndex((b) => b.name === n);
  assert.equal(d.requests[byName('non-UTF-8 bytes')]!.end_user, 'user \uFFFD');
  assert.equal(d.content[byName('10 MiB prompt cut at the bound')]!.request_bytes, 10 * 1024 * 1024);
  assert.equal(roots[byName('10 MiB prompt cut at the bound')]!.attributes['gen_ai.input.messages'], undefined, 'a cut body is not JSON: no input messages');
  assert.equal((JSON.parse(roots[byName('5,000 messages')]!.attributes['gen_ai.input.messages'] as string) as unknown[]).length, 5000);
  const cut = JSON.parse(d.content[byName('stream cut half-way')]!.response) as { choices: { message: { content: string }; finish_reason: string | null }[] };
  assert.ok('half of an answer never finished'.startsWith(cut.choices[0]!.message.content) && cut.choices[0]!.message.content.length > 0);
  assert.equal(cut.choices[0]!.finish_reason, null);
  const tool = JSON.parse(d.content[byName('tool arguments that are not JSON')]!.response) as { content: { input: unknown }[] };
  assert.equal(tool.content[0]!.input, '{"city": Paris');
  const attrs = roots[byName('tool arguments that are not JSON')]!.attributes;
  assert.match(attrs['gen_ai.output.messages'] as string, /"arguments":"\{\\"city\\": Paris"/);
  assert.match(attrs['gen_ai.input.messages'] as string, /"arguments":"\{not json"/);
});

test('span rows are what the SDK exports, field by field: every kind of record, content and 130 tags included', async () => {
  const { SpanKind, SpanStatusCode } = await import('@opentelemetry/api');
  const exporter = new InMemorySpanExporter();
  const builder = new SpanBuilder({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const plainBuilder = new SpanBuilder();
  const retried = servedRecord({ retried: true, endUser: 'u-1', sessionId: 's-1', tags: { a: '1', b: '' } });
  const aborted = servedRecord();
  aborted.stream = true;
  aborted.aborted = true;
  aborted.partial = true;
  aborted.tLastByte = 0;
  aborted.tEnd = 0;
  aborted.failedStage = 'upstream.stream';
  const failed = servedRecord();
  failed.status = 502;
  failed.upstreamStatus = 503;
  failed.errorType = 'upstream_error';
  failed.errorMessage = 'upstream said 503';
  const child = servedRecord();
  child.parentSpanId = '00f067aa0ba902b7';
  const manyTags = servedRecord({ tags: Object.fromEntries(Array.from({ length: 130 }, (_, i) => [`t${i}`, `v${i}`])) });
  const backwards = servedRecord();
  backwards.attempts = [{ provider: 'openai', model: 'm', upstreamHost: 'h', start: backwards.t0 + 0.5, end: backwards.t0 + 0.2, status: 0, errorType: 'timeout', errorMessage: '' }];
  backwards.tAttempt = backwards.t0 + 0.6;
  const withText = withContent(servedRecord({ tags: { feature: 'x' } }), contentOf({ request: '{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}', response: '{"choices":[{"message":{"role":"assistant","content":"yo"}}]}' }));
  const records = [servedRecord(), refusedRecord(), retried, aborted, failed, child, manyTags, backwards, withText];
  const data = enc(batchOf('gw', 3, records));
  const d = decodeBatch(data, builder);
  // Without processors no SDK span is made, and the rows are the same.
  assert.deepEqual(decodeBatch(data, plainBuilder).spans, d.spans);
  const exported = exporter.getFinishedSpans();
  assert.equal(exported.length, d.spans.length);
  const kinds: Record<number, string> = { [SpanKind.INTERNAL]: 'internal', [SpanKind.SERVER]: 'server', [SpanKind.CLIENT]: 'client' };
  const rootOf = new Map(d.requests.map((q) => [q.span_id, q]));
  for (let i = 0; i < exported.length; i++) {
    const s = exported[i]!;
    const row = d.spans[i]!;
    const attrs = Object.entries(s.attributes).filter(([k]) => !CONTENT_ATTRIBUTES.has(k));
    assert.deepEqual(
      {
        trace_id: row.trace_id, span_id: row.span_id, parent_span_id: row.parent_span_id, name: row.name, kind: row.kind, is_root: row.is_root,
        start_time: row.start_time, start_time_unix_nano: row.start_time_unix_nano, duration_ns: row.duration_ns, status_code: row.status_code,
        status_message: row.status_message, attr_keys: row.attr_keys, attr_values: row.attr_values,
      },
      {
        trace_id: s.spanContext().traceId, span_id: s.spanContext().spanId, parent_span_id: s.parentSpanContext?.spanId ?? '', name: s.name, kind: kinds[s.kind],
        is_root: s.kind === SpanKind.SERVER ? 1 : 0, start_time: s.startTime[0], start_time_unix_nano: String(BigInt(s.startTime[0]) * 1_000_000_000n + BigInt(s.startTime[1])),
        duration_ns: String(s.duration[0] * 1e9 + s.duration[1]), status_code: s.status.code === SpanStatusCode.ERROR ? 'ERROR' : 'UNSET', status_message: s.status.message ?? '',
        attr_keys: attrs.map(([k]) => k), attr_values: attrs.map(([, v]) => String(v)),
      },
      `span ${i} (${s.name})`,
    );
    if (row.is_root === 1) assert.ok(rootOf.has(row.span_id), 'a root row is its request');
  }
  // The cases are there: a root with content attributes (on the span, not in the row), one
  // past the SDK's attribute count limit, an attempt that ends before it starts, a caller's parent.
  const rootSpans = exported.filter((s) => s.kind === SpanKind.SERVER);
  assert.ok(rootSpans.some((s) => Object.keys(s.attributes).some((k) => CONTENT_ATTRIBUTES.has(k))));
  assert.ok(rootSpans.some((s) => s.droppedAttributesCount > 0));
  assert.ok(d.spans.some((r) => r.name === 'upstream.attempt' && r.duration_ns === '0'));
  assert.ok(d.spans.some((r) => r.parent_span_id === '00f067aa0ba902b7' && r.is_root === 1));
  assert.ok(d.spans.some((r) => r.status_code === 'ERROR' && r.status_message === 'client aborted'));
});
