/**
 * The dashboard's files served by the query API (routes/ui.ts): `/` and `/ui/*` without
 * credentials (authentication on), with their content types, the page's security policy,
 * revalidation and gzip; nothing outside the dashboard's files, however the path is
 * spelled; the API itself still closed; not in the OpenAPI document.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { ChdbStore, migrate, type Store } from '@sightline/store';
import { buildQueryServer } from '@sightline/app-query';
import { loadAssets, PUBLIC_DIR } from '@sightline/dashboard';
import { KeyHasher, MemoryDirectory } from '@sightline/directory';
import type { FastifyInstance } from 'fastify';

const ADMIN = 'an-admin-token-for-the-ui-test';
let dir: string;
let store: Store;
let app: FastifyInstance;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sightline-ui-'));
  store = await ChdbStore.open({ path: dir });
  await migrate(store);
  app = buildQueryServer({ store, auth: { adminToken: ADMIN, directory: new MemoryDirectory({ hasher: new KeyHasher('a-server-secret-of-enough-bytes') }) } });
});

after(async () => {
  await app.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

test('the page and its files, without credentials, with their content types and the page\'s policy', async () => {
  const page = await app.inject('/');
  assert.equal(page.statusCode, 200);
  assert.equal(page.headers['content-type'], 'text/html; charset=utf-8');
  assert.match(String(page.headers['content-security-policy']), /script-src 'self';/);
  assert.doesNotMatch(String(page.headers['content-security-policy']), /unsafe-inline|unsafe-eval/);
  assert.equal(page.headers['x-content-type-options'], 'nosniff');
  assert.equal(page.headers['x-frame-options'], 'DENY');
  assert.match(page.body, /<script type="module" src="ui\/app\.js"><\/script>/);
  assert.equal((await app.inject({ method: 'HEAD', url: '/' })).statusCode, 200);

  const types: Record<string, string> = { 'app.js': 'text/javascript; charset=utf-8', 'style.css': 'text/css; charset=utf-8', 'favicon.svg': 'image/svg+xml', 'pages/request.js': 'text/javascript; charset=utf-8', 'vendor/uPlot.min.css': 'text/css; charset=utf-8' };
  for (const [path, type] of Object.entries(types)) {
    const r = await app.inject(`/ui/${path}`);
    assert.equal(r.statusCode, 200, path);
    assert.equal(r.headers['content-type'], type, path);
  }
  // uPlot comes from node_modules as it is, nothing copied.
  const uplot = await app.inject('/ui/vendor/uPlot.esm.js');
  assert.equal(uplot.headers['content-type'], 'text/javascript; charset=utf-8');
  assert.ok(uplot.rawPayload.equals(readFileSync(createRequire(import.meta.url).resolve('uplot/dist/uPlot.esm.js'))));
  // Every served file is the file on disk.
  const assets = loadAssets();
  assert.ok(assets.size >= 20, `${assets.size} files`);
  for (const [path, a] of assets) {
    if (path.startsWith('vendor/')) continue;
    const r = await app.inject(`/ui/${path}`);
    assert.ok(r.rawPayload.equals(readFileSync(join(PUBLIC_DIR, path))), path);
    assert.equal(r.headers.etag, a.etag);
  }
});

test('nothing else: type declarations, the compiler\'s configuration, other files and any path that climbs out are 404', async () => {
  const refused = [
    '/ui/lib/types.d.ts',
    '/ui/tsconfig.json',
    '/ui/vendor/uPlot.esm.d.ts',
    '/ui/',
    '/ui/nothing.js',
    '/ui/../package.json',
    '/ui/..%2f..%2fpackage.json',
    '/ui/%2e%2e/%2e%2e/src/server.ts',
    '/ui/..%5c..%5cpackage.json',
    '/ui/vendor/../../package.json',
    '/ui//etc/passwd',
    '/ui/%2fetc%2fpasswd',
    '/ui/app.js%00.css',
    '/index.html',
  ];
  for (const url of refused) {
    const r = await app.inject(url);
    // A path that normalises out of /ui/ (`/ui/../x` is `/x`) is an API path: 401 without credentials.
    const code = (r.json() as { error: { code: string } }).error.code;
    assert.ok((r.statusCode === 404 && code === 'not_found') || (r.statusCode === 401 && code === 'unauthorized'), `${url}: ${r.statusCode} ${r.body.slice(0, 80)}`);
    assert.doesNotMatch(r.body, /"name":\s*"sightline"|root:x:/, url);
    // With the admin token too: never a file.
    const admin = await app.inject({ url, headers: { authorization: `Bearer ${ADMIN}` } });
    assert.equal(admin.statusCode, 404, `${url} as the admin: ${admin.statusCode}`);
  }
});

test('revalidation (ETag, 304) and gzip for clients that take it', async () => {
  const first = await app.inject('/ui/app.js');
  assert.equal(first.headers['cache-control'], 'no-cache');
  const etag = String(first.headers.etag);
  assert.match(etag, /^"[A-Za-z0-9_-]{27}"$/);
  const again = await app.inject({ url: '/ui/app.js', headers: { 'if-none-match': etag } });
  assert.equal(again.statusCode, 304);
  assert.equal(again.body, '');
  assert.equal((await app.inject({ url: '/ui/app.js', headers: { 'if-none-match': '"other"' } })).statusCode, 200);
  const gz = await app.inject({ url: '/ui/vendor/uPlot.esm.js', headers: { 'accept-encoding': 'gzip, br' } });
  assert.equal(gz.headers['content-encoding'], 'gzip');
  assert.equal(gz.headers.vary, 'accept-encoding');
  const plain = await app.inject('/ui/vendor/uPlot.esm.js');
  assert.equal(plain.headers['content-encoding'], undefined);
  assert.ok(gunzipSync(gz.rawPayload).equals(plain.rawPayload));
  assert.ok(gz.rawPayload.length < plain.rawPayload.length / 2);
});

test('the page opens nothing else: the API still takes credentials, a key in the URL is still refused, and the document lists no page', async () => {
  assert.equal((await app.inject('/v1/requests')).statusCode, 401);
  assert.equal((await app.inject('/ui/../v1/requests')).statusCode, 401, 'a path that normalises into the API is the API');
  assert.equal((await app.inject(`/?token=${ADMIN}`)).statusCode, 400);
  assert.equal((await app.inject('/ui/app.js?key=sl-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ')).statusCode, 400);
  const doc = (await app.inject('/openapi.json')).json() as { paths: Record<string, unknown> };
  assert.deepEqual(Object.keys(doc.paths).filter((p) => p === '/' || p.startsWith('/ui')), []);
});
