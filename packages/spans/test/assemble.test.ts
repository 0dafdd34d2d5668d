/**
 * Stream assembly (packages/spans/src/assemble.ts) on streams recorded from the mock provider
 * (bench/mock, a real HTTP server), in both dialects, with and without tool calls: the
 * assembled message equals the mock's non-streamed answer to the same request, and the same
 * streams cut at every byte offset never throw, are flagged partial until their end event,
 * and assemble to a prefix of the whole.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { assembleAnthropicStream, assembleOpenAIStream, assembleStream, type AssembledAnthropic, type AssembledOpenAI, type Json, type JsonObject } from '@sightline/spans';
import type { Dialect } from '@sightline/core';
import { startMock, type MockServer } from '../../../bench/mock/server.js';

interface Recorded {
  name: string;
  dialect: Dialect;
  /** The SSE text the mock streamed. */
  sse: string;
  /** The mock's JSON answer to the same request without `stream`. */
  json: JsonObject;
}

let mock: MockServer;
const recorded: Recorded[] = [];

const openaiTools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { location: { type: 'string' } } } } }];
const anthropicTools = [{ name: 'get_weather', input_schema: { type: 'object', properties: { location: { type: 'string' } } } }];

async function call(path: string, body: object): Promise<string> {
  const r = await fetch(mock.url + path, { method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, body: JSON.stringify(body) });
  assert.equal(r.status, 200);
  return r.text();
}

async function record(name: string, dialect: Dialect, body: Record<string, unknown>): Promise<void> {
  const path = dialect === 'anthropic' ? '/v1/messages' : '/v1/chat/completions';
  const streamBody = dialect === 'openai' ? { ...body, stream: true, stream_options: { include_usage: true } } : { ...body, stream: true };
  const sse = await call(path, streamBody);
  const json = JSON.parse(await call(path, body)) as JsonObject;
  recorded.push({ name, dialect, sse, json });
}

before(async () => {
  // Several chunks with multibyte text, so cuts fall inside characters and inside events.
  mock = await startMock({ chunks: 6, responseBytes: 80 });
  await record('openai text', 'openai', { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] });
  await record('openai tool call', 'openai', { model: 'gpt-4o', tools: openaiTools, messages: [{ role: 'user', content: 'use tool please' }] });
  await record('anthropic text', 'anthropic', { model: 'claude-x', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] });
  await record('anthropic tool use', 'anthropic', { model: 'claude-x', max_tokens: 50, tools: anthropicTools, messages: [{ role: 'user', content: 'use tool please' }] });
});

after(async () => {
  await mock.close();
});

function openai(sse: string): { m: AssembledOpenAI; partial: boolean } {
  const a = assembleOpenAIStream(sse);
  assert.ok(a !== null);
  return { m: a.message, partial: a.partial };
}

function anthropic(sse: string): { m: AssembledAnthropic; partial: boolean } {
  const a = assembleAnthropicStream(sse);
  assert.ok(a !== null);
  return { m: a.message, partial: a.partial };
}

function get(o: Json | undefined, ...path: (string | number)[]): Json | undefined {
  let v: Json | undefined = o;
  for (const k of path) {
    if (typeof k === 'number') v = Array.isArray(v) ? v[k] : undefined;
    else v = typeof v === 'object' && v !== null && !Array.isArray(v) ? v[k] : undefined;
  }
  return v;
}

test('OpenAI streams assemble into the chat.completion the mock answers without streaming', () => {
  for (const r of recorded.filter((x) => x.dialect === 'openai')) {
    const { m, partial } = openai(r.sse);
    assert.equal(partial, false, r.name);
    assert.equal(m.object, 'chat.completion');
    assert.equal(m.model, 'gpt-4o');
    assert.match(m.id, /^chatcmpl-/);
    assert.equal(m.choices.length, 1);
    const c = m.choices[0]!;
    assert.equal(c.message.role, 'assistant');
    assert.equal(c.message.content, get(r.json, 'choices', 0, 'message', 'content'), r.name);
    assert.equal(c.finish_reason, get(r.json, 'choices', 0, 'finish_reason'), r.name);
    assert.deepEqual(m.usage, get(r.json, 'usage'), r.name);
    const tools = get(r.json, 'choices', 0, 'message', 'tool_calls');
    if (Array.isArray(tools)) {
      assert.equal(c.message.tool_calls?.length, tools.length);
      assert.equal(c.message.tool_calls![0]!.function.name, get(tools, 0, 'function', 'name'));
      assert.equal(c.message.tool_calls![0]!.function.arguments, get(tools, 0, 'function', 'arguments'));
      assert.match(c.message.tool_calls![0]!.id, /^call_/);
      assert.equal(c.message.tool_calls![0]!.type, 'function');
    } else {
      assert.equal(c.message.tool_calls, undefined);
    }
  }
});

test('Anthropic streams assemble into the message the mock answers without streaming', () => {
  for (const r of recorded.filter((x) => x.dialect === 'anthropic')) {
    const { m, partial } = anthropic(r.sse);
    assert.equal(partial, false, r.name);
    assert.equal(m.type, 'message');
    assert.equal(m.role, 'assistant');
    assert.equal(m.model, 'claude-x');
    assert.equal(m.stop_reason, get(r.json, 'stop_reason'));
    assert.equal(m.usage?.output_tokens, get(r.json, 'usage', 'output_tokens'));
    assert.equal(m.usage?.input_tokens, get(r.json, 'usage', 'input_tokens'));
    // The blocks equal the non-streamed ones, except for the ids the mock makes up per request.
    const strip = (b: Json): Json => (typeof b === 'object' && b !== null && !Array.isArray(b) ? { ...b, id: 'x' } : b);
    assert.deepEqual(m.content.map(strip), (get(r.json, 'content') as Json[]).map(strip), r.name);
  }
  const tool = anthropic(recorded.find((x) => x.name === 'anthropic tool use')!.sse).m.content[0]!;
  assert.equal(tool.type, 'tool_use');
  assert.deepEqual(tool.input, { location: 'Paris', unit: 'celsius' });
});

/** The offset just past the line holding `marker` (the event that ends the stream). */
function endOfLine(text: string, marker: string): number {
  const at = Buffer.from(text).indexOf(marker);
  assert.ok(at >= 0, `${marker} not in the stream`);
  return Buffer.from(text).indexOf('\n', at) + 1;
}

/** The text and tool arguments of an assembled message, whichever the dialect. */
function texts(dialect: Dialect, sse: string): { text: string; args: string; partial: boolean } | null {
  const a = assembleStream(dialect, sse);
  if (a === null) return null;
  if (dialect === 'openai') {
    const m = a.message as AssembledOpenAI;
    const c = m.choices[0];
    return { text: c?.message.content ?? '', args: c?.message.tool_calls?.[0]?.function.arguments ?? '', partial: a.partial };
  }
  const m = a.message as AssembledAnthropic;
  const text = m.content.map((b) => (typeof b.text === 'string' ? b.text : '')).join('');
  const input = m.content[0]?.input;
  return { text, args: input === undefined ? '' : typeof input === 'string' ? input : JSON.stringify(input), partial: a.partial };
}

test('a stream cut at every byte offset never throws, is partial until its end event, and assembles a prefix of the whole', () => {
  for (const r of recorded) {
    const bytes = Buffer.from(r.sse);
    const whole = texts(r.dialect, r.sse)!;
    assert.equal(whole.partial, false);
    assert.equal(whole.args !== '', r.name.includes('tool'), `${r.name}: tool arguments ${whole.args}`);
    // OpenAI: finished once every choice has its finish_reason (or at [DONE]); Anthropic: at message_stop.
    const end = r.dialect === 'openai' ? endOfLine(r.sse, '"finish_reason":"') : endOfLine(r.sse, '"type":"message_stop"');
    // Anthropic: the tool input is `{}` from content_block_start until the first delta, then
    // the raw JSON so far while it does not parse, then the object (the concatenation parses
    // to what JSON.stringify prints here).
    const wholeArgs = whole.args;
    for (let i = 0; i <= bytes.length; i++) {
      // As the gateway hands it over: bytes cut anywhere, invalid UTF-8 as U+FFFD.
      const cut = bytes.subarray(0, i).toString('utf8');
      const t = texts(r.dialect, cut);
      if (t === null) {
        // Nothing read yet: only before the first complete event.
        assert.ok(i < bytes.indexOf('\n\n') + 2, `${r.name}: nothing assembled from ${i} bytes`);
        continue;
      }
      assert.equal(t.partial, i < end, `${r.name} cut at ${i}: partial ${t.partial}`);
      assert.ok(whole.text.startsWith(t.text), `${r.name} cut at ${i}: ${JSON.stringify(t.text)}`);
      if (t.args !== '{}') assert.ok(wholeArgs.startsWith(t.args), `${r.name} cut at ${i}: args ${t.args}`);
    }
  }
});

test('tool arguments that are not JSON are kept as the raw string; events that are not JSON are skipped and counted', () => {
  const sse = [
    'event: message_start',
    'data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}',
    '',
    'event: content_block_start',
    'data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}',
    '',
    'data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\\"city\\": Par"}}',
    '',
    'data: {not json',
    '',
    'data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"is}"}}',
    '',
    'data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}',
    '',
    'data: {"type":"message_stop"}',
    '',
    '',
  ].join('\r\n');
  const a = assembleAnthropicStream(sse)!;
  assert.equal(a.partial, false);
  assert.equal(a.skipped, 1);
  assert.equal(a.events, 6);
  assert.deepEqual(a.message.content, [{ type: 'tool_use', id: 'toolu_1', name: 'f', input: '{"city": Paris}' }]);
  assert.deepEqual(a.message.usage, { input_tokens: 3, output_tokens: 9 });
  assert.equal(a.message.stop_reason, 'tool_use');

  const o = assembleOpenAIStream(
    'data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{oops"}}]}}]}\n\n' +
      'data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n',
  )!;
  assert.deepEqual(o.message.choices[0]!.message, { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{oops' } }] });
});

test('several choices and interleaved tool calls are kept apart by index; a mid-stream error is kept', () => {
  const ev = (o: object): string => `data: ${JSON.stringify(o)}\n\n`;
  const sse =
    ev({ id: 'c', model: 'm', created: 5, choices: [{ index: 1, delta: { role: 'assistant', content: 'B1' } }, { index: 0, delta: { role: 'assistant', content: 'A1' } }] }) +
    ev({ choices: [{ index: 0, delta: { tool_calls: [{ index: 1, id: 't2', function: { name: 'g', arguments: '{"b"' } }, { index: 0, id: 't1', function: { name: 'f', arguments: '{"a"' } }] } }] }) +
    ev({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: ':1}' } }, { index: 1, function: { arguments: ':2}' } }] } }] }) +
    ev({ choices: [{ index: 1, delta: { content: 'B2' }, finish_reason: 'length' }] }) +
    ev({ error: { message: 'upstream went away', type: 'server_error' } });
  const a = assembleOpenAIStream(sse)!;
  assert.equal(a.partial, true, 'choice 0 never finished and no [DONE]');
  assert.equal(a.message.created, 5);
  assert.deepEqual(
    a.message.choices.map((c) => [c.index, c.message.content, c.message.tool_calls?.map((t) => [t.id, t.function.name, t.function.arguments]), c.finish_reason]),
    [
      [0, 'A1', [['t1', 'f', '{"a":1}'], ['t2', 'g', '{"b":2}']], null],
      [1, 'B1B2', undefined, 'length'],
    ],
  );
  assert.deepEqual(a.message.error, { message: 'upstream went away', type: 'server_error' });
  const anthropicError = assembleAnthropicStream('event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n')!;
  assert.deepEqual(anthropicError.message.error, { type: 'overloaded_error', message: 'Overloaded' });
  assert.equal(anthropicError.partial, true);
});

test('text with no event in it (a JSON error body, nothing, garbage) assembles to null, never throws', () => {
  for (const d of ['openai', 'anthropic'] as const) {
    assert.equal(assembleStream(d, ''), null);
    assert.equal(assembleStream(d, '{"error":{"message":"bad"}}'), null);
    assert.equal(assembleStream(d, '\uFFFD\uFFFD\0\n\n\r\r:comment\n\n'), null);
    assert.equal(assembleStream(d, 'data: [1,2]\n\ndata: "x"\n\n'), null);
  }
  // Only [DONE]: an empty, complete answer.
  assert.deepEqual(assembleOpenAIStream('data: [DONE]\n\n')?.message.choices, []);
});

test('random garbage around valid events never throws (seeded, 2,000 rounds)', () => {
  let seed = 42;
  const rand = (): number => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
  const pieces = ['data: ', 'event: ', '\n', '\r\n', '\r', '{', '}', '"', '[DONE]', '"choices":[', '"delta":{', '"index":', '1e999', '-1', '"type":"content_block_delta"', '"tool_calls":[{', 'null', ',', ':', '\uD83D', '🙂', '"partial_json":"'];
  for (const r of recorded) pieces.push(...r.sse.split('\n').slice(0, 8));
  for (let round = 0; round < 2000; round++) {
    let s = '';
    const n = Math.floor(rand() * 30);
    for (let i = 0; i < n; i++) s += pieces[Math.floor(rand() * pieces.length)]!;
    for (const d of ['openai', 'anthropic'] as const) {
      const a = assembleStream(d, s);
      if (a !== null) JSON.stringify(a.message);
    }
  }
});
