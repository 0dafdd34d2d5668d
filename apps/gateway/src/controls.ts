/**
 * Rate limits and budgets at the gateway (issue 12, docs/governance.md): the `limits` and
 * `budget` stages ask the governor (@sightline/controls) in memory, with the request's upper
 * bounds; the response's real usage settles both after the response.
 *
 * Upper bounds, so that a budget is never overspent while a request is in flight:
 * - input tokens ≤ the request body's bytes (a token is at least one byte of UTF-8 text, and
 *   the body holds the text plus its JSON);
 * - output tokens ≤ the client's max tokens (`max_tokens`, `max_completion_tokens`); a request
 *   under a budget or a token limit without one gets `capture.default_max_tokens` injected;
 * - cost ≤ input bound × the dearest input price (plain, cache write, cache read) + output
 *   bound × the output price, at the price of the model the client asked for.
 */
import type { Admission, Budget, Governor, Limits, RateHeaders, Refused, Ticket, UnavailablePolicy } from '@sightline/controls';
import type { Price } from '@sightline/config';
import { GatewayError } from './errors.js';

/** The controls of one request, allocated only when a limit or a budget applies. */
export class RequestControls {
  limits: Ticket | null = null;
  budget: Ticket | null = null;
  /** The output-token bound, and whether it must be injected into the request. */
  maxOutput = 0;
  injectMaxTokens = false;
  /** `x-ratelimit-*` headers for the answer (OpenAI's names), when rate limits apply. */
  headers: Record<string, string> | null = null;
}

/** The client's own output-token bound, or 0 when it sets none. */
export function clientMaxTokens(body: Record<string, unknown>): number {
  for (const k of ['max_completion_tokens', 'max_tokens', 'max_output_tokens'] as const) {
    const v = body[k];
    if (typeof v === 'number' && Number.isInteger(v) && v > 0) return v;
  }
  return 0;
}

export interface LimitsInput {
  keyId: string;
  team: string;
  keyLimits: Limits | null;
  teamLimits: Limits | null;
  keyBudget: Budget | null;
  teamBudget: Budget | null;
  requestBytes: number;
  maxOutput: number;
  policy: UnavailablePolicy | null;
}

/** The admission of the `limits` stage: requests and tokens per minute; no budget. */
export function limitsAdmission(i: LimitsInput): Admission {
  return { keyId: i.keyId, team: i.team, keyLimits: i.keyLimits, teamLimits: i.teamLimits, keyBudget: null, teamBudget: null, tokens: i.requestBytes + i.maxOutput, costUsd: null, whenUnavailable: i.policy };
}

/** The admission of the `budget` stage: the request's upper-bound cost; no rate limits. */
export function budgetAdmission(i: LimitsInput, price: Price | null): Admission {
  const cost = price === null ? null : (i.requestBytes * Math.max(price.input, price.cacheWrite, price.cacheRead) + i.maxOutput * price.output) / 1e6;
  return { keyId: i.keyId, team: i.team, keyLimits: null, teamLimits: null, keyBudget: i.keyBudget, teamBudget: i.teamBudget, tokens: 0, costUsd: cost, whenUnavailable: i.policy };
}

/** A duration as OpenAI writes its reset headers (`1s`, `6m0s`, `250ms`). */
export function resetText(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.ceil(ms))}ms`;
  const s = Math.ceil(ms / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${s % 60}s`;
}

/** `x-ratelimit-*` headers, as OpenAI sends them; null when no rate limit applies. */
export function rateLimitHeaders(h: RateHeaders, nowMs: number): Record<string, string> | null {
  const out: Record<string, string> = {};
  let any = false;
  if (h.limitRequests !== undefined) {
    any = true;
    out['x-ratelimit-limit-requests'] = String(h.limitRequests);
    out['x-ratelimit-remaining-requests'] = String(Math.max(0, h.remainingRequests ?? 0));
    out['x-ratelimit-reset-requests'] = resetText((h.resetRequestsAtMs ?? nowMs) - nowMs);
  }
  if (h.limitTokens !== undefined) {
    any = true;
    out['x-ratelimit-limit-tokens'] = String(h.limitTokens);
    out['x-ratelimit-remaining-tokens'] = String(Math.max(0, Math.floor(h.remainingTokens ?? 0)));
    out['x-ratelimit-reset-tokens'] = resetText((h.resetTokensAtMs ?? nowMs) - nowMs);
  }
  return any ? out : null;
}

const usd = (n: number): string => `$${n < 1 ? n.toFixed(6).replace(/0+$/, '').replace(/\.$/, '') : n.toFixed(2)}`;

/** The 429 of a refusal, in words that name the scope, the limit, what is spent and when it resets. */
export function refusalError(r: Refused): GatewayError {
  const resets = new Date(r.resetAtMs).toISOString();
  const scope = r.scope === 'key' ? 'this key' : 'this key\'s team';
  let message: string;
  if (r.kind === 'budget') {
    if (r.reason === 'unpriced') message = `A budget applies to ${scope} and the model has no price, so its spend could not be counted; ask an administrator to add the model's price.`;
    else if (r.reason === 'unavailable') message = `The budget of ${scope} cannot be checked right now (the limits store is unreachable); retry shortly.`;
    else message = `The ${r.scope} budget of ${usd(r.limit)} is spent (${usd(r.spentUsd ?? r.limit - r.remaining)} spent${r.reason === 'too_large' ? ', and this request alone could cost more than the whole budget' : ''}); it resets at ${resets}.`;
    return new GatewayError('budget_exceeded', message, null, { details: { scope: r.scope, limit_usd: r.limit, spent_usd: r.spentUsd ?? r.limit - r.remaining, resets_at: resets, reason: r.reason }, retryAfterMs: r.resetAtMs - Date.now() });
  }
  const what = r.kind === 'requests' ? 'requests per minute' : 'tokens per minute';
  message =
    r.reason === 'too_large'
      ? `This request could use more tokens than ${scope}'s whole limit of ${r.limit} ${what}; lower max_tokens or the prompt.`
      : r.reason === 'unavailable'
        ? `The rate limits of ${scope} cannot be checked right now (the limits store is unreachable); retry shortly.`
        : `Rate limit reached for ${scope}: ${r.limit} ${what} (${Math.max(0, Math.floor(r.remaining))} left); it resets at ${resets}.`;
  return new GatewayError('rate_limited', message, null, { details: { scope: r.scope, limit: r.limit, kind: r.kind, resets_at: resets, reason: r.reason }, retryAfterMs: r.resetAtMs - Date.now() });
}
