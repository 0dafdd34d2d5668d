/**
 * Content and attribution in the query API (issue 11), on both engines (a real
 * clickhouse-server 18.16 and chdb 26.x): prompts and answers in `GET /v1/requests/{traceId}`
 * for callers with the `content` scope only, the phrase search `q=` (team-scoped, bounded),
 * the end user, session and tag filters of the listing, and `POST /v1/metrics` grouped and
 * filtered by attribution, per request and per stage, from raw rows.
 *
 * Rows are what the ingester writes: each record goes through `decodeBatch` (content
 * prepared, streams assembled, personal data redacted for policy `redacted`). Every answer
 * is checked against /openapi.json (checked.ts).
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChdbStore, ClickHouseServerStore, migrate, type Store } from '@sightline/store';
import { decodeBatch, SpanBuilder } from '@sightline/spans';
import type { WireRecord } from '@sightline/core';
import { buildQueryServer } from '@sightline/app-query';
import { priceLookup } from '@sightline/config';
import { KeyHasher, MemoryDirectory, parseKeyInput, type Scope } from '@sightline/directory';
import type { FastifyInstance } from 'fastify';
import { ClickHouseServer } from '../../../test/support/servers.js';
import { batchOf, contentOf, servedRecord, withContent } from '../../../test/support/records.js';
import { anthropicToolSse, openaiSse, redactEmails } from '../../../test/support/content.js';
import { checked, type Checked } from './checked.js';

const BASE_MS = Date.UTC(2025, 7, 1, 12, 0, 20);
const ORIGIN_NS = BigInt(BASE_MS) * 1_000_000n - 1_000_000_000n;
const iso = (ms: number) => new Date(ms).toISOString();
const RANGE = { from: iso(BASE_MS - 60_000), to: iso(BASE_MS + 600_000) };
const Q_RANGE = `from=${RANGE.from}&to=${RANGE.to}`;
const priceOf = priceLookup([{ match: ['gpt-4o*'], inputPerMTok: 2.5, outputPerMTok: 10, cacheReadPerMTok: 1.25, cacheWritePerMTok: 2.5 }]);

const PHRASE = 'Purple Elephant Sonata';
const EMAIL = 'jane.doe@example.com';
const chatBody = (text: string, stream = false) => JSON.stringify({ model: 'gpt-4o', stream, messages: [{ role: 'user', content: text }] });
const chatAnswer = (text: string) => JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion', model: 'gpt-4o', choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }] });

interface Fixture {
  name: string;
  team: string;
  endUser: string;
  session?: string;
  tags?: Record<string, string>;
  dialect?: 'openai' | 'anthropic';
  stream?: boolean;
  /** null: the team's policy is `none` (no content on the record). */
  content: { request: string; response: string; policy?: 'full' | 'redacted' } | null;
}

const FIXTURES: Fixture[] = [
  { name: 'A', team: 'alpha', endUser: 'u-1', session: 's-1', tags: { env: 'prod', feature: 'search' }, content: { request: chatBody(`Please play the ${PHRASE} for me`), response: chatAnswer('Sonata noted') } },
  // The phrase of the answer is split across two deltas: only the assembled answer holds it.
  { name: 'B', team: 'alpha', endUser: 'u-2', session: 's-1', tags: { env: 'dev' }, stream: true, content: { request: chatBody('sing', true), response: openaiSse(['The MAGENTA-', 'WHALE sings']) } },
  { name: 'C', team: 'alpha', endUser: 'u-1', session: 's-2', tags: { env: 'prod' }, dialect: 'anthropic', stream: true, content: { request: '{"model":"claude-x","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"weather?"}]}', response: anthropicToolSse(['{"city": ', '"Par', 'is"}']) } },
  { name: 'D', team: 'alpha', endUser: 'u-3', content: null },
  // A body as Python's json.dumps sends it (non-ASCII as \u escapes) and a quoted word.
  { name: 'G', team: 'alpha', endUser: 'u-1', content: { request: '{"model":"gpt-4o","messages":[{"role":"user","content":"caf\\u00e9 cr\\u00e8me and a \\"quoted\\" word"}]}', response: chatAnswer('ok') } },
  ...[1, 2, 3].map((i): Fixture => ({ name: `F${i}`, team: 'alpha', endUser: 'u-2', tags: { env: 'prod' }, content: { request: chatBody(`filler ${i}`), response: chatAnswer(`filler answer ${i}`) } })),
  { name: 'E', team: 'beta', endUser: 'u-1', tags: { env: 'prod' }, content: { request: chatBody(`beta asks for the ${PHRASE.toLowerCase()}`), response: chatAnswer('beta answer') } },
  { name: 'R', team: 'gamma', endUser: EMAIL, content: { request: chatBody(`write to ${EMAIL} today`), response: chatAnswer(`Sent to ${EMAIL}.`), policy: 'redacted' } },
];

/** Each fixture's request record as a gateway publishes it, one second apart. */
function records(): WireRecord[] {
  return FIXTURES.map((f, i) => {
    const r = servedRecord({ seq: i + 1, t0: 1000 + i * 1000, team: f.team, endUser: f.endUser, sessionId: f.session, tags: f.tags });
    r.stream = f.stream === true;
    r.dialect = f.dialect ?? 'openai';
    if (r.dialect === 'anthropic') r.route = '/v1/messages';
    if (r.stream) r.tFirstToken = r.t0 + 100.5;
    const w = withContent(r, f.content === null ? null : contentOf({ request: f.content.request, response: f.content.response, policy: f.content.policy }));
    w.inputTokens = 100;
    w.outputTokens = 10;
    w.usageFound = true;
    return w;
  });
}

interface ContentView {
  request: string;
  response: string;
  request_bytes: number;
  response_bytes: number;
  request_truncated: boolean;
  response_truncated: boolean;
  partial: boolean;
  policy: string;
  redactions: Record<string, number>;
}
interface RequestView {
  span_id: string;
  team: string;
  end_user: string;
  session_id: string;
  tags: Record<string, string>;
  content?: ContentView | null;
}
interface Item {
  trace_id: string;
  team: string;
  end_user: string;
  session_id: string;
  tags: Record<string, string>;
}
type Row = Record<string, string | number | null>;

function suite(name: string, open: () => Promise<{ store: Store; done: () => Promise<void> }>) {
  describe(name, () => {
    let store: Store;
    let done: () => Promise<void>;
    let server: FastifyInstance;
    let bounded: FastifyInstance;
    let admin: Checked;
    let alphaRead: Checked;
    let alphaContent: Checked;
    let boundedAdmin: Checked;
    /** Trace id of each fixture, by name. */
    const traces = new Map<string, string>();
    const ADMIN = 'the-admin-token-of-the-content-tests';

    before(async () => {
      ({ store, done } = await open());
      await migrate(store);
      const recs = records();
      FIXTURES.forEach((f, i) => traces.set(f.name, recs[i]!.traceId));
      const batch = { ...batchOf('gw-content', 1, recs), origin_unix_nano: ORIGIN_NS.toString() };
      const decoded = decodeBatch(Buffer.from(JSON.stringify(batch)), new SpanBuilder(), { redactPersonal: redactEmails });
      assert.equal(decoded.content.length, FIXTURES.filter((f) => f.content !== null).length);
      await store.insert('spans', decoded.spans);
      await store.insert('content', decoded.content);
      await store.insert('requests', decoded.requests);
      // A/A redelivered: identical copies, listed and counted once.
      await store.insert('content', decoded.content.slice(0, 1));
      await store.insert('requests', decoded.requests.slice(0, 1));

      const directory = new MemoryDirectory({ hasher: new KeyHasher('a-server-secret-of-enough-bytes') });
      const key = async (scopes: Scope[]) => (await directory.createKey(parseKeyInput({ team: 'alpha', name: scopes.join('+'), scopes }, Date.now()), Date.now())).secret;
      const [readKey, contentKey] = [await key(['read']), await key(['read', 'content'])];
      server = buildQueryServer({ store, priceOf, auth: { adminToken: ADMIN, directory } });
      bounded = buildQueryServer({ store, priceOf, auth: { adminToken: ADMIN, directory }, searchMaxBytes: 1000 });
      admin = await checked(server, { headers: { authorization: `Bearer ${ADMIN}` } });
      alphaRead = await checked(server, { headers: { authorization: `Bearer ${readKey}` } });
      alphaContent = await checked(server, { headers: { authorization: `Bearer ${contentKey}` } });
      boundedAdmin = await checked(bounded, { headers: { authorization: `Bearer ${ADMIN}` } });
    });
    after(async () => {
      await server.close();
      await bounded.close();
      await done();
    });

    const view = async (client: Checked, fixture: string): Promise<RequestView> => {
      const res = await client.inject(`/v1/requests/${traces.get(fixture)}`);
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json() as { requests: RequestView[] };
      assert.equal(body.requests.length, 1);
      return body.requests[0]!;
    };
    const list = async (client: Checked, params: string): Promise<Item[]> => {
      const res = await client.inject(`/v1/requests?${Q_RANGE}&${params}`);
      assert.equal(res.statusCode, 200, res.body);
      return (res.json() as { data: Item[] }).data;
    };
    const namesOf = (items: Item[]) => items.map((i) => FIXTURES[[...traces.values()].indexOf(i.trace_id)]!.name).sort();
    const metrics = async (client: Checked, body: object): Promise<Row[]> => {
      const res = await client.inject({ method: 'POST', url: '/v1/metrics', payload: { ...RANGE, ...body } });
      assert.equal(res.statusCode, 200, res.body);
      return (res.json() as { rows: Row[] }).rows;
    };
    const byDim = (rows: Row[], dim: string, metric = 'requests') => Object.fromEntries(rows.map((r) => [r[dim], r[metric]]));

    test('a request with content: the prompt and the answer as stored, sizes and flags, for the admin and a content key', async () => {
      for (const client of [admin, alphaContent]) {
        const a = await view(client, 'A');
        const c = a.content!;
        assert.ok(c !== null && c !== undefined);
        assert.ok(c.request.includes(PHRASE), c.request);
        assert.equal(c.request, FIXTURES[0]!.content!.request);
        assert.equal(c.response, FIXTURES[0]!.content!.response);
        assert.deepEqual([c.request_bytes, c.response_bytes], [Buffer.byteLength(c.request), Buffer.byteLength(c.response)]);
        assert.deepEqual([c.request_truncated, c.response_truncated, c.partial, c.policy], [false, false, false, 'full']);
        assert.deepEqual([a.end_user, a.session_id, a.tags], ['u-1', 's-1', { env: 'prod', feature: 'search' }]);
      }
      // Streams: the answer assembled into one message, in each dialect.
      const b = (await view(admin, 'B')).content!;
      assert.equal((JSON.parse(b.response) as { choices: { message: { content: string } }[] }).choices[0]!.message.content, 'The MAGENTA-WHALE sings');
      assert.equal(b.response_bytes, Buffer.byteLength(FIXTURES[1]!.content!.response), 'the size is of what the client received');
      const c = (await view(admin, 'C')).content!;
      assert.deepEqual((JSON.parse(c.response) as { content: { input: unknown }[] }).content[0]!.input, { city: 'Paris' });
      assert.equal((await view(admin, 'D')).content, null, 'policy none: null for a content reader');
    });

    test('a read-only key sees the request and its attribution, never the content (absent, not null)', async () => {
      const a = await view(alphaRead, 'A');
      assert.ok(!('content' in a), JSON.stringify(Object.keys(a)));
      assert.equal(a.end_user, 'u-1');
      assert.ok(!('content' in (await view(alphaRead, 'D'))));
      assert.equal((await alphaRead.inject(`/v1/requests/${traces.get('E')}`)).statusCode, 404, "another team's request");
    });

    test('policy redacted: personal data replaced in the content and the attribution, the replacements counted', async () => {
      const r = await view(admin, 'R');
      const c = r.content!;
      assert.equal(c.policy, 'redacted');
      assert.ok(!c.request.includes(EMAIL) && !c.response.includes(EMAIL));
      assert.ok(c.request.includes('[EMAIL]') && c.response.includes('[EMAIL]'));
      assert.deepEqual(c.redactions, { email: 2 });
      assert.equal(r.end_user, '[EMAIL]');
    });

    test('the listing carries the attribution and filters by end user, session and tags (all must match)', async () => {
      const all = await list(admin, 'team=alpha');
      assert.equal(all.length, 8, 'a redelivered request is listed once');
      const a = all.find((i) => i.trace_id === traces.get('A'))!;
      assert.deepEqual([a.end_user, a.session_id, a.tags], ['u-1', 's-1', { env: 'prod', feature: 'search' }]);
      assert.deepEqual(namesOf(await list(alphaRead, 'end_user=u-1')), ['A', 'C', 'G']);
      assert.deepEqual(namesOf(await list(admin, 'end_user=u-1')), ['A', 'C', 'E', 'G']);
      assert.deepEqual(namesOf(await list(alphaRead, 'session=s-1')), ['A', 'B']);
      assert.deepEqual(namesOf(await list(alphaRead, 'tag=env:prod')), ['A', 'C', 'F1', 'F2', 'F3']);
      assert.deepEqual(namesOf(await list(alphaRead, 'tag=ENV:prod&tag=feature:search')), ['A']);
      assert.deepEqual(namesOf(await list(alphaRead, 'tag=env:prod&session=s-2')), ['C']);
      assert.deepEqual(await list(alphaRead, 'tag=env:staging'), []);
      const bad = await alphaRead.inject(`/v1/requests?tag=novalue`);
      assert.equal(bad.statusCode, 400);
      assert.equal((bad.json() as { error: { field: string } }).error.field, 'tag[0]');
    });

    test('q finds a phrase in prompts and answers, case-insensitively, in the caller\'s team only', async () => {
      assert.deepEqual(namesOf(await list(admin, `q=${encodeURIComponent('purple ELEPHANT')}`)), ['A', 'E']);
      assert.deepEqual(namesOf(await list(alphaContent, `q=${encodeURIComponent('purple elephant')}`)), ['A']);
      // In an assembled stream answer (split across deltas), and in a tool call's arguments.
      assert.deepEqual(namesOf(await list(alphaContent, 'q=magenta-whale')), ['B']);
      assert.deepEqual(namesOf(await list(alphaContent, 'q=paris')), ['C']);
      // Escaped in the stored JSON: a quoted word, and non-ASCII sent as \u escapes.
      assert.deepEqual(namesOf(await list(alphaContent, `q=${encodeURIComponent('a "quoted" word')}`)), ['G']);
      assert.deepEqual(namesOf(await list(alphaContent, `q=${encodeURIComponent('café crème')}`)), ['G']);
      // Redacted content is searched as stored: the placeholder, not the address.
      assert.deepEqual(namesOf(await list(admin, `q=${encodeURIComponent(EMAIL)}`)), []);
      assert.deepEqual(namesOf(await list(admin, 'q=%5BEMAIL%5D')), ['R']);
      // With filters only `requests` has.
      assert.deepEqual(namesOf(await list(admin, `q=sonata&tag=env:prod`)), ['A', 'E']);
      assert.deepEqual(namesOf(await list(admin, `q=sonata&end_user=u-2`)), []);
      assert.deepEqual(namesOf(await list(admin, `q=filler&end_user=u-2&team=alpha`)), ['F1', 'F2', 'F3']);
    });

    test('q pages with cursors bound to the phrase', async () => {
      const first = await admin.inject(`/v1/requests?${Q_RANGE}&q=sonata&limit=1`);
      const p1 = first.json() as { data: Item[]; next_cursor: string | null };
      assert.equal(p1.data.length, 1);
      assert.ok(p1.next_cursor !== null);
      const p2 = (await admin.inject(`/v1/requests?${Q_RANGE}&q=sonata&limit=1&cursor=${p1.next_cursor}`)).json() as { data: Item[]; next_cursor: string | null };
      assert.equal(p2.data.length, 1);
      assert.equal(p2.next_cursor, null);
      assert.deepEqual(namesOf([...p1.data, ...p2.data]), ['A', 'E']);
      const other = await admin.inject(`/v1/requests?${Q_RANGE}&q=filler&limit=1&cursor=${p1.next_cursor}`);
      assert.equal(other.statusCode, 400);
      assert.equal((other.json() as { error: { field: string } }).error.field, 'cursor');
    });

    test('q takes the content scope (403 naming q), and a search past the scan bound is a 422 naming q', async () => {
      const res = await alphaRead.inject(`/v1/requests?q=sonata`);
      assert.equal(res.statusCode, 403);
      const e = (res.json() as { error: { code: string; field: string; message: string } }).error;
      assert.deepEqual([e.code, e.field], ['forbidden', 'q']);
      assert.match(e.message, /content/);
      const big = await boundedAdmin.inject(`/v1/requests?${Q_RANGE}&q=sonata`);
      assert.equal(big.statusCode, 422, big.body);
      const b = (big.json() as { error: { code: string; field: string; message: string } }).error;
      assert.deepEqual([b.code, b.field], ['query_too_large', 'q']);
      assert.match(b.message, /read more than 1000 bytes of prompts and answers.*shorter range/);
      // The same server lists without q: the bound is the search's only.
      assert.equal((await boundedAdmin.inject(`/v1/requests?${Q_RANGE}`)).statusCode, 200);
      assert.match((await boundedAdmin.inject('/metrics')).body, /^sightline_query_limited_total 1$/m);
    });

    test('metrics by end user, session and tag, from raw rows: counts, latency, tokens and cost, team-scoped', async () => {
      const rows = await metrics(alphaContent, { metrics: ['requests', 'mean_ms', 'p50_ms', 'input_tokens', 'cost_usd', 'streams'], group_by: ['end_user'] });
      assert.deepEqual(byDim(rows, 'end_user'), { 'u-1': 3, 'u-2': 4, 'u-3': 1 }, 'the key reads its own team; a redelivered request counts once');
      const u1 = rows.find((r) => r.end_user === 'u-1')!;
      assert.equal(u1.input_tokens, 300);
      assert.equal(u1.streams, 1);
      assert.ok(Math.abs(Number(u1.mean_ms) - 150.05) < 0.01, String(u1.mean_ms));
      assert.ok(Math.abs(Number(u1.p50_ms) - 150.05) < 0.5, String(u1.p50_ms));
      assert.ok(Math.abs(Number(u1.cost_usd) - (3 * (100 * 2.5 + 10 * 10)) / 1e6) < 1e-9, String(u1.cost_usd));
      assert.deepEqual(byDim(await metrics(admin, { metrics: ['requests'], group_by: ['end_user'] }), 'end_user'), { 'u-1': 4, 'u-2': 4, 'u-3': 1, '[EMAIL]': 1 });
      assert.deepEqual(byDim(await metrics(alphaRead, { metrics: ['requests'], group_by: ['tag.env'] }), 'tag.env'), { prod: 5, dev: 1, '': 2 });
      assert.deepEqual(byDim(await metrics(alphaRead, { metrics: ['requests'], group_by: ['session'] }), 'session'), { 's-1': 2, 's-2': 1, '': 5 });
      const both = await metrics(alphaRead, { metrics: ['requests'], group_by: ['end_user', 'tag.env'], filters: { 'tag.env': ['prod'], session: ['s-1', 's-2'] } });
      assert.deepEqual(both, [{ end_user: 'u-1', 'tag.env': 'prod', requests: 2 }]);
      // With an interval: buckets of the raw rows, every bucket filled.
      const series = await metrics(alphaRead, { metrics: ['requests'], group_by: ['end_user'], filters: { end_user: ['u-2'] }, interval: '1m', from: iso(BASE_MS - 20_000), to: iso(BASE_MS + 100_000) });
      assert.deepEqual(series.map((r) => [r.time, r.requests]), [[iso(BASE_MS - 20_000), 4], [iso(BASE_MS + 40_000), 0]]);
      // Without attribution the same question is answered by the rollups (none computed here: zero).
      assert.deepEqual(await metrics(alphaRead, { metrics: ['requests'] }), [{ requests: 0 }]);
    });

    test('per-stage metrics by end user and tag: each stage of each request once, with its latency', async () => {
      const rows = await metrics(alphaRead, { metrics: ['requests', 'p50_ms', 'errors'], group_by: ['stage', 'end_user'], filters: { stage: ['upstream.wait'] } });
      assert.deepEqual(byDim(rows, 'end_user'), { 'u-1': 3, 'u-2': 4, 'u-3': 1 });
      for (const r of rows) {
        assert.equal(r.stage, 'upstream.wait');
        assert.equal(r.errors, 0);
        // upstream.wait: request sent (t0 + 0.51 ms) to the first byte (t0 + 100 ms).
        assert.ok(Math.abs(Number(r.p50_ms) - 99.49) < 0.1, String(r.p50_ms));
      }
      const dev = await metrics(alphaRead, { metrics: ['requests'], group_by: ['stage'], filters: { 'tag.env': ['dev'] } });
      const stages = byDim(dev, 'stage');
      assert.equal(stages['upstream.wait'], 1);
      assert.equal(stages['parse'], 1);
      assert.equal(stages['upstream.attempt'], undefined, 'attempt spans are not stages');
    });

    test('attribution metrics cap the range at 7 days and refuse what per stage lacks, naming the field', async () => {
      const long = await admin.inject({ method: 'POST', url: '/v1/metrics', payload: { metrics: ['requests'], group_by: ['end_user'], from: iso(BASE_MS - 8 * 86_400_000), to: iso(BASE_MS) } });
      assert.equal(long.statusCode, 400);
      const e = (long.json() as { error: { field: string; message: string } }).error;
      assert.equal(e.field, 'from');
      assert.match(e.message, /at most 7 days/);
      const rollup = await admin.inject({ method: 'POST', url: '/v1/metrics', payload: { metrics: ['requests'], group_by: ['model'], from: iso(BASE_MS - 8 * 86_400_000), to: iso(BASE_MS) } });
      assert.equal(rollup.statusCode, 200, 'the rollups keep their longer range');
      const stageDialect = await admin.inject({ method: 'POST', url: '/v1/metrics', payload: { metrics: ['requests'], group_by: ['stage', 'end_user', 'dialect'] } });
      assert.equal(stageDialect.statusCode, 400);
      assert.equal((stageDialect.json() as { error: { field: string } }).error.field, 'group_by[2]');
      const badTag = await admin.inject({ method: 'POST', url: '/v1/metrics', payload: { metrics: ['requests'], group_by: ['tag.'] } });
      assert.equal(badTag.statusCode, 400);
      assert.equal((badTag.json() as { error: { field: string } }).error.field, 'group_by[0]');
      const badFilter = await admin.inject({ method: 'POST', url: '/v1/metrics', payload: { metrics: ['requests'], filters: { 'tag.Env x': ['a'] } } });
      assert.equal(badFilter.statusCode, 400);
    });
  });
}

suite('clickhouse-server', async () => {
  const server = await ClickHouseServer.start();
  const store = new ClickHouseServerStore({ url: server.url, database: 'sightline' });
  return { store, done: async () => { await store.close(); await server.dispose(); } };
});

suite('chdb', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sightline-qc-'));
  const store = await ChdbStore.open({ path: dir });
  return { store, done: async () => { await store.close(); rmSync(dir, { recursive: true, force: true }); } };
});
