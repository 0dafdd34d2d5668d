/**
 * The lease machinery shared by the NATS and the in-process governors (docs/governance.md).
 *
 * Every limit that applies to a request (a key's or team's requests or tokens per minute, or
 * budget per day or month) is a *meter* in this process, one per window. A meter admits only
 * against its *lease*: capacity this instance took from the shared entry of that limit and
 * window (entry.ts) by compare-and-set. So:
 *
 *   admitted by all instances  ≤  Σ leases taken  ≤  limit.
 *
 * Admission (`admit`) is arithmetic on the meter's fields: no I/O, no await, and no
 * allocation besides the ticket. The shared store is used in the background (`#sync`): to take
 * a lease before this one runs out (sized to the recent demand, at most half of a fair share of
 * what is left, so it shrinks to one unit near the end), to report what settled requests used,
 * to renew the lease's expiry, and to give unused capacity back when the meter is idle.
 *
 * A meter with no lease yet (the first request of a limit in a window on this instance) cannot
 * decide alone: with an asynchronous store it answers `Wait` — one compare-and-set, ~0.3 ms —
 * unless its view of the shared entry is fresh and shows the limit used up (then it refuses).
 * Near the end of a window the next window's lease is taken ahead, so a limit in steady use
 * does not wait at the turn of the minute.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { ControlsError } from './errors.js';
import { copyEntry, freshEntry, kvKey, leaseTotals, nanoDown, nanoUp, NANO_PER_USD, sweepExpired, type LimitEntry, type MeterKind, type ScopeKind } from './entry.js';
import {
  DEFAULT_UNAVAILABLE_POLICY,
  type Actual,
  type Admission,
  type Admitted,
  type Budget,
  type GovernorStatus,
  type Limits,
  type RateHeaders,
  type RefusalReason,
  type Refused,
  type ScopeUsage,
  type Ticket,
  type UnavailablePolicy,
  type UsageQuery,
  type Verdict,
  type Wait,
} from './types.js';
import { windowEnd, windowSlot, windowStart, type Period } from './windows.js';

/** An entry as read, with the revision a compare-and-set must name (0: the key has no value). */
export interface Stored {
  entry: LimitEntry | null;
  revision: number;
}

/** What the engine needs of the shared store. */
export interface Backend {
  readonly source: 'nats' | 'memory';
  /** True: `getSync`/`putSync` work and every exchange is synchronous (the in-process store). */
  readonly sync: boolean;
  /** The store can be reached now. */
  available(): boolean;
  error(): string | null;
  get(key: string): Promise<Stored>;
  /** Writes `entry` if the key is still at `revision`; the new revision, or null when another writer came first. */
  put(key: string, entry: LimitEntry, revision: number): Promise<number | null>;
  getSync(key: string): Stored;
  putSync(key: string, entry: LimitEntry, revision: number): number | null;
}

export interface GovernorOptions {
  /** Wall clock of the background work (lease expiry, windows); `admit` and `settle` take theirs as an argument. Default `Date.now`. */
  clock?: () => number;
  /** This instance's name in the shared entries. Default `<hostname>/<pid>/<random>`, new for every governor. */
  holderId?: string;
  /**
   * How long a lease stays valid without renewal (renewed every third of it while held). After
   * it another instance counts the lease as spent: the bound of how long a crashed instance's
   * lease is held apart, and of how long an instance cut off from NATS keeps its own. Default 30 000.
   */
  leaseTtlMs?: number;
  /** A meter without requests for this long gives its unused lease back. Default 2000. */
  idleMs?: number;
  /** A lease is sized to this much of the recent demand (then capped by a fair share of what is left). Default 1000. */
  horizonMs?: number;
  /** Period of the background pass (reports, idle returns, renewals, next-window leases). Default 100. */
  tickMs?: number;
  /** Consumption is reported to the shared entry at least this often while there is some (for the views: the bounds do not depend on it). Default 1000. */
  flushMs?: number;
  /** A view of the shared entry younger than this may refuse without asking the store again. Default 1000. */
  viewFreshMs?: number;
  /** A `Wait` resolves within this; an exchange that takes longer counts as the store being unavailable. Default 500. */
  waitTimeoutMs?: number;
  /** Compare-and-set attempts of one background exchange before giving up. Default 20. */
  casAttempts?: number;
  /** The next window's lease is taken this long before it starts, for limits in use. Default 2000. */
  prefetchMs?: number;
  /** After a failed exchange with the store, the unavailable policy applies for this long. Default 1000. */
  errorHoldMs?: number;
  /** State changes (store unreachable, leases lost) are reported here. Default: nowhere. */
  log?: (message: string) => void;
}

type Required2<T> = { [K in keyof T]-?: Exclude<T[K], undefined> };

const KIND_OF: readonly MeterKind[] = ['requests', 'tokens', 'budget'];
const REQ = 0;
const TOK = 1;
const USD = 2;

/** One limit of one scope in one window, as this instance holds it. */
class Meter {
  /** Current limit in units (requests, tokens, nano-USD), from the latest admission. */
  limit = 0;
  /** Capacity of the lease not reserved: admissions take from it. Negative: consumed beyond the lease (fail-open, or a settle above its reservation). */
  free = 0;
  /** The lease as the shared entry shows it after our last write. */
  held = 0;
  /** Consumption not yet reported to the shared entry (moved from our lease to `used` by the next write). */
  unreported = 0;
  /** Reservations of requests not yet settled (tokens and budget meters). */
  inflight = 0;
  /** used + Σ leases of the entry at our last read or write; NaN: never seen. */
  seenTaken = Number.NaN;
  seenUsed = 0;
  seenAt = Number.NEGATIVE_INFINITY;
  /** Units asked since the demand estimate was last updated, and the estimate (units per ms). */
  asked = 0;
  rateAt: number;
  rate = 0;
  /** The largest single request seen: a lease always fits one. */
  maxAsk = 1;
  lastAsk = Number.NEGATIVE_INFINITY;
  /** A request is waiting for this much free capacity. */
  need = 0;
  /** Refill in the background once `free` drops below this. */
  refillBelow = 0;
  lastWrite = Number.NEGATIVE_INFINITY;
  /** The background exchanges in progress (one at a time per meter), and when the current one started. */
  syncing: Promise<void> | null = null;
  roundStarted = 0;
  /** Run another exchange after this one: something changed while it was on its way. */
  again = false;
  /** Admissions waiting for the current exchange (created when the first one waits). */
  waiters: { promise: Promise<void>; release: () => void } | null = null;
  /** The next exchange must read the entry (not trust our last write's copy): a refusal's recheck. */
  mustRead = false;
  lastRecheck = Number.NEGATIVE_INFINITY;
  failedAt = Number.NEGATIVE_INFINITY;
  cached: Stored | null = null;
  /** Our writes to the entry so far: each one stamps our holder record, so a write whose answer was lost can be recognised. */
  writes = 0;
  /** A write sent whose outcome is unknown (the answer timed out or the connection dropped). */
  uncertain: Plan | null = null;
  retired = false;

  constructor(
    readonly kind: number,
    readonly scope: ScopeKind,
    readonly id: string,
    readonly period: Period,
    readonly start: number,
    readonly end: number,
    readonly key: string,
    createdAt: number,
  ) {
    this.rateAt = createdAt;
  }
}

interface Slot {
  cur: Meter | null;
  next: Meter | null;
  /** The shared entry was seen in a later window than our clock says (skew): no meter before it. */
  minStart: number;
  minPeriod: Period | null;
}

class ScopeState {
  readonly slots: [Slot, Slot, Slot] = [
    { cur: null, next: null, minStart: 0, minPeriod: null },
    { cur: null, next: null, minStart: 0, minPeriod: null },
    { cur: null, next: null, minStart: 0, minPeriod: null },
  ];
  lastUse = 0;
  constructor(
    readonly scope: ScopeKind,
    readonly id: string,
  ) {}
}

/**
 * The admission's proof, its own `Admitted` verdict and its headers in one object: the only
 * allocation of an admission. It keeps the meters whose reservations settle corrects.
 */
class TicketImpl implements Ticket, Admitted, RateHeaders {
  readonly ok = true as const;
  settled = false;
  kt: Meter | null = null;
  ktUnits = 0;
  tt: Meter | null = null;
  ttUnits = 0;
  ku: Meter | null = null;
  kuUnits = 0;
  tu: Meter | null = null;
  tuUnits = 0;
  limitRequests: number | undefined = undefined;
  remainingRequests: number | undefined = undefined;
  resetRequestsAtMs: number | undefined = undefined;
  limitTokens: number | undefined = undefined;
  remainingTokens: number | undefined = undefined;
  resetTokensAtMs: number | undefined = undefined;
  get ticket(): Ticket {
    return this;
  }
  get headers(): RateHeaders {
    return this;
  }
}

/** No limit applies: one shared verdict, settled in advance. */
const UNLIMITED = new TicketImpl();
UNLIMITED.settled = true;

interface Plan {
  entry: LimitEntry;
  /** The holder stamp this write carries. */
  seq: number;
  lost: boolean;
  report: number;
  take: number;
  give: number;
  heldAfter: number;
  takenAfter: number;
  usedAfter: number;
  target: number;
}

const OBSOLETE = Symbol('obsolete');

const enum Need {
  Ok,
  Wait,
  Exhausted,
  Unavailable,
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function usd(nano: number): number {
  return nano / NANO_PER_USD;
}

function whole(n: number): number {
  return n > 0 ? Math.ceil(n) : 0;
}

export class Engine {
  readonly #backend: Backend;
  readonly #o: Required2<Omit<GovernorOptions, 'holderId'>>;
  readonly #id: string;
  readonly #keys = new Map<string, ScopeState>();
  readonly #teams = new Map<string, ScopeState>();
  /** Scratch of one admission (admission is synchronous, so one set serves all). */
  readonly #ms: Meter[] = [];
  readonly #us: number[] = [0, 0, 0, 0, 0, 0];
  readonly #timer: NodeJS.Timeout;
  #closed = false;
  #closing = false;
  #error: string | null = null;
  #failedOpen = 0;
  #failedClosed = 0;
  #waits = 0;

  constructor(backend: Backend, opts: GovernorOptions = {}) {
    this.#backend = backend;
    const positive = (v: number | undefined, d: number, field: string): number => {
      if (v === undefined) return d;
      if (!Number.isFinite(v) || v <= 0) throw new ControlsError('SL_CTL_INVALID', `${field}: must be a positive number of milliseconds`, field);
      return v;
    };
    this.#o = {
      clock: opts.clock ?? Date.now,
      leaseTtlMs: positive(opts.leaseTtlMs, 30_000, 'leaseTtlMs'),
      idleMs: positive(opts.idleMs, 2000, 'idleMs'),
      horizonMs: positive(opts.horizonMs, 1000, 'horizonMs'),
      tickMs: positive(opts.tickMs, 100, 'tickMs'),
      flushMs: positive(opts.flushMs, 1000, 'flushMs'),
      viewFreshMs: positive(opts.viewFreshMs, 1000, 'viewFreshMs'),
      waitTimeoutMs: positive(opts.waitTimeoutMs, 500, 'waitTimeoutMs'),
      casAttempts: positive(opts.casAttempts, 20, 'casAttempts'),
      prefetchMs: positive(opts.prefetchMs, 2000, 'prefetchMs'),
      errorHoldMs: positive(opts.errorHoldMs, 1000, 'errorHoldMs'),
      log: opts.log ?? (() => {}),
    };
    this.#id = opts.holderId ?? `${hostname()}/${process.pid}/${randomBytes(4).toString('hex')}`;
    for (let i = 0; i < 6; i++) this.#ms.push(null as unknown as Meter);
    this.#timer = setInterval(() => this.#tick(), this.#o.tickMs);
    this.#timer.unref();
  }

  get holderId(): string {
    return this.#id;
  }

  // ---- admission: synchronous, in memory ---------------------------------------------------

  admit(a: Admission, nowMs: number, mayWait = true): Verdict {
    const kl = a.keyLimits;
    const tl = a.teamLimits;
    const kb = a.keyBudget;
    const tb = a.teamBudget;
    if (kl === null && tl === null && kb === null && tb === null) return UNLIMITED;
    const ms = this.#ms;
    const us = this.#us;
    let n = 0;
    if (kl !== null || kb !== null) {
      const s = this.#scope(this.#keys, 'key', a.keyId, nowMs);
      if (kl !== null) {
        if (kl.requests_per_minute !== undefined) {
          ms[n] = this.#meter(s, REQ, kl.requests_per_minute, 'minute', nowMs);
          us[n++] = 1;
        }
        if (kl.tokens_per_minute !== undefined) {
          ms[n] = this.#meter(s, TOK, kl.tokens_per_minute, 'minute', nowMs);
          us[n++] = whole(a.tokens);
        }
      }
      if (kb !== null) {
        if (a.costUsd === null) return this.#unpriced('key', a.keyId, kb, nowMs, n);
        ms[n] = this.#meter(s, USD, nanoDown(kb.usd), kb.period, nowMs);
        us[n++] = nanoUp(a.costUsd);
      }
    }
    if (tl !== null || tb !== null) {
      const s = this.#scope(this.#teams, 'team', a.team, nowMs);
      if (tl !== null) {
        if (tl.requests_per_minute !== undefined) {
          ms[n] = this.#meter(s, REQ, tl.requests_per_minute, 'minute', nowMs);
          us[n++] = 1;
        }
        if (tl.tokens_per_minute !== undefined) {
          ms[n] = this.#meter(s, TOK, tl.tokens_per_minute, 'minute', nowMs);
          us[n++] = whole(a.tokens);
        }
      }
      if (tb !== null) {
        if (a.costUsd === null) return this.#unpriced('team', a.team, tb, nowMs, n);
        ms[n] = this.#meter(s, USD, nanoDown(tb.usd), tb.period, nowMs);
        us[n++] = nanoUp(a.costUsd);
      }
    }

    // Decide every meter before reserving on any: all pass, or nothing is reserved.
    let refusal: Refused | null = null;
    let waitOn: Meter | null = null;
    let open = false;
    for (let i = 0; i < n; i++) {
      const m = ms[i]!;
      const u = us[i]!;
      m.asked += u;
      m.lastAsk = nowMs;
      if (u > m.maxAsk) m.maxAsk = u;
      if (u === 0 || m.free >= u) continue;
      if (u > m.limit) {
        refusal ??= this.#refusal(m, 'too_large', u, nowMs, n);
        continue;
      }
      const d = this.#short(m, u, nowMs, mayWait);
      if (d === Need.Ok) continue;
      if (d === Need.Wait) waitOn ??= m;
      else if (d === Need.Exhausted) refusal ??= this.#refusal(m, 'exhausted', u, nowMs, n);
      else if (this.#mode(a.whenUnavailable, m) === 'fail_open') open = true;
      else refusal ??= this.#refusal(m, 'unavailable', u, nowMs, n);
    }
    if (refusal !== null) {
      if (refusal.reason === 'unavailable') this.#failedClosed++;
      return refusal;
    }
    if (waitOn !== null) {
      this.#waits++;
      const w: Wait = { ok: 'wait', ready: this.#waitFor(waitOn) };
      return w;
    }
    if (open) this.#failedOpen++;

    const t = new TicketImpl();
    for (let i = 0; i < n; i++) {
      const m = ms[i]!;
      const u = us[i]!;
      m.free -= u;
      if (m.kind === REQ) {
        m.unreported += u; // a request is consumed when admitted
        this.#rateHeader(t, m, true);
      } else {
        m.inflight += u;
        if (m.kind === TOK) {
          if (m.scope === 'key') {
            t.kt = m;
            t.ktUnits = u;
          } else {
            t.tt = m;
            t.ttUnits = u;
          }
          this.#rateHeader(t, m, false);
        } else if (m.scope === 'key') {
          t.ku = m;
          t.kuUnits = u;
        } else {
          t.tu = m;
          t.tuUnits = u;
        }
      }
      if (m.free < m.refillBelow && !this.#backend.sync) this.#kick(m);
    }
    return t;
  }

  settle(t: Ticket, actual: Actual, _nowMs: number): void {
    if (!(t instanceof TicketImpl) || t.settled) return;
    t.settled = true;
    const tokens = whole(actual.tokens);
    if (t.kt !== null) this.#correct(t.kt, t.ktUnits, tokens);
    if (t.tt !== null) this.#correct(t.tt, t.ttUnits, tokens);
    if (t.ku !== null || t.tu !== null) {
      // An unknown cost is charged at the reservation: the upper bound.
      const cost = actual.costUsd === null ? -1 : nanoUp(actual.costUsd);
      if (t.ku !== null) this.#correct(t.ku, t.kuUnits, cost < 0 ? t.kuUnits : cost);
      if (t.tu !== null) this.#correct(t.tu, t.tuUnits, cost < 0 ? t.tuUnits : cost);
    }
  }

  #correct(m: Meter, reserved: number, used: number): void {
    // A request is charged to the window it was admitted in; that window's meter is gone once it ended.
    if (m.retired) return;
    m.inflight -= reserved;
    m.free += reserved - used;
    m.unreported += used;
    if (m.free < 0 && !this.#backend.sync) this.#kick(m);
  }

  #scope(map: Map<string, ScopeState>, scope: ScopeKind, id: string, nowMs: number): ScopeState {
    let s = map.get(id);
    if (s === undefined) {
      s = new ScopeState(scope, id);
      map.set(id, s);
    }
    s.lastUse = nowMs;
    return s;
  }

  #meter(s: ScopeState, kind: number, limit: number, period: Period, nowMs: number): Meter {
    const slot = s.slots[kind]!;
    const m = slot.cur;
    // Fast path: the window is current (an earlier `nowMs` than the window's start, from a
    // caller's clock behind the store's, stays in it rather than going back).
    if (m !== null && nowMs < m.end && m.period === period && !m.retired) {
      m.limit = limit;
      return m;
    }
    return this.#roll(s, slot, kind, limit, period, nowMs);
  }

  #roll(s: ScopeState, slot: Slot, kind: number, limit: number, period: Period, nowMs: number): Meter {
    let start = windowStart(period, nowMs);
    if (slot.minPeriod === period && slot.minStart > start) start = slot.minStart;
    const nx = slot.next;
    let m: Meter;
    if (nx !== null && !nx.retired && nx.period === period && nx.start === start) {
      m = nx;
      slot.next = null;
    } else {
      if (nx !== null && (nx.period !== period || nx.start <= start)) {
        nx.retired = true;
        slot.next = null;
      }
      m = this.#newMeter(s, kind, period, start, nowMs);
    }
    if (slot.cur !== null) slot.cur.retired = true;
    slot.cur = m;
    m.limit = limit;
    return m;
  }

  #newMeter(s: ScopeState, kind: number, period: Period, start: number, nowMs: number): Meter {
    return new Meter(kind, s.scope, s.id, period, start, windowEnd(period, start), kvKey(KIND_OF[kind]!, s.scope, s.id, windowSlot(period, start)), nowMs);
  }

  /** The meter lacks free capacity for `u`: take it now (in-process store), wait for a lease, or refuse. */
  #short(m: Meter, u: number, nowMs: number, mayWait: boolean): Need {
    if (this.#closed || !this.#backend.available()) return Need.Unavailable;
    if (this.#backend.sync) {
      if (u > m.need) m.need = u;
      this.#syncNow(m);
      return m.free >= u ? Need.Ok : Need.Exhausted;
    }
    if (nowMs - m.failedAt < this.#o.errorHoldMs) return Need.Unavailable;
    if (m.syncing !== null && this.#o.clock() - m.roundStarted > this.#o.waitTimeoutMs) return Need.Unavailable;
    if (nowMs - m.seenAt < this.#o.viewFreshMs && m.limit - m.seenTaken + m.free < u) {
      // Used up as of a fresh view. Capacity may still come back (an idle instance returning
      // its lease): look again in the background, at most every quarter of a second.
      if (nowMs - m.lastRecheck >= 250) {
        m.lastRecheck = nowMs;
        m.mustRead = true;
        this.#kick(m);
      }
      return Need.Exhausted;
    }
    if (u > m.need) m.need = u;
    this.#kick(m);
    return mayWait ? Need.Wait : Need.Unavailable;
  }

  #mode(p: UnavailablePolicy | null | undefined, m: Meter): 'fail_open' | 'fail_closed' {
    const policy = p ?? DEFAULT_UNAVAILABLE_POLICY;
    return m.kind === USD ? policy.budget : policy.limits;
  }

  /** What is left of the meter's limit as this instance knows it, in units. */
  #remaining(m: Meter): number {
    if (Number.isNaN(m.seenTaken)) return Math.max(0, m.free);
    return Math.max(0, m.limit - m.seenTaken + m.free);
  }

  /** Puts the meter's numbers in the headers when it is the most constraining of its kind so far. */
  #rateHeader(h: TicketImpl, m: Meter, requests: boolean): void {
    const left = this.#remaining(m);
    if (requests) {
      if (h.remainingRequests !== undefined && h.remainingRequests <= left) return;
      h.limitRequests = m.limit;
      h.remainingRequests = left;
      h.resetRequestsAtMs = m.end;
    } else {
      if (h.remainingTokens !== undefined && h.remainingTokens <= left) return;
      h.limitTokens = m.limit;
      h.remainingTokens = left;
      h.resetTokensAtMs = m.end;
    }
  }

  #refusal(m: Meter, reason: RefusalReason, u: number, nowMs: number, n: number): Refused {
    const h = new TicketImpl();
    for (let i = 0; i < n; i++) {
      const x = this.#ms[i]!;
      if (x.kind !== USD) this.#rateHeader(h, x, x.kind === REQ);
    }
    const kind = KIND_OF[m.kind]!;
    const budget = m.kind === USD;
    const left = this.#remaining(m);
    const who = `${m.scope} ${m.id}`;
    const resetAtMs = reason === 'unavailable' ? nowMs + 1000 : m.end;
    const resets = new Date(resetAtMs).toISOString();
    let msg: string;
    if (reason === 'unavailable') {
      msg = `The ${budget ? 'budget' : 'rate limit'} of ${who} cannot be checked now (the shared limits store is unreachable) and its team's policy is fail_closed; try again shortly.`;
    } else if (budget) {
      const spent = usd(m.seenUsed + m.unreported);
      msg =
        reason === 'too_large'
          ? `This request could cost up to $${usd(u)}, more than the whole budget of ${who} ($${usd(m.limit)} per ${m.period}).`
          : `The budget of ${who} is used up: $${usd(m.limit)} per ${m.period}, $${spent} spent, $${usd(left)} left and not enough for this request (up to $${usd(u)}); it resets at ${resets}.`;
    } else {
      const unit = m.kind === REQ ? 'requests' : 'tokens';
      msg =
        reason === 'too_large'
          ? `This request may use up to ${u} tokens, more than the ${m.limit} tokens per minute of ${who}.`
          : `Rate limit reached for ${who}: ${m.limit} ${unit} per minute, ${left} left; the window resets at ${resets}.`;
    }
    const r: Refused = {
      ok: false,
      scope: m.scope,
      kind,
      reason,
      limit: budget ? usd(m.limit) : m.limit,
      remaining: budget ? usd(left) : left,
      resetAtMs,
      message: msg,
      headers: h,
      ...(budget ? { spentUsd: usd(m.seenUsed + m.unreported) } : {}),
    };
    return r;
  }

  #unpriced(scope: ScopeKind, id: string, b: Budget, nowMs: number, n: number): Refused {
    const h = new TicketImpl();
    for (let i = 0; i < n; i++) {
      const x = this.#ms[i]!;
      if (x.kind !== USD) this.#rateHeader(h, x, x.kind === REQ);
    }
    const start = windowStart(b.period, nowMs);
    return {
      ok: false,
      scope,
      kind: 'budget',
      reason: 'unpriced',
      limit: b.usd,
      remaining: 0,
      resetAtMs: windowEnd(b.period, start),
      message: `The ${scope} ${id} has a budget and this model has no price, so the request's cost could not be counted: add the model to the configuration's pricing.`,
      headers: h,
    };
  }

  // ---- the background: leases, reports, renewals -------------------------------------------

  #kick(m: Meter): void {
    if (this.#closed || m.retired) return;
    if (this.#backend.sync) {
      this.#syncNow(m);
      return;
    }
    if (m.syncing !== null) {
      m.again = true;
      return;
    }
    m.roundStarted = this.#o.clock();
    m.syncing = this.#run(m);
  }

  /**
   * Released when the current exchange ends (its lease, if any, is then in `free`), or after
   * waitTimeoutMs at the latest: past that the meter counts as unavailable until the exchange
   * ends (`#short`), so no admission waits longer.
   */
  #waitFor(m: Meter): Promise<void> {
    if (m.waiters === null) {
      let release!: () => void;
      const promise = new Promise<void>((r) => (release = r));
      const t = setTimeout(release, this.#o.waitTimeoutMs);
      t.unref();
      m.waiters = {
        promise,
        release: () => {
          clearTimeout(t);
          release();
        },
      };
    }
    return m.waiters.promise;
  }

  #release(m: Meter): void {
    const w = m.waiters;
    m.waiters = null;
    w?.release();
  }

  async #run(m: Meter): Promise<void> {
    // Yield first: `#kick` stores this promise in `m.syncing`, and the `finally` below must
    // clear it after that, not before (a run that ends without awaiting would leave it set).
    await undefined;
    try {
      do {
        m.again = false;
        if (!this.#backend.available()) break;
        m.roundStarted = this.#o.clock();
        try {
          await this.#exchange(m);
        } finally {
          this.#release(m);
        }
      } while (m.again && !this.#closed && !m.retired);
    } catch (e) {
      m.failedAt = this.#o.clock();
      const msg = message(e);
      if (msg !== this.#error) this.#o.log(`limits: ${msg}`);
      this.#error = msg;
    } finally {
      m.syncing = null;
      this.#release(m);
    }
  }

  /** One compare-and-set of the meter's entry, retried when another instance wrote first. */
  async #exchange(m: Meter): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const fromCache = attempt === 1 && m.cached !== null && !m.mustRead;
      const stored = fromCache ? m.cached! : await this.#backend.get(m.key);
      if (!fromCache) m.mustRead = false;
      if (m.retired) return;
      const now = this.#o.clock();
      const plan = this.#plan(m, stored, now, !fromCache);
      if (plan === null) return;
      if (plan === OBSOLETE) {
        this.#obsolete(m, stored);
        return;
      }
      let revision: number | null;
      try {
        revision = await this.#backend.put(m.key, plan.entry, stored.revision);
      } catch (e) {
        // The write may or may not have happened. Until the next read tells (by our stamp on
        // the holder record), what it gave back stays out of `free`.
        m.cached = null;
        m.uncertain = plan;
        throw e;
      }
      if (revision === null) {
        m.free += plan.give; // not written: the capacity is still ours
        m.cached = null;
        if (attempt >= this.#o.casAttempts) throw new ControlsError('SL_CTL_CONFLICT', `${m.key}: lost the compare-and-set ${attempt} times in a row`);
        continue;
      }
      this.#commit(m, plan, { entry: plan.entry, revision }, now);
      this.#error = null;
      return;
    }
  }

  /** With the in-process store every exchange is synchronous. */
  #syncNow(m: Meter): void {
    for (let attempt = 1; attempt <= 3; attempt++) {
      const stored = this.#backend.getSync(m.key);
      const now = this.#o.clock();
      const plan = this.#plan(m, stored, now, true);
      if (plan === null) return;
      if (plan === OBSOLETE) {
        this.#obsolete(m, stored);
        return;
      }
      const revision = this.#backend.putSync(m.key, plan.entry, stored.revision);
      if (revision === null) {
        m.free += plan.give;
        continue;
      }
      this.#commit(m, plan, { entry: plan.entry, revision }, now);
      return;
    }
  }

  /**
   * What to write: the reported consumption, a lease to take or capacity to give back, the
   * renewed expiry, expired holders swept. Null when nothing needs writing (the view is then
   * refreshed from what was read). Takes `give` out of `free` at once, so it cannot be admitted
   * against while the write is on its way.
   */
  #plan(m: Meter, stored: Stored, now: number, fresh: boolean): Plan | null | typeof OBSOLETE {
    const id = this.#id;
    const e0 = stored.entry;
    let e: LimitEntry;
    let write = false;
    if (e0 === null || e0.period !== m.period || e0.start < m.start) {
      e = freshEntry(m.period, m.start, m.limit, now); // the window's first writer (or an entry of another period)
      write = true;
    } else if (e0.start > m.start) {
      return OBSOLETE;
    } else {
      e = copyEntry(e0);
    }
    if (sweepExpired(e, now, id) > 0) write = true;
    const mine = e.holders[id];
    if (m.uncertain !== null) {
      const u = m.uncertain;
      m.uncertain = null;
      const happened = u.heldAfter === 0 ? mine === undefined : mine !== undefined && mine.seq === u.seq;
      if (happened) {
        if (u.lost) {
          this.#retire(m);
          return null;
        }
        this.#apply(m, u);
      } else {
        m.free += u.give;
      }
    }
    if ((mine?.lease ?? 0) !== m.held) {
      // The entry no longer shows our lease: it expired while we could not renew it and another
      // instance counted it as spent. Whatever we admitted against it is covered by that; what
      // we consumed beyond it (fail-open) is added now. The meter is retired: its tickets settle
      // as no-ops and the next admission starts a fresh lease.
      if (mine !== undefined) {
        if (mine.lease > 0) {
          e.used += mine.lease;
          e.presumed += mine.lease;
        }
        delete e.holders[id];
      }
      if (m.free < 0) e.used += -m.free;
      e.updated = now;
      return { entry: e, seq: m.writes + 1, lost: true, report: 0, take: 0, give: 0, heldAfter: 0, takenAfter: 0, usedAfter: e.used, target: 0 };
    }
    const report = m.unreported;
    if (report !== 0) {
      e.used += report;
      write = true;
    }
    const heldAfterReport = m.held - report;
    const others = leaseTotals(e, id);
    const taken = e.used + others.sum + heldAfterReport;
    const avail = Math.max(0, m.limit - taken);

    // Demand: units asked per ms, smoothed; asked-but-not-yet-folded units count too, so the
    // first lease of a burst is sized to the burst.
    const dt = now - m.rateAt;
    if (dt >= 20) {
      const inst = m.asked / dt;
      m.rate = m.rate === 0 ? inst : 0.7 * m.rate + 0.3 * inst;
      m.asked = 0;
      m.rateAt = now;
    }
    let take = 0;
    let give = 0;
    let target = 0;
    const idle = this.#closing || (m.need === 0 && now - m.lastAsk >= this.#o.idleMs);
    if (idle) {
      if (m.free > 0) give = m.free;
    } else {
      // At most half of a fair share of what is left (this instance and every other holding
      // some), at least one request: large leases while much remains, one unit near the end.
      const left = avail + Math.max(0, m.free);
      const cap = Math.max(m.maxAsk, Math.floor(left / (2 * (others.active + 1))));
      const demand = Math.max(Math.ceil(m.rate * this.#o.horizonMs), m.asked);
      target = Math.min(cap, Math.max(m.maxAsk, demand));
      const want = Math.max(m.need, target);
      if (m.need > m.free || m.free < Math.ceil(target / 2)) take = Math.max(0, Math.min(want - m.free, avail));
    }
    if (take > 0 || give > 0) write = true;
    const heldAfter = heldAfterReport + take - give;
    if (heldAfter !== 0) {
      // Renewed with every write, and on its own once a third of its life has passed.
      if (mine === undefined || mine.expires - now < (this.#o.leaseTtlMs * 2) / 3) write = true;
      // `busy`: the part of the lease not free (requests in flight, consumption not yet reported), for the views.
      const busy = Math.max(0, heldAfter - Math.max(0, m.free - give + take));
      if (write) e.holders[id] = { lease: heldAfter, busy, expires: now + this.#o.leaseTtlMs, seq: m.writes + 1 };
    } else if (mine !== undefined) {
      delete e.holders[id];
      write = true;
    }
    if (!write) {
      if (fresh) this.#see(m, taken, e.used, now);
      m.need = 0;
      return null;
    }
    e.limit = m.limit;
    e.updated = now;
    m.free -= give;
    return { entry: e, seq: m.writes + 1, lost: false, report, take, give, heldAfter, takenAfter: taken + take - give, usedAfter: e.used, target };
  }

  #see(m: Meter, taken: number, used: number, now: number): void {
    m.seenTaken = taken;
    m.seenUsed = used;
    m.seenAt = now;
  }

  #commit(m: Meter, p: Plan, stored: Stored, now: number): void {
    m.lastWrite = now;
    if (p.lost) {
      this.#o.log(`limits: the lease on ${m.key} expired while this instance could not renew it; counted as spent, starting a new one`);
      this.#retire(m);
      return;
    }
    this.#apply(m, p);
    m.cached = stored;
    m.need = 0;
    m.refillBelow = Math.ceil(p.target / 2);
    this.#see(m, p.takenAfter, p.usedAfter, now);
  }

  /** A write's effect on the meter (`give` left `free` when it was planned). */
  #apply(m: Meter, p: Plan): void {
    m.held = p.heldAfter;
    m.unreported -= p.report;
    m.free += p.take;
    m.writes = p.seq;
  }

  /** The shared entry is in a later window than this meter: our clock is behind the writer's. */
  #obsolete(m: Meter, stored: Stored): void {
    const start = stored.entry?.start ?? 0;
    const s = (m.scope === 'key' ? this.#keys : this.#teams).get(m.id);
    if (s !== undefined) {
      const slot = s.slots[m.kind]!;
      if (slot.minPeriod !== m.period) slot.minStart = 0;
      slot.minStart = Math.max(slot.minStart, start);
      slot.minPeriod = m.period;
    }
    this.#retire(m);
  }

  #retire(m: Meter): void {
    m.retired = true;
    const s = (m.scope === 'key' ? this.#keys : this.#teams).get(m.id);
    if (s === undefined) return;
    const slot = s.slots[m.kind]!;
    if (slot.cur === m) slot.cur = null;
    if (slot.next === m) slot.next = null;
  }

  /** Reports, idle returns, renewals and next-window leases; forgets windows that ended. */
  #tick(): void {
    if (this.#closed) return;
    const now = this.#o.clock();
    const up = this.#backend.available();
    for (const map of [this.#keys, this.#teams]) {
      for (const [id, s] of map) {
        let live = false;
        for (const slot of s.slots) {
          // Forget windows that ended (a second of grace for requests admitted at their end).
          if (slot.cur !== null && now >= slot.cur.end + 1000) {
            slot.cur.retired = true;
            slot.cur = null;
          }
          if (slot.next !== null && now >= slot.next.end + 1000) {
            slot.next.retired = true;
            slot.next = null;
          }
          if (slot.cur !== null) {
            live = true;
            if (up) this.#due(slot.cur, now);
          }
          if (slot.next !== null) {
            live = true;
            if (up) this.#due(slot.next, now);
          }
          // The next window's lease, for a limit in use, before its window starts.
          const c = slot.cur;
          if (up && c !== null && slot.next === null && !c.retired && now >= c.end - this.#o.prefetchMs && now < c.end && now - c.lastAsk < this.#o.prefetchMs && c.rate > 0) {
            const nx = this.#newMeter(s, c.kind, c.period, c.end, now);
            nx.limit = c.limit;
            nx.rate = c.rate;
            nx.maxAsk = c.maxAsk;
            nx.lastAsk = c.end; // idle counts from the window's start, not from now
            slot.next = nx;
            live = true;
            this.#kick(nx);
          }
        }
        if (!live && now - s.lastUse > 120_000) map.delete(id);
      }
    }
  }

  /** Starts an exchange when the meter has something to report, give back, renew or repay. */
  #due(m: Meter, now: number): void {
    if (m.syncing !== null) return;
    if (
      (m.unreported !== 0 && now - m.lastWrite >= this.#o.flushMs) ||
      (m.free > 0 && now - m.lastAsk >= this.#o.idleMs) ||
      (m.held !== 0 && now - m.lastWrite >= this.#o.leaseTtlMs / 3) ||
      m.free < 0 ||
      m.uncertain !== null
    ) {
      this.#kick(m);
    }
  }

  /** After a reconnect: report and settle debts now rather than at the next tick. */
  wake(): void {
    this.#tick();
  }

  // ---- views ------------------------------------------------------------------------------

  async usage(q: UsageQuery, nowMs: number): Promise<ScopeUsage[]> {
    if (this.#closed) throw new ControlsError('SL_CTL_CLOSED', 'the governor is closed');
    const out: ScopeUsage[] = [];
    const each = async (scope: ScopeKind, id: string, limits: Limits | null, budget: Budget | null): Promise<void> => {
      if (limits?.requests_per_minute !== undefined) out.push(await this.#usageOf(scope, id, REQ, limits.requests_per_minute, 'minute', nowMs));
      if (limits?.tokens_per_minute !== undefined) out.push(await this.#usageOf(scope, id, TOK, limits.tokens_per_minute, 'minute', nowMs));
      if (budget !== null) out.push(await this.#usageOf(scope, id, USD, nanoDown(budget.usd), budget.period, nowMs));
    };
    if (q.key !== undefined) await each('key', q.key.id, q.key.limits, q.key.budget);
    if (q.team !== undefined) await each('team', q.team.name, q.team.limits, q.team.budget);
    return out;
  }

  async #usageOf(scope: ScopeKind, id: string, kind: number, limit: number, period: Period, nowMs: number): Promise<ScopeUsage> {
    const start = windowStart(period, nowMs);
    const end = windowEnd(period, start);
    const key = kvKey(KIND_OF[kind]!, scope, id, windowSlot(period, start));
    const local = (): Meter | null => {
      const cur = (scope === 'key' ? this.#keys : this.#teams).get(id)?.slots[kind]?.cur;
      return cur !== null && cur !== undefined && !cur.retired && cur.start === start && cur.period === period ? cur : null;
    };
    let stored: Stored = { entry: null, revision: 0 };
    let m = local();
    if (this.#backend.sync) stored = this.#backend.getSync(key);
    else {
      if (!this.#backend.available()) throw new ControlsError('SL_CTL_UNAVAILABLE', `the shared limits store (NATS) cannot be read now: ${this.#backend.error() ?? 'not connected'}`);
      // The entry and this instance's own numbers must be of the same moment: read while none of
      // our exchanges on it is under way, or a report could be counted twice, or not at all.
      for (let attempt = 1; ; attempt++) {
        if (m?.syncing) await m.syncing;
        const writes = m?.writes ?? 0;
        try {
          stored = await this.#backend.get(key);
        } catch (e) {
          throw new ControlsError('SL_CTL_UNAVAILABLE', `the shared limits store (NATS) cannot be read now: ${message(e)}`, null, { cause: e });
        }
        const now = local();
        if (now === m && (m === null || (m.syncing === null && m.writes === writes))) break;
        if (attempt >= 5) throw new ControlsError('SL_CTL_CONFLICT', `${key}: changing too fast to be read consistently; try again`);
        m = now;
      }
    }
    let used = 0;
    let presumed = 0;
    let reserved = 0;
    let holders = 0;
    const e0 = stored.entry;
    if (e0 !== null && e0.period === period && e0.start === start) {
      const e = copyEntry(e0);
      sweepExpired(e, nowMs, this.#id); // leases expired but not yet swept by a writer count as spent already
      used = e.used;
      presumed = e.presumed;
      for (const h in e.holders) {
        holders++;
        // Another instance's lease: what it had in flight at its last write (the rest it can
        // still admit against, so it is part of what remains). Ours is exact (below).
        if (h !== this.#id) reserved += e.holders[h]!.busy ?? e.holders[h]!.lease;
      }
    }
    if (m !== null) {
      // This instance: its reservations in flight, and its consumption not yet reported, as used.
      used += m.unreported;
      reserved += Math.max(0, m.inflight);
    }
    reserved = Math.max(0, reserved);
    const remaining = Math.max(0, limit - used - reserved);
    const conv = kind === USD ? usd : (n: number) => n;
    return {
      scope,
      id,
      kind: KIND_OF[kind]!,
      period,
      limit: conv(limit),
      used: conv(used),
      reserved: conv(reserved),
      remaining: conv(remaining),
      presumed: conv(presumed),
      holders,
      windowStartMs: start,
      resetAtMs: end,
    };
  }

  status(): GovernorStatus {
    let leases = 0;
    for (const map of [this.#keys, this.#teams]) {
      for (const s of map.values()) {
        for (const slot of s.slots) {
          if (slot.cur !== null && slot.cur.held !== 0) leases++;
          if (slot.next !== null && slot.next.held !== 0) leases++;
        }
      }
    }
    const available = this.#backend.available();
    const error = this.#error ?? this.#backend.error();
    return {
      source: this.#backend.source,
      synced: available && this.#error === null,
      error: available ? this.#error : error,
      leases,
      failedOpen: this.#failedOpen,
      failedClosed: this.#failedClosed,
      waits: this.#waits,
    };
  }

  /** Gives back every unused lease and reports what is pending (bounded by `deadlineMs`), then stops. */
  async close(deadlineMs = 2000): Promise<void> {
    if (this.#closed || this.#closing) return;
    this.#closing = true; // every exchange from now on gives back all free capacity
    clearInterval(this.#timer);
    const pending: Promise<void>[] = [];
    if (this.#backend.available()) {
      for (const map of [this.#keys, this.#teams]) {
        for (const s of map.values()) {
          for (const slot of s.slots) {
            for (const m of [slot.cur, slot.next]) {
              if (m === null || (m.free <= 0 && m.unreported === 0 && m.uncertain === null)) continue;
              this.#kick(m);
              if (m.syncing !== null) pending.push(m.syncing);
            }
          }
        }
      }
    }
    if (pending.length > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.all(pending), new Promise<void>((r) => (timer = setTimeout(r, deadlineMs)))]);
      clearTimeout(timer);
    }
    this.#closed = true;
  }
}

/**
 * Admits, waiting for leases when the governor asks to (`Wait`): what the gateway calls. Each
 * wait is one exchange with the store (and never more than `waitTimeoutMs`); after `rounds` of
 * them (a guard, not a bound met in practice: a round either leases capacity or shows it is
 * gone) it decides without waiting, by the unavailable policy.
 */
export async function admitOrWait(g: { admit(a: Admission, nowMs: number, mayWait?: boolean): Verdict }, a: Admission, now: () => number = Date.now, rounds = 64): Promise<Admitted | Refused> {
  for (let i = 0; i < rounds; i++) {
    const v = g.admit(a, now());
    if (v.ok !== 'wait') return v;
    await v.ready;
  }
  const v = g.admit(a, now(), false);
  if (v.ok === 'wait') throw new ControlsError('SL_CTL_INVALID', 'admit(…, mayWait = false) answered Wait');
  return v;
}
