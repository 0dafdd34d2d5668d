/** JSON values as JSON.parse returns them, and the few readers content handling needs. */

export type Json = null | boolean | number | string | Json[] | JsonObject;
export interface JsonObject {
  [key: string]: Json;
}

export function isObject(v: Json | undefined): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The string at `v`, or null. */
export function str(v: Json | undefined): string | null {
  return typeof v === 'string' ? v : null;
}

/** A non-negative safe integer at `v`, or `fallback`. */
export function index(v: Json | undefined, fallback: number): number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : fallback;
}

/** JSON.parse that answers `undefined` instead of throwing. */
export function parseJson(text: string): Json | undefined {
  try {
    return JSON.parse(text) as Json;
  } catch {
    return undefined;
  }
}
