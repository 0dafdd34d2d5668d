/**
 * `GET /v1/requests` (the listing, newest first, cursor paging) and
 * `GET /v1/requests/{traceId}` (one trace's requests with their waterfalls); docs/api.md.
 */
import type { FastifyInstance } from 'fastify';
import type { Store } from '@sightline/store';
import { teamScope } from '../auth.js';
import { filterHash, MAX_CURSOR_LENGTH, type CursorCodec } from '../cursor.js';
import { QueryError } from '../errors.js';
import { RANGES } from '../limits.js';
import { rangeParams, timeParam, traceIdParam } from '../params.js';
import type { PriceOf } from '@sightline/config';
import { listRequests, type ListPosition, type RequestListFilter } from '../queries/requests.js';
import { requestsByTrace } from '../queries/trace.js';
import { ERRORS, FROM, ISO_TIME, NAME_PARAM, TEAM_PARAM, TO, query } from '../schemas.js';

export interface RequestRoutesContext {
  store: Store;
  priceOf: PriceOf;
  cursors: CursorCodec;
}

const KEY_ID = '^key_[a-z0-9]{16}$';

const LIST_QUERY = query({
  from: { ...FROM, description: `${FROM.description}. Default 24 hours before \`to\`; at most ${RANGES.requests.maxDays} days before it` },
  to: TO,
  model: NAME_PARAM,
  provider: NAME_PARAM,
  status: { type: 'string', pattern: '^([1-5][0-9][0-9]|[1-5]xx)$', description: 'An HTTP status (`404`) or a class (`5xx`)' },
  error_type: { type: 'string', maxLength: 128, description: 'The gateway\'s error code, e.g. `upstream_timeout`' },
  stream: { type: 'boolean' },
  min_total_ms: { type: 'number', minimum: 0, maximum: 86_400_000, description: 'Only requests that took at least this long' },
  key: { type: 'string', pattern: KEY_ID, description: 'A key id (`key_…`), not a secret' },
  team: TEAM_PARAM,
  limit: { type: 'integer', minimum: 1, maximum: 1000, default: 50 },
  cursor: { type: 'string', maxLength: MAX_CURSOR_LENGTH, description: '`next_cursor` of the previous page, with the same parameters' },
});

interface ListQuery {
  from?: string;
  to?: string;
  model?: string;
  provider?: string;
  status?: string;
  error_type?: string;
  stream?: boolean;
  min_total_ms?: number;
  key?: string;
  team?: string;
  limit: number;
  cursor?: string;
}

const SUMMARY = {
  type: 'object',
  additionalProperties: false,
  required: ['trace_id', 'span_id', 'start_time', 'start_time_unix_nano', 'team', 'key_id', 'model', 'provider', 'dialect', 'stream', 'status', 'error_type', 'total_ms', 'gateway_ms', 'ttft_ms', 'tokens', 'cost_usd'],
  properties: {
    trace_id: { type: 'string' },
    span_id: { type: 'string' },
    start_time: ISO_TIME,
    start_time_unix_nano: { type: 'string', description: 'Unix nanoseconds, as a decimal string (beyond a double)' },
    team: { type: 'string' },
    key_id: { type: 'string', description: "The caller's key id; '' when authentication was off" },
    model: { type: 'string' },
    provider: { type: 'string' },
    dialect: { type: 'string', enum: ['openai', 'anthropic', ''] },
    stream: { type: 'boolean' },
    status: { type: 'integer', description: 'HTTP status sent to the client' },
    error_type: { type: 'string' },
    total_ms: { type: 'number' },
    gateway_ms: { type: 'number', description: "The gateway's own time: total minus waiting on the provider" },
    ttft_ms: { type: 'number', description: 'Time to the first streamed token; 0 when not a stream' },
    tokens: {
      type: 'object',
      additionalProperties: false,
      required: ['input', 'output', 'cache_read', 'cache_write'],
      properties: { input: { type: 'integer' }, output: { type: 'integer' }, cache_read: { type: 'integer' }, cache_write: { type: 'integer' } },
    },
    cost_usd: { type: ['number', 'null'], description: 'At the configured prices (the configuration\'s `pricing`, then the shipped price table); null when the model has no price' },
  },
} as const;

const MS_NS = (ns: string, ms: string) => ({ [`${ns}`]: { type: 'integer' }, [`${ms}`]: { type: 'number' } });

const WATERFALL_ENTRY = {
  type: 'object',
  additionalProperties: false,
  required: ['stage', 'span_id', 'offset_ns', 'duration_ns', 'offset_ms', 'duration_ms', 'status', 'status_message'],
  properties: { stage: { type: 'string' }, span_id: { type: 'string' }, ...MS_NS('offset_ns', 'offset_ms'), ...MS_NS('duration_ns', 'duration_ms'), status: { type: 'string', enum: ['UNSET', 'OK', 'ERROR'] }, status_message: { type: 'string' } },
} as const;

const ATTEMPT = {
  type: 'object',
  additionalProperties: false,
  required: ['attempt', 'span_id', 'provider', 'model', 'status', 'error_type', 'offset_ns', 'duration_ns', 'offset_ms', 'duration_ms', 'ok'],
  properties: {
    attempt: { type: 'integer' },
    span_id: { type: 'string' },
    provider: { type: 'string' },
    model: { type: 'string' },
    status: { type: 'integer' },
    error_type: { type: 'string' },
    ...MS_NS('offset_ns', 'offset_ms'),
    ...MS_NS('duration_ns', 'duration_ms'),
    ok: { type: 'boolean' },
  },
} as const;

const STR = { type: 'string' } as const;
const INT = { type: 'integer' } as const;

const REQUEST_VIEW = {
  type: 'object',
  additionalProperties: false,
  required: ['trace_id', 'span_id', 'parent_span_id', 'instance', 'seq', 'start_time', 'start_time_unix_nano', 'method', 'route', 'dialect', 'model', 'response_model', 'provider', 'upstream_model', 'team', 'stream', 'http_status', 'upstream_status', 'error_type', 'aborted', 'total_ns', 'gateway_ns', 'upstream_ns', 'ttfb_ns', 'ttft_ns', 'usage', 'request_bytes', 'response_bytes', 'attributes', 'waterfall', 'attempts'],
  properties: {
    trace_id: STR,
    span_id: STR,
    parent_span_id: STR,
    instance: STR,
    seq: INT,
    start_time: ISO_TIME,
    start_time_unix_nano: STR,
    method: STR,
    route: STR,
    dialect: STR,
    model: STR,
    response_model: STR,
    provider: STR,
    upstream_model: STR,
    team: STR,
    stream: { type: 'boolean' },
    http_status: INT,
    upstream_status: INT,
    error_type: STR,
    aborted: { type: 'boolean' },
    total_ns: INT,
    gateway_ns: INT,
    upstream_ns: INT,
    ttfb_ns: INT,
    ttft_ns: INT,
    usage: {
      type: 'object',
      additionalProperties: false,
      required: ['input_tokens', 'output_tokens', 'cache_read_tokens', 'cache_write_tokens', 'partial'],
      properties: { input_tokens: INT, output_tokens: INT, cache_read_tokens: INT, cache_write_tokens: INT, partial: { type: 'boolean' } },
    },
    request_bytes: INT,
    response_bytes: INT,
    attributes: { type: 'object', additionalProperties: { type: 'string' }, description: "The root span's attributes" },
    waterfall: { type: 'array', items: WATERFALL_ENTRY },
    attempts: { type: 'array', items: ATTEMPT },
  },
} as const;

function statusFilter(s: string | undefined): RequestListFilter['status'] {
  if (s === undefined) return null;
  return s.endsWith('xx') ? { class: Number(s[0]) } : { code: Number(s) };
}

export function registerRequestRoutes(app: FastifyInstance, ctx: RequestRoutesContext): void {
  app.get<{ Querystring: ListQuery }>(
    '/v1/requests',
    {
      schema: {
        summary: 'Captured requests, newest first, a page at a time',
        tags: ['requests'],
        querystring: LIST_QUERY,
        response: {
          200: {
            type: 'object',
            additionalProperties: false,
            required: ['data', 'next_cursor'],
            properties: {
              data: { type: 'array', items: SUMMARY },
              next_cursor: { type: ['string', 'null'], description: 'Pass as `cursor` (with the same parameters) for the next page; null on the last' },
            },
          },
          ...ERRORS,
        },
      },
    },
    async (req) => {
      const q = req.query;
      const team = teamScope(req.caller, q.team ?? null);
      const { fromNs: defaultFromNs, toNs } = rangeParams({ from: q.from, to: q.to }, RANGES.requests);
      // Everything the listing is filtered by, as given (a default `to` is not: it moves
      // with the clock, and the cursor's position bounds later pages anyway).
      const filters = {
        from: q.from === undefined ? null : timeParam('from', q.from, 0n).toString(),
        to: q.to === undefined ? null : toNs.toString(),
        team,
        model: q.model ?? null,
        provider: q.provider ?? null,
        status: q.status ?? null,
        error_type: q.error_type ?? null,
        stream: q.stream ?? null,
        min_total_ms: q.min_total_ms ?? null,
        key: q.key ?? null,
      };
      const hash = filterHash(filters);
      let after: ListPosition | null = null;
      let fromNs = defaultFromNs;
      if (q.cursor !== undefined) {
        const c = ctx.cursors.decode(q.cursor, hash);
        after = c;
        fromNs = c.fromNs;
      }
      const f: RequestListFilter = {
        fromNs,
        toNs,
        team,
        model: filters.model,
        provider: filters.provider,
        status: statusFilter(q.status),
        errorType: filters.error_type,
        stream: filters.stream,
        minTotalNs: q.min_total_ms === undefined ? null : BigInt(Math.round(q.min_total_ms * 1e6)),
        keyId: filters.key,
      };
      const { items, next } = await listRequests(ctx.store, f, after, q.limit, ctx.priceOf);
      return { data: items, next_cursor: next === null ? null : ctx.cursors.encode({ ...next, fromNs }, hash) };
    },
  );

  app.get<{ Params: { traceId: string } }>(
    '/v1/requests/:traceId',
    {
      schema: {
        summary: "One trace's requests with their stage waterfalls and upstream attempts",
        tags: ['requests'],
        params: { type: 'object', required: ['traceId'], properties: { traceId: { type: 'string', maxLength: 64, description: '32 hexadecimal characters (`x-sightline-trace-id`)' } } },
        response: {
          200: {
            type: 'object',
            additionalProperties: false,
            required: ['trace_id', 'total', 'omitted', 'requests'],
            properties: {
              trace_id: STR,
              total: { type: 'integer', description: 'Requests with this trace id' },
              omitted: { type: 'integer', description: 'Requests not listed (past the first 100)' },
              requests: { type: 'array', items: REQUEST_VIEW },
            },
          },
          ...ERRORS,
        },
      },
    },
    async (req) => {
      const traceId = traceIdParam(req.params.traceId);
      const { requests, total, omitted } = await requestsByTrace(ctx.store, traceId, teamScope(req.caller, null));
      if (requests.length === 0) throw new QueryError('not_found', `no request with trace id ${traceId} (capture reaches the store within seconds; retry shortly if it was just sent)`);
      return { trace_id: traceId, total, omitted, requests };
    },
  );
}
