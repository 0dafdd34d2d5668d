import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BATCH_HEAD_ROOM, BatchCutter, Capture, JobBatch, PagePool, RequestRecord, preparedViews, contentWire, contentOf, jobCount, jobsOf, keepContent, keepResponseChunk, placeholderBase64, prepareJob, recordPartsOf, recordText, recordsBytes, recordUsage, usageMembers, wireHead, NO_USAGE, type ContentOptions } from '@sightline/capture';
import { MemoryBus } from '@sightline/bus';
import { messageRecords, readCaptureMessage, type WireRecord } from '@sightline/core';
import { captureConfig, servedRecord, wireJson, wireOf } from '../../../test/support/records.js';

const noRedact: ContentOptions['redactSecrets'] = (text) => ({ text, counts: {} });
const opts = (maxBytes = 1000): ContentOptions => ({ maxBytes, keepBase64: false, redactSecrets: noRedact });

test('long base64 strings become a placeholder with their media type and size; the JSON stays valid', () => {
  const png = 'iVBORw0KGgo' + 'A'.repeat(4000);
  const body = JSON.stringify({
    model: 'm',
    messages: [
      { role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/jpeg;base64,${'B'.repeat(8000)}` } }, { type: 'text', text: 'what is this?' }] },
      { role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } }] },
    ],
    note: 'word '.repeat(1000),
    slashed: '/9j/' + 'C/D'.repeat(2000),
  }).replace(/C\/D/g, 'C\\/D');
  const { bytes, replaced } = placeholderBase64(Buffer.from(body));
  assert.equal(replaced, 3);
  const parsed = JSON.parse(bytes.toString('utf8')) as { messages: { content: { image_url?: { url: string }; source?: { data: string }; text?: string }[] }[]; note: string; slashed: string };
  assert.equal(parsed.messages[0]!.content[0]!.image_url!.url, '[base64 image/jpeg 6000 bytes]');
  assert.equal(parsed.messages[0]!.content[1]!.text, 'what is this?');
  assert.equal(parsed.messages[1]!.content[0]!.source!.data, `[base64 image/png ${Math.floor((png.length * 3) / 4)} bytes]`);
  assert.equal(parsed.note, 'word '.repeat(1000), 'long text that is not base64 stays');
  assert.match(parsed.slashed, /^\[base64 image\/jpeg \d+ bytes\]$/);
});

test('text, short strings and prose with spaces are kept as they are', () => {
  const body = Buffer.from(JSON.stringify({ a: 'hello world '.repeat(500), b: 'short', c: 'Zm9v' }));
  const { bytes, replaced } = placeholderBase64(body);
  assert.equal(replaced, 0);
  assert.equal(bytes, body, 'the input itself when nothing is replaced');
});

test('content is bounded per side, flagged when cut, and absent under policy none', () => {
  const r = new RequestRecord();
  r.contentPolicy = 'full';
  r.requestBody = Buffer.from(JSON.stringify({ t: 'é'.repeat(2000) }));
  for (let i = 0; i < 100; i++) keepContent(r, `data: chunk ${i}\n\n`, 1000);
  keepContent(r, Buffer.from('tail'), 1000);
  assert.ok(r.contentOutKept < 1100, `kept ${r.contentOutKept}`);
  const c = contentOf(r, opts())!;
  assert.equal(c.requestTruncated, true);
  assert.equal(c.requestBytes, r.requestBody.length);
  assert.ok(Buffer.byteLength(c.request) <= 1002, 'cut at the bound (a split character may become U+FFFD)');
  assert.equal(c.responseTruncated, true);
  assert.equal(c.responseBytes, r.contentOutBytes);
  assert.ok(c.response.startsWith('data: chunk 0\n\n'));
  const none = new RequestRecord();
  none.contentPolicy = 'none';
  none.requestBody = Buffer.from('{"secret":1}');
  keepContent(none, 'x', 1000);
  assert.equal(none.contentOut, null);
  assert.equal(contentOf(none, opts()), null);
});

test('secrets are replaced on both sides, with their counts', () => {
  const r = new RequestRecord();
  r.contentPolicy = 'redacted';
  r.requestBody = Buffer.from('{"k":"sk-proj-LEAK"}');
  keepContent(r, 'echo sk-proj-LEAK', 1000);
  const c = contentOf(r, { ...opts(), redactSecrets: (t) => ({ text: t.replaceAll('sk-proj-LEAK', '[SECRET]'), counts: { secret: t.split('sk-proj-LEAK').length - 1 } }) })!;
  assert.equal(c.policy, 'redacted');
  assert.ok(!c.request.includes('LEAK') && !c.response.includes('LEAK'));
  assert.deepEqual(c.redactions, { secret: 2 });
});

test('records made from a flat batch of jobs (issue 15) read back as the records toWire makes, byte for byte as the serving thread makes them', () => {
  // A redactor that changes the text, so a content made without it would differ.
  const redactSecrets: ContentOptions['redactSecrets'] = (text) => {
    const counts: Record<string, number> = {};
    if (text.includes('secret')) counts.generic = 1;
    return { text: text.replaceAll('secret', '[SECRET]'), counts };
  };
  const o: ContentOptions = { maxBytes: 1024, keepBase64: false, redactSecrets };
  const big = Buffer.from(JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'secret '.repeat(30_000) }] }));
  const anthropic = [
    'event: message_start\ndata: {"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":9,"output_tokens":1,"cache_read_input_tokens":4}}}\n\n',
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hé"}}\n\n',
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}\n\n',
  ];
  const cases: [string, (r: RequestRecord) => void][] = [
    ['JSON answer', (r) => keepResponseChunk(r, Buffer.from('{"model":"gpt-4o-2024","usage":{"prompt_tokens":3,"completion_tokens":4}}'))],
    ['Anthropic stream in pieces', (r) => { r.stream = true; for (const s of anthropic) keepResponseChunk(r, Buffer.from(s)); }],
    ['stream cut short', (r) => { r.stream = true; r.partial = true; keepResponseChunk(r, Buffer.from('data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {"choices":[{"delta":{"content":"b"}}]}\n\n')); }],
    ['usage read already (budgets)', (r) => { keepResponseChunk(r, Buffer.from('{"usage":{"prompt_tokens":1}}')); r.usage = NO_USAGE; }],
    ['no response kept', () => {}],
    ['policy none', (r) => { r.contentPolicy = 'none'; keepResponseChunk(r, Buffer.from('{"usage":{"prompt_tokens":2,"completion_tokens":1}}')); }],
    ['policy redacted', (r) => { r.contentPolicy = 'redacted'; }],
    // A translated stream's pieces are strings; the bound (1 KiB) falls inside a two-byte character of one.
    ['answer past the bound, strings and bytes', (r) => { r.contentOut = null; r.contentOutKept = 0; r.contentOutBytes = 0; keepContent(r, 'a'.repeat(1000), o.maxBytes); keepContent(r, Buffer.from('b'.repeat(23)), o.maxBytes); keepContent(r, 'é'.repeat(50), o.maxBytes); keepContent(r, 'never kept', o.maxBytes); }],
    // An answer relayed as it came: the same chunks as the kept response (their bytes are copied once).
    ['stream relayed as it came', (r) => { r.stream = true; r.contentOut = null; r.contentOutKept = 0; r.contentOutBytes = 0; for (const s of anthropic) { const c = Buffer.from(s); keepResponseChunk(r, c); keepContent(r, c, o.maxBytes); } }],
    // The same, past the content bound (1 KiB): the answer is copied apart, cut at the bound.
    ['relayed answer past the bound', (r) => { r.contentOut = null; r.contentOutKept = 0; r.contentOutBytes = 0; for (const s of ['{"model":"gpt-4o","x":"', 'é'.repeat(400), '","usage":{"prompt_tokens":5,"completion_tokens":6}}']) { const c = Buffer.from(s); keepResponseChunk(r, c); keepContent(r, c, o.maxBytes); } }],
    // Every field of the head away from its default: numbers, flags, strings and lists all make the trip.
    ['every field of the head set', (r) => {
      Object.assign(r, { tLimits: r.t0 + 0.0211, tCache: r.t0 + 0.0212, tBudget: r.t0 + 0.0213, cacheHit: true, tAttempt: r.t0 + 0.45, tFirstToken: r.t0 + 100.0005, newConnection: true,
        failedStage: 'upstream.stream', partial: true, stream: true, dialect: 'anthropic', upstreamHost: 'api.example:8443', keyId: 'key_01', status: 499, upstreamStatus: 200,
        errorType: 'client_closed', errorMessage: 'gone \u2713 "quoted"\nline \ud800 lone', aborted: true, requestBytes: 1234, responseBytes: 98765, sessionId: 'sess-\u00e9', parentSpanId: '00f067aa0ba902b7' });
      r.attempts = [{ provider: 'p1', model: 'm1', upstreamHost: 'h1', start: r.t0 + 0.03, end: r.t0 + 0.4, status: 500, errorType: 'upstream_error', errorMessage: 'provider p1 answered 500' }];
    }],
    // Larger than half a page: its own shared buffer.
    ['request of 200 KiB', (r) => { r.requestBody = big; }],
    ['no request body', (r) => { r.requestBody = null; }],
  ];
  const pool = new PagePool();
  const batch = new JobBatch(pool);
  const expected: WireRecord[] = [];
  const here: string[] = [];
  for (const [name, fill] of cases) {
    const r = servedRecord({ seq: expected.length, endUser: 'u"1\n2', tags: { env: 'prod' } });
    r.contentPolicy = 'full';
    r.requestBody = Buffer.from('{"model":"gpt-4o","messages":[{"role":"user","content":"my secret ✓"}]}');
    keepContent(r, 'answer text ✓', o.maxBytes);
    fill(r);
    // The job first: it copies and leaves the record as it was (toWire keeps the usage it reads on the record).
    batch.add(r, o.maxBytes);
    expected.push(wireJson(r, o));
    // The record as the serving thread makes it without a content thread (capture.ts #serialise).
    const c = contentOf(r, o);
    here.push(recordPartsOf(`${wireHead(r)},${usageMembers(recordUsage(r))},"content":`, c === null ? null : contentWire(c)).parts.join(''));
  }
  assert.equal(batch.length, cases.length);
  // Every byte the jobs need was copied into the pages, the 200 KiB request among them.
  assert.ok(batch.bytes > big.length, `${batch.bytes} bytes copied`);
  // The message travels by structured clone, as to the worker thread (its pages are shared, not copied).
  const message = structuredClone(batch.message());
  assert.equal(jobCount(message), cases.length);
  const { heads, jobs } = jobsOf(message);
  for (let i = 0; i < cases.length; i++) {
    const got = recordText(heads[i]!, prepareJob(jobs[i]!, o.maxBytes, false, redactSecrets));
    assert.deepEqual(wireOf(got), expected[i], cases[i]![0]);
    assert.equal(got, here[i], `${cases[i]![0]}: the same bytes as made on the serving thread`);
  }
  // The 200 KiB request had a buffer of its own; the rest fit one page, which is reused once released.
  assert.deepEqual(message.pages.map((p) => p.byteLength).sort((a, b) => a - b), [big.length, 256 * 1024]);
  const page = batch.message().pages.find((p) => p.byteLength === 256 * 1024)!;
  batch.release();
  assert.equal(batch.message().pages.length, 0);
  assert.equal(pool.take(), page);
  assert.notEqual(pool.take(), page);
  const empty = new JobBatch(pool);
  assert.deepEqual(jobsOf(empty.message()), { heads: [], jobs: [] });
});

test('an answer relayed as it came is copied once for the usage and the content; one that differs from the kept response is copied apart', () => {
  const chunks = ['data: {"choices":[{"delta":{"content":"hello"}}]}\n\n', 'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\n', 'data: [DONE]\n\n'].map((s) => Buffer.from(s));
  const response = chunks.reduce((n, c) => n + c.length, 0);
  const request = Buffer.from('{"model":"gpt-4o","stream":true,"messages":[]}');
  const record = (translated: boolean): RequestRecord => {
    const r = servedRecord();
    r.stream = true;
    r.contentPolicy = 'full';
    r.requestBody = request;
    for (const c of chunks) {
      keepResponseChunk(r, c);
      keepContent(r, translated ? c.toString() : c, 1024);
    }
    return r;
  };
  for (const translated of [false, true]) {
    const batch = new JobBatch(new PagePool());
    const r = record(translated);
    batch.add(r, 1024);
    assert.equal(batch.bytes, request.length + response * (translated ? 2 : 1), translated ? 'the answer copied apart' : 'one copy for both');
    const { heads, jobs } = jobsOf(structuredClone(batch.message()));
    const got = wireOf(recordText(heads[0]!, prepareJob(jobs[0]!, 1024, false, noRedact)));
    assert.deepEqual(got, wireJson(r, opts(1024)));
    assert.equal(got.outputTokens, 1);
    assert.match(JSON.stringify(got.content), /hello/);
  }
});

test('a batch of records made whole as bytes (the worker thread\'s answer): each is the UTF-8 of its v3 record (toWire\'s record) in one buffer, with room for a batch header before them and `, ` after each; a job that fails is null and the others are intact', () => {
  const o: ContentOptions = { maxBytes: 256 * 1024, keepBase64: false, redactSecrets: (text) => ({ text, counts: {} }) };
  const batch = new JobBatch(new PagePool());
  const expected: (WireRecord | null)[] = [];
  for (let i = 0; i < 3; i++) {
    const r = servedRecord({ seq: i, endUser: `usér ${i}` });
    r.contentPolicy = 'full';
    r.requestBody = Buffer.from(`{"model":"gpt-4o","messages":[{"role":"user","content":"ça ${i} ✓"}]}`);
    keepContent(r, `réponse ${i}`, o.maxBytes);
    keepResponseChunk(r, Buffer.from(`{"usage":{"prompt_tokens":${i + 1},"completion_tokens":2}}`));
    batch.add(r, o.maxBytes);
    expected.push(wireJson(r, o));
  }
  const message = structuredClone(batch.message());
  const { heads, jobs } = jobsOf(message);
  // The middle job cannot be prepared (its content input is not one).
  (jobs[1] as { content: unknown }).content = { requestBody: 42 };
  expected[1] = null;
  const prepared = recordsBytes(heads, jobs, o.maxBytes, false, o.redactSecrets, { maxBytes: 512 * 1024, maxRequests: 256 }, message.estimate);
  const { buffer } = prepared;
  const records = preparedViews(prepared);
  assert.equal(records.length, 3);
  assert.equal(records[1], null);
  assert.equal(records[0]!.byteOffset, BATCH_HEAD_ROOM);
  assert.equal(records[2]!.byteOffset, BATCH_HEAD_ROOM + records[0]!.length + 2);
  assert.equal(Buffer.from(buffer, BATCH_HEAD_ROOM + records[0]!.length, 2).toString(), ', ');
  for (const i of [0, 2]) {
    const rec = records[i]!;
    assert.equal(rec.buffer, buffer);
    assert.deepEqual(wireOf(rec), expected[i]);
    assert.equal(rec.length, Buffer.byteLength(recordText(heads[i]!, prepareJob(jobs[i]!, o.maxBytes, false, o.redactSecrets))));
  }
  // The buffer holds the records and may run on past them (it is sized ahead, job.ts).
  assert.ok(buffer.byteLength >= BATCH_HEAD_ROOM + records[0]!.length + records[2]!.length + 4);
  assert.deepEqual([...prepared.starts], [BATCH_HEAD_ROOM]);
});

test('a worker answer has room for a batch header wherever the capture will cut: the same rule on both sides', () => {
  const o: ContentOptions = { maxBytes: 256 * 1024, keepBase64: false, redactSecrets: (text) => ({ text, counts: {} }) };
  const batch = new JobBatch(new PagePool());
  for (let i = 0; i < 10; i++) {
    const r = servedRecord({ seq: i });
    r.contentPolicy = 'full';
    r.requestBody = Buffer.from(JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x'.repeat(100 * (i + 1)) }] }));
    batch.add(r, o.maxBytes);
  }
  const message = structuredClone(batch.message());
  const { heads, jobs } = jobsOf(message);
  // Small bounds, so that the ten records make several batches, by bytes and by count.
  const cut = { maxBytes: 6000, maxRequests: 3 };
  const prepared = recordsBytes(heads, jobs, o.maxBytes, false, o.redactSecrets, cut, message.estimate);
  const records = preparedViews(prepared).map((r) => r!);
  const cutter = new BatchCutter(cut.maxBytes, cut.maxRequests);
  const expectedStarts = records.filter((r, i) => cutter.add(r.length) || i === 0).map((r) => r.byteOffset);
  assert.ok(expectedStarts.length >= 4, `several batches: ${expectedStarts.length}`);
  assert.deepEqual([...prepared.starts], expectedStarts);
  const bytes = Buffer.from(prepared.buffer);
  for (let i = 0; i < records.length; i++) {
    const r = records[i]!;
    const starts = prepared.starts.includes(r.byteOffset);
    // Room before a batch's first record; `, ` right before every other.
    if (!starts) assert.equal(bytes.toString('latin1', r.byteOffset - 2, r.byteOffset), ', ');
    else assert.ok(r.byteOffset >= BATCH_HEAD_ROOM && (i === 0 || r.byteOffset - BATCH_HEAD_ROOM === records[i - 1]!.byteOffset + records[i - 1]!.length + 2));
    assert.equal(bytes.toString('latin1', r.byteOffset + r.length, r.byteOffset + r.length + 2), ', ');
  }
});

/** A redactor that changes the text and counts, as the gateway's does. */
const redactKeys: ContentOptions['redactSecrets'] = (text) => {
  const n = text.split('sk-proj-').length - 1;
  const counts: Record<string, number> = n > 0 ? { openai: n } : {};
  return { text: text.replaceAll('sk-proj-', '[SECRET:openai]'), counts };
};

test('content in a v4 record: its JSON member gives the texts\' UTF-8 lengths and the texts follow the record\'s line as they are; read back, it is the content (a two-byte answer, secrets, cuts, none)', () => {
  const o: ContentOptions = { maxBytes: 64, keepBase64: false, redactSecrets: redactKeys };
  const cases: [string, (r: RequestRecord) => void][] = [
    ['ASCII prompt, two-byte answer', (r) => { r.requestBody = Buffer.from('{"messages":[{"content":"plain ascii prompt"}]}'); keepContent(r, 'answer 🙂 你好 — done', o.maxBytes); }],
    ['secrets and cuts on both sides', (r) => { r.requestBody = Buffer.from(`{"k":"sk-proj-${'a'.repeat(40)}","pad":"${'x'.repeat(200)}"}`); keepContent(r, `"quoted" \\ back\nslash ${'é'.repeat(100)}`, o.maxBytes); }],
    ['no answer', (r) => { r.requestBody = Buffer.from('{}'); }],
  ];
  for (const [name, fill] of cases) {
    const r = new RequestRecord();
    r.contentPolicy = 'full';
    fill(r);
    const c = contentOf(r, o)!;
    const w = contentWire(c);
    assert.deepEqual(JSON.parse(w.json), { ...c, request: Buffer.byteLength(c.request), response: Buffer.byteLength(c.response) }, name);
    assert.equal(w.textBytes, Buffer.byteLength(c.request + c.response), name);
    // The texts are the strings themselves, not copies joined into one.
    assert.equal(w.request, c.request);
    assert.equal(w.response, c.response);
    const head = `${wireHead(r)},${usageMembers(recordUsage(r))},"content":`;
    const rec = recordPartsOf(head, w);
    assert.equal(rec.parts.length, 3);
    assert.ok(rec.parts[0]!.endsWith('}\n') && !rec.parts[0]!.slice(0, -1).includes('\n'), `${name}: one JSON line, then the texts`);
    assert.equal(rec.bytes, Buffer.byteLength(rec.parts.join('')), name);
    assert.deepEqual(wireOf(rec.parts.join('')).content, c, name);
  }
  const none = recordPartsOf('{"s":[],"content":', null);
  assert.deepEqual(none.parts, ['{"s":[],"content":null}\n']);
});

test('a capture without a content thread publishes each record as its v4 record (toWire\'s record); content past the record bound is cut harder', async () => {
  const bus = new MemoryBus();
  const o: ContentOptions = { maxBytes: 256 * 1024, keepBase64: false, redactSecrets: redactKeys };
  const capture = new Capture({ instance: 'gw-parts', config: captureConfig({ flushIntervalMs: 60_000, batchMaxRequests: 3 }), publisher: bus, content: o });
  const expected: unknown[] = [];
  const make = (seq: number, body: Buffer, answer: string) => {
    const r = servedRecord({ seq });
    r.contentPolicy = 'full';
    r.requestBody = body;
    keepContent(r, answer, o.maxBytes);
    return r;
  };
  const plain = make(0, Buffer.from(`{"messages":[{"content":"${'the quick brown fox '.repeat(3000)}"}]}`), 'answer 🙂 你好');
  // 200 KiB of invalid UTF-8 on each side: each byte becomes U+FFFD, three bytes, and the two
  // texts (1.2 MB) are past the record bound (960 KiB) at 256 KiB; a quarter of that fits.
  const escaped = make(1, Buffer.alloc(200 * 1024, 0xff), '');
  keepContent(escaped, Buffer.alloc(200 * 1024, 0xff), o.maxBytes);
  const none = servedRecord({ seq: 2 });
  for (const r of [plain, escaped, none]) {
    capture.record(r);
    expected.push(wireJson(r, r === escaped ? { ...o, maxBytes: o.maxBytes / 4 } : r === none ? undefined : o));
  }
  assert.equal(await capture.close(5000), 0);
  const [m] = await bus.fetch(1, 100);
  assert.equal((readCaptureMessage(m!.data) as { v: number }).v, 4);
  const records = messageRecords(m!.data);
  assert.deepEqual(records, expected);
  assert.equal(records[1]!.content!.request.length, 64 * 1024);
  assert.equal(records[1]!.content!.requestTruncated, true);
});
