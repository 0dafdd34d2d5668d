/** `POST /v1/metrics`: the query model behind every chart (queries/metrics.ts, docs/api.md). */
import type { FastifyInstance } from 'fastify';
import type { Store } from '@sightline/store';
import { teamScope } from '../auth.js';
import { QueryError } from '../errors.js';
import { RANGES } from '../limits.js';
import { rangeParams } from '../params.js';
import type { PriceOf } from '@sightline/config';
import {
  METRICS_BODY_SCHEMA,
  METRICS_ROW_SCHEMA,
  compileMetrics,
  compileModels,
  compileTopGroups,
  planMetrics,
  seriesLimit,
  shapeRows,
  type MetricsBody,
  type MetricsDbRow,
  type ModelPrice,
} from '../queries/metrics.js';
import { ERRORS } from '../schemas.js';

/** More models in range than prices put into one query: narrow it. */
const MAX_MODELS = 10_000;

export function registerMetricsRoutes(app: FastifyInstance, ctx: { store: Store; priceOf: PriceOf }): void {
  app.post<{ Body: MetricsBody }>(
    '/v1/metrics',
    {
      schema: {
        summary: 'Metrics over time, grouped by team, key, model, provider, dialect, status class, stage, end user, session or tag',
        tags: ['metrics'],
        body: METRICS_BODY_SCHEMA,
        response: {
          200: {
            type: 'object',
            additionalProperties: false,
            required: ['rows', 'truncated'],
            properties: {
              rows: { type: 'array', items: METRICS_ROW_SCHEMA },
              truncated: { type: 'boolean', description: 'More groups than `limit` (or than fit with the interval) existed; the largest are listed' },
            },
          },
          ...ERRORS,
        },
      },
    },
    async (req) => {
      const b = req.body;
      // A key reads its own team: naming another in the filters is a 403.
      const own = teamScope(req.caller, null);
      if (own !== null) for (const t of b.filters?.team ?? []) teamScope(req.caller, t);
      const teams = own !== null ? [own] : (b.filters?.team ?? null);
      const range = rangeParams({ from: b.from === undefined ? undefined : String(b.from), to: b.to === undefined ? undefined : String(b.to) }, RANGES.metrics);
      const plan = planMetrics(b, range, teams, Math.floor(Date.now() / 1000));
      const db = ctx.store.database;

      // The models to price and the top groups do not depend on each other: both at once
      // (the chart statement needs both).
      const pricing = async (): Promise<ModelPrice[]> => {
        if (plan.mode !== 'requests' || !plan.metrics.includes('cost_usd')) return [];
        const models = await ctx.store.query<{ model: string }>(compileModels(plan, db));
        if (models.length > MAX_MODELS) throw new QueryError('query_too_large', `more than ${MAX_MODELS} models in range to price; ask for a shorter range or filter by model`);
        return models.flatMap((m) => {
          const price = ctx.priceOf(m.model);
          return price === null ? [] : [{ model: m.model, price }];
        });
      };
      const topGroups = async (): Promise<{ rows: MetricsDbRow[]; truncated: boolean } | null> => {
        if (plan.intervalS === null || plan.groupBy.length === 0) return null;
        const found = await ctx.store.query<MetricsDbRow>(compileTopGroups(plan, db));
        const keep = seriesLimit(plan);
        return { rows: found.slice(0, keep), truncated: found.length > keep };
      };
      const [prices, top] = await Promise.all([pricing(), topGroups()]);
      const rows = await ctx.store.query<MetricsDbRow>(compileMetrics(plan, db, { prices, top: top?.truncated === true ? top.rows : undefined }));
      return shapeRows(plan, rows, top);
    },
  );
}
