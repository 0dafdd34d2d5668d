import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { anthropicResponseToResponses, isTranslationError, type AnthropicMessage, type ResponsesRequest } from '@sightline/translate';
import { chooseRelay, ErrorTranslateRelay, JsonTranslateRelay, ResponsesJsonRelay, ScrubErrorRelay, StreamTranslateRelay, UsageStripRelay, passthroughRelay, type RelayPlan } from '../src/relay.js';

test('provider error bodies relayed in the same dialect lose anything key-like', () => {
  const r = new ScrubErrorRelay(1024);
  const head = r.head(401, { 'content-type': 'application/json', 'content-length': '120' });
  assert.equal(head.status, 401);
  assert.equal(head.headers['content-length'], undefined);
  assert.equal(r.data(Buffer.from('{"error":{"message":"Incorrect API key provided: sk-proj-abcdefghijklmnop1234. You can')), null);
  const out = r.end();
  assert.ok(!out.includes('sk-proj-abcdefghijklmnop1234'), out);
  assert.match(out, /\[redacted\]/);
});

test('the usage-only chunk is removed and every other event passes, split anywhere', () => {
  const stream =
    'data: {"choices":[{"index":0,"delta":{"content":"héllo"}}],"usage":null}\n\n' +
    'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}\n\n' +
    'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\n' +
    'data: [DONE]\n\n';
  const bytes = Buffer.from(stream);
  for (let cut = 1; cut < bytes.length; cut += 7) {
    const r = new UsageStripRelay();
    r.head(200, {});
    const out = [r.data(bytes.subarray(0, cut)), r.data(bytes.subarray(cut)), r.end()].filter((x) => x !== null).join('');
    assert.ok(!out.includes('prompt_tokens'), `cut ${cut}`);
    assert.ok(out.includes('héllo') && out.includes('"finish_reason":"stop"') && out.endsWith('data: [DONE]\n\n'), `cut ${cut}: ${out}`);
  }
});

test('chunks of whole events without a usage object are relayed as they came, unparsed', () => {
  const r = new UsageStripRelay();
  r.head(200, {});
  const a = Buffer.from('data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null}\n\n');
  const b = Buffer.from('data: {"choices":[{"index":0,"delta":{"content":"one"}}],"usage" : null}\n\ndata: {"choices":[{"index":0,"delta":{"content":"two"}}]}\r\n\r\n');
  assert.equal(r.data(a), a, 'the same buffer, not a copy');
  assert.equal(r.data(b), b);
  // A chunk that ends inside an event is parsed, and so is the rest of that event.
  const c1 = Buffer.from('data: {"choices":[{"index":0,"delta":{"content":"thr');
  const c2 = Buffer.from('ee"}}]}\n\n');
  assert.equal(r.data(c1), null);
  const out = r.data(c2);
  assert.notEqual(out, c2);
  assert.match(String(out), /"content":"three"/);
  // Between events again: the next whole-event chunk passes as it came.
  const d = Buffer.from('data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n');
  assert.equal(r.data(d), d);
  // The usage chunk (usage is an object) is parsed and removed; [DONE] passes.
  const u = Buffer.from('data: {"choices":[],"usage": \t{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\ndata: [DONE]\n\n');
  assert.equal(r.data(u), 'data: [DONE]\n\n');
  assert.equal(r.end(), null);
});

test('fast and parsed paths together relay every event but the usage-only one, however the stream is cut', () => {
  const events = [
    'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null}\n\n',
    ...Array.from({ length: 6 }, (_, i) => `data: {"choices":[{"index":0,"delta":{"content":"w${i} é"}}],"usage":null}\n\n`),
    'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}\n\n',
    'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":7,"total_tokens":10}}\n\n',
    'data: [DONE]\n\n',
  ];
  const bytes = Buffer.from(events.join(''));
  const want = events.filter((e) => !e.includes('prompt_tokens')).map((e) => e.replace(/^data: /, '').trim());
  let seed = 7;
  const rnd = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  for (let round = 0; round < 300; round++) {
    // Cuts: sometimes at event boundaries (the fast path), sometimes anywhere (the parser).
    const cuts = new Set<number>();
    let at = 0;
    for (const e of events) {
      at += Buffer.byteLength(e);
      if (rnd(2) === 0) cuts.add(at);
    }
    for (let k = rnd(4); k > 0; k--) cuts.add(1 + rnd(bytes.length - 1));
    const points = [0, ...[...cuts].filter((c) => c > 0 && c < bytes.length).sort((x, y) => x - y), bytes.length];
    const r = new UsageStripRelay();
    r.head(200, {});
    let out = '';
    for (let i = 1; i < points.length; i++) {
      const o = r.data(bytes.subarray(points[i - 1], points[i]));
      if (o !== null) out += o.toString();
    }
    const e = r.end();
    if (e !== null) out += e.toString();
    const got = out
      .split('\n\n')
      .filter((s) => s !== '')
      .map((s) => s.replace(/^data: ?/, '').trim());
    assert.deepEqual(got, want, `round ${round}, cuts ${points.join(',')}`);
  }
});

const LIMITS = { bodyBytes: 1000, sseEventBytes: 100, contentBytes: 1000 };
const plan = (p: Partial<RelayPlan>): RelayPlan => ({ api: 'chat', client: 'openai', sameDialect: true, stream: false, stripUsage: false, includeUsage: false, responseModel: 'm', request: null, ...p });

test('one function chooses the relay from the plan and the status', () => {
  assert.equal(chooseRelay(plan({}), 200, LIMITS), passthroughRelay);
  assert.ok(chooseRelay(plan({ stream: true, stripUsage: true }), 200, LIMITS) instanceof UsageStripRelay);
  // A provider error is held and scrubbed even when the stream would have been stripped.
  assert.ok(chooseRelay(plan({ stream: true, stripUsage: true }), 500, LIMITS) instanceof ScrubErrorRelay);
  assert.ok(chooseRelay(plan({}), 401, LIMITS) instanceof ScrubErrorRelay);
  assert.ok(chooseRelay(plan({ sameDialect: false }), 200, LIMITS) instanceof JsonTranslateRelay);
  assert.ok(chooseRelay(plan({ sameDialect: false, stream: true }), 200, LIMITS) instanceof StreamTranslateRelay);
  assert.ok(chooseRelay(plan({ sameDialect: false, stream: true }), 429, LIMITS) instanceof ErrorTranslateRelay);
  for (const [p, status] of [[plan({}), 200], [plan({ stream: true, stripUsage: true }), 200], [plan({ sameDialect: false, stream: true }), 200]] as const) {
    assert.equal(chooseRelay(p, status, LIMITS).holds, false);
  }
  for (const [p, status] of [[plan({}), 500], [plan({ sameDialect: false }), 200], [plan({ sameDialect: false }), 400]] as const) {
    assert.equal(chooseRelay(p, status, LIMITS).holds, true);
  }
});

test('held bodies and parsed events are bounded: past the limit, data throws upstream_too_large', () => {
  const tooLarge = (e: unknown) => isTranslationError(e) && e.code === 'upstream_too_large';
  for (const r of [chooseRelay(plan({}), 500, LIMITS), chooseRelay(plan({ sameDialect: false }), 200, LIMITS), chooseRelay(plan({ sameDialect: false }), 500, LIMITS)]) {
    r.head(200, {});
    assert.equal(r.data(Buffer.alloc(600, 'x')), null);
    assert.throws(() => r.data(Buffer.alloc(600, 'x')), tooLarge);
  }
  for (const r of [chooseRelay(plan({ stream: true, stripUsage: true }), 200, LIMITS), chooseRelay(plan({ sameDialect: false, stream: true, client: 'anthropic' }), 200, LIMITS)]) {
    r.head(200, {});
    r.data(Buffer.from('data: ' + 'x'.repeat(60)));
    assert.throws(() => r.data(Buffer.from('y'.repeat(60))), tooLarge, 'an unterminated line past the bound');
  }
  // Many short data lines of one event count together.
  const r = chooseRelay(plan({ stream: true, stripUsage: true }), 200, LIMITS);
  assert.throws(() => {
    for (let i = 0; i < 20; i++) r.data(Buffer.from('data: 0123456789\n'));
  }, tooLarge);
  // Events within the bound, however many, pass.
  const ok = chooseRelay(plan({ stream: true, stripUsage: true }), 200, LIMITS);
  for (let i = 0; i < 1000; i++) ok.data(Buffer.from('data: {"choices":[],"usage":null}\n\n'));
});

// ---------------------------------------------------------------- Responses API client, Anthropic provider

interface Golden {
  options: { responseModel: string; request: Record<string, unknown> };
  input: unknown;
}
const golden = (name: string): Golden => JSON.parse(readFileSync(fileURLToPath(new URL(`../../../packages/translate/test/golden/${name}`, import.meta.url)), 'utf8')) as Golden;
/** `created_at` is the relay's clock: left out of comparisons. */
const unclocked = (s: string) => s.replace(/"created_at":\d+/g, '"created_at":0');

test('a Responses API client of an Anthropic provider: chosen by the plan, JSON held and translated whole', () => {
  const g = golden('responses-response.json');
  const p = plan({ api: 'responses', sameDialect: false, responseModel: g.options.responseModel, request: g.options.request as unknown as ResponsesRequest });
  const r = chooseRelay(p, 200, { ...LIMITS, bodyBytes: 1 << 20 });
  assert.ok(r instanceof ResponsesJsonRelay);
  assert.equal(r.holds, true);
  assert.equal(r.head(200, { 'content-type': 'application/json', 'content-length': '9' }).headers['content-length'], undefined);
  const bytes = Buffer.from(JSON.stringify(g.input));
  assert.equal(r.data(bytes.subarray(0, 10)), null);
  assert.equal(r.data(bytes.subarray(10)), null);
  const expected = JSON.stringify(anthropicResponseToResponses(g.input as AnthropicMessage, { responseModel: g.options.responseModel, createdAt: 0, request: g.options.request as unknown as ResponsesRequest }));
  assert.equal(unclocked(String(r.end())), unclocked(expected));
  // Errors from the provider are translated into the OpenAI error shape, as for chat.
  assert.ok(chooseRelay(p, 400, LIMITS) instanceof ErrorTranslateRelay);
  assert.ok(chooseRelay({ ...p, stream: true }, 529, LIMITS) instanceof ErrorTranslateRelay);
});

test('a Responses API stream from an Anthropic provider, cut anywhere (seeded), gives the same typed events as uncut', () => {
  const g = golden('responses-stream-tools.json');
  const events = g.input as { event: string; data: unknown }[];
  const sse = Buffer.from(events.map((e) => `event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`).join(''));
  const p = plan({ api: 'responses', sameDialect: false, stream: true, responseModel: g.options.responseModel, request: g.options.request as unknown as ResponsesRequest });
  const run = (cuts: number[]): string => {
    const r = chooseRelay(p, 200, { ...LIMITS, sseEventBytes: 1 << 20 });
    assert.ok(r instanceof StreamTranslateRelay);
    assert.equal(r.head(200, { 'content-length': '5' }).headers['content-type'], 'text/event-stream; charset=utf-8');
    let out = '';
    let from = 0;
    for (const c of [...cuts, sse.length]) {
      out += r.data(sse.subarray(from, c)) ?? '';
      from = c;
    }
    return unclocked(out + (r.end() ?? ''));
  };
  const whole = run([]);
  assert.match(whole, /^event: response\.created\n/);
  assert.match(whole, /event: response\.completed\ndata: [^\n]*"status":"completed"[^\n]*\n\n$/);
  assert.ok(whole.includes('"type":"response.function_call_arguments.done"'));
  let seed = 16;
  const rand = (): number => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed / 2 ** 32;
  };
  for (let round = 0; round < 200; round++) {
    const cuts = Array.from({ length: 1 + Math.floor(rand() * 12) }, () => 1 + Math.floor(rand() * (sse.length - 1))).sort((a, b) => a - b);
    assert.equal(run(cuts), whole, `round ${round}, cuts ${cuts.join(',')}`);
  }
});
