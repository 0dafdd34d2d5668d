/** `GET /v1/usage`: requests, tokens and cost from the per-minute rollup. */
import { join, sql, type Sql, type Store } from '@sightline/store';
import { rollupSource, splitRange } from './metrics.js';
import { costUsd, type PriceOf } from '@sightline/config';
import { ms, type Num } from './common.js';

export type UsageKey = 'team' | 'key' | 'model' | 'provider' | 'dialect';
export const USAGE_KEYS: readonly UsageKey[] = ['team', 'key', 'model', 'provider', 'dialect'];

export interface UsageRow {
  team?: string;
  /** The key id (`key_…`; '' for requests served without authentication). */
  key?: string;
  model?: string;
  provider?: string;
  dialect?: string;
  requests: number;
  errors: number;
  aborted: number;
  streams: number;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
  /** US dollars at the configured prices (`pricing`, then the shipped table); null when a model in the group has no price. */
  cost_usd: number | null;
  /** Mean of the gateway's own time per request, in milliseconds. */
  gateway_mean_ms: number;
}

export interface UsageFilter {
  fromS: number;
  toS: number;
  team: string | null;
  /** A key id. */
  key: string | null;
  model: string | null;
  provider: string | null;
  groupBy: UsageKey[];
  /** Now, Unix seconds (which days the day rollup holds); default the clock. */
  nowS?: number;
}

/**
 * Usage and cost from the request rollups (migration 005: whole days and hours from
 * requests_agg_1d and _1h, the ends from requests_agg_1m, FINAL), grouped as asked; from
 * their key-less twins (migration 008, requests_team_agg_*) when neither the grouping nor
 * the filter names a key. Minutes are whole: `from` is rounded down and `to` up to the minute.
 */
export async function usage(store: Store, f: UsageFilter, priceOf: PriceOf): Promise<{ rows: UsageRow[]; total: UsageRow }> {
  const from = f.fromS - (f.fromS % 60);
  const where: Sql[] = [];
  if (f.team !== null) where.push(sql`team = ${f.team}`);
  if (f.key !== null) where.push(sql`key_id = ${f.key}`);
  if (f.model !== null) where.push(sql`model = ${f.model}`);
  if (f.provider !== null) where.push(sql`provider = ${f.provider}`);
  const ranges = splitRange(from, f.toS, null, f.nowS ?? Math.floor(Date.now() / 1000));
  const byKey = f.key !== null || f.groupBy.includes('key');
  const dims = byKey ? sql`team, key_id, model, provider, dialect` : sql`team, model, provider, dialect`;
  const columns = ['team', ...(byKey ? ['key_id'] : []), 'model', 'provider', 'dialect', 'requests', 'errors', 'aborted', 'streams', 'input_tokens', 'output_tokens', 'cache_read_tokens', 'cache_write_tokens', 'gateway_ns_sum'];
  const src = rollupSource(store.database, byKey ? 'requests' : 'requests_team', ranges, columns, where.length === 0 ? null : join(where, sql` AND `));
  const rows = await store.query<Record<string, Num | string>>(
    sql`SELECT ${dims}, sum(requests) AS requests, sum(errors) AS errors, sum(aborted) AS aborted, sum(streams) AS streams,
  sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cache_read_tokens) AS cache_read_tokens, sum(cache_write_tokens) AS cache_write_tokens,
  sum(gateway_ns_sum) AS gateway_ns
FROM ${src} GROUP BY ${dims}`,
  );
  const groups = new Map<string, UsageRow & { gatewayNs: number }>();
  const blank = (): UsageRow & { gatewayNs: number } => ({ requests: 0, errors: 0, aborted: 0, streams: 0, input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0, cost_usd: 0, gateway_mean_ms: 0, gatewayNs: 0 });
  const total = blank();
  for (const r of rows) {
    const col = (k: UsageKey): string => String(r[k === 'key' ? 'key_id' : k]);
    const key = f.groupBy.map(col).join('\u0000');
    let g = groups.get(key);
    if (g === undefined) {
      g = blank();
      for (const k of f.groupBy) g[k] = col(k);
      groups.set(key, g);
    }
    const input = Number(r.input_tokens);
    const output = Number(r.output_tokens);
    const cr = Number(r.cache_read_tokens);
    const cw = Number(r.cache_write_tokens);
    // Requests without tokens (refused before a provider) cost nothing, priced or not.
    const cost = input + output === 0 ? 0 : costUsd(priceOf(String(r.model)), input, output, cr, cw);
    for (const t of [g, total]) {
      t.requests += Number(r.requests);
      t.errors += Number(r.errors);
      t.aborted += Number(r.aborted);
      t.streams += Number(r.streams);
      t.input_tokens += input;
      t.output_tokens += output;
      t.cache_read_tokens += cr;
      t.cache_write_tokens += cw;
      t.gatewayNs += Number(r.gateway_ns);
      t.cost_usd = t.cost_usd === null || cost === null ? null : t.cost_usd + cost;
    }
  }
  const finish = (g: UsageRow & { gatewayNs: number }): UsageRow => {
    const { gatewayNs, ...rest } = g;
    return { ...rest, cost_usd: rest.cost_usd === null ? null : Math.round(rest.cost_usd * 1e6) / 1e6, gateway_mean_ms: rest.requests === 0 ? 0 : ms(gatewayNs / rest.requests) };
  };
  const out = [...groups.values()].map(finish).sort((a, b) => b.requests - a.requests);
  return { rows: out, total: finish(total) };
}
