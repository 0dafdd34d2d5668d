/**
 * Model prices: the configuration's `pricing` entries, then the shipped table below, compiled
 * once into a lookup (first match wins), and the cost arithmetic that uses them. One place, so
 * the query API's cost figures and the gateway's budgets (issue 12) charge the same amounts.
 */
import { globToRegExp } from './router.js';
import type { PriceConfig } from './types.js';

/** Per-million-token prices of a model, in US dollars. */
export interface Price {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
}

/** Price lookup for a model: its prices, or null when no entry matches. */
export type PriceOf = (model: string) => Price | null;

export interface PriceLookupOptions {
  /**
   * Append the shipped table (SHIPPED_PRICES) after `pricing`. Default true; pass the
   * configuration's `pricingDefaults` (`pricing_defaults: false` turns it off).
   */
  shipped?: boolean;
}

/** Distinct model names remembered per lookup; past this, lookups still work, uncached. */
const MEMO_LIMIT = 10_000;

/**
 * Compiles `pricing` (the configuration's entries) followed by the shipped table into a
 * lookup: the first entry with a matching name or `*` glob gives the model's prices, so a
 * configuration entry overrides the shipped price of any model it matches.
 */
export function priceLookup(pricing: readonly PriceConfig[], opts: PriceLookupOptions = {}): PriceOf {
  const entries = opts.shipped === false ? pricing : [...pricing, ...SHIPPED_PRICES.prices];
  const compiled = entries.flatMap((p) => {
    const price: Price = { input: p.inputPerMTok, output: p.outputPerMTok, cacheRead: p.cacheReadPerMTok, cacheWrite: p.cacheWritePerMTok };
    return p.match.map((m) => ({ re: globToRegExp(m), price }));
  });
  // Work per model name happens once: later lookups (the gateway prices every request) are a Map read.
  const memo = new Map<string, Price | null>();
  return (model) => {
    let hit = memo.get(model);
    if (hit === undefined) {
      hit = compiled.find((c) => c.re.test(model))?.price ?? null;
      if (memo.size < MEMO_LIMIT) memo.set(model, hit);
    }
    return hit;
  };
}

/**
 * US dollars for these token counts at price `p`, or null without a price.
 * `input` includes cached tokens for every provider (docs/schema.md), so cache reads and
 * writes are taken out of it and charged at their own prices.
 */
export function costUsd(p: Price | null, input: number, output: number, cacheRead: number, cacheWrite: number): number | null {
  if (p === null) return null;
  return (Math.max(0, input - cacheRead - cacheWrite) * p.input + cacheRead * p.cacheRead + cacheWrite * p.cacheWrite + output * p.output) / 1e6;
}

/** One shipped entry: OpenAI bills no cache writes, so they are charged as input. */
function openai(match: string[], input: number, cachedInput: number, output: number): PriceConfig {
  return { match, inputPerMTok: input, outputPerMTok: output, cacheReadPerMTok: cachedInput, cacheWritePerMTok: input };
}

/** One shipped entry: `cacheWrite` is Anthropic's 5-minute write (1.25 × input). */
function anthropic(match: string[], input: number, cacheWrite5m: number, cacheRead: number, output: number): PriceConfig {
  return { match, inputPerMTok: input, outputPerMTok: output, cacheReadPerMTok: cacheRead, cacheWritePerMTok: cacheWrite5m };
}

/**
 * Prices shipped with Sightline: standard (not batch, flex or priority) list prices in US
 * dollars per million tokens, as published on 2026-12-01 (docs/configuration.md, "Prices").
 *
 * Sources, read on that date:
 * - Anthropic: https://platform.claude.com/docs/en/about-claude/pricing ("Model pricing") and
 *   the model pages https://platform.claude.com/docs/en/models/<model>/overview. Cache write
 *   is the 5-minute write (1.25 × input); 1-hour writes (2 × input) are charged at it too.
 *   Claude Sonnet 5.5's cache read is the price cut on 2026-10-07 ($0.20 → $0.10).
 * - OpenAI: https://developers.openai.com/api/docs/pricing and the model pages
 *   https://developers.openai.com/api/docs/models/<model> (text tokens, standard tier);
 *   cached input is the cache read. OpenAI charges no cache writes for these models.
 *
 * Left out on purpose (see docs/configuration.md): models priced in tiers by prompt length
 * (Claude Haiku 5.5), limited-availability models (Claude Mythos), models whose price could
 * not be confirmed on that date (GPT-5.6 and GPT-6 families, promotional prices; Claude Fable
 * 5.2), `-pro`, realtime, audio, search and image models (other token classes). Long-context
 * surcharges (OpenAI above 272K input tokens; Anthropic's 1M-context beta on Sonnet 4/4.5)
 * are not represented: such requests are charged at these standard prices.
 *
 * Names are exact, or globs only where every name they reach has the same price. Order
 * matters only between overlapping globs (first match wins).
 */
export const SHIPPED_PRICES: { readonly asOf: string; readonly source: string; readonly prices: readonly PriceConfig[] } = {
  asOf: '2026-12-01',
  source: 'https://platform.claude.com/docs/en/about-claude/pricing https://developers.openai.com/api/docs/pricing',
  prices: [
    // OpenAI: GPT-4o and GPT-4.1 families.
    openai(['gpt-4o-mini', 'gpt-4o-mini-2024-07-18'], 0.15, 0.075, 0.6),
    openai(['gpt-4o', 'gpt-4o-2024-08-06', 'gpt-4o-2024-11-20'], 2.5, 1.25, 10),
    // The first GPT-4o snapshot kept its launch price and has no cached-input price.
    openai(['gpt-4o-2024-05-13'], 5, 5, 15),
    openai(['gpt-4.1', 'gpt-4.1-2025-04-14'], 2, 0.5, 8),
    openai(['gpt-4.1-mini', 'gpt-4.1-mini-2025-04-14'], 0.4, 0.1, 1.6),
    openai(['gpt-4.1-nano', 'gpt-4.1-nano-2025-04-14'], 0.1, 0.025, 0.4),
    // OpenAI: o-series reasoning models (reasoning tokens are billed as output).
    openai(['o1', 'o1-2024-12-17'], 15, 7.5, 60),
    openai(['o3', 'o3-2025-04-16'], 2, 0.5, 8),
    openai(['o3-mini', 'o3-mini-2025-01-31'], 1.1, 0.55, 4.4),
    openai(['o4-mini', 'o4-mini-2025-04-16'], 1.1, 0.275, 4.4),
    // OpenAI: GPT-5 family.
    openai(['gpt-5', 'gpt-5-2025-08-07'], 1.25, 0.125, 10),
    openai(['gpt-5-mini', 'gpt-5-mini-2025-08-07'], 0.25, 0.025, 2),
    openai(['gpt-5-nano', 'gpt-5-nano-2025-08-07'], 0.05, 0.005, 0.4),
    openai(['gpt-5.1', 'gpt-5.1-2025-11-13'], 1.25, 0.125, 10),
    openai(['gpt-5.2', 'gpt-5.2-2025-12-11'], 1.75, 0.175, 14),
    openai(['gpt-5.4', 'gpt-5.4-2026-03-05'], 2.5, 0.25, 15),
    openai(['gpt-5.4-mini', 'gpt-5.4-mini-2026-03-17'], 0.75, 0.075, 4.5),
    openai(['gpt-5.4-nano', 'gpt-5.4-nano-2026-03-17'], 0.2, 0.02, 1.25),
    openai(['gpt-5.5', 'gpt-5.5-2026-04-23'], 5, 0.5, 30),
    // OpenAI: embeddings (input only).
    openai(['text-embedding-3-small'], 0.02, 0.02, 0),
    openai(['text-embedding-3-large'], 0.13, 0.13, 0),

    // Anthropic: input, 5-minute cache write, cache read, output.
    anthropic(['claude-fable-5-1'], 10, 12.5, 0.25, 50),
    anthropic(['claude-fable-5'], 10, 12.5, 1, 50),
    anthropic(['claude-opus-5-5'], 4, 5, 0.2, 20),
    anthropic(['claude-opus-5'], 5, 6.25, 0.5, 25),
    anthropic(['claude-opus-4-8*', 'claude-opus-4-7*', 'claude-opus-4-6*', 'claude-opus-4-5*'], 5, 6.25, 0.5, 25),
    anthropic(['claude-opus-4-1*', 'claude-opus-4-0', 'claude-opus-4-2025*', 'claude-3-opus*'], 15, 18.75, 1.5, 75),
    anthropic(['claude-sonnet-5-5'], 2, 2.5, 0.1, 10),
    anthropic(['claude-sonnet-5'], 2, 2.5, 0.2, 10),
    anthropic(['claude-sonnet-4-6*', 'claude-sonnet-4-5*', 'claude-sonnet-4-0', 'claude-sonnet-4-2025*', 'claude-3-7-sonnet*', 'claude-3-5-sonnet*'], 3, 3.75, 0.3, 15),
    anthropic(['claude-haiku-4-5*'], 1, 1.25, 0.1, 5),
    anthropic(['claude-3-5-haiku*'], 0.8, 1, 0.08, 4),
    anthropic(['claude-3-haiku*'], 0.25, 0.3, 0.03, 1.25),
  ],
};
