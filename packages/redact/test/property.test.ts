import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RedactError, redactJson, redactText } from '@sightline/redact';
import type { JsonValue, RedactionCounts, RedactionPolicy } from '@sightline/redact';
import { KEYS, MUST_GO, MUST_STAY, policyFor } from './corpus.ts';
// Seeded, so a failure names a round that can be replayed.
import { seeded as mulberry32 } from '../../../test/support/seeded.js';

// Separators a writer would put between sentences, list items and fields (never nothing: a key
// glued to a word is no longer a token of its own).
const SEPARATORS = [' ', '\n', '\n\n', '\t', ', ', '; ', ' | ', ' (', ') ', ': ', ' = ', '\n- ', '\r\n'];
const FILLER = ['the', 'Order', 'shipped on', '2024-03-14', 'at 10:30', 'v1.2.3', 'sk-learn', 'password', 'Bearer', 'token', '100%', 'café', '日本語のテキスト', '🙂', '\\n', '"quoted"', "it's", '{}', '[]', '1,284 tokens', '$12.50'];
const PLACEHOLDER = /\[(?:[A-Z_]+|SECRET:[a-z]+)\]/g;

const pick = <T>(rand: () => number, xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
const total = (c: RedactionCounts): number => Object.values(c).reduce((a, b) => a + b, 0);
const inJson = (s: string): string => JSON.stringify(s).slice(1, -1);

interface Doc {
  text: string;
  secrets: string[];
}

function randomDoc(rand: () => number, policy: RedactionPolicy): Doc {
  const parts: string[] = [];
  const secrets: string[] = [];
  const n = 1 + Math.floor(rand() * 8);
  for (let i = 0; i < n; i++) {
    const r = rand();
    if (r < 0.4) {
      const c = pick(rand, MUST_GO);
      parts.push(c.text);
      if (policy === 'redacted' || policyFor(c.type) === 'full') secrets.push(...c.secrets);
    } else if (r < 0.7) {
      parts.push(pick(rand, MUST_STAY).text);
    } else {
      parts.push(pick(rand, FILLER));
    }
  }
  let text = parts[0] ?? '';
  for (let i = 1; i < parts.length; i++) text += pick(rand, SEPARATORS) + parts[i];
  return { text, secrets };
}

function assertNoSecret(out: string, secrets: string[], where: string): void {
  for (const s of secrets) {
    const at = Math.max(out.indexOf(s), out.indexOf(inJson(s)));
    assert.ok(at < 0, `${where}: ${JSON.stringify(s)} survived in …${JSON.stringify(out.slice(Math.max(0, at - 80), at + s.length + 80))}…`);
  }
}

test('random documents: redaction is idempotent, leaves no corpus secret, and counts every placeholder it writes', () => {
  const rand = mulberry32(20261201);
  for (let round = 0; round < 400; round++) {
    const policy: RedactionPolicy = rand() < 0.5 ? 'full' : 'redacted';
    const doc = randomDoc(rand, policy);
    const where = `round ${round} (${policy})`;
    const once = redactText(doc.text, policy);
    assertNoSecret(once.text, doc.secrets, where);
    assert.equal(once.text.match(PLACEHOLDER)?.length ?? 0, total(once.counts), `${where}: placeholders vs counts ${JSON.stringify(once.counts)}`);
    const twice = redactText(once.text, policy);
    assert.equal(twice.text, once.text, `${where}: not idempotent`);
    assert.deepEqual(twice.counts, {}, `${where}: second pass counted`);

    // The same document as a raw JSON body: still valid JSON afterwards, nothing left.
    const raw = JSON.stringify({ messages: [{ role: 'user', content: doc.text }] });
    const rawOut = redactText(raw, policy);
    assert.doesNotThrow(() => JSON.parse(rawOut.text), `${where}: raw JSON broken: ${rawOut.text.slice(0, 300)}`);
    assertNoSecret(rawOut.text, doc.secrets, `${where} raw JSON`);
    assert.equal(redactText(rawOut.text, policy).text, rawOut.text, `${where}: raw JSON not idempotent`);
  }
});

function randomJson(rand: () => number, policy: RedactionPolicy, secrets: string[], depth: number): JsonValue {
  const r = rand();
  if (depth > 6 || r < 0.35) {
    const doc = randomDoc(rand, policy);
    secrets.push(...doc.secrets);
    return rand() < 0.1 ? Math.floor(rand() * 1e6) : rand() < 0.05 ? null : doc.text;
  }
  if (r < 0.6) return Array.from({ length: Math.floor(rand() * 4) }, () => randomJson(rand, policy, secrets, depth + 1));
  const o: Record<string, JsonValue> = {};
  for (let i = Math.floor(rand() * 4); i > 0; i--) {
    // Keys are mostly names, sometimes data (an address, a key) or a credential field.
    const k = rand();
    let key = pick(rand, ['role', 'content', 'name', 'arguments', 'password', 'api_key', 'token', 'metadata']);
    if (k < 0.1) {
      const c = pick(rand, MUST_GO);
      key = c.text;
      if (policy === 'redacted' || policyFor(c.type) === 'full') secrets.push(...c.secrets);
    }
    o[key] = randomJson(rand, policy, secrets, depth + 1);
  }
  return o;
}

test('random JSON values: redactJson is idempotent, leaves no corpus secret in keys or values, and keeps the shape', () => {
  const rand = mulberry32(42);
  for (let round = 0; round < 200; round++) {
    const policy: RedactionPolicy = rand() < 0.5 ? 'full' : 'redacted';
    const secrets: string[] = [];
    const input = randomJson(rand, policy, secrets, 0);
    const before = JSON.stringify(input);
    const once = redactJson(input, policy);
    const out = JSON.stringify(once.value);
    assert.equal(JSON.stringify(input), before, `round ${round}: input changed`);
    assertNoSecret(out, secrets, `round ${round} (${policy})`);
    const twice = redactJson(once.value, policy);
    assert.deepEqual(twice.value, once.value, `round ${round}: not idempotent`);
    assert.deepEqual(twice.counts, {}, `round ${round}: second pass counted`);
    assert.equal(typeof once.value, input === null ? 'object' : typeof input, `round ${round}: type changed`);
    assert.equal(Array.isArray(once.value), Array.isArray(input));
  }
});

test('deep nesting is walked without recursion; past maxDepth (or a cycle) a RedactError is thrown', () => {
  let deep: JsonValue = 'write to deep@example.com';
  for (let i = 0; i < 100_000; i++) deep = i % 2 === 0 ? [deep] : { k: deep };
  const r = redactJson(deep, 'redacted', { maxDepth: 200_000 });
  let v: JsonValue = r.value;
  for (let i = 0; i < 100_000; i++) v = Array.isArray(v) ? (v[0] as JsonValue) : ((v as Record<string, JsonValue>).k as JsonValue);
  assert.equal(v, 'write to [EMAIL]');
  assert.deepEqual(r.counts, { email: 1 });

  assert.throws(
    () => redactJson(deep, 'redacted'),
    (e: unknown) => e instanceof RedactError && e.code === 'SL_REDACT_TOO_DEEP',
  );
  const cyclic: Record<string, unknown> = { a: 'x' };
  cyclic.self = cyclic;
  assert.throws(
    () => redactJson(cyclic as unknown as JsonValue, 'full'),
    (e: unknown) => e instanceof RedactError && e.code === 'SL_REDACT_TOO_DEEP',
  );
  // 128 levels (the gateway's cap) pass with the default bound.
  let capped: JsonValue = 'ok';
  for (let i = 0; i < 128; i++) capped = [capped];
  assert.doesNotThrow(() => redactJson(capped, 'redacted'));
});

test('base64 payloads stay strings, untouched, while secrets around them go', () => {
  const bytes = Buffer.alloc(3 * 1024 * 1024);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 2654435761) >>> 24;
  const data = bytes.toString('base64');
  const body: JsonValue = {
    messages: [
      {
        role: 'user',
        content: [
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data } },
          { type: 'text', text: `key ${KEYS.openaiProject}` },
          { type: 'image_url', image_url: { url: `data:image/png;base64,${data}` } },
        ],
      },
    ],
  };
  const { value, counts } = redactJson(body, 'redacted');
  const content = (value as { messages: Array<{ content: Array<Record<string, JsonValue>> }> }).messages[0]?.content ?? [];
  assert.equal((content[0]?.source as Record<string, JsonValue>).data, data);
  assert.equal(content[1]?.text, 'key [SECRET:openai]');
  assert.equal((content[2]?.image_url as Record<string, JsonValue>).url, `data:image/png;base64,${data}`);
  assert.deepEqual(counts, { 'secret:openai': 1 });

  const text = `see ![x](data:image/png;base64,${data.slice(0, 4096)}) and mail ops@example.com, key ${KEYS.anthropic}`;
  const r = redactText(text, 'redacted');
  assert.equal(r.text, `see ![x](data:image/png;base64,${data.slice(0, 4096)}) and mail [EMAIL], key [SECRET:anthropic]`);
});

test('text that is not ASCII keeps every character around a replacement', () => {
  const text = 'Grüße, 日本 🙂 — schreib an jörg@example.de oder ruf +49 30 12345678 an. ✔';
  const r = redactText(text, 'redacted');
  assert.equal(r.text, 'Grüße, 日本 🙂 — schreib an [EMAIL] oder ruf [PHONE] an. ✔');
  assert.equal(redactText('письмо: иван@пример.рф или ivan@example.com', 'redacted').text, 'письмо: [EMAIL] или [EMAIL]');
});

// Content is chosen by clients, so the detectors must stay linear on hostile text: every
// regex is bounded and every scan resumes past what it has looked at. This is a guard against
// a regression to catastrophic backtracking (it would time out), not a measurement.
test('hostile text (256 KiB of repeated near-matches) is redacted to completion and idempotently', { timeout: 60_000 }, () => {
  const size = 256 * 1024;
  const fill = (unit: string): string => unit.repeat(Math.ceil(size / unit.length)).slice(0, size);
  const units = ['-----BEGIN PRIVATE KEY-----', '1:', 'a1b2:', 'a@', `${'a'.repeat(64)}@${'b'.repeat(200)} `, '4111 ', '+1 2', '1.2.', 'sk-', 'eyJ.', 'password="', 'Bearer ', '://a:', 'AB12', '%40', 'x'.repeat(9000) + '.eyJabc'];
  for (const unit of units) {
    const text = fill(unit);
    const once = redactText(text, 'redacted');
    assert.equal(redactText(once.text, 'redacted').text, once.text, JSON.stringify(unit));
  }
});
