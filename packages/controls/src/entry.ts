/**
 * The shared state of one limit in one window: a JSON entry of the key-value bucket
 * `sightline-limits` (docs/governance.md, "The bucket"), changed only by compare-and-set on
 * its revision, so every change is computed from the state it replaces.
 *
 *   key    `<kind>.<scope>.<id>.<slot>`   e.g. `req.key.key_3F….0`, `usd.team.research.1`
 *   value  { v, period, start, limit, used, presumed, holders: { <instance>: { lease, expires } }, updated }
 *
 * Units: requests, tokens, or nano-USD (integers: sums stay exact; a budget up to
 * $9,007,199 per period is exact, larger ones are capped there).
 *
 * `used` is what instances reported as consumed (plus `presumed`); a holder's `lease` is the
 * capacity it took and has not yet reported as consumed (its requests in flight and its unused
 * capacity). What is left for new leases is `limit − used − Σ lease`. An instance admits only
 * against its own lease, so consumption never exceeds what was taken, and what was taken never
 * exceeds the limit.
 */
import type { Period } from './windows.js';

export type MeterKind = 'requests' | 'tokens' | 'budget';
export type ScopeKind = 'key' | 'team';

export interface Holder {
  lease: number;
  /** Unix ms after which another instance may presume this lease spent (its holder stopped renewing). */
  expires: number;
  /** Of `lease`, what was in flight or consumed but not yet reported at the holder's last write (for the views). */
  busy?: number;
  /** The holder's count of its writes to this entry: tells it whether a write it did not hear back from happened. */
  seq?: number;
}

export interface LimitEntry {
  v: 1;
  period: Period;
  /** Window start, Unix ms. */
  start: number;
  /** The limit as the last writer knew it (for the views; admission uses its own directory's). */
  limit: number;
  used: number;
  /** Of `used`: expired leases, counted as spent because nobody can know how much of them their dead holder used. */
  presumed: number;
  holders: Record<string, Holder>;
  updated: number;
}

const KIND_CODE: Record<MeterKind, string> = { requests: 'req', tokens: 'tok', budget: 'usd' };

/**
 * KV keys are NATS subject tokens ([-/_=.A-Za-z0-9], no empty token): any other character of an
 * id, and `.`, is written `=XXXX` (its UTF-16 code unit in hex; `=` itself included), so every id
 * maps to one key and back.
 */
export function escapeId(id: string): string {
  if (/^[A-Za-z0-9_-]+$/.test(id)) return id;
  let out = '';
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    const ch = id[i]!;
    out += /[A-Za-z0-9_-]/.test(ch) ? ch : `=${c.toString(16).toUpperCase().padStart(4, '0')}`;
  }
  return out === '' ? '=' : out;
}

export function kvKey(kind: MeterKind, scope: ScopeKind, id: string, slot: 0 | 1): string {
  return `${KIND_CODE[kind]}.${scope}.${escapeId(id)}.${slot}`;
}

export const NANO_PER_USD = 1e9;

/** USD → nano-USD, rounded up (a reservation or a cost is never undercounted); 1e-6 absorbs float noise such as 0.0003 × 1e9 = 300000.00000000006. */
export function nanoUp(usd: number): number {
  return Math.min(Number.MAX_SAFE_INTEGER, Math.max(0, Math.ceil(usd * NANO_PER_USD - 1e-6)));
}

/** A budget in nano-USD, rounded down. */
export function nanoDown(usd: number): number {
  return Math.min(Number.MAX_SAFE_INTEGER, Math.max(0, Math.floor(usd * NANO_PER_USD + 1e-6)));
}

export function freshEntry(period: Period, start: number, limit: number, nowMs: number): LimitEntry {
  return { v: 1, period, start, limit, used: 0, presumed: 0, holders: {}, updated: nowMs };
}

/** A copy a writer may change (the holders one by one) while the original stays as read. */
export function copyEntry(e: LimitEntry): LimitEntry {
  return { ...e, holders: { ...e.holders } };
}

/**
 * Moves the leases of holders other than `self` that expired by `nowMs` into `used` (and
 * `presumed`): their holder stopped renewing, and whatever it admitted against them is spent
 * for all we know. A negative lease (a holder that consumed more than it took, e.g. fail-open
 * admissions) is dropped: its excess is already in `used`. Changes `e`; returns how many were swept.
 */
export function sweepExpired(e: LimitEntry, nowMs: number, self: string): number {
  let n = 0;
  for (const id in e.holders) {
    if (id === self) continue;
    const h = e.holders[id]!;
    if (h.expires > nowMs) continue;
    if (h.lease > 0) {
      e.used += h.lease;
      e.presumed += h.lease;
    }
    delete e.holders[id];
    n++;
  }
  return n;
}

/** Σ lease over the holders, and how many hold a positive lease. */
export function leaseTotals(e: LimitEntry, except: string | null = null): { sum: number; active: number } {
  let sum = 0;
  let active = 0;
  for (const id in e.holders) {
    if (id === except) continue;
    const l = e.holders[id]!.lease;
    sum += l;
    if (l > 0) active++;
  }
  return { sum, active };
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function encodeEntry(e: LimitEntry): Uint8Array {
  return encoder.encode(JSON.stringify(e));
}

function isNum(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

/** The entry, or null when the bytes are not one (a writer then starts the window afresh). */
export function decodeEntry(data: Uint8Array): LimitEntry | null {
  try {
    return asEntry(JSON.parse(decoder.decode(data)));
  } catch {
    return null;
  }
}

/** `v` when it has the shape of an entry, else null. */
export function asEntry(v: unknown): LimitEntry | null {
  const e = v as LimitEntry;
  if (typeof v !== 'object' || v === null || e.v !== 1) return null;
  if (e.period !== 'minute' && e.period !== 'day' && e.period !== 'month') return null;
  if (!isNum(e.start) || !isNum(e.limit) || !isNum(e.used) || !isNum(e.presumed) || !isNum(e.updated)) return null;
  if (typeof e.holders !== 'object' || e.holders === null) return null;
  for (const id in e.holders) {
    const h = e.holders[id];
    if (typeof h !== 'object' || h === null || !isNum(h.lease) || !isNum(h.expires)) return null;
    if ((h.busy !== undefined && !isNum(h.busy)) || (h.seq !== undefined && !isNum(h.seq))) return null;
  }
  return e;
}
