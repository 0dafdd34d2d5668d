/**
 * The dashboard's typical requests over the dataset, as query API calls. Times are fixed to
 * the dataset's end (`toS`, when loading began) rather than to the clock, so "the last hour"
 * is an hour of data however long the load took.
 */
import { DASHBOARD_TARGET_MS, LISTING_TARGET_MS, type Scenario } from './measure.js';

const iso = (s: number): string => new Date(s * 1000).toISOString();

export function metricsScenario(id: string, title: string, caller: string, body: object): Scenario {
  return { id, title, caller, method: 'POST', url: '/v1/metrics', body, targetMs: DASHBOARD_TARGET_MS };
}

export function listingUrl(params: Record<string, string | number>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) q.set(k, String(v));
  return `/v1/requests?${q.toString()}`;
}

/** The metrics requests: each for the admin (every team) and for one team's key. */
export function metricsScenarios(toS: number, team: string): Scenario[] {
  const hour = { from: iso(toS - 3600), to: iso(toS) };
  const month = { from: iso(toS - 30 * 86_400), to: iso(toS) };
  const week = { from: iso(toS - 7 * 86_400), to: iso(toS) };
  const lastHour = { ...hour, metrics: ['requests', 'error_rate', 'p50_ms', 'p95_ms', 'p99_ms', 'ttft_p50_ms', 'output_tokens', 'cost_usd'], group_by: ['model'], interval: '5m' };
  const daily = { ...month, metrics: ['requests', 'errors', 'error_rate', 'p50_ms', 'p99_ms', 'input_tokens', 'output_tokens', 'cost_usd'], interval: '1d' };
  const stages = { ...week, metrics: ['requests', 'p50_ms', 'p99_ms'], group_by: ['stage', 'model'], limit: 500 };
  return [
    metricsScenario('last-hour-by-model', 'Last hour by model, 5-minute buckets', 'admin', lastHour),
    metricsScenario('last-hour-by-model', 'Last hour by model, 5-minute buckets', team, lastHour),
    metricsScenario('30-days-by-day-per-team', '30 days by day per team', 'admin', { ...daily, group_by: ['team'] }),
    metricsScenario('30-days-by-day-per-team', '30 days by day, the team by model', team, { ...daily, group_by: ['model'] }),
    metricsScenario('stage-p99-by-model-week', 'Per-stage p50/p99 by model over a week', 'admin', stages),
    metricsScenario('stage-p99-by-model-week', 'Per-stage p50/p99 by model over a week', team, stages),
  ];
}

/** "One team's slowest requests today", step 1: the team's p99 today (the threshold). */
export function todayP99Scenario(toS: number, team: string): Scenario {
  const dayStart = toS - (toS % 86_400);
  return metricsScenario('slowest-today-p99', "One team's p99 today (the threshold)", team, { from: iso(dayStart), to: iso(toS), metrics: ['requests', 'p99_ms'] });
}

/** Step 2: the team's requests today at or above that threshold, newest first (the listing a dashboard opens). */
export function slowestTodayScenario(toS: number, team: string, minTotalMs: number): Scenario {
  const dayStart = toS - (toS % 86_400);
  return {
    id: 'slowest-today-list',
    title: `One team's slowest requests today (total ≥ its p99, ${minTotalMs} ms)`,
    caller: team,
    method: 'GET',
    url: listingUrl({ from: iso(dayStart), to: iso(toS), min_total_ms: minTotalMs, limit: 50 }),
    targetMs: DASHBOARD_TARGET_MS,
  };
}

/** The 30-day listing's parameters (every page of one listing repeats them). */
export function listingParams(toS: number): Record<string, string | number> {
  return { from: iso(toS - 30 * 86_400), to: iso(toS), limit: 50 };
}

export function listingScenario(id: string, title: string, caller: string, toS: number, cursor: string | null): Scenario {
  const params = listingParams(toS);
  return { id, title, caller, method: 'GET', url: listingUrl(cursor === null ? params : { ...params, cursor }), targetMs: LISTING_TARGET_MS };
}
