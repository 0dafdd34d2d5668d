/** Defaults and checks shared by both caches. */
import { CacheError } from './errors.js';

export const MiB = 1024 * 1024;
/** Memory per process for entries. Each gateway worker holds its own copy of what it watched. */
export const DEFAULT_MAX_BYTES = 64 * MiB;
/** NATS's default max_payload (https://docs.nats.io/running-a-nats-service/configuration#limits); the embedded mode keeps the same bound so both modes cache the same answers. */
export const DEFAULT_MAX_ENTRY_BYTES = 1 * MiB;
export const DEFAULT_SWEEP_INTERVAL_MS = 1000;

export function positive(field: string, v: number | undefined, dflt: number): number {
  if (v === undefined) return dflt;
  if (!Number.isFinite(v) || v <= 0) throw new CacheError('SL_CACHE_OPTION', `${field}: must be a positive number, got ${String(v)}`, field);
  return v;
}
