/**
 * The governor's contract (issue 12, items 1, 3 and 4; docs/governance.md): rate limits and
 * budgets per key and per team, decided in memory at admission and settled after the
 * response, held exactly across gateway replicas and workers by leases refilled in the
 * background.
 *
 * Two moments per request, both synchronous:
 * - `admit` before anything is sent upstream: reserves one request, the request's upper bound
 *   of tokens and its upper bound of cost against every limit and budget that applies;
 * - `settle` after the response (or the failure): corrects the reservations to what the
 *   request really used.
 */

/** A key's or team's rate limits, as the directory records them (integers ≥ 1). */
export interface Limits {
  requests_per_minute?: number;
  tokens_per_minute?: number;
}

/** A key's or team's budget: USD per UTC calendar day or month. */
export interface Budget {
  usd: number;
  period: 'day' | 'month';
}

/** What happens when a limit needs the shared store (NATS) and it cannot be reached. */
export type FailMode = 'fail_open' | 'fail_closed';

/**
 * The team's choice while the shared store is unreachable and the instance's leases are used up
 * (docs/governance.md, "When NATS is down"). Rate limits and budgets separately.
 */
export interface UnavailablePolicy {
  /** requests_per_minute and tokens_per_minute. Default `fail_open`. */
  limits: FailMode;
  /** Budgets. Default `fail_closed`. */
  budget: FailMode;
}

export const DEFAULT_UNAVAILABLE_POLICY: UnavailablePolicy = Object.freeze({ limits: 'fail_open', budget: 'fail_closed' });

/** One request at the door. */
export interface Admission {
  keyId: string;
  team: string;
  keyLimits: Limits | null;
  teamLimits: Limits | null;
  keyBudget: Budget | null;
  teamBudget: Budget | null;
  /** Upper bound of the request's tokens (input estimate + max output tokens); reserved against tokens_per_minute. */
  tokens: number;
  /**
   * Upper bound of its cost in USD, reserved against budgets. Null: the model has no price —
   * a request under a budget is then refused (`reason: 'unpriced'`), since its spend could not be counted.
   */
  costUsd: number | null;
  /** The team's choice while NATS is unreachable; null: DEFAULT_UNAVAILABLE_POLICY. */
  whenUnavailable?: UnavailablePolicy | null;
}

/**
 * Values for the `x-ratelimit-*` headers OpenAI sends (the most constraining of the key's and
 * the team's limits of each kind); absent when no limit of that kind applies. Remaining counts
 * are this instance's view: exact when it refuses, approximate otherwise (docs/governance.md).
 */
export interface RateHeaders {
  readonly limitRequests?: number;
  readonly remainingRequests?: number;
  /** Unix ms when the requests window resets (the next UTC minute). */
  readonly resetRequestsAtMs?: number;
  readonly limitTokens?: number;
  readonly remainingTokens?: number;
  /** Unix ms when the tokens window resets (the next UTC minute). */
  readonly resetTokensAtMs?: number;
}

/** Proof of an admission, handed back to `settle` exactly once (a second settle is ignored). */
export interface Ticket {
  readonly headers: RateHeaders;
}

export interface Admitted {
  readonly ok: true;
  readonly ticket: Ticket;
}

export type RefusalKind = 'requests' | 'tokens' | 'budget';

/**
 * Why a request was refused:
 * - `exhausted`: the window's requests or tokens, or the period's budget, are used up;
 * - `too_large`: this one request's upper bound exceeds the whole limit (it can never pass);
 * - `unavailable`: the limit needed the shared store, it is unreachable, and the team's policy is fail_closed;
 * - `unpriced`: a budget applies and the model has no price.
 */
export type RefusalReason = 'exhausted' | 'too_large' | 'unavailable' | 'unpriced';

export interface Refused {
  readonly ok: false;
  readonly scope: 'key' | 'team';
  readonly kind: RefusalKind;
  readonly reason: RefusalReason;
  /** Requests, tokens, or USD for a budget. */
  readonly limit: number;
  /** What is left of it as this instance knows it (requests, tokens or USD). */
  readonly remaining: number;
  /** Unix ms when the window or period resets; for `unavailable`, a second from now. */
  readonly resetAtMs: number;
  /** Budgets: USD spent in the period (settled, plus what the shared store holds as reserved). */
  readonly spentUsd?: number;
  readonly message: string;
  /** The rate-limit headers of the answer, like an admission's. */
  readonly headers: RateHeaders;
}

/**
 * No decision without the shared store yet: this instance holds no lease for a limit that
 * applies (its first request in the window, or its lease ran out before the background refill).
 * Call `admit` again once `ready` resolves (one exchange with NATS, ~0.3 ms; at most
 * `waitTimeoutMs`); `admitOrWait` does so.
 * Never returned by the MemoryGovernor.
 */
export interface Wait {
  readonly ok: 'wait';
  readonly ready: Promise<void>;
}

export type Verdict = Admitted | Refused | Wait;

export interface Actual {
  /** Tokens the request really used (input + output; cut streams: what was seen). */
  tokens: number;
  /** Its real cost; null when unknown (the reservation is then charged in full). */
  costUsd: number | null;
}

/** What is asked of `usage`: the scopes and the limits they have (from the directory). */
export interface UsageQuery {
  key?: { id: string; limits: Limits | null; budget: Budget | null };
  team?: { name: string; limits: Limits | null; budget: Budget | null };
}

/** One limit's state in the current window or period, as the shared store knows it. */
export interface ScopeUsage {
  scope: 'key' | 'team';
  /** The key id or the team name. */
  id: string;
  kind: RefusalKind;
  period: 'minute' | 'day' | 'month';
  /** Requests, tokens, or USD. */
  limit: number;
  /** Requests admitted, tokens used, or USD spent (reported by every instance, plus presumed). */
  used: number;
  /**
   * Reserved by requests in flight (at their upper bound). Other instances' as of their last
   * exchange with the store (at most `flushMs` old while they have traffic); this instance's exact.
   */
  reserved: number;
  /**
   * max(0, limit − used − reserved): what the scope can still spend or admit, wherever it lands.
   * Part of it may sit in an instance's lease until that instance uses it or gives it back (idle, `idleMs`).
   */
  remaining: number;
  /** Of `used`: leases of instances that stopped renewing them (crashed), counted as spent. */
  presumed: number;
  /** Instances holding a lease. */
  holders: number;
  windowStartMs: number;
  resetAtMs: number;
}

export interface GovernorStatus {
  source: 'nats' | 'memory';
  /** Connected to the shared store and the last exchange with it succeeded. */
  synced: boolean;
  error: string | null;
  /** Limits (per scope, kind and window) this instance holds a lease on. */
  leases: number;
  /** Admissions decided while the shared store was unreachable, since start. */
  failedOpen: number;
  failedClosed: number;
  /** Admissions that had to wait for a lease (`Wait`), since start. */
  waits: number;
}

export interface Governor {
  /** Resolves once the shared store is reachable, or its start timeout passed (then `status().synced` is false). */
  readonly ready: Promise<void>;
  /** In memory and synchronous; `mayWait: false` never returns `Wait` (the unavailable policy decides instead). */
  admit(a: Admission, nowMs: number, mayWait?: boolean): Verdict;
  /** Synchronous: corrects the ticket's reservations to `actual`. Settle every ticket, failures too (`{tokens: 0, costUsd: 0}` when nothing was sent). */
  settle(t: Ticket, actual: Actual, nowMs: number): void;
  /** Spend and limits as the shared store knows them (GET /v1/budget, admin views). */
  usage(q: UsageQuery, nowMs: number): Promise<ScopeUsage[]>;
  status(): GovernorStatus;
  /** Returns this instance's unused leases, then stops. */
  close(): Promise<void>;
}
