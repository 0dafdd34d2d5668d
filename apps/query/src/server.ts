/**
 * The query API (docs/api.md): per-request waterfalls and per-stage percentiles, read
 * from ClickHouse.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { StoreError, withReadLimits, type ReadLimits, type Store } from '@sightline/store';
import { QueryError } from './errors.js';
import { rangeParams, stringParam, traceIdParam } from './params.js';
import { requestsByTrace } from './queries/trace.js';
import { stageStats } from './queries/stages.js';
import { captureHealth } from './queries/capture.js';
import { usage, USAGE_KEYS, type UsageKey } from './queries/usage.js';
import type { PriceOf } from './pricing.js';
import { DEFAULT_READ_LIMITS, NARROWING, RANGES } from './limits.js';
import { DirectoryError } from '@sightline/directory';
import { authenticate, requireAdmin, teamScope, type QueryAuth } from './auth.js';
import { registerAdminRoutes } from './routes/admin.js';

export interface QueryServerOptions {
  store: Store;
  /** Prices for cost figures (configuration `pricing`); default: none. */
  priceOf?: PriceOf;
  /** The ClickHouse limits every query runs with; default DEFAULT_READ_LIMITS (limits.ts). */
  limits?: ReadLimits;
  /** Authentication (admin token and key directory); null or absent: open, every caller is the admin. */
  auth?: QueryAuth | null;
  log?: (msg: string) => void;
}

const DIRECTORY_ERRORS = { SL_DIR_INVALID: 'bad_parameter', SL_DIR_NOT_FOUND: 'not_found', SL_DIR_CONFLICT: 'store_unavailable', SL_DIR_UNAVAILABLE: 'store_unavailable' } as const;

const LIMIT_TEXT = {
  time: (l: ReadLimits) => `the query ran past the query API's time limit (${l.maxExecutionTimeS} s)`,
  memory: (l: ReadLimits) => `the query needed more memory than the query API allows (${Math.round(l.maxMemoryBytes / 1024 ** 2)} MiB)`,
  result: (l: ReadLimits) => `the answer has more rows than the query API returns (${l.maxResultRows})`,
};

export function buildQueryServer(opts: QueryServerOptions): FastifyInstance {
  const limits = opts.limits ?? DEFAULT_READ_LIMITS;
  // Every query of every endpoint goes through this: limited and read-only.
  const store = withReadLimits(opts.store, limits);
  const log = opts.log ?? (() => {});
  const auth = opts.auth ?? null;
  const app = Fastify({ logger: false });
  app.decorateRequest('caller', null);
  app.addHook('onRequest', async (req) => {
    req.caller = authenticate(req, auth, Date.now());
  });
  let served = 0;
  let failed = 0;
  let limited = 0;

  app.setErrorHandler((err: Error & { statusCode?: number }, req, reply) => {
    let qe: QueryError;
    if (err instanceof QueryError) qe = err;
    else if (err instanceof DirectoryError) qe = new QueryError(DIRECTORY_ERRORS[err.code], err.message, { cause: err, field: err.field });
    else if (err instanceof StoreError && err.limit !== null) {
      limited++;
      const narrow = NARROWING[req.routeOptions.url ?? ''] ?? 'narrow the query';
      qe = new QueryError('query_too_large', `${LIMIT_TEXT[err.limit](limits)}; ${narrow}`, { cause: err });
    } else if (err instanceof StoreError) {
      log(`store error: ${err.message}`);
      qe = new QueryError('store_unavailable', 'the data store did not answer; try again', { cause: err });
    } else if (err.statusCode !== undefined && err.statusCode < 500) qe = new QueryError('bad_parameter', err.message);
    else {
      log(`internal error: ${err.stack ?? err.message}`);
      qe = new QueryError('internal_error', 'internal error');
    }
    if (qe.status >= 500) failed++;
    void reply.code(qe.status).send(qe.toJSON());
  });
  app.setNotFoundHandler((req, reply) => {
    void reply.code(404).send(new QueryError('not_found', `no route for ${req.method} ${(req.raw.url ?? '').split('?', 1)[0]}`).toJSON());
  });
  app.addHook('onResponse', async () => {
    served++;
  });

  app.get('/healthz', async () => ({ ok: true, store: store.kind, database: store.database }));
  app.get('/metrics', async (_req, reply) => {
    reply.header('content-type', 'text/plain; version=0.0.4');
    return `# HELP sightline_query_requests_total Query API requests served.\n# TYPE sightline_query_requests_total counter\nsightline_query_requests_total ${served}\n# HELP sightline_query_failures_total Query API requests that failed on our side.\n# TYPE sightline_query_failures_total counter\nsightline_query_failures_total ${failed}\n# HELP sightline_query_limited_total Query API requests whose query a limit stopped (422).\n# TYPE sightline_query_limited_total counter\nsightline_query_limited_total ${limited}\n`;
  });

  app.get('/v1/whoami', async (req) => {
    const c = req.caller;
    if (c === null || c.kind === 'admin') return { kind: 'admin', team: null, key_id: null, scopes: ['admin'], authentication: auth !== null };
    return { kind: 'key', team: c.key.team, key_id: c.key.id, name: c.key.name, scopes: c.key.scopes, authentication: true };
  });

  registerAdminRoutes(app, auth?.directory ?? null);

  app.get<{ Params: { traceId: string } }>('/v1/requests/:traceId', async (req) => {
    const traceId = traceIdParam(req.params.traceId);
    const { requests, total, omitted } = await requestsByTrace(store, traceId, teamScope(req.caller, null));
    if (requests.length === 0) throw new QueryError('not_found', `no request with trace id ${traceId} (capture reaches the store within seconds; retry shortly if it was just sent)`);
    return { trace_id: traceId, total, omitted, requests };
  });

  app.get<{ Querystring: Record<string, unknown> }>('/v1/stages', async (req) => {
    const q = req.query;
    const { fromNs, toNs } = rangeParams(q, RANGES.stages);
    const filter = { fromNs, toNs, model: stringParam('model', q.model), provider: stringParam('provider', q.provider), team: teamScope(req.caller, stringParam('team', q.team)) };
    const stages = await stageStats(store, filter);
    return {
      from: new Date(Number(fromNs / 1_000_000n)).toISOString(),
      to: new Date(Number(toNs / 1_000_000n)).toISOString(),
      model: filter.model,
      provider: filter.provider,
      team: filter.team,
      stages,
    };
  });

  app.get<{ Querystring: Record<string, unknown> }>('/v1/usage', async (req) => {
    const q = req.query;
    const { fromNs, toNs } = rangeParams(q, RANGES.usage);
    const groupRaw = stringParam('group_by', q.group_by) ?? 'team,model';
    const groupBy = groupRaw.split(',').map((k) => k.trim()).filter((k) => k !== '');
    for (const k of groupBy) {
      if (!(USAGE_KEYS as readonly string[]).includes(k)) throw new QueryError('bad_parameter', `group_by takes ${USAGE_KEYS.join(', ')}; got "${k.slice(0, 32)}"`);
    }
    const fromS = Number(fromNs / 1_000_000_000n);
    const toS = Number((toNs + 59_999_999_999n) / 1_000_000_000n);
    const result = await usage(store, { fromS, toS: toS - (toS % 60), team: teamScope(req.caller, stringParam('team', q.team)), model: stringParam('model', q.model), provider: stringParam('provider', q.provider), groupBy: groupBy as UsageKey[] }, opts.priceOf ?? (() => null));
    return { from: new Date((fromS - (fromS % 60)) * 1000).toISOString(), to: new Date((toS - (toS % 60)) * 1000).toISOString(), group_by: groupBy, ...result };
  });

  app.get<{ Querystring: Record<string, unknown> }>('/v1/capture', async (req) => {
    // Capture health counts every team's requests per gateway instance: the operator's view.
    requireAdmin(req.caller, 'capture health (served and captured requests of every team, per gateway instance)');
    const q = req.query;
    const { fromNs, toNs } = rangeParams(q, RANGES.capture);
    const instance = stringParam('instance', q.instance);
    const health = await captureHealth(store, fromNs, toNs, instance);
    return {
      from: new Date(Number(fromNs / 1_000_000n)).toISOString(),
      to: new Date(Number(toNs / 1_000_000n)).toISOString(),
      ...health,
    };
  });

  return app;
}
