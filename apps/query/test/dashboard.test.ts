/**
 * The dashboard API on both engines (a real clickhouse-server 18.16 and chdb 26.x): the
 * request listing and its cursors, team scoping with real keys, and the metrics query over
 * the rollups the ingester computes. Rows are made by the real span builder; every answer
 * is checked against /openapi.json (checked.ts).
 *
 * The fixture (a fixed clock, 2025-07-01 12:00:20 UTC) is a list of request specs, and
 * the expected answers are computed from the same list, so each assertion says what the
 * API must return for data we know.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChdbStore, ClickHouseServerStore, ident, migrate, sql, table, type Store } from '@sightline/store';
import { toWire } from '@sightline/capture';
import { SpanBuilder, type BuiltRequest } from '@sightline/spans';
import type { WireRecord } from '@sightline/core';
import { buildQueryServer, METRICS } from '@sightline/app-query';
import { costUsd, priceLookup } from '@sightline/config';
import { Rollup } from '@sightline/app-ingester';
import { KeyHasher, MemoryDirectory, parseKeyInput } from '@sightline/directory';
import type { FastifyInstance } from 'fastify';
import { ClickHouseServer } from '../../../test/support/servers.js';
import { refusedRecord, servedRecord } from '../../../test/support/records.js';
import { checked, type Checked } from './checked.js';

const BASE_MS = Date.UTC(2025, 6, 1, 12, 0, 20);
const DAY_MS = 86_400_000;
const ORIGIN_NS = BigInt(BASE_MS) * 1_000_000n - 1_000_000_000n;
const iso = (ms: number) => new Date(ms).toISOString();
/** Today's fixture and the day before, as query parameters. */
const ALL = `from=${iso(BASE_MS - 2 * DAY_MS)}&to=${iso(BASE_MS + 3_600_000)}`;
/** A longer range, for the requests one test adds two hours later (outside ALL). */
const LATER = `from=${iso(BASE_MS - 2 * DAY_MS)}&to=${iso(BASE_MS + 3 * 3_600_000)}`;
const TODAY = { from: iso(BASE_MS - 80_000), to: iso(BASE_MS + 160_000) };

const KEY_A = 'key_aaaaaaaaaaaaaaaa';
const KEY_B = 'key_bbbbbbbbbbbbbbbb';
const KEY_C = 'key_cccccccccccccccc';

const PRICING = [
  { match: ['gpt-4o*'], inputPerMTok: 2.5, outputPerMTok: 10, cacheReadPerMTok: 1.25, cacheWritePerMTok: 2.5 },
  { match: ['claude-*'], inputPerMTok: 3, outputPerMTok: 15, cacheReadPerMTok: 0.3, cacheWritePerMTok: 3.75 },
];
const priceOf = priceLookup(PRICING);

interface Spec {
  team: string;
  key: string;
  model: string;
  provider: string;
  dialect: 'openai' | 'anthropic';
  status: number;
  errorType: string;
  stream: boolean;
  /** Milliseconds after BASE_MS (the day before: minus a day). */
  offsetMs: number;
  totalMs: number;
  tokens: { input: number; output: number; cacheRead: number };
  refused: boolean;
}

function spec(o: Partial<Spec> & Pick<Spec, 'team' | 'offsetMs'>): Spec {
  // A served record's marks run to 150.05 ms (test/support/records.ts): totals are longer.
  return { key: '', model: 'gpt-4o', provider: 'openai', dialect: 'openai', status: 200, errorType: '', stream: false, totalMs: 160, tokens: { input: 100, output: 50, cacheRead: 20 }, refused: false, ...o };
}

const SPECS: Spec[] = [
  // alpha, key A, gpt-4o: 40 requests over 12:00:20–12:01:18, 151–190 ms long.
  ...Array.from({ length: 40 }, (_, i) => spec({ team: 'alpha', key: KEY_A, offsetMs: i * 1500, totalMs: 151 + i })),
  // alpha, key B, claude-x streams through provider p2 (Anthropic clients).
  ...Array.from({ length: 10 }, (_, i) => spec({ team: 'alpha', key: KEY_B, model: 'claude-x', provider: 'p2', dialect: 'anthropic', stream: true, offsetMs: 200 + i * 1500, tokens: { input: 1000, output: 200, cacheRead: 0 } })),
  // three alpha requests that started in the same nanosecond (ties broken by span id).
  ...Array.from({ length: 3 }, () => spec({ team: 'alpha', key: KEY_A, offsetMs: 30_000 })),
  // beta, key C: 15 requests, every third a 500.
  ...Array.from({ length: 15 }, (_, i) => spec({ team: 'beta', key: KEY_C, offsetMs: 100 + i * 2000, status: i % 3 === 0 ? 500 : 200, errorType: i % 3 === 0 ? 'upstream_error' : '' })),
  // beta: three requests refused in parse (400, no model, no tokens, no key).
  ...Array.from({ length: 3 }, (_, i) => spec({ team: 'beta', offsetMs: 700 + i * 1000, refused: true, model: '', provider: '', status: 400, errorType: 'invalid_request_error', tokens: { input: 0, output: 0, cacheRead: 0 } })),
  // gamma: a model without a price.
  ...Array.from({ length: 2 }, (_, i) => spec({ team: 'gamma', model: 'mystery', provider: 'p3', offsetMs: 900 + i * 1000, tokens: { input: 10, output: 5, cacheRead: 0 } })),
  // alpha the day before.
  ...Array.from({ length: 5 }, (_, i) => spec({ team: 'alpha', key: KEY_A, offsetMs: -DAY_MS + i * 1000 })),
];
const today = SPECS.filter((s) => s.offsetMs >= 0);

let seq = 0;
/** The record a gateway would publish for a spec. */
function wire(s: Spec): WireRecord {
  const t0 = 1000 + s.offsetMs;
  const r = s.refused ? refusedRecord({ seq: ++seq, t0, team: s.team }) : servedRecord({ seq: ++seq, t0, team: s.team, provider: s.provider });
  if (!s.refused) {
    r.model = s.model;
    r.upstreamModel = s.model;
    r.tFinish = t0 + s.totalMs;
    r.status = s.status;
    r.upstreamStatus = s.status;
    r.errorType = s.errorType;
    r.stream = s.stream;
    if (s.stream) r.tFirstToken = t0 + 100.5;
  }
  r.keyId = s.key;
  r.dialect = s.dialect;
  const w = toWire(r);
  w.inputTokens = s.tokens.input;
  w.outputTokens = s.tokens.output;
  w.cacheReadTokens = s.tokens.cacheRead;
  w.usageFound = s.tokens.input + s.tokens.output > 0;
  return w;
}

interface Item {
  trace_id: string;
  span_id: string;
  start_time_unix_nano: string;
  team: string;
  key_id: string;
  model: string;
  status: number;
  stream: boolean;
  total_ms: number;
  ttft_ms: number;
  error_type: string;
  tokens: { input: number; output: number; cache_read: number; cache_write: number };
  cost_usd: number | null;
}
interface Page {
  data: Item[];
  next_cursor: string | null;
}
type Row = Record<string, string | number | null>;

/** Newest first: start time, then span id, then trace id, all descending. */
function newestFirst(a: { start_time_unix_nano: string; span_id: string; trace_id: string }, b: typeof a): number {
  const d = BigInt(b.start_time_unix_nano) - BigInt(a.start_time_unix_nano);
  if (d !== 0n) return d > 0n ? 1 : -1;
  return b.span_id.localeCompare(a.span_id) || b.trace_id.localeCompare(a.trace_id);
}

function countBy<T>(items: readonly T[], key: (t: T) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const t of items) out[key(t)] = (out[key(t)] ?? 0) + 1;
  return out;
}

function suite(name: string, open: () => Promise<{ store: Store; done: () => Promise<void> }>) {
  describe(name, () => {
    let store: Store;
    let done: () => Promise<void>;
    let app: FastifyInstance;
    let api: Checked;
    let secured: FastifyInstance;
    /** The secured server as the admin, and as alpha's read key. */
    let admin: Checked;
    let alphaKey: Checked;
    const builder = new SpanBuilder();
    const built: { spec: Spec; w: WireRecord; b: BuiltRequest }[] = [];

    const listAll = async (client: Checked, params: string, limit: number): Promise<Item[]> => {
      const out: Item[] = [];
      let cursor: string | null = null;
      for (let pages = 0; pages < 200; pages++) {
        const res = await client.inject(`/v1/requests?${params}&limit=${limit}${cursor === null ? '' : `&cursor=${cursor}`}`);
        assert.equal(res.statusCode, 200, res.body);
        const page = res.json() as Page;
        assert.ok(page.data.length <= limit);
        out.push(...page.data);
        if (page.next_cursor === null) return out;
        assert.equal(page.data.length, limit, 'only the last page is short');
        cursor = page.next_cursor;
      }
      throw new Error('more than 200 pages');
    };
    const metrics = async (client: Checked, body: object): Promise<{ rows: Row[]; truncated: boolean }> => {
      const res = await client.inject({ method: 'POST', url: '/v1/metrics', payload: { ...TODAY, ...body } });
      assert.equal(res.statusCode, 200, res.body);
      return res.json() as { rows: Row[]; truncated: boolean };
    };
    const refusedWith = async (client: Checked, req: Parameters<Checked['inject']>[0], status: number, field: string | null, message?: RegExp) => {
      const res = await client.inject(req);
      assert.equal(res.statusCode, status, res.body);
      const e = (res.json() as { error: { field?: string; message: string } }).error;
      assert.equal(e.field ?? null, field, res.body);
      if (message !== undefined) assert.match(e.message, message);
    };

    before(async () => {
      ({ store, done } = await open());
      await migrate(store);
      for (const s of SPECS) {
        const w = wire(s);
        built.push({ spec: s, w, b: builder.build(w, 'gw-dash', ORIGIN_NS) });
      }
      await store.insert('spans', built.flatMap((x) => x.b.spans));
      await store.insert('requests', built.map((x) => x.b.request));
      // Two requests delivered twice, built again as the ingester does (the same request;
      // its stage span ids are derived from the root's, so the copies collapse under FINAL).
      const again = built.slice(0, 2).map((x) => builder.build(x.w, 'gw-dash', ORIGIN_NS));
      assert.equal(again[0]!.spans[1]!.span_id, built[0]!.b.spans[1]!.span_id);
      await store.insert('spans', again.flatMap((b) => b.spans));
      await store.insert('requests', again.map((b) => b.request));
      // No ingester wrote these rows: the reconciliation an ingester runs at start rolls
      // both days up (and copies their stage spans, as for data older than the rollups).
      const r = await new Rollup(store).reconcile({ nowS: Math.floor(BASE_MS / 1000) });
      assert.deepEqual(r.requestDays, [20250630, 20250701]);
      assert.deepEqual(r.stageDays, [20250630, 20250701]);

      app = buildQueryServer({ store, priceOf, cursorSecret: 'a cursor secret for the tests' });
      api = await checked(app);
      const directory = new MemoryDirectory({ hasher: new KeyHasher('a-server-secret-of-enough-bytes') });
      const { secret } = await directory.createKey(parseKeyInput({ team: 'alpha', name: 'dash', scopes: ['read'] }, Date.now()), Date.now());
      secured = buildQueryServer({ store, priceOf, auth: { adminToken: 'the-admin-token-of-these-tests', directory } });
      admin = await checked(secured, { headers: { authorization: 'Bearer the-admin-token-of-these-tests' } });
      alphaKey = await checked(secured, { headers: { authorization: `Bearer ${secret}` } });
    });
    after(async () => {
      await app.close();
      await secured.close();
      await done();
    });

    test('paging through every request gives each exactly once, newest first, across days and ties', async () => {
      const expected = built.map((x) => x.b.request).sort(newestFirst);
      for (const limit of [7, 50, 1000]) {
        const got = await listAll(api, ALL, limit);
        assert.equal(got.length, SPECS.length, `limit ${limit}: a request delivered twice is listed once`);
        assert.deepEqual(got.map((i) => i.span_id), expected.map((r) => r.span_id), `limit ${limit}`);
      }
    });

    test('pages stay stable while new requests arrive between them: no duplicate, no gap', async () => {
      const before = await listAll(api, LATER, 1000);
      const first = (await api.inject(`/v1/requests?${LATER}&limit=9`)).json() as Page;
      // New requests (two hours later: newer than the first page, outside the other tests'
      // range) and a redelivery of one already listed.
      const fresh = Array.from({ length: 4 }, (_, i) => builder.build(wire(spec({ team: 'alpha', key: KEY_A, offsetMs: 2 * 3_600_000 + i })), 'gw-dash', ORIGIN_NS));
      await store.insert('spans', fresh.flatMap((b) => b.spans));
      await store.insert('requests', [...fresh.map((b) => b.request), built[5]!.b.request]);
      const seen = [...first.data];
      let cursor = first.next_cursor;
      while (cursor !== null) {
        const page = (await api.inject(`/v1/requests?${LATER}&limit=9&cursor=${cursor}`)).json() as Page;
        seen.push(...page.data);
        cursor = page.next_cursor;
      }
      assert.equal(seen.length, SPECS.length);
      assert.deepEqual(seen.map((i) => i.span_id), before.map((i) => i.span_id));
      // A new listing starts with them.
      const now = (await api.inject(`/v1/requests?${LATER}&limit=4`)).json() as Page;
      assert.deepEqual(new Set(now.data.map((i) => i.span_id)), new Set(fresh.map((b) => b.request.span_id)));
    });

    test('forged, truncated, foreign and replayed-with-other-filters cursors are 400s naming the cursor', async () => {
      const page = (await api.inject(`/v1/requests?${ALL}&limit=5`)).json() as Page;
      const c = page.next_cursor!;
      assert.equal((await api.inject(`/v1/requests?${ALL}&limit=5&cursor=${c}`)).statusCode, 200);
      const [payload, mac] = c.split('.') as [string, string];
      const fields = JSON.parse(Buffer.from(payload, 'base64url').toString()) as unknown[];
      fields[1] = String(BigInt(fields[1] as string) + 1_000_000_000n);
      const forged = `${Buffer.from(JSON.stringify(fields)).toString('base64url')}.${mac}`;
      const other = (await (await checked(buildQueryServer({ store, priceOf, cursorSecret: 'another secret, another server' }))).inject(`/v1/requests?${ALL}&limit=5`)).json() as Page;
      for (const bad of [c.slice(0, -3), c.slice(0, 20), forged, 'nonsense', `${payload}.`, other.next_cursor!]) {
        await refusedWith(api, `/v1/requests?${ALL}&limit=5&cursor=${encodeURIComponent(bad)}`, 400, 'cursor', /invalid cursor/);
      }
      for (const changed of [`${ALL}&model=gpt-4o`, `${ALL}&team=alpha`, `from=${iso(BASE_MS - DAY_MS)}&to=${iso(BASE_MS + 3_600_000)}`, `${ALL}&stream=false`]) {
        await refusedWith(api, `/v1/requests?${changed}&limit=5&cursor=${c}`, 400, 'cursor', /other parameters/);
      }
      // The same cursor with another page size is fine: the position does not depend on it.
      assert.equal((await api.inject(`/v1/requests?${ALL}&limit=50&cursor=${c}`)).statusCode, 200);
    });

    test('filters: status (exact or class), model, provider, key, stream, error type, the slowest', async () => {
      const count = async (q: string) => (await listAll(api, `${ALL}&${q}`, 1000)).length;
      assert.equal(await count('status=5xx'), SPECS.filter((s) => s.status >= 500).length);
      assert.equal(await count('status=400'), 3);
      assert.equal(await count('status=2xx&team=beta'), 10);
      assert.equal(await count('model=claude-x'), 10);
      assert.equal(await count('provider=p2&stream=true'), 10);
      assert.equal(await count('stream=false'), SPECS.length - 10);
      assert.equal(await count(`key=${KEY_C}`), 15);
      assert.equal(await count('error_type=upstream_error'), 5);
      const slow = await listAll(api, `${ALL}&min_total_ms=180`, 1000);
      assert.equal(slow.length, SPECS.filter((s) => !s.refused && s.totalMs >= 180).length);
      assert.ok(slow.length > 0 && slow.every((i) => i.total_ms >= 180));
      // An item: tokens, TTFT and cost at the model's prices.
      const claude = (await listAll(api, `${ALL}&model=claude-x`, 1))[0]!;
      assert.deepEqual([claude.team, claude.key_id, claude.stream, claude.ttft_ms, claude.tokens], ['alpha', KEY_B, true, 100.5, { input: 1000, output: 200, cache_read: 0, cache_write: 0 }]);
      assert.ok(Math.abs(claude.cost_usd! - 0.006) < 1e-12, String(claude.cost_usd));
      assert.equal((await listAll(api, `${ALL}&model=mystery`, 1))[0]!.cost_usd, null);
      // Bad parameters name themselves.
      await refusedWith(api, `/v1/requests?limit=1001`, 400, 'limit', /must be <= 1000/);
      await refusedWith(api, `/v1/requests?colour=red`, 400, 'colour', /unknown parameter `colour` \(expected from, to, model/);
      await refusedWith(api, `/v1/requests?status=2x`, 400, 'status');
      await refusedWith(api, `/v1/requests?key=alpha`, 400, 'key');
      await refusedWith(api, `/v1/requests?from=${iso(BASE_MS - 40 * DAY_MS)}&to=${iso(BASE_MS)}`, 400, null, /at most 31 days/);
    });

    test('a team key reads its own team only: another team is a 403, and cursors do not cross', async () => {
      const mine = await listAll(alphaKey, ALL, 20);
      assert.equal(mine.length, SPECS.filter((s) => s.team === 'alpha').length);
      assert.ok(mine.every((i) => i.team === 'alpha'));
      assert.deepEqual(await listAll(alphaKey, `${ALL}&team=alpha`, 1000), mine);
      await refusedWith(alphaKey, `/v1/requests?${ALL}&team=beta`, 403, 'team', /belongs to team `alpha`/);
      // The admin's cursor (every team) replayed with alpha's key: refused, not re-scoped.
      const adminPage = (await admin.inject(`/v1/requests?${ALL}&limit=3`)).json() as Page;
      await refusedWith(alphaKey, `/v1/requests?${ALL}&limit=3&cursor=${adminPage.next_cursor}`, 400, 'cursor');
      // A beta trace does not exist for alpha.
      const betaTrace = built.find((x) => x.spec.team === 'beta')!.b.request.trace_id;
      assert.equal((await alphaKey.inject(`/v1/requests/${betaTrace}`)).statusCode, 404);
      assert.equal((await admin.inject(`/v1/requests/${betaTrace}`)).statusCode, 200);
      // Metrics and usage: alpha's rows only; naming beta is a 403.
      const byTeam = await metrics(alphaKey, { metrics: ['requests'], group_by: ['team'] });
      assert.deepEqual(byTeam.rows, [{ team: 'alpha', requests: today.filter((s) => s.team === 'alpha').length }]);
      await refusedWith(alphaKey, { method: 'POST', url: '/v1/metrics', payload: { ...TODAY, metrics: ['requests'], filters: { team: ['alpha', 'beta'] } } }, 403, 'team');
      const usage = (await alphaKey.inject(`/v1/usage?${ALL}&group_by=team,key`)).json() as { rows: { team: string; key: string; requests: number }[] };
      assert.deepEqual(usage.rows.map((r) => [r.team, r.key, r.requests]), [['alpha', KEY_A, 48], ['alpha', KEY_B, 10]]);
      await refusedWith(alphaKey, `/v1/usage?${ALL}&team=beta`, 403, 'team');
      await refusedWith(alphaKey, `/v1/stages?team=beta`, 403, 'team');
      // Without credentials: 401.
      const anon = await checked(secured);
      await refusedWith(anon, `/v1/requests?${ALL}`, 401, null);
    });

    test('metrics by each dimension count what the fixture holds, from the rollups', async () => {
      const dims: [string, (s: Spec) => string][] = [
        ['team', (s) => s.team],
        ['key', (s) => s.key],
        ['model', (s) => s.model],
        ['provider', (s) => s.provider],
        ['dialect', (s) => s.dialect],
        ['status_class', (s) => `${Math.floor(s.status / 100)}xx`],
      ];
      for (const [dim, of] of dims) {
        const { rows, truncated } = await metrics(api, { metrics: ['requests', 'errors'], group_by: [dim] });
        assert.equal(truncated, false);
        const got = Object.fromEntries(rows.map((r) => [r[dim], r.requests]));
        assert.deepEqual(got, countBy(today, of), dim);
        const errors = Object.fromEntries(rows.map((r) => [r[dim], r.errors]));
        assert.deepEqual(errors, Object.fromEntries(Object.keys(got).map((k) => [k, today.filter((s) => of(s) === k && s.status >= 400).length])), `${dim} errors`);
      }
      // Two dimensions, and the largest group first.
      const { rows } = await metrics(api, { metrics: ['requests'], group_by: ['team', 'model'] });
      assert.deepEqual(rows[0], { team: 'alpha', model: 'gpt-4o', requests: 43 });
      // Filters: values ORed, filters ANDed.
      const f = await metrics(api, { metrics: ['requests', 'error_rate'], filters: { team: ['beta', 'gamma'], status_class: ['5xx', '4xx'] } });
      assert.deepEqual(f.rows, [{ requests: 8, error_rate: 1 }]);
      // The limit keeps the largest groups and says so.
      const top = await metrics(api, { metrics: ['requests'], group_by: ['team'], limit: 1 });
      assert.deepEqual(top, { rows: [{ team: 'alpha', requests: 53 }], truncated: true });
    });

    test('a range of days reads ended days, whole hours and the ragged minutes, and counts the same', async () => {
      const from = iso(BASE_MS - 2 * DAY_MS + 17 * 60_000);
      const to = iso(BASE_MS + 3_600_000 + 7 * 60_000);
      const { rows } = await metrics(api, { from, to, metrics: ['requests', 'errors', 'cost_usd', 'p50_ms'], group_by: ['team'] });
      assert.deepEqual(Object.fromEntries(rows.map((r) => [r.team, r.requests])), countBy(SPECS, (s) => s.team));
      const alpha = rows.find((r) => r.team === 'alpha')!;
      // States merged across the levels: alpha's requests take 151–190 ms, most of them 160.
      assert.ok(Math.abs((alpha.p50_ms as number) - 160) < 15, `alpha p50 ${alpha.p50_ms}`);
      const daily = await metrics(api, { from: iso(Date.UTC(2025, 5, 29)), to: iso(Date.UTC(2025, 6, 2)), metrics: ['requests'], interval: '1d' });
      assert.deepEqual(daily.rows.map((r) => [r.time, r.requests]), [
        [iso(Date.UTC(2025, 5, 29)), 0],
        [iso(Date.UTC(2025, 5, 30)), SPECS.length - today.length],
        [iso(Date.UTC(2025, 6, 1)), today.length],
      ]);
      const usage = (await api.inject(`/v1/usage?from=${from}&to=${to}&group_by=team`)).json() as { rows: { team: string; requests: number }[] };
      assert.deepEqual(Object.fromEntries(usage.rows.map((r) => [r.team, r.requests])), countBy(SPECS, (s) => s.team));
    });

    test('the key-less rollups (migration 008) sum the per-key ones, each request once, and the metrics answer the same from either', async () => {
      // SQL: every level of both twins counts what the fixture holds (the redelivered two once).
      const total = async (t: string, col: string) => {
        const [r] = await store.query<{ n: string | number }>(sql`SELECT sum(${ident(col)}) AS n FROM ${table(store.database, t)} FINAL`);
        return Number(r?.n ?? 0);
      };
      for (const level of ['1m', '1h', '1d']) {
        assert.equal(await total(`requests_team_agg_${level}`, 'requests'), SPECS.length, level);
        assert.equal(await total(`requests_team_agg_${level}`, 'requests'), await total(`requests_agg_${level}`, 'requests'), level);
        assert.equal(await total(`stages_team_agg_${level}`, 'spans'), await total(`stages_agg_${level}`, 'spans'), level);
        assert.equal(await total(`stages_team_agg_${level}`, 'errors'), 3, `${level}: the refused requests' parse stages`);
      }
      // The API: a body without `key` reads the twins; the same body filtered by every key
      // in the fixture reads the per-key rollups. Ranges over days, hours and minutes.
      const everyKey = [...new Set(SPECS.map((s) => s.key))];
      const long = { from: iso(BASE_MS - 2 * DAY_MS + 17 * 60_000), to: iso(BASE_MS + 3_600_000 + 7 * 60_000) };
      const bodies: object[] = [
        { ...long, metrics: [...METRICS], group_by: ['team', 'model', 'dialect', 'status_class'] },
        { ...long, metrics: ['requests', 'p99_ms', 'cost_usd'], interval: '1h', group_by: ['team'] },
        { ...long, metrics: ['requests', 'errors', 'error_rate', 'mean_ms', 'p50_ms', 'p95_ms', 'p99_ms'], group_by: ['stage', 'model'], limit: 500 },
        { ...long, metrics: ['requests', 'p50_ms'], group_by: ['team'], filters: { stage: ['upstream.wait'] } },
      ];
      for (const body of bodies) {
        const keyless = await metrics(admin, body);
        const b = body as { filters?: Record<string, string[]> };
        const perKey = await metrics(admin, { ...body, filters: { ...(b.filters ?? {}), key: everyKey } });
        assert.ok(keyless.rows.length > 0);
        assert.deepEqual(keyless, perKey, JSON.stringify(body));
      }
      // A team key reads its own team through the twins too.
      const mine = await metrics(alphaKey, bodies[0]!);
      assert.deepEqual([...new Set(mine.rows.map((r) => r.team))], ['alpha']);
      assert.equal(mine.rows.reduce((n, r) => n + (r.requests as number), 0), SPECS.filter((s) => s.team === 'alpha').length);
    });

    test('latency percentiles, gateway time and TTFT come from the t-digest states', async () => {
      const { rows } = await metrics(api, { metrics: ['p50_ms', 'p99_ms', 'mean_ms', 'gateway_p50_ms', 'ttft_p50_ms', 'ttft_mean_ms'], group_by: ['key'], filters: { team: ['alpha'] } });
      const a = rows.find((r) => r.key === KEY_A)!;
      // Key A: 40 requests of 151–190 ms and three of 160 ms; the median is the 22nd, 169.
      assert.ok(Math.abs((a.p50_ms as number) - 169) <= 1.5, `p50 ${a.p50_ms}`);
      assert.ok((a.p99_ms as number) >= 188 && (a.p99_ms as number) <= 190.5, `p99 ${a.p99_ms}`);
      assert.ok(Math.abs((a.mean_ms as number) - (40 * 170.5 + 3 * 160) / 43) < 0.01, `mean ${a.mean_ms}`);
      assert.ok((a.gateway_p50_ms as number) > 0 && (a.gateway_p50_ms as number) < (a.p50_ms as number));
      assert.deepEqual([a.ttft_p50_ms, a.ttft_mean_ms], [0, 0], 'no streams: no TTFT');
      const b = rows.find((r) => r.key === KEY_B)!;
      assert.ok(Math.abs((b.ttft_p50_ms as number) - 100.5) < 0.01, `ttft ${b.ttft_p50_ms}`);
      assert.equal(b.ttft_mean_ms, 100.5);
    });

    test('per-stage metrics: counts per stage once each (redeliveries too), stage latency, failures', async () => {
      const { rows } = await metrics(api, { metrics: ['requests', 'errors', 'p50_ms'], group_by: ['stage'] });
      const by = Object.fromEntries(rows.map((r) => [r.stage, r]));
      const served = today.filter((s) => !s.refused).length;
      assert.equal(by.parse!.requests, today.length);
      assert.equal(by['egress.write']!.requests, today.length);
      assert.equal(by['upstream.wait']!.requests, served);
      assert.equal(by.parse!.errors, 3, 'the refused requests failed in parse');
      assert.ok(!('upstream.attempt' in by), 'attempt spans are not stages');
      // Served requests parse in 10 µs (test/support/records.ts), most of them.
      assert.ok(Math.abs((by.parse!.p50_ms as number) - 0.01) < 0.002, `parse p50 ${by.parse!.p50_ms}`);
      // By stage and model, one stage.
      const one = await metrics(api, { metrics: ['requests'], group_by: ['model'], filters: { stage: ['upstream.wait'] } });
      assert.deepEqual(Object.fromEntries(one.rows.map((r) => [r.model, r.requests])), countBy(today.filter((s) => !s.refused), (s) => s.model));
    });

    test('an interval adds the bucket time and fills empty buckets with zeros', async () => {
      const from = Date.UTC(2025, 6, 1, 11, 58);
      const to = Date.UTC(2025, 6, 1, 12, 3);
      const res = await metrics(api, { from: iso(from), to: iso(to), metrics: ['requests', 'cost_usd', 'p50_ms'], interval: '1m' });
      const minuteOf = (s: Spec) => iso(Math.floor((BASE_MS + s.offsetMs) / 60_000) * 60_000);
      const perMinute = countBy(today, minuteOf);
      assert.deepEqual(res.rows.map((r) => [r.time, r.requests]), [0, 1, 2, 3, 4].map((m) => [iso(from + m * 60_000), perMinute[iso(from + m * 60_000)] ?? 0]));
      assert.deepEqual(res.rows[0], { time: iso(from), requests: 0, cost_usd: 0, p50_ms: 0 });
      // Grouped: every bucket of every series; the limit keeps the largest series.
      const grouped = await metrics(api, { from: iso(from), to: iso(to), metrics: ['requests'], group_by: ['team'], interval: '1m', limit: 2 });
      assert.equal(grouped.truncated, true);
      assert.equal(grouped.rows.length, 5 * 2);
      assert.deepEqual([...new Set(grouped.rows.map((r) => r.team))], ['alpha', 'beta']);
      assert.equal(grouped.rows.filter((r) => r.team === 'beta').reduce((n, r) => n + (r.requests as number), 0), 18);
      const fiveMin = await metrics(api, { from: iso(from), to: iso(to), metrics: ['requests'], interval: '5m' });
      assert.deepEqual(fiveMin.rows, [{ time: iso(Date.UTC(2025, 6, 1, 11, 55)), requests: 0 }, { time: iso(Date.UTC(2025, 6, 1, 12, 0)), requests: today.length }]);
    });

    test('cost is priced per model even when the grouping leaves the model out; null with unpriced tokens', async () => {
      const { rows } = await metrics(api, { metrics: ['cost_usd', 'input_tokens'], group_by: ['team'] });
      const costOf = (s: Spec) => (s.tokens.input + s.tokens.output === 0 ? 0 : (costUsd(priceOf(s.model), s.tokens.input, s.tokens.output, s.tokens.cacheRead, 0) ?? Number.NaN));
      const cost = (team: string) => today.filter((s) => s.team === team).reduce((n, s) => n + costOf(s), 0);
      const by = Object.fromEntries(rows.map((r) => [r.team, r]));
      assert.ok(Math.abs((by.alpha!.cost_usd as number) - cost('alpha')) < 1e-6, `alpha ${by.alpha!.cost_usd} vs ${cost('alpha')}`);
      assert.ok(Math.abs((by.beta!.cost_usd as number) - cost('beta')) < 1e-6, 'refused requests without tokens cost nothing');
      assert.equal(by.gamma!.cost_usd, null, 'tokens of a model without a price');
      assert.equal(by.alpha!.input_tokens, today.filter((s) => s.team === 'alpha').reduce((n, s) => n + s.tokens.input, 0));
      // Without any price configured, cost is null wherever there were tokens.
      const unpriced = await checked(buildQueryServer({ store }));
      const res = (await unpriced.inject({ method: 'POST', url: '/v1/metrics', payload: { ...TODAY, metrics: ['cost_usd'], group_by: ['team'] } })).json() as { rows: Row[] };
      assert.deepEqual(Object.fromEntries(res.rows.map((r) => [r.team, r.cost_usd])), { alpha: null, beta: null, gamma: null });
    });

    test('unknown metrics, dimensions and filters, and what the stage rollup lacks, are 400s naming the field', async () => {
      const post = (body: object) => ({ method: 'POST' as const, url: '/v1/metrics', payload: { ...TODAY, ...body } });
      await refusedWith(api, post({ metrics: ['requests', 'colour'] }), 400, 'metrics[1]', /must be one of requests, errors/);
      await refusedWith(api, post({ metrics: ['requests'], group_by: ['colour'] }), 400, 'group_by[0]');
      await refusedWith(api, post({ metrics: ['requests'], filters: { colour: ['red'] } }), 400, 'filters.colour', /unknown field `filters.colour`/);
      await refusedWith(api, post({ metrics: ['requests'], colour: 1 }), 400, 'colour');
      await refusedWith(api, post({ metrics: ['requests', 'cost_usd'], group_by: ['stage'] }), 400, 'metrics[1]', /per stage/);
      await refusedWith(api, post({ metrics: ['requests'], group_by: ['stage', 'status_class'] }), 400, 'group_by[1]');
      await refusedWith(api, post({ metrics: ['requests'], filters: { status_class: ['5x'] } }), 400, 'filters.status_class[0]');
      await refusedWith(api, post({ metrics: [] }), 400, 'metrics');
      await refusedWith(api, { method: 'POST', url: '/v1/metrics', payload: { from: TODAY.from } }, 400, 'metrics', /is required/);
      await refusedWith(api, post({ metrics: ['requests'], interval: '1m', from: iso(BASE_MS - 3 * DAY_MS) }), 400, 'interval', /buckets/);
      await refusedWith(api, post({ metrics: ['requests'], from: TODAY.to, to: TODAY.from }), 400, null, /before/);
      await refusedWith(api, { method: 'POST', url: '/v1/metrics', headers: { 'content-type': 'application/json' }, payload: '{"metrics":' }, 400, null);
    });
  });
}

suite('clickhouse-server', async () => {
  const server = await ClickHouseServer.start();
  const store = new ClickHouseServerStore({ url: server.url, database: 'sightline' });
  return { store, done: async () => { await store.close(); await server.dispose(); } };
});

suite('chdb', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sightline-dash-'));
  const store = await ChdbStore.open({ path: dir });
  return { store, done: async () => { await store.close(); rmSync(dir, { recursive: true, force: true }); } };
});
