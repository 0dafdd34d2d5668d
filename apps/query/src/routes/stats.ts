/** `GET /v1/stages`, `GET /v1/usage` and `GET /v1/capture` (docs/api.md). */
import type { FastifyInstance } from 'fastify';
import type { Store } from '@sightline/store';
import { requireAdmin, teamScope } from '../auth.js';
import { QueryError } from '../errors.js';
import { RANGES } from '../limits.js';
import { rangeParams } from '../params.js';
import type { PriceOf } from '@sightline/config';
import { captureHealth } from '../queries/capture.js';
import { stageStats } from '../queries/stages.js';
import { usage, USAGE_KEYS, type UsageKey } from '../queries/usage.js';
import { ERRORS, FROM, ISO_TIME, NAME_PARAM, NULLABLE_STRING, TEAM_PARAM, TO, query } from '../schemas.js';

const INT = { type: 'integer' } as const;
const NUM = { type: 'number' } as const;

const STAGE_STATS = {
  type: 'object',
  additionalProperties: false,
  required: ['stage', 'count', 'p50_ns', 'p95_ns', 'p99_ns', 'p50_ms', 'p95_ms', 'p99_ms'],
  properties: { stage: { type: 'string' }, count: INT, p50_ns: INT, p95_ns: INT, p99_ns: INT, p50_ms: NUM, p95_ms: NUM, p99_ms: NUM },
} as const;

const USAGE_ROW = {
  type: 'object',
  additionalProperties: false,
  required: ['requests', 'errors', 'aborted', 'streams', 'input_tokens', 'output_tokens', 'cache_read_tokens', 'cache_write_tokens', 'cost_usd', 'gateway_mean_ms'],
  properties: {
    team: { type: 'string' },
    key: { type: 'string', description: "Key id; '' for requests served without authentication" },
    model: { type: 'string' },
    provider: { type: 'string' },
    dialect: { type: 'string' },
    requests: INT,
    errors: INT,
    aborted: INT,
    streams: INT,
    input_tokens: INT,
    output_tokens: INT,
    cache_read_tokens: INT,
    cache_write_tokens: INT,
    cost_usd: { type: ['number', 'null'], description: 'null when the group has tokens of a model without a price' },
    gateway_mean_ms: NUM,
  },
} as const;

const COUNTS = { served: INT, captured: INT, missing: INT } as const;

export function registerStatsRoutes(app: FastifyInstance, ctx: { store: Store; priceOf: PriceOf }): void {
  const { store } = ctx;

  app.get<{ Querystring: { from?: string; to?: string; model?: string; provider?: string; team?: string } }>(
    '/v1/stages',
    {
      schema: {
        summary: "Count and p50/p95/p99 of each stage's duration",
        tags: ['stages'],
        querystring: query({ from: { ...FROM, description: `${FROM.description}. Default an hour before \`to\`` }, to: TO, model: NAME_PARAM, provider: NAME_PARAM, team: TEAM_PARAM }),
        response: {
          200: {
            type: 'object',
            additionalProperties: false,
            required: ['from', 'to', 'model', 'provider', 'team', 'stages'],
            properties: { from: ISO_TIME, to: ISO_TIME, model: NULLABLE_STRING, provider: NULLABLE_STRING, team: NULLABLE_STRING, stages: { type: 'array', items: STAGE_STATS } },
          },
          ...ERRORS,
        },
      },
    },
    async (req) => {
      const q = req.query;
      const { fromNs, toNs } = rangeParams({ from: q.from, to: q.to }, RANGES.stages);
      const filter = { fromNs, toNs, model: q.model ?? null, provider: q.provider ?? null, team: teamScope(req.caller, q.team ?? null) };
      const stages = await stageStats(store, filter);
      return {
        from: new Date(Number(fromNs / 1_000_000n)).toISOString(),
        to: new Date(Number(toNs / 1_000_000n)).toISOString(),
        model: filter.model,
        provider: filter.provider,
        team: filter.team,
        stages,
      };
    },
  );

  app.get<{ Querystring: { from?: string; to?: string; model?: string; provider?: string; team?: string; key?: string; group_by?: string } }>(
    '/v1/usage',
    {
      schema: {
        summary: 'Requests, tokens and cost, grouped (from the per-minute rollup)',
        tags: ['usage'],
        querystring: query({
          from: { ...FROM, description: `${FROM.description}; rounded down to the minute. Default 24 hours before \`to\`` },
          to: TO,
          team: TEAM_PARAM,
          key: { type: 'string', pattern: '^key_[a-z0-9]{16}$', description: 'A key id (`key_…`)' },
          model: NAME_PARAM,
          provider: NAME_PARAM,
          group_by: { type: 'string', maxLength: 128, description: `Comma-separated: ${USAGE_KEYS.join(', ')}. Default team,model` },
        }),
        response: {
          200: {
            type: 'object',
            additionalProperties: false,
            required: ['from', 'to', 'group_by', 'rows', 'total'],
            properties: { from: ISO_TIME, to: ISO_TIME, group_by: { type: 'array', items: { type: 'string', enum: [...USAGE_KEYS] } }, rows: { type: 'array', items: USAGE_ROW }, total: USAGE_ROW },
          },
          ...ERRORS,
        },
      },
    },
    async (req) => {
      const q = req.query;
      const { fromNs, toNs } = rangeParams({ from: q.from, to: q.to }, RANGES.usage);
      const groupBy = (q.group_by ?? 'team,model').split(',').map((k) => k.trim()).filter((k) => k !== '');
      for (const k of groupBy) {
        if (!(USAGE_KEYS as readonly string[]).includes(k)) throw new QueryError('bad_parameter', `group_by takes ${USAGE_KEYS.join(', ')}; got "${k.slice(0, 32)}"`, { field: 'group_by' });
      }
      const fromS = Number(fromNs / 1_000_000_000n);
      const toS = Number((toNs + 59_999_999_999n) / 1_000_000_000n);
      const result = await usage(
        store,
        { fromS, toS: toS - (toS % 60), team: teamScope(req.caller, q.team ?? null), key: q.key ?? null, model: q.model ?? null, provider: q.provider ?? null, groupBy: groupBy as UsageKey[] },
        ctx.priceOf,
      );
      return { from: new Date((fromS - (fromS % 60)) * 1000).toISOString(), to: new Date((toS - (toS % 60)) * 1000).toISOString(), group_by: groupBy, ...result };
    },
  );

  app.get<{ Querystring: { from?: string; to?: string; instance?: string } }>(
    '/v1/capture',
    {
      schema: {
        summary: 'Capture health: served vs captured requests per gateway instance and minute, and ingest lag (admin token)',
        tags: ['capture'],
        querystring: query({ from: { ...FROM, description: `${FROM.description}. Default an hour before \`to\`` }, to: TO, instance: NAME_PARAM }),
        response: {
          200: {
            type: 'object',
            additionalProperties: false,
            required: ['from', 'to', 'instances', 'lag'],
            properties: {
              from: ISO_TIME,
              to: ISO_TIME,
              instances: {
                type: 'array',
                items: {
                  type: 'object',
                  additionalProperties: false,
                  required: ['instance', 'served', 'captured', 'missing', 'minutes'],
                  properties: {
                    instance: { type: 'string' },
                    ...COUNTS,
                    minutes: { type: 'array', items: { type: 'object', additionalProperties: false, required: ['minute', 'served', 'captured', 'missing'], properties: { minute: ISO_TIME, ...COUNTS } } },
                  },
                },
              },
              lag: { type: 'object', additionalProperties: false, required: ['batches', 'p50_ms', 'p99_ms', 'max_ms'], properties: { batches: INT, p50_ms: NUM, p99_ms: NUM, max_ms: NUM } },
            },
          },
          ...ERRORS,
        },
      },
    },
    async (req) => {
      // Capture health counts every team's requests per gateway instance: the operator's view.
      requireAdmin(req.caller, 'capture health (served and captured requests of every team, per gateway instance)');
      const q = req.query;
      const { fromNs, toNs } = rangeParams({ from: q.from, to: q.to }, RANGES.capture);
      const health = await captureHealth(store, fromNs, toNs, q.instance ?? null);
      return {
        from: new Date(Number(fromNs / 1_000_000n)).toISOString(),
        to: new Date(Number(toNs / 1_000_000n)).toISOString(),
        ...health,
      };
    },
  );
}
