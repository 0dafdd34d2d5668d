/** Model prices from the configuration's `pricing` list, compiled once: first match wins. */
import { globToRegExp, type PriceConfig } from '@sightline/config';
import type { PriceOf } from './queries.js';

export function priceLookup(pricing: readonly PriceConfig[]): PriceOf {
  const compiled = pricing.flatMap((p) =>
    p.match.map((m) => ({
      re: globToRegExp(m),
      price: { input: p.inputPerMTok, output: p.outputPerMTok, cacheRead: p.cacheReadPerMTok, cacheWrite: p.cacheWritePerMTok },
    })),
  );
  const cache = new Map<string, ReturnType<PriceOf>>();
  return (model) => {
    let hit = cache.get(model);
    if (hit === undefined) {
      hit = compiled.find((c) => c.re.test(model))?.price ?? null;
      if (cache.size < 10_000) cache.set(model, hit);
    }
    return hit;
  };
}
