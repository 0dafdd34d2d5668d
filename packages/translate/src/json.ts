/** Internal narrowing helpers for parsed JSON (`unknown` in, typed out). Not exported from the package. */

export type JsonObject = Record<string, unknown>;

export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function asObject(v: unknown): JsonObject | null {
  return isObject(v) ? v : null;
}

export function asString(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

/** A finite, non-negative number, else null. */
export function asCount(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null;
}

/** JSON.parse that returns undefined instead of throwing. */
export function tryParseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
