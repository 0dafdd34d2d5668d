/**
 * Model prices from the configuration's `pricing` list, compiled once (first match wins),
 * and the cost arithmetic that uses them.
 */
import { globToRegExp, type PriceConfig } from '@sightline/config';

/** Per-million-token prices of a model, in US dollars. */
export interface Price {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
}

/** Price lookup for a model: its prices, or null when no `pricing` entry matches. */
export type PriceOf = (model: string) => Price | null;

export function priceLookup(pricing: readonly PriceConfig[]): PriceOf {
  const compiled = pricing.flatMap((p) =>
    p.match.map((m) => ({
      re: globToRegExp(m),
      price: { input: p.inputPerMTok, output: p.outputPerMTok, cacheRead: p.cacheReadPerMTok, cacheWrite: p.cacheWritePerMTok },
    })),
  );
  const cache = new Map<string, Price | null>();
  return (model) => {
    let hit = cache.get(model);
    if (hit === undefined) {
      hit = compiled.find((c) => c.re.test(model))?.price ?? null;
      if (cache.size < 10_000) cache.set(model, hit);
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
