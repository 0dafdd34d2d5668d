/**
 * `app.inject` that checks every answer against the server's own OpenAPI document
 * (`/openapi.json`): the path and method are documented, the status is one the operation
 * lists, and the body validates against that response's schema (JSON Schema 2020-12, as
 * OpenAPI 3.1 reads it). The query tests call the API through this, so every response
 * they receive is checked (issue 10: "every endpoint's real responses validate").
 */
import assert from 'node:assert/strict';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';

// ajv-formats is CommonJS with `exports.default`: take the function whichever way it arrives.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv2020) => Ajv2020;

export type OpenApiDoc = {
  openapi: string;
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: object }> }> }>>;
};

export interface Checked {
  inject(opts: InjectOptions | string): Promise<LightMyRequestResponse>;
  /** Operations answered, as `get /v1/requests/{traceId} 200`. */
  readonly seen: Set<string>;
  readonly doc: OpenApiDoc;
}

/** An Ajv for JSON Schema 2020-12 with formats: the dialect of OpenAPI 3.1. */
export function newAjv(): Ajv2020 {
  return addFormats(new Ajv2020({ strict: false, allErrors: true }));
}

function templateMatcher(template: string): RegExp {
  const re = template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+');
  return new RegExp(`^${re}$`);
}

export async function checked(app: FastifyInstance, defaults: { headers?: Record<string, string> } = {}): Promise<Checked> {
  const res = await app.inject({ url: '/openapi.json' });
  assert.equal(res.statusCode, 200, res.body);
  const doc = res.json() as OpenApiDoc;
  const ajv = newAjv();
  const compiled = new Map<object, ValidateFunction>();
  const templates = Object.keys(doc.paths).map((t) => ({ t, re: templateMatcher(t) }));
  const seen = new Set<string>();

  const check = (method: string, url: string, r: LightMyRequestResponse): void => {
    const path = url.split('?', 1)[0]!;
    // An exact template first (`/v1/requests` is not `/v1/requests/{traceId}`).
    const hit = templates.find((x) => x.t === path) ?? templates.find((x) => x.re.test(path));
    if (hit === undefined) {
      assert.equal(r.statusCode, 404, `${method} ${path} is not in /openapi.json but answered ${r.statusCode}`);
      return;
    }
    const op = doc.paths[hit.t]![method];
    assert.ok(op !== undefined, `${method} ${hit.t} is not in /openapi.json`);
    const status = String(r.statusCode);
    const response = op.responses[status] ?? op.responses[`${status[0]}XX`] ?? op.responses.default;
    assert.ok(response !== undefined, `${method} ${hit.t} answered ${status}, which /openapi.json does not list`);
    const type = String(r.headers['content-type'] ?? '').split(';', 1)[0]!.trim();
    const media = response.content?.[type];
    assert.ok(media !== undefined, `${method} ${hit.t} ${status} answered ${type}, which /openapi.json does not list (${Object.keys(response.content ?? {}).join(', ')})`);
    let validate = compiled.get(media.schema);
    if (validate === undefined) compiled.set(media.schema, (validate = ajv.compile(media.schema)));
    const body: unknown = type === 'application/json' ? r.json() : r.body;
    assert.ok(validate(body), `${method} ${hit.t} ${status}: the body does not match /openapi.json: ${ajv.errorsText(validate.errors)}\n${r.body.slice(0, 2000)}`);
    seen.add(`${method} ${hit.t} ${status}`);
  };

  return {
    doc,
    seen,
    async inject(opts) {
      const o: InjectOptions = typeof opts === 'string' ? { url: opts } : opts;
      const withDefaults: InjectOptions = { ...o, headers: { ...(defaults.headers ?? {}), ...(o.headers ?? {}) } };
      const r = await app.inject(withDefaults);
      check((o.method ?? 'GET').toLowerCase(), String(o.url ?? o.path ?? '/'), r);
      return r;
    },
  };
}
