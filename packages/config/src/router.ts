import type { RouteConfig } from './types.js';

export interface RouteMatch {
  route: RouteConfig;
  /** The pattern that matched, as written (e.g. `gpt-*`). */
  pattern: string;
}

/**
 * Model → provider routing, compiled once at start-up.
 *
 * Exact names win over patterns; among patterns, the first in file order wins. Patterns
 * are `*` globs, anchored at both ends.
 */
export class Router {
  readonly #exact = new Map<string, { route: RouteConfig; pattern: string }>();
  readonly #patterns: { re: RegExp; route: RouteConfig; pattern: string }[] = [];

  constructor(routes: readonly RouteConfig[]) {
    for (const route of routes) {
      for (const pattern of route.match) {
        if (pattern.includes('*')) {
          const re = globToRegExp(pattern);
          this.#patterns.push({ re, route, pattern });
        } else if (!this.#exact.has(pattern)) {
          this.#exact.set(pattern, { route, pattern });
        }
      }
    }
  }

  /** The route for a model, or null when nothing matches. */
  match(model: string): RouteMatch | null {
    const hit = this.#exact.get(model) ?? this.#patterns.find((p) => p.re.test(model));
    if (hit === undefined) return null;
    return { route: hit.route, pattern: hit.pattern };
  }

  /** Every exact model name the configuration lists (for `GET /v1/models`). */
  exactModels(): string[] {
    return [...this.#exact.keys()];
  }
}

/** A model pattern (`*` matches anything, everything else literally), anchored at both ends. */
export function globToRegExp(pattern: string): RegExp {
  return new RegExp(`^${pattern.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);
}
