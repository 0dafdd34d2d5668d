import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  anthropicResponseToOpenAI,
  anthropicStopReasonToOpenAI,
  anthropicUsageToOpenAI,
  openaiFinishReasonToAnthropic,
  openaiResponseToAnthropic,
  openaiUsageToAnthropic,
} from '../src/index.js';
import type { AnthropicMessage, OpenAIChatCompletion } from '../src/index.js';

const AO = { responseModel: 'gpt-client', created: 1700000000 };
const OA = { responseModel: 'claude-client' };

function amsg(extra: Partial<AnthropicMessage>): AnthropicMessage {
  return {
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    model: 'claude-upstream',
    content: [],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 1, output_tokens: 1 },
    ...extra,
  };
}

function ocmp(message: Record<string, unknown>, finish: string | null, usage?: Record<string, unknown>): OpenAIChatCompletion {
  const out: Record<string, unknown> = {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: 'gpt-upstream',
    choices: [{ index: 0, message: { role: 'assistant', content: null, refusal: null, ...message }, finish_reason: finish, logprobs: null }],
  };
  if (usage !== undefined) out.usage = usage;
  return out as unknown as OpenAIChatCompletion;
}

describe('stop / finish reason tables', () => {
  test('Anthropic stop_reason -> OpenAI finish_reason', () => {
    const table: Array<[string | null, string]> = [
      ['end_turn', 'stop'],
      ['stop_sequence', 'stop'],
      ['max_tokens', 'length'],
      ['model_context_window_exceeded', 'length'],
      ['tool_use', 'tool_calls'],
      ['refusal', 'content_filter'],
      ['pause_turn', 'stop'],
      [null, 'stop'],
      ['something_new', 'stop'],
    ];
    for (const [a, o] of table) {
      assert.equal(anthropicStopReasonToOpenAI(a), o, String(a));
      const res = anthropicResponseToOpenAI(amsg({ stop_reason: a as AnthropicMessage['stop_reason'] }), AO);
      assert.equal(res.choices[0]!.finish_reason, o, String(a));
    }
  });

  test('OpenAI finish_reason -> Anthropic stop_reason', () => {
    const table: Array<[string | null, string]> = [
      ['stop', 'end_turn'],
      ['length', 'max_tokens'],
      ['tool_calls', 'tool_use'],
      ['function_call', 'tool_use'],
      ['content_filter', 'refusal'],
      [null, 'end_turn'],
    ];
    for (const [o, a] of table) {
      assert.equal(openaiFinishReasonToAnthropic(o), a, String(o));
      assert.equal(openaiResponseToAnthropic(ocmp({ content: 'x' }, o), OA).message.stop_reason, a, String(o));
    }
  });
});

describe('usage', () => {
  test('Anthropic usage -> OpenAI: cache reads and writes are prompt tokens', () => {
    assert.deepEqual(anthropicUsageToOpenAI({ input_tokens: 10, cache_read_input_tokens: 100, cache_creation_input_tokens: 1000, output_tokens: 5 }), {
      prompt_tokens: 1110,
      completion_tokens: 5,
      total_tokens: 1115,
      prompt_tokens_details: { cached_tokens: 100 },
    });
    assert.deepEqual(anthropicUsageToOpenAI({ input_tokens: 10, cache_read_input_tokens: null, output_tokens: 5 }), {
      prompt_tokens: 10,
      completion_tokens: 5,
      total_tokens: 15,
      prompt_tokens_details: { cached_tokens: 0 },
    });
  });

  test('OpenAI usage -> Anthropic: cached tokens leave input_tokens', () => {
    assert.deepEqual(openaiUsageToAnthropic({ prompt_tokens: 2000, completion_tokens: 7, prompt_tokens_details: { cached_tokens: 1536 } }), {
      input_tokens: 464,
      output_tokens: 7,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 1536,
    });
    assert.deepEqual(openaiUsageToAnthropic({ prompt_tokens: 20, completion_tokens: 7 }), {
      input_tokens: 20,
      output_tokens: 7,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    });
  });

  test('round trip of usage numbers', () => {
    const a = { input_tokens: 30, cache_read_input_tokens: 70, cache_creation_input_tokens: 0, output_tokens: 9 };
    assert.deepEqual(openaiUsageToAnthropic(anthropicUsageToOpenAI(a)), a);
  });
});

describe('Anthropic response -> OpenAI', () => {
  test('text only: content string, no tool_calls field', () => {
    const res = anthropicResponseToOpenAI(amsg({ content: [{ type: 'text', text: 'Hi é 🙂' }] }), AO);
    assert.deepEqual(res.choices[0]!.message, { role: 'assistant', content: 'Hi é 🙂', refusal: null });
    assert.equal(res.model, 'gpt-client');
    assert.equal(res.created, 1700000000);
    assert.equal(res.id, 'msg_1');
    assert.equal(res.object, 'chat.completion');
  });

  test('tool only: content null; redacted thinking and server blocks dropped', () => {
    const content = [
      { type: 'redacted_thinking', data: 'xx' },
      { type: 'server_tool_use', id: 'srv', name: 'web_search', input: { q: 'x' } },
      { type: 'tool_use', id: 'toolu_9', name: 'f', input: {} },
    ] as unknown as AnthropicMessage['content'];
    const res = anthropicResponseToOpenAI(amsg({ content, stop_reason: 'tool_use' }), AO);
    assert.deepEqual(res.choices[0]!.message, {
      role: 'assistant',
      content: null,
      refusal: null,
      tool_calls: [{ id: 'toolu_9', type: 'function', function: { name: 'f', arguments: '{}' } }],
    });
  });

  test('empty content: empty string', () => {
    assert.equal(anthropicResponseToOpenAI(amsg({ content: [] }), AO).choices[0]!.message.content, '');
  });
});

describe('OpenAI response -> Anthropic', () => {
  test('text: one text block, ids and model', () => {
    const { message, invalidToolArguments } = openaiResponseToAnthropic(ocmp({ content: 'Hello 你好' }, 'stop', { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 }), OA);
    assert.deepEqual(message, {
      id: 'chatcmpl-1',
      type: 'message',
      role: 'assistant',
      model: 'claude-client',
      content: [{ type: 'text', text: 'Hello 你好' }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 5, output_tokens: 2, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    });
    assert.deepEqual(invalidToolArguments, []);
  });

  test("'stop' with tool calls becomes tool_use; empty arguments are {}", () => {
    const { message } = openaiResponseToAnthropic(
      ocmp({ content: '', tool_calls: [{ id: 'c', type: 'function', function: { name: 'now', arguments: '' } }] }, 'stop'),
      OA,
    );
    assert.equal(message.stop_reason, 'tool_use');
    assert.deepEqual(message.content, [{ type: 'tool_use', id: 'c', name: 'now', input: {} }]);
  });

  test('invalid arguments: {} sent, defect recorded', () => {
    const { message, invalidToolArguments } = openaiResponseToAnthropic(
      ocmp({ tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '[1]' } }, { id: 'c2', type: 'function', function: { name: 'g', arguments: 'nope' } }] }, 'tool_calls'),
      OA,
    );
    assert.deepEqual(message.content, [
      { type: 'tool_use', id: 'c1', name: 'f', input: {} },
      { type: 'tool_use', id: 'c2', name: 'g', input: {} },
    ]);
    assert.deepEqual(invalidToolArguments, [
      { id: 'c1', name: 'f', arguments: '[1]' },
      { id: 'c2', name: 'g', arguments: 'nope' },
    ]);
  });

  test('refusal: text block and stop_reason refusal', () => {
    const { message } = openaiResponseToAnthropic(ocmp({ refusal: "I can't help with that." }, 'stop'), OA);
    assert.deepEqual(message.content, [{ type: 'text', text: "I can't help with that." }]);
    assert.equal(message.stop_reason, 'refusal');
  });

  test('legacy function_call becomes tool_use', () => {
    const { message } = openaiResponseToAnthropic(ocmp({ function_call: { name: 'f', arguments: '{"a":1}' } }, 'function_call'), OA);
    assert.deepEqual(message.content, [{ type: 'tool_use', id: 'chatcmpl-1_fc', name: 'f', input: { a: 1 } }]);
    assert.equal(message.stop_reason, 'tool_use');
  });

  test('no choices and no usage: empty message with zero usage', () => {
    const res = { id: 'x', object: 'chat.completion', created: 1, model: 'm', choices: [] } as unknown as OpenAIChatCompletion;
    const { message } = openaiResponseToAnthropic(res, OA);
    assert.deepEqual(message.content, []);
    assert.equal(message.stop_reason, 'end_turn');
    assert.deepEqual(message.usage, { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
  });

  test('round trip Anthropic -> OpenAI -> Anthropic keeps content and stop reason', () => {
    const original = amsg({
      content: [
        { type: 'text', text: 'Let me look.' },
        { type: 'tool_use', id: 'toolu_1', name: 'search', input: { q: 'é 🙂', n: [1, 2] } },
      ],
      stop_reason: 'tool_use',
      usage: { input_tokens: 3, output_tokens: 4, cache_read_input_tokens: 5, cache_creation_input_tokens: 0 },
    });
    const { message } = openaiResponseToAnthropic(anthropicResponseToOpenAI(original, AO), { responseModel: 'claude-upstream' });
    assert.deepEqual(message, original);
  });
});
