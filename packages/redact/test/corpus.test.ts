import { test } from 'node:test';
import assert from 'node:assert/strict';
import { placeholderOf, redactJson, redactText } from '@sightline/redact';
import type { JsonValue } from '@sightline/redact';
import { MUST_GO, MUST_STAY, policyFor } from './corpus.ts';

/** A secret as it appears inside a JSON string literal. */
const inJson = (s: string): string => JSON.stringify(s).slice(1, -1);

function assertGone(out: string, secrets: string[], where: string): void {
  for (const s of secrets) {
    assert.ok(!out.includes(s), `${where}: ${JSON.stringify(s)} survived in ${JSON.stringify(out).slice(0, 400)}`);
    assert.ok(!out.includes(inJson(s)), `${where}: ${JSON.stringify(s)} survived JSON-escaped`);
  }
}

test('the corpus is consistent: no must-go secret also appears in a must-stay example', () => {
  for (const c of MUST_GO) {
    assert.ok(c.secrets.length > 0 && c.secrets.every((s) => s.length >= 6 && c.text.includes(s)), c.name);
    for (const stay of MUST_STAY) for (const s of c.secrets) assert.ok(!stay.text.includes(s), `${c.name}: ${s} is in ${stay.name}`);
  }
});

test('every must-go example is replaced by its placeholder and counted, under its policy and the stricter one', () => {
  for (const c of MUST_GO) {
    const policies = policyFor(c.type) === 'full' ? (['full', 'redacted'] as const) : (['redacted'] as const);
    for (const policy of policies) {
      const r = redactText(c.text, policy);
      assertGone(r.text, c.secrets, `${c.name} (${policy})`);
      assert.ok((r.counts[c.type] ?? 0) >= 1, `${c.name} (${policy}): counts ${JSON.stringify(r.counts)} lack ${c.type}`);
      assert.ok(r.text.includes(placeholderOf(c.type)), `${c.name} (${policy}): no ${placeholderOf(c.type)} in ${r.text}`);
    }
  }
});

test('personal data is kept under the full policy (secrets only)', () => {
  for (const c of MUST_GO.filter((x) => policyFor(x.type) === 'redacted')) {
    const r = redactText(c.text, 'full');
    assert.equal(r.text, c.text, c.name);
    assert.deepEqual(r.counts, {}, c.name);
  }
});

test('must-go examples are found inside a JSON body, raw or parsed, and the raw body stays valid JSON', () => {
  for (const c of MUST_GO) {
    const body = { model: 'gpt-4o-mini', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: c.text }] };
    const raw = JSON.stringify(body);
    const r = redactText(raw, 'redacted');
    assertGone(r.text, c.secrets, `${c.name} (raw JSON)`);
    const parsed = JSON.parse(r.text) as { messages: Array<{ content: string }> };
    assert.ok(parsed.messages[1]?.content.includes(placeholderOf(c.type)), `${c.name} (raw JSON): ${parsed.messages[1]?.content}`);

    const j = redactJson(body, 'redacted');
    const out = JSON.stringify(j.value);
    assertGone(out, c.secrets, `${c.name} (redactJson)`);
    assert.ok((j.counts[c.type] ?? 0) >= 1, `${c.name} (redactJson): ${JSON.stringify(j.counts)}`);
  }
});

test('must-go examples are found in code blocks, in tool-call arguments and URL-encoded', () => {
  for (const c of MUST_GO) {
    const fenced = redactText('Here is my config:\n```\n' + c.text + '\n```\nWhat is wrong?', 'redacted');
    assertGone(fenced.text, c.secrets, `${c.name} (code block)`);
    // OpenAI tool calls carry their arguments as a JSON string inside the JSON body.
    const call = { role: 'assistant', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'run', arguments: JSON.stringify({ input: c.text }) } }] };
    assertGone(JSON.stringify(redactJson(call, 'redacted').value), c.secrets, `${c.name} (tool arguments)`);
    if (c.urlEncoded === true) {
      const encoded = redactText(`https://example.com/next?q=${encodeURIComponent(c.text)}&page=2`, 'redacted');
      assertGone(encoded.text, c.secrets.map(encodeURIComponent), `${c.name} (URL-encoded)`);
      assertGone(decodeURIComponent(encoded.text), c.secrets, `${c.name} (URL-encoded, decoded)`);
    }
  }
});

test('every must-stay example is left exactly as it was, under both policies', () => {
  for (const c of MUST_STAY) {
    for (const policy of ['full', 'redacted'] as const) {
      const r = redactText(c.text, policy);
      assert.equal(r.text, c.text, `${c.name} (${policy})`);
      assert.deepEqual(r.counts, {}, `${c.name} (${policy})`);
    }
    assert.deepEqual(redactJson({ content: c.text }, 'redacted').value, { content: c.text }, `${c.name} (JSON)`);
  }
});

test('a corpus secret next to near misses: only the secret goes', () => {
  const text = MUST_STAY.map((c) => c.text).join('\n\n');
  const go = MUST_GO.find((c) => c.type === 'card');
  assert.ok(go !== undefined);
  const r = redactText(`${text}\n\n${go.text}`, 'redacted');
  assert.equal(r.text, `${text}\n\n${go.text.replace('4111 1111 1111 1111', '[CARD]')}`);
  assert.deepEqual(r.counts, { card: 1 });
});

test('JSON keys are redacted too, colliding keys are kept apart, and credential keys redact their values', () => {
  const input: JsonValue = {
    'alice@example.com': { plan: 'pro' },
    'bob@example.com': { plan: 'free' },
    '[EMAIL]': 'a key that already looks like a placeholder',
    password: 'hunter2',
    api_key: 'abc',
    Authorization: 'Bearer short',
    apiKey: KEY_IN_FIELD,
    token: 'Hello',
    max_tokens: 1024,
    pin: 1234,
    passwd: 98765,
    credentials: { password: { type: 'string' } },
    empty_password: { password: '' },
  };
  const { value, counts } = redactJson(input, 'redacted');
  assert.deepEqual(value, {
    '[EMAIL]': { plan: 'pro' },
    '[EMAIL]#2': { plan: 'free' },
    '[EMAIL]#3': 'a key that already looks like a placeholder',
    password: '[PASSWORD]',
    api_key: '[SECRET]',
    Authorization: '[SECRET]',
    apiKey: '[SECRET:openai]',
    token: 'Hello',
    max_tokens: 1024,
    pin: 1234,
    passwd: '[PASSWORD]',
    credentials: { password: { type: 'string' } },
    empty_password: { password: '' },
  });
  assert.deepEqual(counts, { email: 2, password: 2, secret: 2, 'secret:openai': 1 });
  // Keys are secrets too under the full policy; personal data in keys stays there.
  const full = redactJson({ [KEY_IN_FIELD]: 1, 'alice@example.com': 2 }, 'full');
  assert.deepEqual(full.value, { '[SECRET:openai]': 1, 'alice@example.com': 2 });
});

const KEY_IN_FIELD = MUST_GO[0]?.secrets[0] ?? '';

test('redactJson does not change its input, keeps types and order, and keeps __proto__ as an own key', () => {
  const raw = '{"a":[1,true,null,"x@example.com",{"b":2.5}],"__proto__":{"polluted":"ops@example.com"},"z":"end"}';
  const input = JSON.parse(raw) as JsonValue;
  const { value } = redactJson(input, 'redacted');
  assert.equal(JSON.stringify(input), raw);
  assert.equal(JSON.stringify(value), '{"a":[1,true,null,"[EMAIL]",{"b":2.5}],"__proto__":{"polluted":"[EMAIL]"},"z":"end"}');
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
  assert.equal(Object.getPrototypeOf(value), Object.prototype);
  for (const scalar of [null, true, 3, 'plain', 'mail me: x@example.com'] as const) {
    const r = redactJson(scalar, 'redacted');
    assert.equal(r.value, scalar === 'mail me: x@example.com' ? 'mail me: [EMAIL]' : scalar);
  }
});

test('redactJson copies on write: unchanged subtrees are the input\'s own, changed ones are copies', () => {
  const untouched = { role: 'system', content: 'Be brief.', n: [1, 2, 3] };
  const touched = { role: 'user', content: [{ type: 'text', text: 'mail ops@example.com' }, { type: 'text', text: 'nothing here' }] };
  const input: JsonValue = { model: 'gpt-4o-mini', messages: [untouched, touched] };
  const same = redactJson(input, 'full');
  assert.equal(same.value, input, 'nothing to redact under full: the input itself');
  const r = redactJson(input, 'redacted');
  const out = r.value as { messages: Array<{ content: JsonValue }> };
  assert.notEqual(r.value, input);
  assert.equal(out.messages[0], untouched);
  assert.notEqual(out.messages[1], touched);
  const parts = out.messages[1]?.content as JsonValue[];
  assert.equal(parts[1], touched.content[1]);
  assert.deepEqual(parts[0], { type: 'text', text: 'mail [EMAIL]' });
  assert.equal(touched.content[0]?.text, 'mail ops@example.com', 'the input is unchanged');
});
