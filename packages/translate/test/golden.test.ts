/**
 * Golden fixtures: test/golden/<name>.json holds {description, options, input, expected}.
 * Streams store input events ({event?, data}) and the expected list of output events with
 * parsed JSON data; the test writes the input as SSE bytes, runs it through SseParser and
 * the translator, and parses the output SSE text back.
 */

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  AnthropicStreamToOpenAI,
  AnthropicStreamToResponses,
  OpenAIStreamToAnthropic,
  anthropicRequestToOpenAI,
  anthropicResponseToOpenAI,
  anthropicResponseToResponses,
  openaiRequestToAnthropic,
  openaiResponseToAnthropic,
  responsesRequestToAnthropic,
} from '../src/index.js';
import type {
  AnthropicMessage,
  AnthropicMessagesRequest,
  AnthropicRequestToOpenAIOptions,
  AnthropicResponseToOpenAIOptions,
  AnthropicStreamToOpenAIOptions,
  OpenAIChatCompletion,
  OpenAIChatRequest,
  OpenAIRequestToAnthropicOptions,
  OpenAIResponseToAnthropicOptions,
  OpenAIStreamToAnthropicOptions,
  AnthropicResponseToResponsesOptions,
  AnthropicStreamToResponsesOptions,
  ResponsesRequest,
  ResponsesRequestToAnthropicOptions,
} from '../src/index.js';
import { accumulateAnthropic, accumulateOpenAI, accumulateResponses, loadGolden, parseSseText, runStream, toSseText } from './helpers.js';
import type { InputEvent } from './helpers.js';

describe('golden: requests', () => {
  for (const name of ['openai-request-basic', 'openai-request-tool-history']) {
    test(name, () => {
      const g = loadGolden(name);
      const input = structuredClone(g.input);
      const got = openaiRequestToAnthropic(g.input as OpenAIChatRequest, g.options as unknown as OpenAIRequestToAnthropicOptions);
      assert.deepEqual(got, g.expected);
      assert.deepEqual(g.input, input, 'input not mutated');
    });
  }
  for (const name of ['anthropic-request-basic', 'anthropic-request-simple']) {
    test(name, () => {
      const g = loadGolden(name);
      const input = structuredClone(g.input);
      const got = anthropicRequestToOpenAI(g.input as AnthropicMessagesRequest, g.options as unknown as AnthropicRequestToOpenAIOptions);
      assert.deepEqual(got, g.expected);
      assert.deepEqual(g.input, input, 'input not mutated');
    });
  }
});

describe('golden: JSON responses', () => {
  test('anthropic-response (Anthropic -> OpenAI)', () => {
    const g = loadGolden('anthropic-response');
    const got = anthropicResponseToOpenAI(g.input as AnthropicMessage, g.options as unknown as AnthropicResponseToOpenAIOptions);
    assert.deepEqual(got, g.expected);
  });
  test('openai-response (OpenAI -> Anthropic)', () => {
    const g = loadGolden('openai-response');
    const got = openaiResponseToAnthropic(g.input as OpenAIChatCompletion, g.options as unknown as OpenAIResponseToAnthropicOptions);
    assert.deepEqual(got, g.expected);
  });
});

describe('golden: streams', () => {
  const anthropicToOpenAI = (name: string): void => {
    test(`${name} (Anthropic SSE -> OpenAI SSE)`, () => {
      const g = loadGolden(name);
      const sse = toSseText(g.input as InputEvent[]);
      const opts = g.options as unknown as AnthropicStreamToOpenAIOptions;
      const whole = runStream(new AnthropicStreamToOpenAI(opts), sse);
      assert.deepEqual(parseSseText(whole.output), g.expected);
      // Byte-by-byte delivery gives the same output.
      assert.equal(runStream(new AnthropicStreamToOpenAI(opts), sse, 1).output, whole.output);
      // Nothing held back: every content-bearing input event produced output in its own push.
      const inputs = g.input as InputEvent[];
      inputs.forEach((ev, i) => {
        const d = ev.data as { type: string; delta?: { type: string; text?: string; partial_json?: string } };
        const carries =
          d.type === 'message_start' || d.type === 'message_delta' || d.type === 'message_stop' ||
          (d.type === 'content_block_delta' && ((d.delta?.type === 'text_delta' && d.delta.text !== '') || (d.delta?.type === 'input_json_delta' && d.delta.partial_json !== '')));
        if (carries) assert.notEqual(whole.perEvent[i], '', `input event ${i} (${d.type}) produced output immediately`);
      });
      // The client-side view is coherent.
      const acc = accumulateOpenAI(parseSseText(whole.output));
      assert.ok(acc.done);
      for (const tc of acc.toolCalls) assert.doesNotThrow(() => JSON.parse(tc.arguments), `arguments of ${tc.id} are complete JSON`);
    });
  };
  anthropicToOpenAI('anthropic-stream-text');
  anthropicToOpenAI('anthropic-stream-tools');

  const openaiToAnthropic = (name: string): void => {
    test(`${name} (OpenAI SSE -> Anthropic SSE)`, () => {
      const g = loadGolden(name);
      const sse = toSseText(g.input as InputEvent[]);
      const opts = g.options as unknown as OpenAIStreamToAnthropicOptions;
      const whole = runStream(new OpenAIStreamToAnthropic(opts), sse);
      assert.deepEqual(parseSseText(whole.output), g.expected);
      assert.equal(runStream(new OpenAIStreamToAnthropic(opts), sse, 1).output, whole.output);
      const inputs = g.input as InputEvent[];
      inputs.forEach((ev, i) => {
        if (typeof ev.data !== 'object' || ev.data === null) return;
        const choices = (ev.data as { choices: Array<{ delta: { content?: string | null; tool_calls?: Array<{ function?: { arguments?: string } }> } }> }).choices;
        const delta = choices[0]?.delta;
        const carries =
          (typeof delta?.content === 'string' && delta.content !== '') ||
          (delta?.tool_calls?.some((tc) => (tc.function?.arguments ?? '') !== '') ?? false);
        if (carries || i === 0) assert.notEqual(whole.perEvent[i], '', `input event ${i} produced output immediately`);
      });
      const acc = accumulateAnthropic(parseSseText(whole.output));
      assert.ok(acc.stopped);
      for (const b of acc.blocks) if (b.type === 'tool_use') assert.doesNotThrow(() => JSON.parse(b.json ?? ''), `input of ${b.id ?? ''} is complete JSON`);
    });
  };
  openaiToAnthropic('openai-stream-text');
  openaiToAnthropic('openai-stream-tools');
});

// ---------------------------------------------------------------- OpenAI Responses API <-> Anthropic

describe('golden: Responses API', () => {
  for (const name of ['responses-request-basic', 'responses-request-tool-loop']) {
    test(`${name} (Responses request -> Anthropic request)`, () => {
      const g = loadGolden(name);
      const input = structuredClone(g.input);
      const got = responsesRequestToAnthropic(g.input as ResponsesRequest, g.options as unknown as ResponsesRequestToAnthropicOptions);
      assert.deepEqual(got, g.expected);
      assert.deepEqual(g.input, input, 'input not mutated');
    });
  }

  test('responses-response (Anthropic message -> Responses response object)', () => {
    const g = loadGolden('responses-response');
    const got = anthropicResponseToResponses(g.input as AnthropicMessage, g.options as unknown as AnthropicResponseToResponsesOptions);
    assert.deepEqual(got, g.expected);
  });

  for (const name of ['responses-stream-text', 'responses-stream-tools']) {
    test(`${name} (Anthropic SSE -> Responses SSE)`, () => {
      const g = loadGolden(name);
      const sse = toSseText(g.input as InputEvent[]);
      const opts = g.options as unknown as AnthropicStreamToResponsesOptions;
      const whole = runStream(new AnthropicStreamToResponses(opts), sse);
      assert.deepEqual(parseSseText(whole.output), g.expected);
      // Byte-by-byte delivery gives the same output.
      assert.equal(runStream(new AnthropicStreamToResponses(opts), sse, 1).output, whole.output);
      // Nothing held back but the closing events of a block (held until the next event, see stream.ts):
      // every event that starts a block, carries content or ends the message produced output in its own push.
      const inputs = g.input as InputEvent[];
      inputs.forEach((ev, i) => {
        const d = ev.data as { type: string; content_block?: { type: string }; delta?: { type: string; text?: string; partial_json?: string; thinking?: string } };
        const piece = d.delta?.text ?? d.delta?.partial_json ?? d.delta?.thinking ?? '';
        const carries =
          d.type === 'message_start' || d.type === 'message_delta' || d.type === 'message_stop' ||
          (d.type === 'content_block_start' && ['text', 'tool_use', 'thinking'].includes(d.content_block?.type ?? '')) ||
          (d.type === 'content_block_delta' && d.delta?.type !== 'signature_delta' && piece !== '');
        if (carries) assert.notEqual(whole.perEvent[i], '', `input event ${i} (${d.type}) produced output immediately`);
        if (d.type === 'content_block_stop' || d.type === 'ping') assert.equal(whole.perEvent[i], '', `input event ${i} (${d.type}) produced nothing`);
      });
      // The client-side view is coherent, and the final response is the JSON translation of the same message.
      const acc = accumulateResponses(parseSseText(whole.output));
      assert.equal(acc.terminal, 'response.completed');
      for (const it of acc.items) if (it.type === 'function_call') assert.doesNotThrow(() => JSON.parse(it.arguments as string), `arguments of ${String(it.call_id)} are complete JSON`);
    });
  }
});
