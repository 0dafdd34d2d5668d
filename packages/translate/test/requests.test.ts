import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  DEFAULT_ANTHROPIC_MAX_TOKENS,
  TranslationError,
  anthropicRequestToOpenAI,
  openaiRequestToAnthropic,
} from '../src/index.js';
import type { AnthropicMessagesRequest, OpenAIChatRequest, TranslationErrorCode } from '../src/index.js';

const O = { model: 'claude-x' };
const A = { model: 'gpt-x' };

function oreq(extra: Record<string, unknown>, messages: unknown[] = [{ role: 'user', content: 'hi' }]): OpenAIChatRequest {
  return { model: 'gpt-4o', messages, ...extra } as OpenAIChatRequest;
}

function areq(extra: Record<string, unknown>, messages: unknown[] = [{ role: 'user', content: 'hi' }]): AnthropicMessagesRequest {
  return { model: 'claude', max_tokens: 100, messages, ...extra } as AnthropicMessagesRequest;
}

function throwsTranslation(fn: () => unknown, code: TranslationErrorCode, param: string | null): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof TranslationError, `expected TranslationError, got ${String(e)}`);
    assert.equal(e.code, code);
    assert.equal(e.param, param);
    assert.equal(e.name, 'TranslationError');
    return true;
  });
}

describe('OpenAI request -> Anthropic', () => {
  test('model comes from options; max_tokens defaults to the exported constant', () => {
    const out = openaiRequestToAnthropic(oreq({}), { model: 'claude-upstream' });
    assert.equal(out.model, 'claude-upstream');
    assert.equal(DEFAULT_ANTHROPIC_MAX_TOKENS, 4096);
    assert.equal(out.max_tokens, 4096);
    assert.equal(openaiRequestToAnthropic(oreq({}), { model: 'm', defaultMaxTokens: 99 }).max_tokens, 99);
    assert.equal(openaiRequestToAnthropic(oreq({ max_tokens: 10 }), O).max_tokens, 10);
    assert.equal(openaiRequestToAnthropic(oreq({ max_tokens: 10, max_completion_tokens: 20 }), O).max_tokens, 20);
  });

  test('single system message is a string; none means no system field', () => {
    const out = openaiRequestToAnthropic(oreq({}, [{ role: 'system', content: 'S' }, { role: 'user', content: 'u' }]), O);
    assert.equal(out.system, 'S');
    assert.equal(openaiRequestToAnthropic(oreq({}), O).system, undefined);
  });

  test('roles alternate: user/user and assistant/assistant are merged, in order', () => {
    const out = openaiRequestToAnthropic(
      oreq({}, [
        { role: 'user', content: 'a' },
        { role: 'user', content: 'b' },
        { role: 'assistant', content: 'c' },
        { role: 'assistant', content: [{ type: 'text', text: 'd' }] },
        { role: 'user', content: 'e' },
      ]),
      O,
    );
    assert.deepEqual(out.messages, [
      { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'c' }, { type: 'text', text: 'd' }] },
      { role: 'user', content: 'e' },
    ]);
  });

  test('tool_choice mapping table', () => {
    const cases: Array<[unknown, boolean | undefined, unknown]> = [
      ['auto', undefined, { type: 'auto' }],
      ['none', undefined, { type: 'none' }],
      ['required', undefined, { type: 'any' }],
      [{ type: 'function', function: { name: 'f' } }, undefined, { type: 'tool', name: 'f' }],
      ['auto', false, { type: 'auto', disable_parallel_tool_use: true }],
      ['required', false, { type: 'any', disable_parallel_tool_use: true }],
      ['none', false, { type: 'none' }],
      [undefined, false, { type: 'auto', disable_parallel_tool_use: true }],
      [undefined, true, undefined],
      ['auto', true, { type: 'auto' }],
    ];
    for (const [choice, parallel, want] of cases) {
      const extra: Record<string, unknown> = { tools: [{ type: 'function', function: { name: 'f' } }] };
      if (choice !== undefined) extra.tool_choice = choice;
      if (parallel !== undefined) extra.parallel_tool_calls = parallel;
      assert.deepEqual(openaiRequestToAnthropic(oreq(extra), O).tool_choice, want, JSON.stringify({ choice, parallel }));
    }
  });

  test('stop: string, array, empty', () => {
    assert.deepEqual(openaiRequestToAnthropic(oreq({ stop: 'x' }), O).stop_sequences, ['x']);
    assert.deepEqual(openaiRequestToAnthropic(oreq({ stop: ['x', 'y'] }), O).stop_sequences, ['x', 'y']);
    assert.equal(openaiRequestToAnthropic(oreq({ stop: [] }), O).stop_sequences, undefined);
    assert.equal(openaiRequestToAnthropic(oreq({ stop: null }), O).stop_sequences, undefined);
  });

  test('user, else safety_identifier -> metadata.user_id', () => {
    assert.deepEqual(openaiRequestToAnthropic(oreq({ user: 'u1', safety_identifier: 's1' }), O).metadata, { user_id: 'u1' });
    assert.deepEqual(openaiRequestToAnthropic(oreq({ safety_identifier: 's1' }), O).metadata, { user_id: 's1' });
    assert.equal(openaiRequestToAnthropic(oreq({}), O).metadata, undefined);
  });

  test('stream flag passes, stream_options does not', () => {
    const out = openaiRequestToAnthropic(oreq({ stream: true, stream_options: { include_usage: true } }), O);
    assert.equal(out.stream, true);
    assert.equal('stream_options' in out, false);
    assert.equal(openaiRequestToAnthropic(oreq({ stream: false }), O).stream, undefined);
  });

  test('PDF file part -> document block', () => {
    const out = openaiRequestToAnthropic(
      oreq({}, [{ role: 'user', content: [{ type: 'file', file: { filename: 'a.pdf', file_data: 'data:application/pdf;base64,JVBERi0=' } }] }]),
      O,
    );
    assert.deepEqual(out.messages[0]!.content, [
      { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' }, title: 'a.pdf' },
    ]);
  });

  test('assistant refusal and empty content with tool calls', () => {
    const out = openaiRequestToAnthropic(
      oreq({}, [
        { role: 'user', content: 'q' },
        { role: 'assistant', content: '', refusal: 'I cannot.' },
        { role: 'user', content: 'q2' },
        { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] },
      ]),
      O,
    );
    assert.equal(out.messages[1]!.content, 'I cannot.');
    assert.deepEqual(out.messages[3]!.content, [{ type: 'tool_use', id: 'c1', name: 'f', input: { a: 1 } }]);
  });

  test('invalid tool arguments -> invalid_tool_arguments with the JSON path', () => {
    const msgs = (args: string): unknown[] => [
      { role: 'user', content: 'q' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'ok', type: 'function', function: { name: 'f', arguments: '{}' } }, { id: 'c', type: 'function', function: { name: 'f', arguments: args } }] },
    ];
    throwsTranslation(() => openaiRequestToAnthropic(oreq({}, msgs('{"a":')), O), 'invalid_tool_arguments', 'messages[1].tool_calls[1].function.arguments');
    throwsTranslation(() => openaiRequestToAnthropic(oreq({}, msgs('[1,2]')), O), 'invalid_tool_arguments', 'messages[1].tool_calls[1].function.arguments');
    throwsTranslation(() => openaiRequestToAnthropic(oreq({}, msgs('"s"')), O), 'invalid_tool_arguments', 'messages[1].tool_calls[1].function.arguments');
  });

  test('unsupported parameters are rejected with their param', () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ n: 2 }, 'n'],
      [{ logprobs: true }, 'logprobs'],
      [{ top_logprobs: 3 }, 'top_logprobs'],
      [{ logit_bias: { '50256': -100 } }, 'logit_bias'],
      [{ presence_penalty: 0.5 }, 'presence_penalty'],
      [{ frequency_penalty: -1 }, 'frequency_penalty'],
      [{ reasoning_effort: 'high' }, 'reasoning_effort'],
      [{ verbosity: 'low' }, 'verbosity'],
      [{ modalities: ['text', 'audio'] }, 'modalities'],
      [{ audio: { voice: 'alloy', format: 'mp3' } }, 'audio'],
      [{ web_search_options: {} }, 'web_search_options'],
      [{ functions: [{ name: 'f' }] }, 'functions'],
      [{ function_call: 'auto' }, 'function_call'],
      [{ response_format: { type: 'json_object' } }, 'response_format'],
      [{ temperature: 1.5 }, 'temperature'],
      [{ tools: [{ type: 'custom', custom: { name: 'c' } }] }, 'tools[0].type'],
      [{ tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [] } } }, 'tool_choice'],
    ];
    for (const [extra, param] of cases) throwsTranslation(() => openaiRequestToAnthropic(oreq(extra), O), 'unsupported_parameter', param);
  });

  test('neutral values of unsupported fields are accepted and dropped', () => {
    const out = openaiRequestToAnthropic(
      oreq({ n: 1, logprobs: false, presence_penalty: 0, frequency_penalty: 0, seed: 1, reasoning_effort: 'none', verbosity: 'medium', response_format: { type: 'text' }, store: true, logit_bias: {}, modalities: ['text'] }),
      O,
    );
    assert.deepEqual(Object.keys(out).sort(), ['max_tokens', 'messages', 'model']);
  });

  test('unsupported content and roles', () => {
    throwsTranslation(
      () => openaiRequestToAnthropic(oreq({}, [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'x', format: 'wav' } }] }]), O),
      'unsupported_parameter',
      'messages[0].content[0]',
    );
    throwsTranslation(
      () => openaiRequestToAnthropic(oreq({}, [{ role: 'user', content: [{ type: 'file', file: { file_id: 'file-1' } }] }]), O),
      'unsupported_parameter',
      'messages[0].content[0].file',
    );
    throwsTranslation(
      () => openaiRequestToAnthropic(oreq({}, [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/bmp;base64,Qk0=' } }] }]), O),
      'unsupported_parameter',
      'messages[0].content[0].image_url.url',
    );
    throwsTranslation(() => openaiRequestToAnthropic(oreq({}, [{ role: 'function', name: 'f', content: 'x' }]), O), 'unsupported_parameter', 'messages[0].role');
  });

  test('invalid requests', () => {
    throwsTranslation(() => openaiRequestToAnthropic(oreq({}, []), O), 'invalid_request', 'messages');
    throwsTranslation(() => openaiRequestToAnthropic(oreq({}, [{ role: 'robot', content: 'x' }]), O), 'invalid_request', 'messages[0].role');
    throwsTranslation(() => openaiRequestToAnthropic(oreq({}, [{ role: 'tool', content: 'x' }]), O), 'invalid_request', 'messages[0].tool_call_id');
    throwsTranslation(() => openaiRequestToAnthropic(oreq({ max_tokens: 0 }), O), 'invalid_request', 'max_tokens');
    throwsTranslation(() => openaiRequestToAnthropic(oreq({ max_completion_tokens: 1.5 }), O), 'invalid_request', 'max_completion_tokens');
    throwsTranslation(
      () => openaiRequestToAnthropic(oreq({}, [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png,notbase64' } }] }]), O),
      'invalid_request',
      'messages[0].content[0].image_url.url',
    );
    throwsTranslation(
      () => openaiRequestToAnthropic(oreq({}, [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'ftp://x/y.png' } }] }]), O),
      'invalid_request',
      'messages[0].content[0].image_url.url',
    );
    throwsTranslation(() => openaiRequestToAnthropic(oreq({ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'array' } } }] }), O), 'invalid_request', 'tools[0].function.parameters.type');
    throwsTranslation(() => openaiRequestToAnthropic(null as unknown as OpenAIChatRequest, O), 'invalid_request', null);
  });
});

describe('Anthropic request -> OpenAI', () => {
  test('stream always asks for usage', () => {
    const out = anthropicRequestToOpenAI(areq({ stream: true }), A);
    assert.equal(out.stream, true);
    assert.deepEqual(out.stream_options, { include_usage: true });
    const plain = anthropicRequestToOpenAI(areq({}), A);
    assert.equal(plain.stream, undefined);
    assert.equal(plain.stream_options, undefined);
  });

  test('model from options, max_tokens kept as max_tokens', () => {
    const out = anthropicRequestToOpenAI(areq({ max_tokens: 77 }), { model: 'upstream' });
    assert.equal(out.model, 'upstream');
    assert.equal(out.max_tokens, 77);
    assert.equal(out.max_completion_tokens, undefined);
  });

  test('tool_choice mapping table', () => {
    const cases: Array<[unknown, unknown, boolean | undefined]> = [
      [{ type: 'auto' }, 'auto', undefined],
      [{ type: 'any' }, 'required', undefined],
      [{ type: 'none' }, 'none', undefined],
      [{ type: 'tool', name: 'f' }, { type: 'function', function: { name: 'f' } }, undefined],
      [{ type: 'auto', disable_parallel_tool_use: true }, 'auto', false],
      [{ type: 'tool', name: 'f', disable_parallel_tool_use: true }, { type: 'function', function: { name: 'f' } }, false],
      [{ type: 'any', disable_parallel_tool_use: false }, 'required', undefined],
    ];
    for (const [choice, want, parallel] of cases) {
      const out = anthropicRequestToOpenAI(areq({ tool_choice: choice, tools: [{ name: 'f', input_schema: { type: 'object' } }] }), A);
      assert.deepEqual(out.tool_choice, want, JSON.stringify(choice));
      assert.equal(out.parallel_tool_calls, parallel, JSON.stringify(choice));
    }
  });

  test('tool results come first, then the rest of the user turn', () => {
    const out = anthropicRequestToOpenAI(
      areq({}, [
        { role: 'user', content: 'q' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: {} }, { type: 'tool_use', id: 't2', name: 'g', input: { x: 'é' } }] },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'here:' },
            { type: 'tool_result', tool_use_id: 't1', content: 'r1' },
            { type: 'tool_result', tool_use_id: 't2', is_error: true, content: [{ type: 'text', text: 'boom' }, { type: 'text', text: '!' }] },
          ],
        },
      ]),
      A,
    );
    assert.deepEqual(out.messages.slice(1), [
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 't1', type: 'function', function: { name: 'f', arguments: '{}' } },
          { id: 't2', type: 'function', function: { name: 'g', arguments: '{"x":"é"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 't1', content: 'r1' },
      { role: 'tool', tool_call_id: 't2', content: [{ type: 'text', text: 'boom' }, { type: 'text', text: '!' }] },
      { role: 'user', content: 'here:' },
    ]);
  });

  test('documents: PDF -> file part, text -> text part', () => {
    const out = anthropicRequestToOpenAI(
      areq({}, [
        {
          role: 'user',
          content: [
            { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' } },
            { type: 'document', title: 'notes', source: { type: 'text', media_type: 'text/plain', data: 'plain notes' } },
          ],
        },
      ]),
      A,
    );
    assert.deepEqual(out.messages[0], {
      role: 'user',
      content: [
        { type: 'file', file: { file_data: 'data:application/pdf;base64,JVBERi0=', filename: 'document.pdf' } },
        { type: 'text', text: 'plain notes' },
      ],
    });
  });

  test('unsupported parameters are rejected with their param', () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ top_k: 5 }, 'top_k'],
      [{ thinking: { type: 'enabled', budget_tokens: 2000 } }, 'thinking'],
      [{ thinking: { type: 'adaptive' } }, 'thinking'],
      [{ container: 'c1' }, 'container'],
      [{ mcp_servers: [{ type: 'url', url: 'https://x', name: 'x' }] }, 'mcp_servers'],
      [{ output_config: { effort: 'low' } }, 'output_config.effort'],
      [{ tools: [{ type: 'web_search_20250305', name: 'web_search' }] }, 'tools[0]'],
    ];
    for (const [extra, param] of cases) throwsTranslation(() => anthropicRequestToOpenAI(areq(extra), A), 'unsupported_parameter', param);
    throwsTranslation(
      () => anthropicRequestToOpenAI(areq({}, [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: [{ type: 'image', source: { type: 'url', url: 'https://x/y.png' } }] }] }]), A),
      'unsupported_parameter',
      'messages[0].content[0].content[0]',
    );
    throwsTranslation(
      () => anthropicRequestToOpenAI(areq({}, [{ role: 'assistant', content: [{ type: 'server_tool_use', id: 's', name: 'web_search', input: {} }] }]), A),
      'unsupported_parameter',
      'messages[0].content[0].type',
    );
    throwsTranslation(
      () => anthropicRequestToOpenAI(areq({}, [{ role: 'user', content: [{ type: 'document', source: { type: 'url', url: 'https://x/a.pdf' } }] }]), A),
      'unsupported_parameter',
      'messages[0].content[0].source',
    );
  });

  test('invalid requests', () => {
    throwsTranslation(() => anthropicRequestToOpenAI(areq({}, []), A), 'invalid_request', 'messages');
    throwsTranslation(() => anthropicRequestToOpenAI(areq({ max_tokens: undefined }), A), 'invalid_request', 'max_tokens');
    throwsTranslation(() => anthropicRequestToOpenAI(areq({}, [{ role: 'system', content: 'x' }]), A), 'invalid_request', 'messages[0].role');
    throwsTranslation(() => anthropicRequestToOpenAI(areq({ tool_choice: { type: 'tool' } }), A), 'invalid_request', 'tool_choice.name');
    throwsTranslation(() => anthropicRequestToOpenAI(areq({ system: [{ type: 'image' }] }), A), 'invalid_request', 'system[0]');
  });

  test('round trip OpenAI -> Anthropic -> OpenAI keeps a tool conversation', () => {
    const original = oreq({ tools: [{ type: 'function', function: { name: 'f', description: 'd', parameters: { type: 'object', properties: {} } } }], tool_choice: 'required', stop: ['x'], max_tokens: 50 }, [
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'q' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":[1,"é"]}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'r' },
      { role: 'assistant', content: 'done' },
    ]);
    const back = anthropicRequestToOpenAI(openaiRequestToAnthropic(original, O), { model: 'gpt-4o' });
    assert.deepEqual(back, original);
  });
});
