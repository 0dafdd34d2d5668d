/**
 * `GET /openapi.json`: a valid OpenAPI 3.1 document (checked against the OpenAPI
 * Initiative's schema for 3.1, and each of its schemas against JSON Schema 2020-12), that
 * lists every route of the query API, and whose response schemas every answer validates
 * against — here every route is called once with authentication on, admin endpoints
 * included, and the other query test files check theirs the same way (checked.ts).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChdbStore, migrate, type Store } from '@sightline/store';
import { buildQueryServer } from '@sightline/app-query';
import { KeyHasher, MemoryDirectory } from '@sightline/directory';
import { MemoryGovernor } from '@sightline/controls';
import type { FastifyInstance } from 'fastify';
import { checked, newAjv, type Checked, type OpenApiDoc } from './checked.js';

const ADMIN = 'an-admin-token-for-the-openapi-test';

/** Every operation of the query API. A route added without appearing here fails the test. */
const OPERATIONS = [
  'get /healthz',
  'get /metrics',
  'get /openapi.json',
  'get /v1/whoami',
  'post /v1/admin/keys',
  'get /v1/admin/keys',
  'get /v1/admin/keys/{id}',
  'delete /v1/admin/keys/{id}',
  'post /v1/admin/keys/{id}/rotate',
  'get /v1/admin/teams',
  'get /v1/admin/teams/{team}',
  'put /v1/admin/teams/{team}',
  'get /v1/budget',
  'get /v1/requests',
  'get /v1/requests/{traceId}',
  'post /v1/metrics',
  'post /v1/sql',
  'get /v1/stages',
  'get /v1/usage',
  'get /v1/capture',
];

let dir: string;
let store: Store;
let app: FastifyInstance;
let admin: Checked;
let doc: OpenApiDoc;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sightline-oas-'));
  store = await ChdbStore.open({ path: dir });
  await migrate(store);
  const directory = new MemoryDirectory({ hasher: new KeyHasher('a-server-secret-of-enough-bytes') });
  app = buildQueryServer({ store, auth: { adminToken: ADMIN, directory }, governor: new MemoryGovernor({}) });
  admin = await checked(app, { headers: { authorization: `Bearer ${ADMIN}` } });
  doc = admin.doc;
});

after(async () => {
  await app.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

function operations(d: OpenApiDoc): string[] {
  return Object.entries(d.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`));
}

test('the document is OpenAPI 3.1: valid against the 3.1 schema, each schema valid JSON Schema 2020-12', () => {
  assert.equal(doc.openapi, '3.1.0');
  const ajv = newAjv();
  // The OAI's schema for 3.1 (fixtures/README.md) points at schemas with `$dynamicRef:
  // "#meta"` so a dialect can extend them; ajv resolves `$dynamicAnchor` only at a resource's
  // root, so the base dialect's target (`#/$defs/schema`) is referenced directly.
  const text = readFileSync(new URL('./fixtures/oas-3.1-schema.json', import.meta.url), 'utf8');
  const oas = JSON.parse(text.replaceAll('"$dynamicRef": "#meta"', '"$ref": "#/$defs/schema"')) as object;
  assert.ok(text.includes('"$dynamicRef": "#meta"'));
  const valid = ajv.validate(oas, doc);
  assert.ok(valid, ajv.errorsText(ajv.errors));
  // The 3.1 schema leaves schemas unchecked (any object): check each against 2020-12.
  let schemas = 0;
  const each = (s: unknown, where: string) => {
    assert.ok(ajv.validateSchema(s as object), `${where}: ${ajv.errorsText(ajv.errors)}`);
    ajv.compile(s as object);
    schemas++;
  };
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops) as [string, { parameters?: { name: string; schema: object }[]; requestBody?: { content: Record<string, { schema: object }> }; responses: Record<string, { content?: Record<string, { schema: object }> }> }][]) {
      for (const p of op.parameters ?? []) each(p.schema, `${method} ${path} parameter ${p.name}`);
      for (const [type, c] of Object.entries(op.requestBody?.content ?? {})) each(c.schema, `${method} ${path} body ${type}`);
      for (const [status, r] of Object.entries(op.responses)) for (const [type, c] of Object.entries(r.content ?? {})) each(c.schema, `${method} ${path} ${status} ${type}`);
    }
  }
  assert.ok(schemas > 50, `${schemas} schemas`);
});

test('it lists every route of the server, each with its errors, and nothing else', () => {
  assert.deepEqual(operations(doc).sort(), [...OPERATIONS].sort());
  for (const op of OPERATIONS) {
    const [method, path] = op.split(' ') as [string, string];
    assert.ok(app.hasRoute({ method: method.toUpperCase() as 'GET', url: path.replace(/\{([^}]+)\}/g, ':$1') }), op);
    const responses = doc.paths[path]![method]!.responses;
    assert.ok('4XX' in responses && '5XX' in responses, `${op} documents its errors`);
    assert.ok(Object.keys(responses).some((s) => s.startsWith('2')), `${op} documents its answer`);
  }
  // Parameters: the query strings and paths fastify validates.
  const list = doc.paths['/v1/requests']!.get as unknown as { parameters: { name: string; in: string }[] };
  assert.deepEqual(list.parameters.map((p) => p.name), ['from', 'to', 'model', 'provider', 'status', 'error_type', 'stream', 'min_total_ms', 'key', 'team', 'end_user', 'session', 'tag', 'q', 'limit', 'cursor']);
  const trace = doc.paths['/v1/requests/{traceId}']!.get as unknown as { parameters: { name: string; in: string; required: boolean }[] };
  assert.deepEqual(trace.parameters.map((p) => [p.name, p.in, p.required]), [['traceId', 'path', true]]);
  assert.ok((doc.paths['/healthz']!.get as unknown as { security: unknown[] }).security.length === 0, 'health needs no credentials');
});

test('every route answers as documented, admin endpoints and errors included', async () => {
  const r = async (req: Parameters<Checked['inject']>[0], status: number) => {
    const res = await admin.inject(req);
    assert.equal(res.statusCode, status, `${JSON.stringify(req)}: ${res.body}`);
    return res;
  };
  await r('/healthz', 200);
  await r('/metrics', 200);
  await r('/v1/whoami', 200);
  const created = (await r({ method: 'POST', url: '/v1/admin/keys', payload: { team: 'alpha', name: 'ci', scopes: ['read', 'gateway'], models: ['gpt-*'], expires_at: null, limits: { requests_per_minute: 5 }, budget: { usd: 1, period: 'day' } } }, 201)).json() as { id: string; key: string };
  assert.equal(((await r('/v1/budget', 200)).json() as { data: unknown[] }).data.length, 2, 'requests per minute and the budget');
  await r({ method: 'POST', url: '/v1/admin/keys', payload: { team: 'alpha', name: 'ci', scopes: ['admin'] } }, 400);
  await r('/v1/admin/keys?team=alpha', 200);
  await r(`/v1/admin/keys/${created.id}`, 200);
  await r('/v1/admin/keys/key_0000000000000000', 404);
  await r({ method: 'POST', url: `/v1/admin/keys/${created.id}/rotate`, payload: { grace_seconds: 60 } }, 200);
  await r({ method: 'POST', url: `/v1/admin/keys/${created.id}/rotate` }, 200);
  await r('/v1/admin/teams', 200);
  await r('/v1/admin/teams/alpha', 200);
  await r({ method: 'PUT', url: '/v1/admin/teams/beta', payload: { description: 'the beta team' } }, 200);
  await r({ method: 'PUT', url: '/v1/admin/teams/beta', payload: { budget: 3 } }, 400);
  await r('/v1/requests', 200);
  await r(`/v1/requests/${'a'.repeat(32)}`, 404);
  const nowS = Math.floor(Date.now() / 1000);
  await store.insert('requests', [{ trace_id: 'b'.repeat(32), span_id: 'b'.repeat(16), instance: 'gw', seq: '1', start_time: nowS, start_time_unix_nano: `${nowS}000000000`, method: 'POST', route: '/v1/chat/completions', dialect: 'openai', model: 'gpt-4o', response_model: 'gpt-4o', provider: 'openai', upstream_model: 'gpt-4o', team: 'alpha', key_id: '', stream: 0, http_status: 200, upstream_status: 200, error_type: '', aborted: 0, total_ns: '2000', gateway_ns: '1000', upstream_ns: '1000', ttfb_ns: '0', ttft_ns: '0', input_tokens: 3, output_tokens: 4, cache_read_tokens: 0, cache_write_tokens: 0, request_bytes: 1, response_bytes: 2, usage_partial: 0 }]);
  await r(`/v1/requests/${'b'.repeat(32)}`, 200);
  assert.equal(((await r('/v1/requests', 200)).json() as { data: unknown[] }).data.length, 1);
  await r('/v1/requests/xyz', 400);
  await r({ method: 'POST', url: '/v1/metrics', payload: { metrics: ['requests', 'p99_ms', 'cost_usd'], group_by: ['team'], interval: '1h' } }, 200);
  await r({ method: 'POST', url: '/v1/metrics', payload: { metrics: ['requests'], group_by: ['stage'] } }, 200);
  await r('/v1/stages', 200);
  await r('/v1/usage?group_by=team,key', 200);
  await r('/v1/capture', 200);
  await r({ method: 'POST', url: '/v1/sql', payload: { query: 'SELECT count() AS n FROM sightline.requests' } }, 200);
  await r({ method: 'POST', url: '/v1/sql', payload: { query: 'DROP TABLE sightline.requests' } }, 400);
  await r({ method: 'POST', url: '/v1/sql', payload: { query: 'SELECT 1', settings: {} } }, 400);
  await r({ method: 'DELETE', url: `/v1/admin/keys/${created.id}` }, 200);
  await r('/nowhere', 404);
  // Without credentials, or with a key that may not: 401 and 403, documented too.
  const anon = await checked(app);
  assert.equal((await anon.inject('/v1/requests')).statusCode, 401);
  assert.equal((await anon.inject('/openapi.json')).statusCode, 200);
  assert.equal((await anon.inject(`/healthz?api_key=${ADMIN}`)).statusCode, 400);
  assert.equal((await anon.inject({ url: '/v1/capture', headers: { authorization: `Bearer ${ADMIN}x` } })).statusCode, 401);

  // Every documented operation was answered with success at least once above.
  const answered = new Set([...admin.seen, ...anon.seen].filter((s) => / 2\d\d$/.test(s)).map((s) => s.replace(/ \d+$/, '')));
  assert.deepEqual(OPERATIONS.filter((op) => !answered.has(op)), []);
});
