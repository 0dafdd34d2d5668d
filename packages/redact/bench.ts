/**
 * Micro-benchmark of the redaction library (not part of the test suite):
 *
 *   node --import tsx packages/redact/bench.ts [--quick]
 *
 * Prints µs per KiB (median and minimum of rounds) for typical chat text and for a 64 KiB JSON chat
 * request, under both policies. Issue 11 budgets ~5 µs per KiB, spent off the request path.
 * The inputs are built from fixed paragraphs (no randomness), so runs compare.
 */

import { redactJson, redactText } from './src/index.ts';
import type { JsonValue, RedactionPolicy } from './src/index.ts';

const quick = process.argv.includes('--quick');

// Prose, code, numbers, the odd identifier: what prompts and completions are made of. A few
// personal items and secrets so that the replacement path is measured too (about one per KiB).
const PARAGRAPHS = [
  'You are a helpful assistant for an online bookshop. Answer briefly and cite the order number when there is one. Orders ship within 2 business days; express delivery costs $12.50 and arrives the next day before 18:00.',
  'Here is the function that fails on Python 3.11.4 with pandas 2.1.0:\n\n```python\ndef load(path: str) -> pd.DataFrame:\n    df = pd.read_csv(path, parse_dates=["created_at"])\n    return df[df["amount"] > 0].groupby("customer_id").sum()\n```\n\nThe traceback ends with `KeyError: \'amount\'` at line 42.',
  'Summarise the meeting notes from 2024-03-14: the team agreed to move the launch to Q3, raise the budget by 15% to 240,000 EUR, and review the 3 open incidents (INC-20417, INC-20433, INC-20460) next Tuesday at 10:30.',
  'The model returned 1,284 tokens in 3.2 seconds (401 tokens/s). Commit 9f2c1e7a4b3d8e6f0a1b2c3d4e5f6a7b8c9d0e1f fixed the regression; see request 550e8400-e29b-41d4-a716-446655440000 in the logs.',
  'Please write to maria.gonzalez@example.org or call +34 612 345 678 if the delivery to Calle Mayor 12, Madrid fails again.',
  'I think the best approach is to cache the embeddings for each document, keyed by a SHA-256 of the text, and rebuild the index every night. That keeps latency under 200 ms at the 99th percentile for the search endpoint.',
  'Translate into French: "The meeting has been moved to Thursday. Bring the quarterly figures and the draft contract; we will sign if legal agrees."',
  // A key, written as a user pastes one (built at run time: no key-shaped literal in the source).
  `It fails with 401 although I export OPENAI_API_KEY=${['sk', 'proj', 'Xq3v9LmT0bW7yZk2RfN8cJ4hG6dS1aE5pU0oI9uY3tR7eW2qA6sD4fG8hJ1kL5zX'].join('-')} in my shell.`,
  'const client = new OpenAI({ baseURL: "http://gateway.internal:8080/v1" });\nconst res = await client.chat.completions.create({ model: "gpt-4o-mini", messages, temperature: 0.2, max_tokens: 512 });\nconsole.log(res.choices[0].message.content);',
];

function chatText(bytes: number): string {
  let s = '';
  for (let i = 0; s.length < bytes; i++) s += PARAGRAPHS[i % PARAGRAPHS.length] + '\n\n';
  // Flat, as strings from JSON.parse are (a slice would be a view on the longer string).
  return JSON.parse(JSON.stringify(s.slice(0, bytes))) as string;
}

function chatRequest(bytes: number): JsonValue {
  const messages: JsonValue[] = [{ role: 'system', content: PARAGRAPHS[0] ?? '' }];
  const body: JsonValue = {
    model: 'gpt-4o-mini',
    temperature: 0.2,
    max_tokens: 1024,
    user: 'user-8812',
    tools: [
      {
        type: 'function',
        function: {
          name: 'lookup_order',
          description: 'Looks an order up by its number.',
          parameters: { type: 'object', properties: { order_id: { type: 'string', description: 'e.g. ORD-2024-00123' } }, required: ['order_id'] },
        },
      },
    ],
    messages,
  };
  for (let i = 1; JSON.stringify(body).length < bytes; i++) {
    messages.push(
      i % 3 === 0
        ? { role: 'assistant', content: null, tool_calls: [{ id: `call_${i}`, type: 'function', function: { name: 'lookup_order', arguments: `{"order_id":"ORD-2024-${String(i).padStart(5, '0')}"}` } }] }
        : { role: i % 2 === 0 ? 'assistant' : 'user', content: PARAGRAPHS[i % PARAGRAPHS.length] ?? '' },
    );
  }
  return body;
}

function sorted(xs: number[]): number[] {
  return [...xs].sort((a, b) => a - b);
}

/**
 * µs per KiB of `bytes`: rounds of `fn` repeated for 20 ms each, after a time-based warm-up
 * (the JIT and V8's regexp tier-up need a few hundred calls). Median and minimum over the
 * rounds: on a shared machine the minimum is the better estimate of the cost itself.
 */
function measure(bytes: number, fn: () => void): { median: number; min: number } {
  const warm = process.hrtime.bigint();
  while (process.hrtime.bigint() - warm < (quick ? 200_000_000n : 1_000_000_000n)) fn();
  const rounds: number[] = [];
  for (let r = 0; r < (quick ? 9 : 31); r++) {
    let n = 0;
    const t0 = process.hrtime.bigint();
    let t = t0;
    while (t - t0 < 20_000_000n) {
      fn();
      n++;
      t = process.hrtime.bigint();
    }
    rounds.push(Number(t - t0) / 1000 / n / (bytes / 1024));
  }
  const s = sorted(rounds);
  return { median: s[Math.floor(s.length / 2)] ?? NaN, min: s[0] ?? NaN };
}

interface Row {
  name: string;
  policy: RedactionPolicy | '-';
  us: { median: number; min: number };
}

const rows: Row[] = [];
const body = chatRequest(64 * 1024);
const raw = JSON.stringify(body);
rows.push({ name: `JSON.parse of the ${Math.round(raw.length / 1024)} KiB body (reference)`, policy: '-', us: measure(raw.length, () => JSON.parse(raw)) });
for (const policy of ['full', 'redacted'] as const) {
  for (const size of [1024, 16 * 1024, 64 * 1024]) {
    const text = chatText(size);
    rows.push({ name: `chat text ${size / 1024} KiB (redactText)`, policy, us: measure(size, () => redactText(text, policy)) });
  }
  rows.push({ name: `JSON ${Math.round(raw.length / 1024)} KiB, parsed (redactJson)`, policy, us: measure(raw.length, () => redactJson(body, policy)) });
  rows.push({ name: `JSON ${Math.round(raw.length / 1024)} KiB, raw text (redactText)`, policy, us: measure(raw.length, () => redactText(raw, policy)) });
}

console.log(`node ${process.version}, ${quick ? 'quick' : 'full'} run`);
console.log('| input | policy | µs/KiB median | µs/KiB min |');
console.log('| --- | --- | ---: | ---: |');
for (const { name, policy, us } of rows) console.log(`| ${name} | ${policy} | ${us.median.toFixed(2)} | ${us.min.toFixed(2)} |`);
