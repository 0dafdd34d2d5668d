/**
 * The gateway's token estimate for `POST /v1/messages/count_tokens` to an OpenAI-API route
 * (count-tokens.ts): ceil(UTF-8 bytes of the text the model reads / 4), at least 1.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { estimateInputTokens } from '../src/count-tokens.js';

test('counts the system prompt, message text, thinking, tool calls and results, and tool definitions; images count nothing', () => {
  const schema = { type: 'object', properties: { city: { type: 'string' } } };
  const body = {
    model: 'gpt-4o',
    system: [{ type: 'text', text: 'sys' }, { type: 'text', text: 'tem' }],
    messages: [
      { role: 'user', content: 'héllo' },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'hmm', signature: 'not counted' },
          { type: 'text', text: 'ok' },
          { type: 'tool_use', id: 'toolu_1', name: 'get', input: { city: 'Oslo' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'cold' }] },
          { type: 'tool_result', tool_use_id: 'toolu_1', content: 'wet' },
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo'.repeat(1000) } },
        ],
      },
    ],
    tools: [{ name: 'get', description: 'Weather', input_schema: schema }],
  };
  const bytes =
    'sys'.length + 'tem'.length + Buffer.byteLength('héllo') + 'hmm'.length + 'ok'.length + 'get'.length + JSON.stringify({ city: 'Oslo' }).length + 'cold'.length + 'wet'.length + 'get'.length + 'Weather'.length + JSON.stringify(schema).length;
  assert.equal(estimateInputTokens(body), Math.ceil(bytes / 4));
});

test('at least one token; malformed parts are skipped, not thrown on', () => {
  assert.equal(estimateInputTokens({ messages: [] }), 1);
  assert.equal(estimateInputTokens({ messages: [null, 3, { role: 'user', content: [null, { type: 'text' }] }], tools: [null], system: 7 }), 1);
  assert.equal(estimateInputTokens({ messages: [{ role: 'user', content: 'abcdefghi' }] }), 3);
});
