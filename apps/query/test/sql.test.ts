/**
 * `POST /v1/sql` (issue 13, item 5) on both engines — a real clickhouse-server (18.16) and
 * chdb (26.x, in process) — holding the same rows: the same statement gives the same answer
 * on both; DDL, INSERT, SET, settings overrides (at any depth), KILL, SYSTEM, files, URLs,
 * other servers and programs are refused and change nothing; the engine itself runs every
 * statement with readonly = 1 and the limits; time, rows and bytes are bounded (422); only the
 * admin token may run SQL, and a team key is answered 501 (docs/api.md explains why).
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChdbStore, ClickHouseServerStore, migrate, sql, table, type Store } from '@sightline/store';
import { toWire } from '@sightline/capture';
import { SpanBuilder } from '@sightline/spans';
import { buildQueryServer, DEFAULT_READ_LIMITS } from '@sightline/app-query';
import { KeyHasher, MemoryDirectory, parseKeyInput, type Scope } from '@sightline/directory';
import type { FastifyInstance } from 'fastify';
import { ClickHouseServer } from '../../../test/support/servers.js';
import { servedRecord } from '../../../test/support/records.js';
import { checked, type Checked } from './checked.js';

const ADMIN = 'sql-test-admin-token-0123456789';
/** Rows of the fixture are stamped from this Unix nanosecond on (2025-06-01 12:00:20 UTC). */
const ORIGIN_NS = BigInt(Date.UTC(2025, 5, 1, 12, 0, 19)) * 1_000_000n;

interface Engine {
  name: 'clickhouse' | 'chdb';
  store: Store;
  api: Checked;
  /** The same API with small limits: 1 s, 10,000 rows, 1 MiB of answer. */
  tight: FastifyInstance;
  app: FastifyInstance;
  done: () => Promise<void>;
}

interface Answer {
  columns: { name: string; type: string }[];
  rows: unknown[][];
  row_count: number;
  elapsed_ms: number;
  engine: string;
}

const engines: Engine[] = [];
const directory = new MemoryDirectory({ hasher: new KeyHasher('a-server-secret-of-enough-bytes') });
const keys: Partial<Record<string, string>> = {};
const builder = new SpanBuilder();

async function fill(store: Store): Promise<void> {
  await migrate(store);
  const built = Array.from({ length: 12 }, (_, i) => {
    const seq = i + 1;
    const r = servedRecord({ seq, t0: 1000 + seq, provider: seq % 3 === 0 ? 'anthropic' : 'openai', team: seq % 2 === 0 ? 'alpha' : 'beta', usage: { prompt: 100 + seq, completion: 50 + seq }, tags: { feature: `f${seq % 2}` } });
    r.traceId = seq.toString(16).padStart(32, '0');
    r.rootSpanId = (0x1000 + seq).toString(16).padStart(16, '0');
    if (seq % 4 === 0) r.model = 'gpt-4o-mini';
    return builder.build(toWire(r), 'gw-sql', ORIGIN_NS);
  });
  await store.insert('spans', built.flatMap((b) => b.spans));
  await store.insert('requests', built.map((b) => b.request));
}

async function open(name: 'clickhouse' | 'chdb'): Promise<Engine> {
  let store: Store;
  let close: () => Promise<void>;
  if (name === 'clickhouse') {
    const ch = await ClickHouseServer.start();
    store = new ClickHouseServerStore({ url: ch.url, database: 'sightline' });
    close = async () => {
      await store.close();
      await ch.dispose();
    };
  } else {
    const dir = mkdtempSync(join(tmpdir(), 'sightline-sql-chdb-'));
    store = await ChdbStore.open({ path: dir, database: 'sightline' });
    close = async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    };
  }
  await fill(store);
  const auth = { adminToken: ADMIN, directory };
  const app = buildQueryServer({ store, auth });
  const tight = buildQueryServer({ store, auth, limits: { maxExecutionTimeS: 1, maxMemoryBytes: 1024 ** 3, maxResultRows: 10_000 }, sqlMaxResultBytes: 1024 ** 2 });
  const api = await checked(app, { headers: { authorization: `Bearer ${ADMIN}` } });
  return {
    name,
    store,
    api,
    tight,
    app,
    done: async () => {
      await app.close();
      await tight.close();
      await close();
    },
  };
}

function post(e: Engine, query: string, token: string | null = ADMIN) {
  return e.api.inject({ method: 'POST', url: '/v1/sql', payload: { query }, headers: token === null ? { authorization: '' } : { authorization: `Bearer ${token}` } });
}

before(async () => {
  for (const scopes of [['read'], ['read', 'content'], ['gateway']] as Scope[][]) {
    keys[scopes.join('+')] = (await directory.createKey(parseKeyInput({ team: 'alpha', name: scopes.join('+'), scopes }, Date.now()), Date.now())).secret;
  }
  engines.push(await open('clickhouse'), await open('chdb'));
});

after(async () => {
  for (const e of engines) await e.done();
});

/** Statements whose answer must be identical on both engines. */
const SAME: string[] = [
  "SELECT count() AS n, sum(input_tokens) AS input, sum(output_tokens) AS output FROM sightline.requests FINAL WHERE instance = 'gw-sql'",
  'SELECT model, provider, count() AS n FROM sightline.requests FINAL GROUP BY model, provider ORDER BY model, provider',
  'SELECT team, uniqExact(trace_id) AS traces, min(seq) AS first, max(seq) AS last FROM sightline.requests FINAL GROUP BY team ORDER BY team',
  'SELECT name, count() AS n, sum(duration_ns) AS total_ns FROM sightline.spans FINAL WHERE is_root = 0 GROUP BY name ORDER BY name',
  'SELECT trace_id, start_time_unix_nano, total_ns, tag_keys, tag_values FROM sightline.requests FINAL ORDER BY seq LIMIT 3',
  // A join and subqueries.
  'SELECT r.seq AS seq, s.spans AS spans FROM (SELECT trace_id, seq FROM sightline.requests FINAL) AS r INNER JOIN (SELECT trace_id, count() AS spans FROM sightline.spans FINAL GROUP BY trace_id) AS s USING trace_id ORDER BY seq',
  "SELECT seq FROM sightline.requests FINAL WHERE trace_id IN (SELECT trace_id FROM sightline.spans FINAL WHERE name = 'upstream.wait' AND duration_ns > 0) AND team = 'alpha' ORDER BY seq",
  // UNION, WITH, a final semicolon and comments.
  "SELECT k, v FROM (SELECT 'a' AS k, 1 AS v UNION ALL SELECT 'b' AS k, 2 AS v) ORDER BY k;",
  'WITH 2 AS k SELECT k * 21 AS answer -- a comment',
  'SELECT /* inline */ number * 2 AS twice FROM system.numbers LIMIT 5',
  // Values: 64-bit integers as strings, arrays, NULL, dates, escapes, a doubled quote.
  "SELECT toUInt64(18446744073709551615) AS big, toInt64(-9007199254740993) AS negative, [1, 2, 3] AS arr, NULL AS nothing, toDate('2025-06-01') AS d, toDateTime(1748779200, 'UTC') AS t, 'quote '' and \\\\ backslash' AS s, 1.5 AS f",
  "SELECT 'a'' SETTINGS readonly = 0 --' AS looks_like_a_setting",
  // The engine runs it read-only with the limits: readonly = 1 (not 2) and the API's values.
  "SELECT name, value FROM system.settings WHERE name IN ('readonly', 'max_execution_time', 'max_result_rows', 'max_result_bytes', 'result_overflow_mode') ORDER BY name",
  "SELECT value FROM system.settings WHERE name = 'readonly' -- \r SETTINGS readonly = 0",
];

describe('the same answer on chdb and on the ClickHouse server', () => {
  for (const q of SAME) {
    test(q.slice(0, 100), async () => {
      const answers: Answer[] = [];
      for (const e of engines) {
        const res = await post(e, q);
        assert.equal(res.statusCode, 200, `${e.name}: ${res.body}`);
        const a = res.json() as Answer;
        assert.equal(a.engine, e.name);
        assert.equal(a.row_count, a.rows.length);
        assert.ok(a.rows.length > 0, `${e.name}: no rows`);
        answers.push(a);
      }
      const [server, chdb] = answers as [Answer, Answer];
      assert.deepEqual(chdb.columns, server.columns);
      assert.deepEqual(chdb.rows, server.rows);
    });
  }

  test('the values are the expected ones, not only equal', async () => {
    const a = (await post(engines[0]!, SAME[0]!)).json() as Answer;
    // 12 requests: input 101..112, output 51..62; 64-bit sums as strings.
    assert.deepEqual(a.rows, [['12', String((101 + 112) * 6), String((51 + 62) * 6)]]);
    const s = (await post(engines[1]!, SAME[12]!)).json() as Answer;
    assert.deepEqual(s.rows, [
      ['max_execution_time', String(DEFAULT_READ_LIMITS.maxExecutionTimeS)],
      ['max_result_bytes', String(64 * 1024 ** 2)],
      ['max_result_rows', String(DEFAULT_READ_LIMITS.maxResultRows)],
      ['readonly', '1'],
      ['result_overflow_mode', 'throw'],
    ]);
    const v = (await post(engines[1]!, SAME[10]!)).json() as Answer;
    assert.deepEqual(v.rows, [['18446744073709551615', '-9007199254740993', [1, 2, 3], null, '2025-06-01', '2025-06-01 12:00:00', "quote ' and \\ backslash", 1.5]]);
  });
});

/** Statements that must be refused, with what the refusal says. Each is tried on both engines. */
const REFUSED: [string, RegExp][] = [
  ['DROP TABLE sightline.requests', /only SELECT/],
  ['CREATE TABLE sightline.x (a UInt8) ENGINE = Memory', /only SELECT/],
  ['ALTER TABLE sightline.requests DELETE WHERE 1', /only SELECT/],
  ['TRUNCATE TABLE sightline.requests', /only SELECT/],
  ["INSERT INTO sightline.requests (trace_id) VALUES ('x')", /only SELECT/],
  ['SET readonly = 0', /only SELECT/],
  ['KILL QUERY WHERE 1', /only SELECT/],
  ['SYSTEM DROP DNS CACHE', /only SELECT/],
  ['OPTIMIZE TABLE sightline.requests FINAL', /only SELECT/],
  ['/* SELECT */ DROP TABLE sightline.requests', /only SELECT/],
  ['SELECT 1; DROP TABLE sightline.requests', /one statement/],
  ['SELECT 1 SETTINGS readonly = 0', /SETTINGS/],
  ['SELECT count() FROM sightline.requests SETTINGS max_execution_time = 3600, max_result_rows = 0', /SETTINGS/],
  // On chdb a subquery's SETTINGS would lower readonly for it: refused before it runs.
  ["SELECT (SELECT value FROM system.settings WHERE name = 'readonly' SETTINGS readonly = 0) AS r", /SETTINGS/],
  ['SELECT * FROM (SELECT 1 SETTINGS max_result_rows = 1000000000)', /SETTINGS/],
  ["SELECT 1 INTO OUTFILE '/tmp/sightline-sql-test-outfile'", /INTO/],
  ['WITH x AS (SELECT 1) INSERT INTO sightline.requests SELECT * FROM x', /INTO/],
  ['SELECT 1 FORMAT TSV', /FORMAT/],
  ["SELECT file('/etc/passwd')", /file\(\)/],
  ["SELECT `file`('/etc/passwd')", /file\(\)/],
  ["SELECT * FROM file('/etc/passwd', 'LineAsString')", /file\(\)/],
  ["SELECT * FROM url('http://127.0.0.1:9/', 'TSV', 'x String')", /url\(\)/],
  ["SELECT * FROM remote('127.0.0.1:9000', system.one)", /remote\(\)/],
  ["SELECT * FROM executable('x.sh', 'TSV', 'x String')", /executable\(\)/],
  ["SELECT 1 /* /* */ ' */ SETTINGS readonly = 0 -- '", /comments inside comments/],
  ["SELECT 1 # '\n SETTINGS readonly = 0 -- '", /character `#`/],
  ['SELECT 1 /* unterminated', /not closed/],
];

describe('refused on both engines, and nothing changed', () => {
  for (const [q, why] of REFUSED) {
    test(q.slice(0, 100), async () => {
      for (const e of engines) {
        const res = await post(e, q);
        assert.equal(res.statusCode, 400, `${e.name}: ${res.body}`);
        const body = res.json() as { error: { code: string; message: string; field?: string } };
        assert.equal(body.error.code, 'bad_parameter');
        assert.equal(body.error.field, 'query');
        assert.match(body.error.message, why, e.name);
      }
    });
  }

  test('the tables are all there with all their rows', async () => {
    for (const e of engines) {
      const n = await e.store.query<{ n: string }>(sql`SELECT count() AS n FROM ${table('sightline', 'requests')} FINAL`);
      assert.equal(Number(n[0]!.n), 12, e.name);
      const t = await e.store.query<{ n: string }>(sql`SELECT count() AS n FROM system.tables WHERE database = 'sightline' AND name = 'x'`);
      assert.equal(Number(t[0]!.n), 0, e.name);
    }
  });

  test('what the statement check lets through, the engine refuses with readonly = 1: table functions', async () => {
    // numbers() is harmless and not on the check's list: readonly = 1 forbids table
    // functions on 18.16; chdb (26.x) allows this one and refuses those that reach outside.
    const server = await post(engines[0]!, 'SELECT * FROM numbers(3)');
    assert.equal(server.statusCode, 400, server.body);
    assert.match((server.json() as { error: { message: string } }).error.message, /ClickHouse refused the query: .*(readonly|READONLY)/);
    const chdb = await post(engines[1]!, 'SELECT * FROM numbers(3)');
    assert.equal(chdb.statusCode, 200, chdb.body);
  });

  test('errors in the statement are the caller\'s: 400 with ClickHouse\'s reason', async () => {
    for (const e of engines) {
      for (const q of ['SELECT nosuch FROM system.one', 'SELECT * FROM sightline.nosuch', 'SELECT (1']) {
        const res = await post(e, q);
        assert.equal(res.statusCode, 400, `${e.name} ${q}: ${res.body}`);
        assert.match((res.json() as { error: { message: string } }).error.message, /^ClickHouse refused the query: .*Code: \d+/);
      }
    }
  });

  test('a body that is not {"query": "…"} is a 400', async () => {
    for (const payload of [{}, { query: '' }, { query: 'SELECT 1', settings: { readonly: 0 } }, { query: 42 }]) {
      const res = await engines[0]!.api.inject({ method: 'POST', url: '/v1/sql', payload, headers: { authorization: `Bearer ${ADMIN}` } });
      assert.equal(res.statusCode, 400, JSON.stringify(payload));
    }
  });
});

describe('limits', () => {
  const tightPost = (e: Engine, query: string) => e.tight.inject({ method: 'POST', url: '/v1/sql', payload: { query }, headers: { authorization: `Bearer ${ADMIN}` } });

  test('time, rows and bytes: 422 query_too_large on both engines', async () => {
    for (const e of engines) {
      for (const q of [
        // Endless without the time limit.
        'SELECT count() FROM system.numbers',
        'SELECT number FROM system.numbers LIMIT 10001',
        // Wide rows: counted by ClickHouse (max_result_bytes)…
        'SELECT arrayMap(x -> x + number, range(1000)) AS wide FROM system.numbers LIMIT 5000',
        // …and a constant column, which 18.16 counts as almost nothing: bounded as JSON read.
        'SELECT range(1000) AS wide FROM system.numbers LIMIT 5000',
      ]) {
        const t0 = Date.now();
        const res = await tightPost(e, q);
        assert.equal(res.statusCode, 422, `${e.name} ${q}: ${res.body.slice(0, 300)}`);
        assert.equal((res.json() as { error: { code: string } }).error.code, 'query_too_large');
        assert.ok(Date.now() - t0 < 10_000, `${e.name} ${q} took ${Date.now() - t0} ms`);
      }
      const ok = await tightPost(e, 'SELECT number FROM system.numbers LIMIT 10000');
      assert.equal(ok.statusCode, 200, `${e.name}: ${ok.body}`);
      assert.equal((ok.json() as Answer).row_count, 10_000);
    }
  });
});

describe('who may run SQL', () => {
  test('the admin token only; a team key gets 501 whatever its scopes, on both engines', async () => {
    for (const e of engines) {
      for (const k of ['read', 'read+content']) {
        const res = await post(e, 'SELECT 1', keys[k]!);
        assert.equal(res.statusCode, 501, `${e.name} ${k}: ${res.body}`);
        const body = res.json() as { error: { code: string; message: string } };
        assert.equal(body.error.code, 'not_implemented');
        assert.match(body.error.message, /cannot guarantee that a statement reads only its team's rows/);
      }
      // A key without the read scope is refused before, like on every endpoint.
      assert.equal((await post(e, 'SELECT 1', keys.gateway!)).statusCode, 403);
      assert.equal((await post(e, 'SELECT 1', null)).statusCode, 401);
      assert.equal((await post(e, 'SELECT 1', 'not-the-token')).statusCode, 401);
    }
  });

  test('with authentication off (loopback, every caller the admin) it answers', async () => {
    const open = buildQueryServer({ store: engines[1]!.store });
    try {
      const res = await open.inject({ method: 'POST', url: '/v1/sql', payload: { query: 'SELECT 1 AS one' } });
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual((res.json() as Answer).rows, [[1]]);
    } finally {
      await open.close();
    }
  });
});
