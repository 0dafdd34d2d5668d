/**
 * Conformance: the official `openai` and `@anthropic-ai/sdk` clients through the
 * gateway, for all four client → provider pairs, JSON and streaming, with and without
 * tools, against the mock provider (a real local HTTP server speaking both APIs).
 * Checks what each SDK returns: content, tool calls with complete arguments,
 * finish/stop reasons, usage.
 */
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { parseConfig } from '@sightline/config';
import { MemoryBus } from '@sightline/bus';
import type { RequestRow } from '@sightline/core';
import { decodeBatch, SpanBuilder } from '@sightline/spans';
import { startGateway, type GatewayHandle } from '@sightline/app-gateway';
import { startMock, type MockServer } from '../../../bench/mock/server.js';
import { waitFor } from '../../../test/support/servers.js';

let mock: MockServer;
let gw: GatewayHandle;
const bus = new MemoryBus();
const rows: RequestRow[] = [];

const TOOL_ARGS = { location: 'Paris', unit: 'celsius' };
const PROMPT = 'Say hello in a few words';
const TOOL_PROMPT = 'What is the weather? use tool';

before(async () => {
  mock = await startMock({ chunks: 6, responseBytes: 80 });
  const config = parseConfig(
    `
gateway: { host: 127.0.0.1, port: 0 }
providers:
  oa: { type: openai-compatible, base_url: "${mock.url}/v1" }
  an: { type: anthropic, base_url: "${mock.url}" }
routes:
  - { match: "gpt-*", provider: oa }
  - { match: "claude-*", provider: an }
capture: { flush_interval_ms: 5 }
`,
    'conformance.yaml',
  );
  gw = await startGateway({ config, publisher: bus, instance: 'gw-conf' });
});

after(async () => {
  await gw.close(2000);
  await mock.close();
});

const builder = new SpanBuilder();

async function capturedRow(traceId: string): Promise<RequestRow> {
  await waitFor(`capture of ${traceId}`, async () => {
    for (const m of await bus.fetch(1000, 10)) {
      rows.push(...decodeBatch(m.data, builder).requests);
      await m.ack();
    }
    return rows.some((r) => r.trace_id === traceId);
  }, 5000);
  return rows.find((r) => r.trace_id === traceId)!;
}

const openaiTools: OpenAI.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { location: { type: 'string' }, unit: { type: 'string' } }, required: ['location'] } } },
];
const anthropicTools: Anthropic.Tool[] = [
  { name: 'get_weather', description: 'Weather for a city', input_schema: { type: 'object', properties: { location: { type: 'string' }, unit: { type: 'string' } }, required: ['location'] } },
];

for (const model of ['gpt-4o-mini', 'claude-sonnet-4-5']) {
  const provider = model.startsWith('gpt') ? 'openai' : 'anthropic';
  describe(`OpenAI client → ${provider} provider`, () => {
    const client = () => new OpenAI({ apiKey: 'sk-conf', baseURL: `${gw.url}/v1`, maxRetries: 0 });

    test('JSON: content, finish reason, usage; the provider in its own dialect', async () => {
      const before = mock.stats()[provider];
      const { data, response } = await client().chat.completions.create({ model, messages: [{ role: 'user', content: PROMPT }] }).withResponse();
      assert.equal(mock.stats()[provider], before + 1, `the ${provider} endpoint served it`);
      assert.equal(data.object, 'chat.completion');
      assert.ok((data.choices[0]?.message.content ?? '').length > 20);
      assert.equal(data.choices[0]?.finish_reason, 'stop');
      assert.ok((data.usage?.prompt_tokens ?? 0) > 0 && (data.usage?.completion_tokens ?? 0) > 0);
      assert.equal(data.usage?.total_tokens, (data.usage?.prompt_tokens ?? 0) + (data.usage?.completion_tokens ?? 0));
      const row = await capturedRow(response.headers.get('x-sightline-trace-id')!);
      assert.equal(row.input_tokens, data.usage?.prompt_tokens);
      assert.equal(row.output_tokens, data.usage?.completion_tokens);
    });

    test('stream: the same text as JSON, finish reason, usage when asked, none when not', async () => {
      const json = await client().chat.completions.create({ model, messages: [{ role: 'user', content: PROMPT }] });
      const s = await client().chat.completions.create({ model, messages: [{ role: 'user', content: PROMPT }], stream: true, stream_options: { include_usage: true } }).withResponse();
      let text = '';
      let finish: string | null = null;
      let usage: OpenAI.CompletionUsage | undefined;
      for await (const c of s.data) {
        text += c.choices[0]?.delta.content ?? '';
        finish = c.choices[0]?.finish_reason ?? finish;
        if (c.usage) usage = c.usage;
      }
      assert.equal(text, json.choices[0]?.message.content);
      assert.equal(finish, 'stop');
      assert.equal(usage?.completion_tokens, json.usage?.completion_tokens);
      assert.equal(usage?.prompt_tokens, json.usage?.prompt_tokens);

      // Without include_usage the client sees no usage chunk, yet usage is captured.
      const s2 = await client().chat.completions.create({ model, messages: [{ role: 'user', content: PROMPT }], stream: true }).withResponse();
      let sawUsage = false;
      let chunks = 0;
      for await (const c of s2.data) {
        chunks++;
        if (c.usage) sawUsage = true;
        assert.ok(c.choices.length > 0, 'no usage-only chunk reaches a client that did not ask');
      }
      assert.ok(chunks > 3);
      assert.equal(sawUsage, false);
      const row = await capturedRow(s2.response.headers.get('x-sightline-trace-id')!);
      assert.equal(row.output_tokens, json.usage?.completion_tokens);
      assert.equal(row.stream, 1);
    });

    test('tools, JSON: a tool call with complete arguments', async () => {
      const r = await client().chat.completions.create({ model, messages: [{ role: 'user', content: TOOL_PROMPT }], tools: openaiTools });
      const call = r.choices[0]?.message.tool_calls?.[0];
      assert.equal(r.choices[0]?.finish_reason, 'tool_calls');
      assert.ok(call !== undefined && call.type === 'function');
      assert.equal(call.function.name, 'get_weather');
      assert.deepEqual(JSON.parse(call.function.arguments), TOOL_ARGS);
      assert.ok(call.id.length > 0);
    });

    test('tools, stream: argument deltas reassemble into the complete arguments', async () => {
      const s = await client().chat.completions.create({ model, messages: [{ role: 'user', content: TOOL_PROMPT }], tools: openaiTools, stream: true });
      let args = '';
      let name = '';
      let id = '';
      let finish: string | null = null;
      let pieces = 0;
      for await (const c of s) {
        for (const tc of c.choices[0]?.delta.tool_calls ?? []) {
          if (tc.function?.name) name = tc.function.name;
          if (tc.id) id = tc.id;
          if (tc.function?.arguments) {
            args += tc.function.arguments;
            pieces++;
          }
        }
        finish = c.choices[0]?.finish_reason ?? finish;
      }
      assert.equal(name, 'get_weather');
      assert.ok(id.length > 0);
      assert.ok(pieces > 1, 'arguments arrived in several deltas');
      assert.deepEqual(JSON.parse(args), TOOL_ARGS);
      assert.equal(finish, 'tool_calls');
    });

    test('a tool result round trip is accepted', async () => {
      const r = await client().chat.completions.create({
        model,
        messages: [
          { role: 'user', content: 'weather?' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: JSON.stringify(TOOL_ARGS) } }] },
          { role: 'tool', tool_call_id: 'call_1', content: '18C and sunny' },
        ],
        tools: openaiTools,
      });
      assert.equal(r.choices[0]?.finish_reason, 'stop');
    });
  });

  describe(`Anthropic client → ${provider} provider`, () => {
    const client = () => new Anthropic({ apiKey: 'sk-ant-conf', baseURL: gw.url, maxRetries: 0 });

    test('JSON: content, stop reason, usage', async () => {
      const before = mock.stats()[provider];
      const msg = await client().messages.create({ model, max_tokens: 256, system: 'be brief', messages: [{ role: 'user', content: PROMPT }] });
      assert.equal(mock.stats()[provider], before + 1);
      assert.equal(msg.type, 'message');
      assert.equal(msg.role, 'assistant');
      const text = msg.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
      assert.ok(text.length > 20);
      assert.equal(msg.stop_reason, 'end_turn');
      assert.ok(msg.usage.input_tokens > 0 && msg.usage.output_tokens > 0);
    });

    test('stream: the same text as JSON, stop reason and usage in the final message', async () => {
      const json = await client().messages.create({ model, max_tokens: 256, messages: [{ role: 'user', content: PROMPT }] });
      const stream = client().messages.stream({ model, max_tokens: 256, messages: [{ role: 'user', content: PROMPT }] });
      let text = '';
      stream.on('text', (t) => (text += t));
      const final = await stream.finalMessage();
      assert.equal(text, json.content.map((b) => (b.type === 'text' ? b.text : '')).join(''));
      assert.equal(final.stop_reason, 'end_turn');
      assert.equal(final.usage.output_tokens, json.usage.output_tokens);
    });

    test('tools, JSON: a tool_use block with the complete input', async () => {
      const msg = await client().messages.create({ model, max_tokens: 256, messages: [{ role: 'user', content: TOOL_PROMPT }], tools: anthropicTools });
      assert.equal(msg.stop_reason, 'tool_use');
      const block = msg.content.find((b) => b.type === 'tool_use');
      assert.ok(block !== undefined && block.type === 'tool_use');
      assert.equal(block.name, 'get_weather');
      assert.deepEqual(block.input, TOOL_ARGS);
    });

    test('tools, stream: input_json deltas reassemble into the complete input', async () => {
      const stream = client().messages.stream({ model, max_tokens: 256, messages: [{ role: 'user', content: TOOL_PROMPT }], tools: anthropicTools });
      let partial = '';
      stream.on('inputJson', (delta) => (partial += delta));
      const final = await stream.finalMessage();
      const block = final.content.find((b) => b.type === 'tool_use');
      assert.ok(block !== undefined && block.type === 'tool_use');
      assert.deepEqual(block.input, TOOL_ARGS);
      assert.deepEqual(JSON.parse(partial), TOOL_ARGS);
      assert.equal(final.stop_reason, 'tool_use');
    });

    test('a provider error reaches the client as the right Anthropic error', async () => {
      mock.failNext(1, 429);
      await assert.rejects(client().messages.create({ model, max_tokens: 16, messages: [{ role: 'user', content: 'x' }] }), (e: unknown) => e instanceof Anthropic.RateLimitError);
    });
  });
}

test('an OpenAI client sees a provider error as the right OpenAI error, whatever the provider', async () => {
  for (const model of ['gpt-4o-mini', 'claude-sonnet-4-5']) {
    mock.failNext(1, 401);
    await assert.rejects(
      new OpenAI({ apiKey: 'sk-conf', baseURL: `${gw.url}/v1`, maxRetries: 0 }).chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }] }),
      (e: unknown) => e instanceof OpenAI.AuthenticationError,
      model,
    );
  }
});
