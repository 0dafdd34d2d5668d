import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nestedDeeperThan, validateCountTokens, validateEmbeddings, validateOpenAI, validateResponses } from '../src/validate.js';
import { GatewayError } from '../src/errors.js';
import { seeded as rng } from '../../../test/support/seeded.js';

/** Depth of a parsed JSON value (objects and arrays), computed on the value itself. */
function depthOf(v: unknown): number {
  if (typeof v !== 'object' || v === null) return 0;
  let d = 0;
  for (const x of Array.isArray(v) ? v : Object.values(v)) d = Math.max(d, depthOf(x));
  return d + 1;
}


const NASTY = ['{', '}', '[', ']', '"', '\\', '\\"', '\\\\', 'é', '{"a":[', 'x'];

function randomValue(r: () => number, depth: number): unknown {
  const k = r();
  if (depth <= 0 || k < 0.3) {
    let s = '';
    for (let i = Math.floor(r() * 6); i > 0; i--) s += NASTY[Math.floor(r() * NASTY.length)];
    return k < 0.1 ? Math.floor(r() * 100) : s;
  }
  if (k < 0.65) return Array.from({ length: 1 + Math.floor(r() * 3) }, () => randomValue(r, depth - 1));
  const o: Record<string, unknown> = {};
  for (let i = Math.floor(r() * 3) + 1; i > 0; i--) o[NASTY[Math.floor(r() * NASTY.length)]! + i] = randomValue(r, depth - 1);
  return o;
}

test('the byte scan agrees with the depth of the parsed value, strings with brackets, quotes and escapes included', () => {
  const r = rng(9);
  for (let round = 0; round < 2000; round++) {
    const v = randomValue(r, 1 + Math.floor(r() * 12));
    const raw = Buffer.from(JSON.stringify(v));
    const d = depthOf(v);
    assert.equal(nestedDeeperThan(raw, d), false, `round ${round}: ${raw}`);
    if (d > 0) assert.equal(nestedDeeperThan(raw, d - 1), true, `round ${round}: ${raw}`);
  }
});

test('deep input is refused before parsing; the JSON error keeps no bytes of the body', () => {
  const deep = Buffer.from('{"model":"m","messages":[],"x":' + '['.repeat(200) + ']'.repeat(200) + '}');
  assert.throws(() => validateOpenAI(deep, 128), (e: unknown) => e instanceof GatewayError && e.code === 'invalid_request' && /deeper than 128/.test(e.message));
  assert.equal(validateOpenAI(deep, 256).model, 'm');
  assert.throws(
    () => validateOpenAI(Buffer.from('{"model":"m","k":"sk-secret" , oops}'), 128),
    (e: unknown) => e instanceof GatewayError && e.code === 'invalid_json' && !e.message.includes('sk-secret') && !e.message.includes('oops'),
  );
});

test('the other endpoints: what the gateway relies on is checked, with the offending parameter', () => {
  const fails = (fn: () => unknown, param: string | null) =>
    assert.throws(fn, (e: unknown) => e instanceof GatewayError && e.status === 400 && e.param === param, String(param));
  const b = (v: unknown) => Buffer.from(JSON.stringify(v));
  // Responses: a model; input, when present, a string or items; stream a boolean.
  assert.equal(validateResponses(b({ model: 'm', input: 'hi' }), 64).model, 'm');
  assert.equal(validateResponses(b({ model: 'm', input: [{ role: 'user', content: 'hi' }], stream: true }), 64).stream, true);
  fails(() => validateResponses(b({ input: 'hi' }), 64), 'model');
  fails(() => validateResponses(b({ model: 'm', input: 3 }), 64), 'input');
  fails(() => validateResponses(b({ model: 'm', input: 'x', stream: 'yes' }), 64), 'stream');
  // Embeddings: a model and an input (strings or token arrays; the provider judges which).
  assert.deepEqual(validateEmbeddings(b({ model: 'e', input: [[1, 2], [3]] }), 64).input, [[1, 2], [3]]);
  fails(() => validateEmbeddings(b({ model: 'e' }), 64), 'input');
  fails(() => validateEmbeddings(b({ model: 'e', input: { text: 'x' } }), 64), 'input');
  fails(() => validateEmbeddings(b({ input: 'x' }), 64), 'model');
  // count_tokens: a Messages request without max_tokens.
  assert.equal(validateCountTokens(b({ model: 'c', messages: [] }), 64).model, 'c');
  fails(() => validateCountTokens(b({ model: 'c' }), 64), 'messages');
  fails(() => validateCountTokens(Buffer.from('{'), 64), null);
});
