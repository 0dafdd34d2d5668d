/**
 * The query API (docs/api.md): captured requests and their waterfalls, per-stage
 * percentiles, metrics, usage and cost, read from ClickHouse, team-scoped; the admin
 * endpoints for keys and teams; and its own OpenAPI document.
 *
 * Every route declares the JSON schemas of its query string, path, body and responses:
 * they validate requests (a bad or unknown field is a 400 naming it), shape responses, and
 * are the document at `/openapi.json` (openapi.ts).
 */
import { createHmac } from 'node:crypto';
import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
import { StoreError, withReadLimits, type ReadLimits, type Store } from '@sightline/store';
import { DirectoryError } from '@sightline/directory';
import { QueryError } from './errors.js';
import type { PriceOf } from '@sightline/config';
import { DEFAULT_READ_LIMITS, DEFAULT_SEARCH_MAX_BYTES, DEFAULT_SQL_MAX_RESULT_BYTES, NARROWING } from './limits.js';
import { authenticate, type QueryAuth } from './auth.js';
import { CursorCodec } from './cursor.js';
import { collectRoutes } from './openapi.js';
import { ERRORS } from './schemas.js';
import { registerAdminRoutes } from './routes/admin.js';
import { registerBudgetRoutes } from './routes/budget.js';
import type { Governor } from '@sightline/controls';
import { registerRequestRoutes } from './routes/requests.js';
import { registerMetricsRoutes } from './routes/metrics.js';
import { registerStatsRoutes } from './routes/stats.js';
import { registerSqlRoutes } from './routes/sql.js';
import { registerUiRoutes } from './routes/ui.js';
import { loadAssets, type Asset } from '@sightline/dashboard';

export interface QueryServerOptions {
  store: Store;
  /**
   * Prices for cost figures: `priceLookup(config.pricing, { shipped: config.pricingDefaults })`
   * from @sightline/config. Default: none (every cost is null).
   */
  priceOf?: PriceOf;
  /** The ClickHouse limits every query runs with; default DEFAULT_READ_LIMITS (limits.ts). */
  limits?: ReadLimits;
  /** Bytes of content one phrase search (`q`) may read per query; default DEFAULT_SEARCH_MAX_BYTES (limits.ts). */
  searchMaxBytes?: number;
  /** Bytes one `POST /v1/sql` answer may hold; default DEFAULT_SQL_MAX_RESULT_BYTES (limits.ts). */
  sqlMaxResultBytes?: number;
  /** Authentication (admin token and key directory); null or absent: open, every caller is the admin. */
  auth?: QueryAuth | null;
  /**
   * Rate limits and budgets, for GET /v1/budget (only `usage` is read: the embedded mode's
   * query process asks the gateway process); null or absent: that endpoint answers 404.
   */
  governor?: Pick<Governor, 'usage'> | null;
  /**
   * Signs the cursors of `GET /v1/requests` (cursor.ts); at least 16 bytes. Replicas behind
   * one load balancer need the same one. Default: derived from the admin token when
   * authentication is on, else random at start (cursors then last as long as the process).
   */
  cursorSecret?: string | Uint8Array;
  log?: (msg: string) => void;
  /** The dashboard's files (served at `/` and `/ui/`); default: @sightline/dashboard's, read at start. */
  dashboard?: ReadonlyMap<string, Asset>;
}

const DIRECTORY_ERRORS = { SL_DIR_INVALID: 'bad_parameter', SL_DIR_NOT_FOUND: 'not_found', SL_DIR_CONFLICT: 'store_unavailable', SL_DIR_UNAVAILABLE: 'store_unavailable' } as const;

const LIMIT_TEXT = {
  time: (l: ReadLimits) => `the query ran past the query API's time limit (${l.maxExecutionTimeS} s)`,
  memory: (l: ReadLimits) => `the query needed more memory than the query API allows (${Math.round(l.maxMemoryBytes / 1024 ** 2)} MiB)`,
  result: (l: ReadLimits) => `the answer has more rows than the query API returns (${l.maxResultRows})`,
};

/** With ajv's `verbose`, an issue also carries the schema it failed (`parentSchema`). */
type ValidationIssue = NonNullable<FastifyError['validation']>[number] & { parentSchema?: Record<string, unknown> };

/** `/filters/model/0` → `filters.model[0]`. */
function fieldOf(instancePath: string, child?: unknown): string {
  const parts = instancePath.split('/').slice(1);
  if (typeof child === 'string') parts.push(child);
  let out = '';
  for (const p of parts) out += /^\d+$/.test(p) ? `[${p}]` : out === '' ? p : `.${p}`;
  return out.slice(0, 96);
}

/** A schema validation failure as a 400 that names the field and says what it takes. */
function validationError(context: string | undefined, v: ValidationIssue): QueryError {
  const params = v.params as Record<string, unknown>;
  const where = context === 'querystring' ? 'parameter' : context === 'params' ? 'path parameter' : 'field';
  switch (v.keyword) {
    case 'additionalProperties': {
      const field = fieldOf(v.instancePath, params.additionalProperty);
      const known = Object.keys((v.parentSchema?.properties ?? {}) as object);
      return new QueryError('bad_parameter', `unknown ${where} \`${field}\`${known.length > 0 ? ` (expected ${known.join(', ')})` : ''}`, { field });
    }
    case 'required': {
      const field = fieldOf(v.instancePath, params.missingProperty);
      return new QueryError('bad_parameter', `${where} \`${field}\` is required`, { field });
    }
    case 'enum': {
      const field = fieldOf(v.instancePath);
      return new QueryError('bad_parameter', `${where} \`${field}\` must be one of ${(params.allowedValues as unknown[]).join(', ')}`, { field });
    }
    default: {
      const field = fieldOf(v.instancePath);
      return field === ''
        ? new QueryError('bad_parameter', `the ${context === 'body' ? 'body' : where} ${v.message ?? 'is not valid'}`, { field: context === 'body' ? 'body' : null })
        : new QueryError('bad_parameter', `${where} \`${field}\` ${v.message ?? 'is not valid'}`, { field });
    }
  }
}

export function buildQueryServer(opts: QueryServerOptions): FastifyInstance {
  const limits = opts.limits ?? DEFAULT_READ_LIMITS;
  // Every query of every endpoint goes through this: limited and read-only.
  const store = withReadLimits(opts.store, limits);
  const log = opts.log ?? (() => {});
  const auth = opts.auth ?? null;
  const priceOf = opts.priceOf ?? (() => null);
  const cursors = new CursorCodec(opts.cursorSecret ?? (auth === null ? undefined : createHmac('sha256', auth.adminToken).update('sightline cursor v1').digest()));
  const app = Fastify({
    logger: false,
    // Query strings arrive as text: coerce them to the schema's types. Unknown fields are
    // refused (a 400 naming them), never silently dropped (fastify's default removes them);
    // `verbose` gives the schema to the error, to list the fields a route takes.
    ajv: { customOptions: { coerceTypes: 'array', removeAdditional: false, useDefaults: true, allErrors: false, verbose: true, allowUnionTypes: true } },
  });
  const openapi = collectRoutes(app);
  app.decorateRequest('caller', null);
  app.addHook('onRequest', async (req) => {
    req.caller = authenticate(req, auth, Date.now());
  });
  let served = 0;
  let failed = 0;
  let limited = 0;

  app.setErrorHandler((err: FastifyError, req, reply) => {
    let qe: QueryError;
    if (err instanceof QueryError) qe = err;
    else if (err.validation !== undefined && err.validation.length > 0) qe = validationError(err.validationContext, err.validation[0]!);
    else if (err instanceof DirectoryError) qe = new QueryError(DIRECTORY_ERRORS[err.code], err.message, { cause: err, field: err.field });
    else if (err instanceof StoreError && err.limit !== null) {
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
    if (qe.code === 'query_too_large') limited++;
    if (qe.status >= 500) failed++;
    void reply.code(qe.status).send(qe.toJSON());
  });
  app.setNotFoundHandler((req, reply) => {
    void reply.code(404).send(new QueryError('not_found', `no route for ${req.method} ${(req.raw.url ?? '').split('?', 1)[0]}`).toJSON());
  });
  app.addHook('onResponse', async () => {
    served++;
  });

  const open = { security: [] as Record<string, string[]>[], tags: ['service'] };
  app.get(
    '/healthz',
    {
      schema: {
        ...open,
        summary: 'Health',
        response: { 200: { type: 'object', additionalProperties: false, required: ['ok', 'store', 'database'], properties: { ok: { type: 'boolean' }, store: { type: 'string', enum: ['clickhouse', 'chdb'] }, database: { type: 'string' } } }, ...ERRORS },
      },
    },
    async () => ({ ok: true, store: store.kind, database: store.database }),
  );
  app.get(
    '/metrics',
    {
      schema: {
        ...open,
        summary: 'Prometheus metrics of the query API',
        response: { 200: { description: 'Prometheus text format 0.0.4', content: { 'text/plain': { schema: { type: 'string' } } } }, ...ERRORS },
      },
    },
    async (_req, reply) => {
      reply.header('content-type', 'text/plain; version=0.0.4');
      return `# HELP sightline_query_requests_total Query API requests served.\n# TYPE sightline_query_requests_total counter\nsightline_query_requests_total ${served}\n# HELP sightline_query_failures_total Query API requests that failed on our side.\n# TYPE sightline_query_failures_total counter\nsightline_query_failures_total ${failed}\n# HELP sightline_query_limited_total Query API requests whose query a limit stopped (422).\n# TYPE sightline_query_limited_total counter\nsightline_query_limited_total ${limited}\n# HELP sightline_query_store_reads_resent_total Reads sent to ClickHouse a second time at once because the connection broke under the first (a keep-alive connection the server had closed).\n# TYPE sightline_query_store_reads_resent_total counter\nsightline_query_store_reads_resent_total ${store.queriesResent ?? 0}\n`;
    },
  );
  app.get(
    '/openapi.json',
    {
      schema: {
        ...open,
        summary: 'This document: OpenAPI 3.1, generated from the schemas that validate requests',
        response: { 200: { type: 'object', additionalProperties: true, required: ['openapi', 'info', 'paths'], properties: { openapi: { type: 'string' } } }, ...ERRORS },
      },
    },
    async () => openapi.document({ title: 'Sightline query API', version: '0.1.0' }),
  );

  app.get(
    '/v1/whoami',
    {
      schema: {
        summary: 'The caller: the admin, or a key with its team and scopes',
        tags: ['service'],
        response: {
          200: {
            type: 'object',
            additionalProperties: false,
            required: ['kind', 'team', 'key_id', 'scopes', 'authentication'],
            properties: {
              kind: { type: 'string', enum: ['admin', 'key'] },
              team: { type: ['string', 'null'] },
              key_id: { type: ['string', 'null'] },
              name: { type: 'string' },
              scopes: { type: 'array', items: { type: 'string' } },
              authentication: { type: 'boolean', description: 'False: the API is open (no admin token set) and answers everyone as the admin' },
            },
          },
          ...ERRORS,
        },
      },
    },
    async (req) => {
      const c = req.caller;
      if (c === null || c.kind === 'admin') return { kind: 'admin', team: null, key_id: null, scopes: ['admin'], authentication: auth !== null };
      return { kind: 'key', team: c.key.team, key_id: c.key.id, name: c.key.name, scopes: c.key.scopes, authentication: true };
    },
  );

  registerAdminRoutes(app, auth?.directory ?? null);
  registerBudgetRoutes(app, auth?.directory ?? null, opts.governor ?? null);
  registerRequestRoutes(app, { store, priceOf, cursors, searchLimits: { ...limits, maxBytesToRead: opts.searchMaxBytes ?? DEFAULT_SEARCH_MAX_BYTES } });
  registerMetricsRoutes(app, { store, priceOf });
  registerStatsRoutes(app, { store, priceOf });
  registerSqlRoutes(app, { store, limits: { ...limits, maxResultBytes: opts.sqlMaxResultBytes ?? DEFAULT_SQL_MAX_RESULT_BYTES } });
  registerUiRoutes(app, opts.dashboard ?? loadAssets());
  return app;
}
