/**
 * Prices: the lookup order (configuration entries, then the shipped table; first match wins),
 * globs, the cost arithmetic with cache reads and writes, the `pricing_defaults` switch, and
 * the shipped table itself — every entry well-formed, reachable, dated, and the same in
 * docs/configuration.md.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ConfigError, costUsd, loadConfigFile, parseConfig, priceLookup, SHIPPED_PRICES, type PriceConfig } from '@sightline/config';

const shipped = fileURLToPath(new URL('../../../config/sightline.yaml', import.meta.url));
const docs = fileURLToPath(new URL('../../../docs/configuration.md', import.meta.url));

const entry = (match: string[], input: number, output = input * 4): PriceConfig => ({ match, inputPerMTok: input, outputPerMTok: output, cacheReadPerMTok: input / 10, cacheWritePerMTok: input });

test('configuration entries come first and override the shipped table; first match wins', () => {
  const defaults = priceLookup([]);
  assert.equal(defaults('gpt-4o')?.input, 2.5);
  assert.equal(defaults('claude-sonnet-4-5')?.input, 3);

  const priceOf = priceLookup([entry(['gpt-4o'], 1), entry(['claude-*'], 7), entry(['claude-sonnet-4-5'], 9)]);
  assert.equal(priceOf('gpt-4o')?.input, 1, 'an exact configuration entry overrides the shipped price');
  assert.equal(priceOf('gpt-4o-mini')?.input, 0.15, 'other models keep their shipped prices');
  assert.equal(priceOf('claude-haiku-4-5')?.input, 7, 'a configuration glob overrides every shipped model it reaches');
  assert.equal(priceOf('claude-sonnet-4-5')?.input, 7, 'an earlier glob wins over a later exact name');
  assert.equal(priceOf('llama-3'), null);

  // A catch-all at the end of the configuration still loses to nothing shipped: it comes first.
  const catchAll = priceLookup([entry(['*'], 42)]);
  assert.equal(catchAll('gpt-4o')?.input, 42);
  assert.equal(catchAll('anything')?.input, 42);
});

test('shipped: false leaves only the configuration entries', () => {
  const priceOf = priceLookup([entry(['gpt-4o'], 1)], { shipped: false });
  assert.equal(priceOf('gpt-4o')?.input, 1);
  assert.equal(priceOf('gpt-4o-mini'), null);
  assert.equal(priceOf('claude-sonnet-4-5'), null);
  assert.equal(priceLookup([], { shipped: false })('gpt-4o'), null);
});

test('globs are anchored, `*` is the only wildcard, and dotted names are literal', () => {
  const priceOf = priceLookup([entry(['m-*-x'], 1), entry(['gpt-4.1'], 2), entry(['a+b(c)'], 3)], { shipped: false });
  assert.equal(priceOf('m-1-x')?.input, 1);
  assert.equal(priceOf('m--x')?.input, 1, '`*` matches the empty string');
  assert.equal(priceOf('m-1-x2'), null, 'anchored at the end');
  assert.equal(priceOf('zm-1-x'), null, 'anchored at the start');
  assert.equal(priceOf('gpt-4x1'), null, '`.` is a dot, not any character');
  assert.equal(priceOf('a+b(c)')?.input, 3, 'regular-expression characters in names are literal');
  assert.equal(priceOf('aab(c)'), null);

  // Shipped globs reach dated snapshots and aliases, and not the neighbours priced differently.
  const d = priceLookup([]);
  assert.equal(d('claude-3-5-haiku-20241022')?.input, 0.8);
  assert.equal(d('claude-3-5-haiku-latest')?.input, 0.8);
  assert.equal(d('claude-opus-4-5-20251101')?.input, 5);
  assert.equal(d('claude-opus-4-1-20250805')?.input, 15);
  assert.equal(d('claude-opus-4-20250514')?.input, 15);
  assert.equal(d('claude-sonnet-4-20250514')?.input, 3);
  assert.equal(d('gpt-4o-mini-2024-07-18')?.input, 0.15);
  assert.equal(d('gpt-4o-2024-05-13')?.input, 5);
  assert.equal(d('gpt-4o-realtime-preview'), null, 'realtime models bill other token classes: not priced as gpt-4o');
  assert.equal(d('claude-haiku-5-5'), null, 'priced in tiers by prompt length: left out');
});

test('the lookup returns the same answer however often it is asked', () => {
  const priceOf = priceLookup([entry(['x-*'], 1)]);
  const first = priceOf('x-1');
  for (let i = 0; i < 3; i++) assert.equal(priceOf('x-1'), first);
  assert.equal(priceOf('y'), null);
  assert.equal(priceOf('y'), null);
});

test('cost: cache reads and writes are taken out of input and charged at their own prices', () => {
  const p = { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 };
  // 1000 input tokens of which 600 read from and 200 written to the cache, 100 output.
  const expected = (200 * 3 + 600 * 0.3 + 200 * 3.75 + 100 * 15) / 1e6;
  assert.ok(Math.abs(costUsd(p, 1000, 100, 600, 200)! - expected) < 1e-15);
  assert.equal(costUsd(p, 1_000_000, 0, 0, 0), 3);
  assert.equal(costUsd(p, 0, 1_000_000, 0, 0), 15);
  assert.equal(costUsd(p, 1_000_000, 0, 1_000_000, 0), 0.3);
  assert.equal(costUsd(p, 1_000_000, 0, 0, 1_000_000), 3.75);
  // Counts that do not add up (cache tokens above input) never charge negative input.
  assert.equal(costUsd(p, 10, 0, 20, 0), (20 * 0.3) / 1e6);
  assert.equal(costUsd(p, 0, 0, 0, 0), 0);
  assert.equal(costUsd(null, 1000, 100, 0, 0), null);
  // With a shipped price: gpt-4o-mini, 1,000 input (400 cached) and 500 output.
  assert.ok(Math.abs(costUsd(priceLookup([])('gpt-4o-mini'), 1000, 500, 400, 0)! - (600 * 0.15 + 400 * 0.075 + 500 * 0.6) / 1e6) < 1e-15);
});

test('every shipped entry is well-formed, reachable and dated, with its source', () => {
  assert.match(SHIPPED_PRICES.asOf, /^\d{4}-\d{2}-\d{2}$/);
  assert.equal(new Date(`${SHIPPED_PRICES.asOf}T00:00:00Z`).toISOString().slice(0, 10), SHIPPED_PRICES.asOf, 'a real calendar date');
  const sources = SHIPPED_PRICES.source.split(' ');
  assert.ok(sources.length >= 2);
  for (const s of sources) assert.equal(new URL(s).protocol, 'https:', s);
  assert.ok(sources.some((s) => new URL(s).hostname === 'platform.claude.com'));
  assert.ok(sources.some((s) => new URL(s).hostname === 'developers.openai.com'));

  const lookup = priceLookup([]);
  const seen = new Set<string>();
  assert.ok(SHIPPED_PRICES.prices.length >= 20);
  for (const p of SHIPPED_PRICES.prices) {
    const name = p.match.join(', ');
    assert.ok(p.match.length > 0, name);
    for (const v of [p.inputPerMTok, p.outputPerMTok, p.cacheReadPerMTok, p.cacheWritePerMTok]) assert.ok(Number.isFinite(v) && v >= 0, `${name}: ${v}`);
    assert.ok(p.inputPerMTok > 0, `${name}: input price`);
    assert.ok(p.cacheReadPerMTok <= p.inputPerMTok, `${name}: a cache read costs no more than input`);
    const claude = p.match.every((m) => m.startsWith('claude-'));
    const openai = p.match.every((m) => /^(gpt-|o\d|text-embedding-)/.test(m));
    assert.ok(claude !== openai, `${name}: one vendor per entry`);
    if (claude) {
      // Anthropic: 5-minute cache writes are 1.25 × input and cache reads 0.1 × input or less,
      // except Claude Haiku 3, published at $0.30 and $0.03 on $0.25 (1.2 × and 0.12 ×).
      const haiku3 = p.match.includes('claude-3-haiku*');
      assert.ok(Math.abs(p.cacheWritePerMTok - (haiku3 ? 1.2 : 1.25) * p.inputPerMTok) < 1e-9, `${name}: cache write`);
      assert.ok(p.cacheReadPerMTok <= (haiku3 ? 0.12 : 0.1) * p.inputPerMTok + 1e-9, `${name}: cache read`);
      assert.ok(p.outputPerMTok === 5 * p.inputPerMTok, `${name}: Claude output is 5 × input`);
    } else {
      // OpenAI bills no cache writes: they are charged as input.
      assert.equal(p.cacheWritePerMTok, p.inputPerMTok, `${name}: cache write`);
    }
    for (const m of p.match) {
      assert.match(m, /^[a-z0-9][a-z0-9.-]*\*?$/, `${name}: a lower-case name, globs only at the end`);
      assert.ok(!seen.has(m), `${m} is listed twice`);
      seen.add(m);
      // Reachable: no earlier entry shadows the name (or a name the glob stands for).
      const sample = m.endsWith('*') ? `${m.slice(0, -1)}-20991231` : m;
      const got = lookup(sample);
      assert.deepEqual(got, { input: p.inputPerMTok, output: p.outputPerMTok, cacheRead: p.cacheReadPerMTok, cacheWrite: p.cacheWritePerMTok }, `${sample} resolves to the entry that lists ${m}`);
    }
  }
});

test('the mock upstream\'s real model names are priced by the shipped table', () => {
  // Names the tests and bench/mock use; mock-only names (gpt-test, claude-test) are not real models.
  const priceOf = priceLookup([]);
  for (const m of ['gpt-4o', 'gpt-4o-mini', 'gpt-4o-2024-08-06', 'gpt-4.1', 'gpt-4.1-mini', 'o3-mini', 'o4-mini', 'text-embedding-3-small', 'text-embedding-3-large', 'claude-3-5-haiku', 'claude-3-5-haiku-20241022', 'claude-haiku-4-5', 'claude-sonnet-4-5', 'claude-sonnet-4-5-20250929', 'claude-opus-4-1']) {
    assert.notEqual(priceOf(m), null, m);
  }
});

test('docs/configuration.md lists the shipped table as the code has it, with its date', () => {
  const text = readFileSync(docs, 'utf8');
  assert.ok(text.includes(`as of ${SHIPPED_PRICES.asOf}`), 'the date');
  for (const s of SHIPPED_PRICES.source.split(' ')) assert.ok(text.includes(s), s);
  const usd = (n: number) => `$${n.toFixed(Math.max(2, (String(n).split('.')[1] ?? '').length))}`;
  for (const p of SHIPPED_PRICES.prices) {
    const row = `| ${p.match.map((m) => `\`${m}\``).join(', ')} | ${usd(p.inputPerMTok)} | ${usd(p.cacheReadPerMTok)} | ${usd(p.cacheWritePerMTok)} | ${usd(p.outputPerMTok)} |`;
    assert.ok(text.includes(row), `missing or different in the docs: ${row}`);
  }
});

const base = `
providers:
  up: { type: openai-compatible, base_url: "http://127.0.0.1:1/v1" }
routes:
  - { match: "m-*", provider: up }
`;

test('pricing_defaults: on unless set to false; the shipped file keeps it on', () => {
  assert.equal(parseConfig(base, 'x.yaml').pricingDefaults, true);
  assert.equal(parseConfig(`${base}pricing_defaults: false\n`, 'x.yaml').pricingDefaults, false);
  assert.equal(parseConfig(`${base}pricing_defaults: \${PD:-true}\n`, 'x.yaml', { env: (n) => (n === 'PD' ? 'false' : undefined) }).pricingDefaults, false);
  assert.throws(() => parseConfig(`${base}pricing_defaults: maybe\n`, 'x.yaml'), (e: unknown) => e instanceof ConfigError && /pricing_defaults: must be true or false/.test(e.message));

  const cfg = loadConfigFile(shipped, { env: () => undefined });
  assert.equal(cfg.pricingDefaults, true);
  const priceOf = priceLookup(cfg.pricing, { shipped: cfg.pricingDefaults });
  assert.notEqual(priceOf('gpt-4o-mini'), null, 'the shipped configuration prices the common models');
  assert.notEqual(priceOf('claude-sonnet-4-5'), null);
});

test('pricing entries: defaults, order kept, and bad entries named', () => {
  const cfg = parseConfig(`${base}pricing:\n  - { match: "m-1", input_per_mtok: 2, output_per_mtok: 8 }\n  - { match: ["m-*", "n"], input_per_mtok: 1, output_per_mtok: 2, cache_read_per_mtok: 0.1, cache_write_per_mtok: 1.25 }\n`, 'x.yaml');
  assert.deepEqual(cfg.pricing, [
    { match: ['m-1'], inputPerMTok: 2, outputPerMTok: 8, cacheReadPerMTok: 2, cacheWritePerMTok: 2 },
    { match: ['m-*', 'n'], inputPerMTok: 1, outputPerMTok: 2, cacheReadPerMTok: 0.1, cacheWritePerMTok: 1.25 },
  ]);
  assert.equal(priceLookup(cfg.pricing)('m-1')?.input, 2, 'file order: the first entry wins');
  const bad = (yaml: string, re: RegExp) => assert.throws(() => parseConfig(`${base}${yaml}`, 'x.yaml'), (e: unknown) => e instanceof ConfigError && re.test(e.message), yaml);
  bad('pricing:\n  - { match: "", input_per_mtok: 1, output_per_mtok: 1 }\n', /pricing\[0\]\.match: must not be empty/);
  bad('pricing:\n  - { match: [], input_per_mtok: 1, output_per_mtok: 1 }\n', /pricing\[0\]\.match: must name at least one model/);
  bad('pricing:\n  - { match: "m", input_per_mtok: 1 }\n', /pricing\[0\]: needs input_per_mtok and output_per_mtok/);
  bad('pricing:\n  - { match: "m", input_per_mtok: -1, output_per_mtok: 1 }\n', /pricing\[0\]\.input_per_mtok/);
  bad('pricing:\n  - { match: "m", input_per_mtok: 1, output_per_mtok: 1, price: 3 }\n', /pricing\[0\]/);
});
