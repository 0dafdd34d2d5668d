/** OpenAI Responses API <-> Anthropic Messages: requests, refusals and JSON responses. */

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  DEFAULT_ANTHROPIC_MAX_TOKENS,
  TranslationError,
  anthropicResponseToResponses,
  anthropicUsageToResponses,
  responsesRequestToAnthropic,
  responsesStatus,
  translationErrorToOpenAI,
} from '../src/index.js';
import type { AnthropicMessage, ResponsesRequest, TranslationErrorCode } from '../src/index.js';

const O = { model: 'claude-x' };

function rreq(extra: Record<string, unknown>, input: unknown = 'hi'): ResponsesRequest {
  return { model: 'gpt-4o', input, ...extra } as ResponsesRequest;
}

function throwsTranslation(fn: () => unknown, code: TranslationErrorCode, param: string | null, message?: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof TranslationError, `expected TranslationError, got ${String(e)}`);
    assert.equal(e.code, code);
    assert.equal(e.param, param);
    if (message !== undefined) assert.match(e.message, message);
    return true;
  });
}

function message(content: unknown[], stop: string | null = 'end_turn', usage: Record<string, unknown> = { input_tokens: 5, output_tokens: 7 }): AnthropicMessage {
  return { id: 'msg_abc', type: 'message', role: 'assistant', model: 'claude', content, stop_reason: stop, stop_sequence: null, usage } as unknown as AnthropicMessage;
}

const OPTS = { responseModel: 'gpt-4o', createdAt: 1 };

// ---------------------------------------------------------------- requests

describe('Responses request -> Anthropic', () => {
  test('model from options; max_output_tokens -> max_tokens, defaulting to the exported constant', () => {
    assert.equal(responsesRequestToAnthropic(rreq({}), { model: 'up' }).model, 'up');
    assert.equal(responsesRequestToAnthropic(rreq({}), O).max_tokens, DEFAULT_ANTHROPIC_MAX_TOKENS);
    assert.equal(responsesRequestToAnthropic(rreq({}), { model: 'm', defaultMaxTokens: 99 }).max_tokens, 99);
    assert.equal(responsesRequestToAnthropic(rreq({ max_output_tokens: 10 }), O).max_tokens, 10);
    throwsTranslation(() => responsesRequestToAnthropic(rreq({ max_output_tokens: 0 }), O), 'invalid_request', 'max_output_tokens');
  });

  test('a string input is one user message; instructions alone are the system string', () => {
    const out = responsesRequestToAnthropic(rreq({ instructions: 'Be brief.' }, 'Hello'), O);
    assert.deepEqual(out, { model: 'claude-x', max_tokens: DEFAULT_ANTHROPIC_MAX_TOKENS, messages: [{ role: 'user', content: 'Hello' }], system: 'Be brief.' });
  });

  test('messages without `type` (EasyInputMessage) and with it are the same; empty texts are skipped', () => {
    const a = responsesRequestToAnthropic(rreq({}, [{ role: 'user', content: 'x' }, { role: 'assistant', content: '' }]), O);
    const b = responsesRequestToAnthropic(rreq({}, [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'x' }, { type: 'input_text', text: '' }] }]), O);
    assert.deepEqual(a.messages, [{ role: 'user', content: 'x' }]);
    assert.deepEqual(b.messages, a.messages);
  });

  test('refusal parts of replayed assistant messages become text', () => {
    const out = responsesRequestToAnthropic(
      rreq({}, [
        { role: 'user', content: 'x' },
        { type: 'message', role: 'assistant', content: [{ type: 'refusal', refusal: 'No.' }, { type: 'output_text', text: ' Sorry.', annotations: [] }] },
        { role: 'user', content: 'y' },
      ]),
      O,
    );
    assert.deepEqual(out.messages[1], { role: 'assistant', content: [{ type: 'text', text: 'No.' }, { type: 'text', text: ' Sorry.' }] });
  });

  test('tool_choice: auto/none/required/function, parallel_tool_calls false; auto and none dropped without tools', () => {
    const tools = [{ type: 'function', name: 'f' }];
    const choice = (extra: Record<string, unknown>): unknown => responsesRequestToAnthropic(rreq(extra), O).tool_choice;
    assert.deepEqual(choice({ tools, tool_choice: 'auto' }), { type: 'auto' });
    assert.deepEqual(choice({ tools, tool_choice: 'none' }), { type: 'none' });
    assert.deepEqual(choice({ tools, tool_choice: 'required' }), { type: 'any' });
    assert.deepEqual(choice({ tools, tool_choice: { type: 'function', name: 'f' } }), { type: 'tool', name: 'f' });
    assert.deepEqual(choice({ tools, parallel_tool_calls: false }), { type: 'auto', disable_parallel_tool_use: true });
    assert.deepEqual(choice({ tools, tool_choice: 'required', parallel_tool_calls: false }), { type: 'any', disable_parallel_tool_use: true });
    assert.equal(choice({ tools }), undefined);
    assert.equal(choice({ tools: [], tool_choice: 'auto', parallel_tool_calls: false }), undefined);
    assert.equal(choice({ tool_choice: 'none' }), undefined);
    throwsTranslation(() => choice({ tool_choice: 'required' }), 'invalid_request', 'tool_choice');
    throwsTranslation(() => choice({ tools, tool_choice: { type: 'function' } }), 'invalid_request', 'tool_choice.name');
  });

  test('store: absent or false accepted, explicit true refused (the provider keeps no state)', () => {
    assert.doesNotThrow(() => responsesRequestToAnthropic(rreq({}), O));
    assert.doesNotThrow(() => responsesRequestToAnthropic(rreq({ store: false }), O));
    assert.doesNotThrow(() => responsesRequestToAnthropic(rreq({ store: null }), O));
    throwsTranslation(() => responsesRequestToAnthropic(rreq({ store: true }), O), 'unsupported_parameter', 'store', /keeps no state/);
  });

  test('stateful features are refused with a 400 naming the field', () => {
    throwsTranslation(() => responsesRequestToAnthropic(rreq({ previous_response_id: 'resp_1' }), O), 'unsupported_parameter', 'previous_response_id', /keeps no state/);
    throwsTranslation(() => responsesRequestToAnthropic(rreq({ conversation: 'conv_1' }), O), 'unsupported_parameter', 'conversation');
    throwsTranslation(() => responsesRequestToAnthropic(rreq({ background: true }), O), 'unsupported_parameter', 'background');
    throwsTranslation(() => responsesRequestToAnthropic(rreq({ prompt: { id: 'pmpt_1' } }), O), 'unsupported_parameter', 'prompt');
    throwsTranslation(
      () => responsesRequestToAnthropic(rreq({}, [{ role: 'user', content: 'x' }, { type: 'item_reference', id: 'msg_1' }]), O),
      'unsupported_parameter',
      'input[1]',
    );
    // null / empty values are the defaults and pass.
    assert.doesNotThrow(() => responsesRequestToAnthropic(rreq({ previous_response_id: null, conversation: null, background: false, prompt: null }), O));
    // The gateway answers an OpenAI client with a 400 whose param names the field.
    try {
      responsesRequestToAnthropic(rreq({ previous_response_id: 'resp_1' }), O);
      assert.fail('not refused');
    } catch (e) {
      assert.ok(e instanceof TranslationError);
      const mapped = translationErrorToOpenAI(e);
      assert.equal(mapped.status, 400);
      assert.deepEqual((JSON.parse(mapped.body) as { error: { param: string; code: string } }).error.param, 'previous_response_id');
    }
  });

  test('tools other than function tools are refused', () => {
    const types = ['web_search', 'web_search_preview', 'file_search', 'computer_use_preview', 'code_interpreter', 'image_generation', 'mcp', 'custom', 'local_shell'];
    for (const type of types) {
      throwsTranslation(
        () => responsesRequestToAnthropic(rreq({ tools: [{ type: 'function', name: 'f' }, { type, name: 'x' }] }), O),
        'unsupported_parameter',
        'tools[1].type',
        new RegExp(`tool type ${type}`),
      );
    }
    throwsTranslation(() => responsesRequestToAnthropic(rreq({ tools: [{ type: 'function' }] }), O), 'invalid_request', 'tools[0].name');
    throwsTranslation(() => responsesRequestToAnthropic(rreq({ tools: [{ type: 'function', name: 'f', parameters: { type: 'array' } }] }), O), 'invalid_request', 'tools[0].parameters.type');
  });

  test('tool_choice for hosted tools, custom tools, mcp or allowed_tools is refused', () => {
    const tools = [{ type: 'function', name: 'f' }];
    for (const tool_choice of [{ type: 'web_search_preview' }, { type: 'file_search' }, { type: 'custom', name: 'c' }, { type: 'mcp', server_label: 's' }, { type: 'allowed_tools', mode: 'auto', tools: [] }]) {
      throwsTranslation(() => responsesRequestToAnthropic(rreq({ tools, tool_choice }), O), 'unsupported_parameter', 'tool_choice');
    }
    throwsTranslation(() => responsesRequestToAnthropic(rreq({ tools, tool_choice: 'sometimes' }), O), 'invalid_request', 'tool_choice');
  });

  test('text.format: text dropped, json_schema -> output_config, json_object refused; verbosity other than medium refused', () => {
    assert.equal(responsesRequestToAnthropic(rreq({ text: { format: { type: 'text' } } }), O).output_config, undefined);
    const schema = { type: 'object', properties: { a: { type: 'string' } } };
    assert.deepEqual(responsesRequestToAnthropic(rreq({ text: { format: { type: 'json_schema', name: 'n', schema, strict: true } } }), O).output_config, {
      format: { type: 'json_schema', schema },
    });
    throwsTranslation(() => responsesRequestToAnthropic(rreq({ text: { format: { type: 'json_schema', name: 'n' } } }), O), 'invalid_request', 'text.format.schema');
    throwsTranslation(() => responsesRequestToAnthropic(rreq({ text: { format: { type: 'json_object' } } }), O), 'unsupported_parameter', 'text.format');
    throwsTranslation(() => responsesRequestToAnthropic(rreq({ text: { format: { type: 'grammar' } } }), O), 'unsupported_parameter', 'text.format');
    throwsTranslation(() => responsesRequestToAnthropic(rreq({ text: { verbosity: 'low' } }), O), 'unsupported_parameter', 'text.verbosity');
    assert.doesNotThrow(() => responsesRequestToAnthropic(rreq({ text: { verbosity: 'medium' } }), O));
  });

  test('reasoning.effort other than none, temperature above 1, logprobs are refused', () => {
    throwsTranslation(() => responsesRequestToAnthropic(rreq({ reasoning: { effort: 'low' } }), O), 'unsupported_parameter', 'reasoning.effort');
    assert.doesNotThrow(() => responsesRequestToAnthropic(rreq({ reasoning: { effort: 'none', summary: 'auto' } }), O));
    assert.doesNotThrow(() => responsesRequestToAnthropic(rreq({ reasoning: { effort: null } }), O));
    throwsTranslation(() => responsesRequestToAnthropic(rreq({ temperature: 1.5 }), O), 'unsupported_parameter', 'temperature');
    assert.equal(responsesRequestToAnthropic(rreq({ temperature: 0.7, top_p: 0.5 }), O).temperature, 0.7);
    throwsTranslation(() => responsesRequestToAnthropic(rreq({ top_logprobs: 2 }), O), 'unsupported_parameter', 'top_logprobs');
    throwsTranslation(() => responsesRequestToAnthropic(rreq({ include: ['reasoning.encrypted_content', 'message.output_text.logprobs'] }), O), 'unsupported_parameter', 'include[1]');
  });

  test('platform fields are dropped; user (else safety_identifier) -> metadata.user_id', () => {
    const out = responsesRequestToAnthropic(
      rreq({ metadata: { a: 'b' }, service_tier: 'flex', truncation: 'auto', prompt_cache_key: 'k', max_tool_calls: 3, stream_options: { include_obfuscation: false }, safety_identifier: 'sid' }),
      O,
    );
    assert.deepEqual(out, { model: 'claude-x', max_tokens: DEFAULT_ANTHROPIC_MAX_TOKENS, messages: [{ role: 'user', content: 'hi' }], metadata: { user_id: 'sid' } });
    assert.deepEqual(responsesRequestToAnthropic(rreq({ user: 'u', safety_identifier: 'sid' }), O).metadata, { user_id: 'u' });
  });

  test('images and files: data and http(s) URLs pass; file ids and other file types are refused', () => {
    const user = (parts: unknown[]): ResponsesRequest => rreq({}, [{ role: 'user', content: parts }]);
    const out = responsesRequestToAnthropic(user([{ type: 'input_file', file_url: 'https://example.com/a.pdf', filename: 'a.pdf' }]), O);
    assert.deepEqual(out.messages[0]!.content, [{ type: 'document', source: { type: 'url', url: 'https://example.com/a.pdf' }, title: 'a.pdf' }]);
    throwsTranslation(() => responsesRequestToAnthropic(user([{ type: 'input_image', file_id: 'file-1', detail: 'auto' }]), O), 'unsupported_parameter', 'input[0].content[0].file_id');
    throwsTranslation(() => responsesRequestToAnthropic(user([{ type: 'input_file', file_id: 'file-1' }]), O), 'unsupported_parameter', 'input[0].content[0].file_id');
    throwsTranslation(
      () => responsesRequestToAnthropic(user([{ type: 'input_file', file_data: 'data:text/csv;base64,YQ==' }]), O),
      'unsupported_parameter',
      'input[0].content[0].file_data',
    );
    throwsTranslation(() => responsesRequestToAnthropic(user([{ type: 'input_image', image_url: 'data:image/bmp;base64,Qk0=' }]), O), 'unsupported_parameter', 'input[0].content[0].image_url');
    throwsTranslation(() => responsesRequestToAnthropic(user([{ type: 'input_audio', input_audio: {} }]), O), 'unsupported_parameter', 'input[0].content[0].type');
  });

  test('non-text parts where only text can go are refused', () => {
    const image = { type: 'input_image', image_url: 'https://example.com/x.png' };
    throwsTranslation(() => responsesRequestToAnthropic(rreq({}, [{ role: 'system', content: [image] }, { role: 'user', content: 'x' }]), O), 'unsupported_parameter', 'input[0].content[0].type');
    throwsTranslation(() => responsesRequestToAnthropic(rreq({}, [{ role: 'user', content: 'x' }, { role: 'assistant', content: [image] }]), O), 'unsupported_parameter', 'input[1].content[0].type');
  });

  test('other input item types are refused; reasoning items are dropped', () => {
    throwsTranslation(() => responsesRequestToAnthropic(rreq({}, [{ type: 'computer_call', call_id: 'c' }]), O), 'unsupported_parameter', 'input[0].type');
    throwsTranslation(() => responsesRequestToAnthropic(rreq({}, [{ type: 'web_search_call', id: 'w' }]), O), 'unsupported_parameter', 'input[0].type');
    const out = responsesRequestToAnthropic(rreq({}, [{ type: 'reasoning', id: 'rs', summary: [], encrypted_content: 'x' }, { role: 'user', content: 'q' }]), O);
    assert.deepEqual(out.messages, [{ role: 'user', content: 'q' }]);
  });

  test('malformed input is refused as invalid_request / invalid_tool_arguments', () => {
    throwsTranslation(() => responsesRequestToAnthropic({ model: 'x' } as ResponsesRequest, O), 'invalid_request', 'input');
    throwsTranslation(() => responsesRequestToAnthropic(rreq({}, []), O), 'invalid_request', 'input');
    throwsTranslation(() => responsesRequestToAnthropic(rreq({}, ''), O), 'invalid_request', 'input');
    throwsTranslation(() => responsesRequestToAnthropic(rreq({ instructions: 'only' }, [{ role: 'developer', content: 'rules' }]), O), 'invalid_request', 'input');
    throwsTranslation(() => responsesRequestToAnthropic(rreq({}, [{ role: 'tool', content: 'x' }]), O), 'invalid_request', 'input[0].role');
    throwsTranslation(() => responsesRequestToAnthropic(rreq({}, ['text']), O), 'invalid_request', 'input[0]');
    throwsTranslation(() => responsesRequestToAnthropic(rreq({}, [{ type: 'function_call', name: 'f', arguments: '{}' }]), O), 'invalid_request', 'input[0].call_id');
    throwsTranslation(() => responsesRequestToAnthropic(rreq({}, [{ type: 'function_call', call_id: 'c', arguments: '{}' }]), O), 'invalid_request', 'input[0].name');
    throwsTranslation(() => responsesRequestToAnthropic(rreq({}, [{ type: 'function_call_output', output: 'x' }]), O), 'invalid_request', 'input[0].call_id');
    throwsTranslation(() => responsesRequestToAnthropic(rreq({}, [{ type: 'function_call_output', call_id: 'c', output: 5 }]), O), 'invalid_request', 'input[0].output');
    for (const args of ['{"a":', '[1]', '"s"']) {
      throwsTranslation(
        () => responsesRequestToAnthropic(rreq({}, [{ role: 'user', content: 'x' }, { type: 'function_call', call_id: 'c', name: 'f', arguments: args }]), O),
        'invalid_tool_arguments',
        'input[1].arguments',
      );
    }
    throwsTranslation(() => responsesRequestToAnthropic(null as unknown as ResponsesRequest, O), 'invalid_request', null);
  });
});

// ---------------------------------------------------------------- JSON responses

describe('Anthropic message -> Responses response object', () => {
  test('stop reasons -> status and incomplete_details', () => {
    const cases: Array<[string | null, string, unknown]> = [
      ['end_turn', 'completed', null],
      ['stop_sequence', 'completed', null],
      ['tool_use', 'completed', null],
      ['pause_turn', 'completed', null],
      [null, 'completed', null],
      ['max_tokens', 'incomplete', { reason: 'max_output_tokens' }],
      ['model_context_window_exceeded', 'incomplete', { reason: 'max_output_tokens' }],
      ['refusal', 'incomplete', { reason: 'content_filter' }],
    ];
    for (const [stop, status, details] of cases) {
      assert.deepEqual(responsesStatus(stop), { status, incomplete_details: details }, String(stop));
      const res = anthropicResponseToResponses(message([{ type: 'text', text: 'x' }], stop), OPTS);
      assert.equal(res.status, status);
      assert.deepEqual(res.incomplete_details, details);
    }
  });

  test('an incomplete response marks its last item incomplete, the others completed', () => {
    const res = anthropicResponseToResponses(
      message([{ type: 'text', text: 'Let me' }, { type: 'tool_use', id: 'toolu_1', name: 'f', input: { a: 1 } }], 'max_tokens'),
      OPTS,
    );
    assert.deepEqual(res.output.map((o) => (o.type === 'reasoning' ? null : o.status)), ['completed', 'incomplete']);
  });

  test('usage: cached tokens counted as input and reported apart; missing or null counts are 0', () => {
    assert.deepEqual(anthropicUsageToResponses({ input_tokens: 3, cache_read_input_tokens: 10, cache_creation_input_tokens: 20, output_tokens: 4 }), {
      input_tokens: 33,
      input_tokens_details: { cached_tokens: 10, cache_write_tokens: 20 },
      output_tokens: 4,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 37,
    });
    assert.deepEqual(anthropicUsageToResponses({ input_tokens: 3, cache_read_input_tokens: null, output_tokens: 4 }).input_tokens_details, { cached_tokens: 0, cache_write_tokens: 0 });
    assert.equal(anthropicResponseToResponses({ id: 'msg_x' } as AnthropicMessage, OPTS).usage?.total_tokens, 0);
  });

  test('without the request, the echoed settings are the API defaults', () => {
    const res = anthropicResponseToResponses(message([]), OPTS);
    assert.deepEqual(
      {
        id: res.id,
        instructions: res.instructions,
        tools: res.tools,
        tool_choice: res.tool_choice,
        temperature: res.temperature,
        top_p: res.top_p,
        parallel: res.parallel_tool_calls,
        metadata: res.metadata,
        user: res.user,
        store: res.store,
        text: res.text,
        max: res.max_output_tokens,
        output: res.output,
      },
      {
        id: 'resp_abc',
        instructions: null,
        tools: [],
        tool_choice: 'auto',
        temperature: 1,
        top_p: 1,
        parallel: true,
        metadata: {},
        user: null,
        store: false,
        text: { format: { type: 'text' } },
        max: null,
        output: [],
      },
    );
    assert.equal(anthropicResponseToResponses({ ...message([]), id: 'other' }, OPTS).id, 'resp_other');
  });

  test('a multi-turn tool loop: the call_id the client gets back is the tool_use id Anthropic sees', () => {
    const tools = [{ type: 'function' as const, name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } }];
    const first = rreq({ tools }, [{ role: 'user', content: 'Weather in Paris?' }]);
    const upstream1 = responsesRequestToAnthropic(first, O);
    assert.equal(upstream1.tools?.length, 1);
    // Anthropic answers with a tool call; the client gets a function_call item.
    const answer = anthropicResponseToResponses(message([{ type: 'tool_use', id: 'toolu_42', name: 'get_weather', input: { city: 'Paris' } }], 'tool_use'), {
      ...OPTS,
      request: first,
    });
    const call = answer.output[0];
    assert.ok(call !== undefined && call.type === 'function_call');
    assert.deepEqual([call.call_id, call.name, JSON.parse(call.arguments) as unknown], ['toolu_42', 'get_weather', { city: 'Paris' }]);
    // The client replays the output items and adds the tool's result.
    const second = rreq({ tools }, [...(first.input as unknown[]), ...answer.output, { type: 'function_call_output', call_id: call.call_id, output: '18 °C' }]);
    assert.deepEqual(responsesRequestToAnthropic(second, O).messages, [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_42', name: 'get_weather', input: { city: 'Paris' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_42', content: '18 °C' }] },
    ]);
  });
});
