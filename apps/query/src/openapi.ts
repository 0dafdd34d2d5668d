/**
 * `GET /openapi.json`: an OpenAPI 3.1 document built from the JSON schemas the routes
 * validate their requests with (fastify `schema`), collected with an onRoute hook.
 *
 * Generated here rather than with @fastify/swagger: its conversion is written for OpenAPI
 * 3.0 (it rewrites `patternProperties`, drops `$id` and `examples`, and only the version
 * string says 3.1), while 3.1 takes JSON Schema as it is
 * (https://spec.openapis.org/oas/v3.1.0#schema-object). The schemas are used untouched,
 * so the document says exactly what the server checks.
 */
import type { FastifyInstance, RouteOptions } from 'fastify';

declare module 'fastify' {
  /** The OpenAPI operation's words beside fastify's schema parts (as @fastify/swagger adds them). */
  interface FastifySchema {
    summary?: string;
    description?: string;
    tags?: string[];
    operationId?: string;
    /** `[]` on the routes anyone may call. */
    security?: Record<string, string[]>[];
    /** Left out of the document (the dashboard's page and files, routes/ui.ts). */
    hide?: boolean;
  }
}

/** A JSON Schema, as fastify takes it. */
export type JsonSchema = Record<string, unknown>;

/** A response given per content type (`/metrics` answers text). */
interface ContentResponse {
  description?: string;
  content: Record<string, { schema: JsonSchema }>;
}

/** The `schema` of a route: fastify's parts, plus the OpenAPI operation's words. */
export interface RouteSchema {
  summary?: string;
  description?: string;
  tags?: string[];
  operationId?: string;
  /** `[]` on the routes anyone may call; otherwise the document's default (bearer). */
  security?: Record<string, string[]>[];
  querystring?: JsonSchema;
  params?: JsonSchema;
  body?: JsonSchema;
  /** By status (`200`, `4xx`, `default`). */
  response?: Record<string, JsonSchema | ContentResponse>;
}

interface Collected {
  method: string;
  url: string;
  schema: RouteSchema;
}

const STATUS_TEXT: Record<string, string> = {
  '200': 'OK',
  '201': 'Created',
  '4XX': 'The request was refused: bad parameter (400), no or bad credentials (401), not allowed (403), not found (404), or a query too large to answer (422)',
  '5XX': 'The query API or its data store failed (500, 503)',
};

/** Collects the routes registered after this call; `document()` describes them. */
export function collectRoutes(app: FastifyInstance): { document: (info: { title: string; version: string }) => Record<string, unknown> } {
  const routes: Collected[] = [];
  app.addHook('onRoute', (r: RouteOptions) => {
    const methods = Array.isArray(r.method) ? r.method : [r.method];
    for (const m of methods) {
      // fastify adds a HEAD route beside every GET: the same operation, not documented twice.
      if (m === 'HEAD' || r.schema?.hide === true) continue;
      routes.push({ method: m.toLowerCase(), url: r.url, schema: (r.schema ?? {}) as RouteSchema });
    }
  });
  let cached: Record<string, unknown> | null = null;
  return {
    document(info) {
      cached ??= build(routes, info);
      return cached;
    },
  };
}

/** `/v1/requests/:traceId` → `/v1/requests/{traceId}`. */
function oasPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

function parameters(where: 'query' | 'path', schema: JsonSchema | undefined): Record<string, unknown>[] {
  if (schema === undefined) return [];
  const props = (schema.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((schema.required ?? []) as string[]);
  return Object.entries(props).map(([name, s]) => {
    const { description, ...rest } = s;
    const p: Record<string, unknown> = { name, in: where, required: where === 'path' || required.has(name), schema: rest };
    if (typeof description === 'string') p.description = description;
    return p;
  });
}

function responses(response: RouteSchema['response']): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [status, r] of Object.entries(response ?? {})) {
    const code = status === 'default' ? status : status.toUpperCase();
    if ('content' in r && typeof r.content === 'object' && r.content !== null) {
      const c = r as ContentResponse;
      out[code] = { description: c.description ?? STATUS_TEXT[code] ?? 'Response', content: c.content };
    } else {
      const s = r as JsonSchema;
      out[code] = { description: (s.description as string | undefined) ?? STATUS_TEXT[code] ?? 'Response', content: { 'application/json': { schema: s } } };
    }
  }
  return out;
}

function build(routes: readonly Collected[], info: { title: string; version: string }): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const s = r.schema;
    const op: Record<string, unknown> = {
      operationId: s.operationId ?? `${r.method}${r.url.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`,
    };
    if (s.summary !== undefined) op.summary = s.summary;
    if (s.description !== undefined) op.description = s.description;
    if (s.tags !== undefined) op.tags = s.tags;
    if (s.security !== undefined) op.security = s.security;
    const params = [...parameters('path', s.params), ...parameters('query', s.querystring)];
    if (params.length > 0) op.parameters = params;
    if (s.body !== undefined) op.requestBody = { required: true, content: { 'application/json': { schema: s.body } } };
    op.responses = responses(s.response);
    (paths[oasPath(r.url)] ??= {})[r.method] = op;
  }
  return {
    openapi: '3.1.0',
    info: {
      ...info,
      description: 'The Sightline query API: captured requests, their stage waterfalls, per-stage percentiles, metrics, usage and cost, team-scoped (docs/api.md).',
    },
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    servers: [{ url: '/' }],
    security: [{ bearer: [] }, { apiKey: [] }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'A Sightline key with the `read` scope (`sl-…`), or the admin token' },
        apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'The same, as the Anthropic SDK sends it' },
      },
    },
    paths,
  };
}
