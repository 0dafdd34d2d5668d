/**
 * Conformance of the other APIs clients call (issue 16) with the official `openai` and
 * `@anthropic-ai/sdk` clients, against the mock provider (a real local HTTP server): the
 * Responses API passed through to an OpenAI-API provider and translated to an Anthropic one
 * (JSON and streams, tools, a multi-turn tool loop), stored responses read and deleted,
 * embeddings, model lookup and listing (also with the shipped configuration), token counting.
 * Each request's capture (route, usage, stages) is checked.
 */
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { costUsd, loadConfigFile, parseConfig, priceLookup } from '@sightline/config';
import type { RequestRow, SpanRow } from '@sightline/core';
import { startGateway, type GatewayHandle } from '@sightline/app-gateway';
import { startMock, type MockServer } from '../../../bench/mock/server.js';
import { CapturedBus } from '../../../test/support/captured.js';

let mock: MockServer;
let gw: GatewayHandle;
const cap = new CapturedBus();

const TOOL_ARGS = { location: 'Paris', unit: 'celsius' };
const PROMPT = 'Say hello in a few words';
const TOOL_PROMPT = 'What is the weather? use tool';
const GPT = 'gpt-4o-mini';
const CLAUDE = 'claude-sonnet-4-5';

before(async () => {
  mock = await startMock({ chunks: 6, responseBytes: 80 });
  const config = parseConfig(
    `
gateway: { host: 127.0.0.1, port: 0 }
providers:
  oa: { type: openai-compatible, base_url: "${mock.url}/v1" }
  # A key, so the gateway reads the provider's model list (an anthropic provider without one is not asked).
  an: { type: anthropic, base_url: "${mock.url}", api_key: sk-ant-provider }
routes:
  - { match: "gpt-*", provider: oa }
  - { match: "text-embedding-*", provider: oa }
  - { match: "claude-*", provider: an }
  - { match: "embed-claude", provider: an }
capture: { flush_interval_ms: 5 }
`,
    'conformance-apis.yaml',
  );
  gw = await startGateway({ config, publisher: cap.bus, instance: 'gw-apis' });
});

after(async () => {
  await gw.close(2000);
  await mock.close();
});

const oa = () => new OpenAI({ apiKey: 'sk-conf', baseURL: `${gw.url}/v1`, maxRetries: 0 });
const an = () => new Anthropic({ apiKey: 'sk-ant-conf', baseURL: gw.url, maxRetries: 0 });

const tools: OpenAI.Responses.FunctionTool[] = [
  { type: 'function', name: 'get_weather', description: 'Weather for a city', strict: false, parameters: { type: 'object', properties: { location: { type: 'string' }, unit: { type: 'string' } }, required: ['location'] } },
];

async function captured(response: Response): Promise<{ request: RequestRow; spans: SpanRow[] }> {
  const id = response.headers.get('x-sightline-trace-id');
  assert.ok(id !== null, 'the answer names its trace');
  return cap.captured(id);
}

const stageNames = (spans: SpanRow[]): string[] => spans.filter((s) => s.is_root === 0 && s.name !== 'upstream.attempt').sort((a, b) => Number(BigInt(a.start_time_unix_nano) - BigInt(b.start_time_unix_nano))).map((s) => s.name);

/** Text, function calls and the final response of a Responses API stream. */
async function drain(stream: AsyncIterable<OpenAI.Responses.ResponseStreamEvent>): Promise<{ text: string; args: string; final: OpenAI.Responses.Response | null; types: string[] }> {
  let text = '';
  let args = '';
  let final: OpenAI.Responses.Response | null = null;
  const types: string[] = [];
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    else if (ev.type === 'response.function_call_arguments.delta') args += ev.delta;
    else if (ev.type === 'response.completed') final = ev.response;
  }
  return { text, args, final, types };
}

function functionCall(r: OpenAI.Responses.Response): OpenAI.Responses.ResponseFunctionToolCall {
  const call = r.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call');
  assert.ok(call !== undefined, `a function_call in ${JSON.stringify(r.output)}`);
  return call;
}

for (const model of [GPT, CLAUDE]) {
  const provider = model === GPT ? 'openai' : 'anthropic';
  const how = model === GPT ? 'passed through to' : 'translated for';
  describe(`Responses API ${how} an ${provider} provider`, () => {
    test('JSON: output text, status, usage; the provider served it in its own API; captured with its usage', async () => {
      const before = mock.stats();
      const { data, response } = await oa().responses.create({ model, input: PROMPT, instructions: 'be brief' }).withResponse();
      const after = mock.stats();
      assert.equal(after[provider], before[provider] + 1, `the ${provider} API served it`);
      assert.equal(after.responses - before.responses, provider === 'openai' ? 1 : 0);
      assert.equal(data.object, 'response');
      assert.equal(data.status, 'completed');
      assert.ok(data.output_text.length > 20, data.output_text);
      assert.equal(data.instructions, 'be brief');
      const u = data.usage!;
      assert.ok(u.input_tokens > 0 && u.output_tokens > 0);
      assert.equal(u.total_tokens, u.input_tokens + u.output_tokens);
      const up = mock.lastRequests().at(-1)!;
      if (provider === 'openai') {
        assert.equal(up.path, '/v1/responses');
        assert.deepEqual(up.body, { model, input: PROMPT, instructions: 'be brief' }, 'the request went upstream as sent');
      } else {
        assert.equal(up.path, '/v1/messages');
        assert.deepEqual((up.body as { system: unknown }).system, 'be brief');
      }
      const { request, spans } = await captured(response);
      assert.equal(request.route, '/v1/responses');
      assert.equal(request.provider, model === GPT ? 'oa' : 'an');
      assert.equal(request.http_status, 200);
      assert.equal(request.input_tokens, u.input_tokens);
      assert.equal(request.output_tokens, u.output_tokens);
      assert.equal(request.response_model, model);
      // The stages of a chat request (a new connection adds upstream.connect).
      assert.deepEqual(
        stageNames(spans).filter((n) => n !== 'upstream.connect'),
        ['ingress.read', 'parse', 'auth', 'route', 'translate.request', 'upstream.send', 'upstream.wait', 'upstream.stream', 'translate.response', 'egress.write'],
      );
    });

    test('stream: typed events, the same text as JSON, usage in response.completed; captured with its usage and first token', async () => {
      const json = await oa().responses.create({ model, input: PROMPT });
      const { data: stream, response } = await oa().responses.create({ model, input: PROMPT, stream: true }).withResponse();
      const { text, final, types } = await drain(stream);
      assert.equal(text, json.output_text);
      assert.equal(types[0], 'response.created');
      assert.equal(types.at(-1), 'response.completed');
      assert.ok(types.includes('response.output_item.done'));
      assert.ok(final !== null);
      assert.equal(final.status, 'completed');
      assert.equal(final.usage?.output_tokens, json.usage?.output_tokens);
      assert.equal(final.usage?.input_tokens, json.usage?.input_tokens);
      const { request } = await captured(response);
      assert.equal(request.stream, 1);
      assert.equal(request.input_tokens, final.usage?.input_tokens);
      assert.equal(request.output_tokens, final.usage?.output_tokens);
      assert.ok(BigInt(request.ttft_ns) > 0n, 'the first token was seen');
    });

    test('tools, JSON and stream: a function_call with complete arguments', async () => {
      const r = await oa().responses.create({ model, input: TOOL_PROMPT, tools });
      const call = functionCall(r);
      assert.equal(call.name, 'get_weather');
      assert.deepEqual(JSON.parse(call.arguments), TOOL_ARGS);
      assert.ok(call.call_id.length > 0);
      const s = await drain(await oa().responses.create({ model, input: TOOL_PROMPT, tools, stream: true }));
      assert.deepEqual(JSON.parse(s.args), TOOL_ARGS);
      assert.ok(s.final !== null);
      assert.deepEqual(JSON.parse(functionCall(s.final).arguments), TOOL_ARGS);
    });

    test('a multi-turn tool loop: function_call, then function_call_output, then the final answer (JSON and stream)', async () => {
      for (const stream of [false, true]) {
        const first = stream ? (await drain(await oa().responses.create({ model, input: TOOL_PROMPT, tools, stream: true }))).final! : await oa().responses.create({ model, input: TOOL_PROMPT, tools });
        const call = functionCall(first);
        const input: OpenAI.Responses.ResponseInputItem[] = [
          { role: 'user', content: TOOL_PROMPT },
          call,
          { type: 'function_call_output', call_id: call.call_id, output: '18C and sunny' },
        ];
        const before = mock.lastRequests().length;
        if (stream) {
          const { data: s, response } = await oa().responses.create({ model, input, tools, stream: true }).withResponse();
          const done = await drain(s);
          assert.ok(done.text.length > 20, 'a final answer in text');
          assert.ok(done.final !== null && done.final.output.every((o) => o.type === 'message'));
          const { request } = await captured(response);
          assert.equal(request.output_tokens, done.final.usage?.output_tokens);
        } else {
          const final = await oa().responses.create({ model, input, tools });
          assert.equal(final.status, 'completed');
          assert.ok(final.output_text.length > 20);
          assert.ok(final.output.every((o) => o.type === 'message'));
        }
        const up = mock.lastRequests()[before]!;
        if (provider === 'anthropic') {
          // The loop reached Anthropic as tool_use and tool_result blocks that refer to each other.
          const messages = (up.body as { messages: { role: string; content: { type: string; id?: string; tool_use_id?: string; content?: unknown }[] }[] }).messages;
          assert.deepEqual(messages.map((m) => m.role), ['user', 'assistant', 'user']);
          assert.equal(messages[1]!.content[0]!.type, 'tool_use');
          assert.equal(messages[1]!.content[0]!.id, call.call_id);
          assert.equal(messages[2]!.content[0]!.type, 'tool_result');
          assert.equal(messages[2]!.content[0]!.tool_use_id, call.call_id);
          assert.equal(messages[2]!.content[0]!.content, '18C and sunny');
        } else {
          assert.equal(up.path, '/v1/responses');
        }
      }
    });
  });
}

test('Responses API to an Anthropic provider: previous_response_id and store: true are a 400 naming the field, in the OpenAI shape', async () => {
  for (const [params, param] of [
    [{ previous_response_id: 'resp_123' }, 'previous_response_id'],
    [{ store: true }, 'store'],
  ] as const) {
    const before = mock.stats().requests;
    const err = await oa()
      .responses.create({ model: CLAUDE, input: PROMPT, ...params })
      .then(() => null, (e: unknown) => e);
    assert.ok(err instanceof OpenAI.BadRequestError, String(err));
    assert.equal(err.param, param);
    assert.equal(err.code, 'translation_failed');
    assert.match(err.message, /keeps no state|keeps responses/);
    assert.equal(mock.stats().requests, before, 'nothing went upstream');
    const id = err.headers?.get('x-sightline-trace-id');
    assert.ok(id !== null && id !== undefined);
    const { request, spans } = await cap.captured(id);
    assert.equal(request.error_type, 'translation_failed');
    assert.equal(spans.find((s) => s.status_code === 'ERROR' && s.is_root === 0)?.name, 'translate.request');
  }
});

test('stored responses: GET and DELETE /v1/responses/{id} reach the OpenAI-API provider; a read counts no tokens; ?model= picks the route', async () => {
  const made = await oa().responses.create({ model: GPT, input: PROMPT });
  const { data: got, response } = await oa().responses.retrieve(made.id).withResponse();
  assert.equal(got.id, made.id);
  assert.equal(got.output_text, made.output_text);
  assert.equal(mock.lastRequests().at(-1)!.path, `/v1/responses/${made.id}`);
  const read = await captured(response);
  assert.equal(read.request.method, 'GET');
  assert.equal(read.request.route, '/v1/responses/{id}', 'the route template, not the id');
  assert.equal(read.request.provider, 'oa');
  assert.equal(read.request.input_tokens, 0, 'the stored usage is not counted again');
  assert.equal(read.request.output_tokens, 0);

  const withModel = await oa().responses.retrieve(made.id, {}, { query: { model: GPT } });
  assert.equal(withModel.id, made.id);
  assert.equal(mock.lastRequests().at(-1)!.path, `/v1/responses/${made.id}`, 'the gateway\'s own query parameter is not sent upstream');

  const { response: delResponse } = await oa().responses.delete(made.id).withResponse();
  assert.equal(delResponse.status, 200);
  assert.equal(mock.lastRequests().at(-1)!.method, 'DELETE');
  assert.equal((await captured(delResponse)).request.method, 'DELETE');
  await assert.rejects(oa().responses.retrieve(made.id), (e: unknown) => e instanceof OpenAI.NotFoundError);

  // A route to Anthropic keeps nothing; a model no route matches is not served.
  await assert.rejects(oa().responses.retrieve(made.id, {}, { query: { model: CLAUDE } }), (e: unknown) => e instanceof OpenAI.BadRequestError && e.code === 'unsupported_route' && /keeps no responses/.test(e.message));
  await assert.rejects(oa().responses.retrieve(made.id, {}, { query: { model: 'llama-3' } }), (e: unknown) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
});

describe('embeddings', () => {
  const direct = async (body: Record<string, unknown>): Promise<unknown> => (await fetch(`${mock.url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })).json();

  test('float and base64, strings, arrays and token arrays: the provider\'s answer unchanged; captured with input tokens and a cost', async () => {
    const priceOf = priceLookup([]);
    for (const input of ['one text', ['two', 'texts'], [1, 2, 3, 4, 5], [[1, 2], [3, 4, 5]]] as const) {
      for (const encoding_format of ['float', 'base64'] as const) {
        const body = { model: 'text-embedding-3-small', input: input as string | string[] | number[] | number[][], encoding_format, dimensions: 8 };
        const { data, response } = await oa().embeddings.create(body).withResponse();
        assert.deepEqual(data, await direct(body), `${JSON.stringify(input)} ${encoding_format}`);
        if (encoding_format === 'base64') assert.equal(typeof data.data[0]!.embedding, 'string', 'base64 passed through untouched');
        const { request, spans } = await captured(response);
        assert.equal(request.route, '/v1/embeddings');
        assert.equal(request.input_tokens, data.usage.prompt_tokens);
        assert.equal(request.output_tokens, 0);
        assert.ok(request.input_tokens > 0);
        assert.ok((costUsd(priceOf(request.model), request.input_tokens, request.output_tokens, 0, 0) ?? 0) > 0, 'the shipped prices price it');
        assert.ok(stageNames(spans).includes('upstream.wait'));
      }
    }
    // The SDK's default asks for base64 and decodes it: the same numbers as float.
    const decoded = await oa().embeddings.create({ model: 'text-embedding-3-small', input: 'one text', dimensions: 8 });
    const floats = (await direct({ model: 'text-embedding-3-small', input: 'one text', dimensions: 8, encoding_format: 'float' })) as { data: { embedding: number[] }[] };
    assert.deepEqual([...decoded.data[0]!.embedding], floats.data[0]!.embedding);
  });

  test('a model routed to an Anthropic provider: a clear 400, nothing sent upstream', async () => {
    const before = mock.stats().requests;
    const err = await oa()
      .embeddings.create({ model: 'embed-claude', input: 'x' })
      .then(() => null, (e: unknown) => e);
    assert.ok(err instanceof OpenAI.BadRequestError, String(err));
    assert.equal(err.code, 'unsupported_route');
    assert.match(err.message, /provider an \(Anthropic Messages API\), which has no embeddings endpoint/);
    assert.equal(mock.stats().requests, before);
  });
});

describe('models', () => {
  test('retrieve in both shapes, consistent with the list; an unknown or unrouted model is a 404', async () => {
    const listed = (await oa().models.list()).data;
    const ids = listed.map((m) => m.id);
    // The provider's models that a route sends to it, under their own names.
    for (const id of ['gpt-4o-mini', 'text-embedding-3-small', 'claude-sonnet-4-5', 'claude-haiku-4-5']) assert.ok(ids.includes(id), `${id} in ${ids.join(', ')}`);
    assert.ok(!ids.includes('o4-mini'), 'a model no route sends anywhere is not listed');
    for (const m of listed) assert.deepEqual(await oa().models.retrieve(m.id), m, 'every listed model is retrieved as listed');
    const gpt = await oa().models.retrieve('gpt-4o-mini');
    assert.deepEqual(gpt, { id: 'gpt-4o-mini', object: 'model', created: 1721172741, owned_by: 'oa' });
    const claude = await an().models.retrieve('claude-sonnet-4-5');
    assert.deepEqual(claude, { type: 'model', id: 'claude-sonnet-4-5', display_name: 'Claude Sonnet 4.5', created_at: '2025-09-29T00:00:00Z' });
    const anList = [];
    for await (const m of an().models.list()) anList.push(m);
    assert.deepEqual(anList.map((m) => m.id), ids, 'the same models in Anthropic\'s shape');
    // Routed by a pattern, but the provider (whose list is known) does not offer it.
    await assert.rejects(oa().models.retrieve('gpt-nonexistent'), (e: unknown) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
    await assert.rejects(an().models.retrieve('llama-3'), (e: unknown) => e instanceof Anthropic.NotFoundError);
  });

  test('the shipped configuration pointed at the mock: models.list from both SDKs returns the mock\'s models', async () => {
    const spool = mkdtempSync(join(tmpdir(), 'sl-models-'));
    const env: Record<string, string> = {
      OPENAI_BASE_URL: `${mock.url}/v1`,
      ANTHROPIC_BASE_URL: mock.url,
      OPENAI_API_KEY: 'sk-shipped-test',
      ANTHROPIC_API_KEY: 'sk-ant-shipped-test',
      SIGHTLINE_SPOOL_DIR: spool,
    };
    const config = loadConfigFile(fileURLToPath(new URL('../../../config/sightline.yaml', import.meta.url)), { env: (name) => env[name] });
    const shipped = new CapturedBus();
    const g = await startGateway({ config, publisher: shipped.bus, instance: 'gw-shipped', port: 0, h2cPort: null, host: '127.0.0.1' });
    try {
      const openaiIds = ((await (await fetch(`${mock.url}/v1/models`)).json()) as { data: { id: string }[] }).data.map((m) => m.id);
      const anthropicIds = ((await (await fetch(`${mock.url}/v1/models`, { headers: { 'anthropic-version': '2023-06-01' } })).json()) as { data: { id: string }[] }).data.map((m) => m.id);
      const expected = [...openaiIds, ...anthropicIds].sort();
      const fromOpenAI = (await new OpenAI({ apiKey: 'sk-x', baseURL: `${g.url}/v1`, maxRetries: 0 }).models.list()).data.map((m) => m.id);
      const fromAnthropic: string[] = [];
      for await (const m of new Anthropic({ apiKey: 'sk-x', baseURL: g.url, maxRetries: 0 }).models.list()) fromAnthropic.push(m.id);
      assert.deepEqual([...fromOpenAI].sort(), expected);
      assert.deepEqual([...fromAnthropic].sort(), expected);
      // The provider keys went with the background fetch; no client key did.
      const fetches = mock.lastRequests().filter((r) => r.path.startsWith('/v1/models') && (r.headers.authorization === 'Bearer sk-shipped-test' || r.headers['x-api-key'] === 'sk-ant-shipped-test'));
      assert.equal(fetches.length, 2);
    } finally {
      await g.close(2000);
      rmSync(spool, { recursive: true, force: true });
    }
  });
});

describe('token counting', () => {
  const QUESTION = 'How many tokens is this? Ünïcödé counts in bytes.';
  const body = {
    system: 'You count.',
    messages: [
      { role: 'user' as const, content: QUESTION },
      { role: 'assistant' as const, content: [{ type: 'text' as const, text: 'Let me see.' }] },
      { role: 'user' as const, content: 'And this.' },
    ],
  };

  test('an Anthropic provider counts; the answer is its own, and costs nothing', async () => {
    const before = mock.stats().countTokens;
    const { data, response } = await an().messages.countTokens({ model: CLAUDE, ...body }).withResponse();
    assert.equal(mock.stats().countTokens, before + 1);
    const direct = (await (await fetch(`${mock.url}/v1/messages/count_tokens`, { method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, body: JSON.stringify({ model: CLAUDE, ...body }) })).json()) as { input_tokens: number };
    assert.deepEqual(data, direct);
    assert.equal(response.headers.get('x-sightline-token-count'), null);
    const { request } = await captured(response);
    assert.equal(request.route, '/v1/messages/count_tokens');
    assert.equal(request.dialect, 'anthropic');
    assert.equal(request.provider, 'an');
    assert.equal(request.input_tokens, 0, 'counting is free: no tokens are captured as spent');
  });

  test('an OpenAI-API provider: the gateway\'s estimate, flagged by a header; nothing goes upstream', async () => {
    const before = mock.stats().requests;
    const { data, response } = await an().messages.countTokens({ model: GPT, ...body }).withResponse();
    assert.equal(mock.stats().requests, before);
    assert.equal(response.headers.get('x-sightline-token-count'), 'estimate');
    const bytes = Buffer.byteLength('You count.') + Buffer.byteLength(QUESTION) + Buffer.byteLength('Let me see.') + Buffer.byteLength('And this.');
    assert.deepEqual(data, { input_tokens: Math.ceil(bytes / 4) });
    const { request, spans } = await captured(response);
    assert.equal(request.http_status, 200);
    assert.equal(request.provider, '');
    assert.equal(request.input_tokens, 0);
    assert.deepEqual(stageNames(spans), ['ingress.read', 'parse', 'auth', 'route', 'translate.request', 'translate.response', 'egress.write']);
    assert.equal(request.upstream_ns, '0');
  });
});
