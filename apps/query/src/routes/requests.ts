/**
 * `GET /v1/requests` (the listing, newest first, cursor paging) and
 * `GET /v1/requests/{traceId}` (one trace's requests with their waterfalls); docs/api.md.
 */
import type { FastifyInstance } from 'fastify';
import type { ReadLimits, Store } from '@sightline/store';
import { mayRead, teamScope } from '../auth.js';
import { filterHash, MAX_CURSOR_LENGTH, type CursorCodec } from '../cursor.js';
import { QueryError } from '../errors.js';
import { RANGES } from '../limits.js';
import { rangeParams, timeParam, traceIdParam } from '../params.js';
import type { PriceOf } from '@sightline/config';
import { listRequests, type ListPosition, type RequestListFilter } from '../queries/requests.js';
import { MAX_PHRASE_LENGTH } from '../queries/content.js';
import { requestsByTrace } from '../queries/trace.js';
import { ERRORS, FROM, ISO_TIME, NAME_PARAM, TEAM_PARAM, TO, query } from '../schemas.js';

export interface RequestRoutesContext {
  store: Store;
  priceOf: PriceOf;
  cursors: CursorCodec;
  /** The limits of a phrase search: the read limits and the scan bound (maxBytesToRead). */
  searchLimits: ReadLimits;
}

/** How many `tag` filters one listing takes (the gateway keeps 16 tags a request). */
const MAX_TAG_FILTERS = 16;
/** `name:value`; names as the gateway stores them (header names, lower case; matched lower-cased). */
const TAG_FILTER = '^[^:]{1,64}:.{0,256}$';

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
  end_user: { type: 'string', maxLength: 256, description: 'Requests of this end user (OpenAI `user` / `safety_identifier`, Anthropic `metadata.user_id`), exactly' },
  session: { type: 'string', maxLength: 256, description: 'Requests of this session (`x-sightline-session-id`), exactly' },
  tag: {
    type: 'array',
    maxItems: MAX_TAG_FILTERS,
    items: { type: 'string', pattern: TAG_FILTER },
    description: 'A tag as `name:value` (`x-sightline-tag-<name>: <value>`); repeat it for several, all of which must match',
  },
  q: {
    type: 'string',
    minLength: 1,
    maxLength: MAX_PHRASE_LENGTH,
    description: 'A phrase searched, case-insensitively, in the prompts and answers of the range (the `content` scope or the admin token); bounded by QUERY_SEARCH_MAX_BYTES',
  },
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
  end_user?: string;
  session?: string;
  tag?: string[];
  q?: string;
  limit: number;
  cursor?: string;
}

const SUMMARY = {
  type: 'object',
  additionalProperties: false,
  required: ['trace_id', 'span_id', 'start_time', 'start_time_unix_nano', 'team', 'key_id', 'model', 'provider', 'dialect', 'stream', 'status', 'error_type', 'total_ms', 'gateway_ms', 'ttft_ms', 'tokens', 'cost_usd', 'end_user', 'session_id', 'tags'],
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
    end_user: { type: 'string', description: "The end user the caller named; '' when none" },
    session_id: { type: 'string', description: "The session (`x-sightline-session-id`); '' when none" },
    tags: { type: 'object', additionalProperties: { type: 'string' }, description: 'Tags (`x-sightline-tag-<name>`) by name' },
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

const CONTENT = {
  type: ['object', 'null'],
  additionalProperties: false,
  required: ['request', 'response', 'request_bytes', 'response_bytes', 'request_truncated', 'response_truncated', 'partial', 'policy', 'redactions'],
  description:
    'The prompt and the answer (the `content` scope or the admin token; absent for other callers). null: nothing was stored (the team\'s policy is `none`, or the content was withheld)',
  properties: {
    request: { type: 'string', description: 'The request body as the client sent it, cut at `capture.content_max_bytes`' },
    response: { type: 'string', description: 'The answer as the client received it: the JSON body, or a stream assembled into one JSON message (docs/schema.md)' },
    request_bytes: { type: 'integer', description: 'Full size of the request body, also past the cut' },
    response_bytes: { type: 'integer', description: 'Full size of the answer as sent, also past the cut' },
    request_truncated: { type: 'boolean' },
    response_truncated: { type: 'boolean' },
    partial: { type: 'boolean', description: 'The stream did not reach its end: `response` is what had arrived' },
    policy: { type: 'string', enum: ['full', 'redacted'] },
    redactions: { type: 'object', additionalProperties: { type: 'integer' }, description: 'Replacements by type (`email`, `openai_key`, …)' },
  },
} as const;

const REQUEST_VIEW = {
  type: 'object',
  additionalProperties: false,
  required: ['trace_id', 'span_id', 'parent_span_id', 'instance', 'seq', 'start_time', 'start_time_unix_nano', 'method', 'route', 'dialect', 'model', 'response_model', 'provider', 'upstream_model', 'team', 'stream', 'http_status', 'upstream_status', 'error_type', 'aborted', 'total_ns', 'gateway_ns', 'upstream_ns', 'ttfb_ns', 'ttft_ns', 'usage', 'request_bytes', 'response_bytes', 'end_user', 'session_id', 'tags', 'attributes', 'waterfall', 'attempts'],
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
    end_user: { type: 'string', description: "The end user the caller named; '' when none" },
    session_id: { type: 'string', description: "The session (`x-sightline-session-id`); '' when none" },
    tags: { type: 'object', additionalProperties: { type: 'string' }, description: 'Tags (`x-sightline-tag-<name>`) by name' },
    attributes: { type: 'object', additionalProperties: { type: 'string' }, description: "The root span's attributes" },
    waterfall: { type: 'array', items: WATERFALL_ENTRY },
    attempts: { type: 'array', items: ATTEMPT },
    content: CONTENT,
  },
} as const;

/** `name:value` filters as [name, value], names lower-cased like the gateway stores them. */
function tagFilters(tags: string[] | undefined): [string, string][] {
  return (tags ?? []).map((t) => {
    const i = t.indexOf(':');
    return [t.slice(0, i).toLowerCase(), t.slice(i + 1)];
  });
}

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
      if (q.q !== undefined && !mayRead(req.caller, 'content')) {
        throw new QueryError('forbidden', 'searching prompts and answers (`q`) takes a key with the `content` scope or the admin token', { field: 'q' });
      }
      const tags = tagFilters(q.tag);
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
        end_user: q.end_user ?? null,
        session: q.session ?? null,
        // Order does not change the listing (all must match): sorted, so it does not change the hash either.
        tag: tags.length === 0 ? null : JSON.stringify(tags.map((t) => `${t[0]}:${t[1]}`).sort()),
        q: q.q ?? null,
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
        endUser: filters.end_user,
        sessionId: filters.session,
        tags,
        phrase: filters.q,
      };
      const { items, next } = await listRequests(ctx.store, f, after, q.limit, ctx.priceOf, { searchLimits: ctx.searchLimits });
      return { data: items, next_cursor: next === null ? null : ctx.cursors.encode({ ...next, fromNs }, hash) };
    },
  );

  app.get<{ Params: { traceId: string } }>(
    '/v1/requests/:traceId',
    {
      schema: {
        summary: "One trace's requests with their stage waterfalls, upstream attempts and (with the `content` scope) prompts and answers",
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
      // Content only for callers who may read it; for the others the field is absent.
      const { requests, total, omitted } = await requestsByTrace(ctx.store, traceId, teamScope(req.caller, null), undefined, { withContent: mayRead(req.caller, 'content') });
      if (requests.length === 0) throw new QueryError('not_found', `no request with trace id ${traceId} (capture reaches the store within seconds; retry shortly if it was just sent)`);
      return { trace_id: traceId, total, omitted, requests };
    },
  );
}
