/**
 * The same migrations and queries against both engines in our compatibility range: a
 * real clickhouse-server (Debian's 18.16) and chdb (26.x, in process).
 */
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
// From the sources rather than '@sightline/store': the docs' example queries need
// trustedSql, which the package does not export, and one declaration of Sql must type both.
import { ClickHouseServerStore, ChdbStore, migrate, readMigrations, sql, table, withReadLimits, StoreError, type ReadLimits, type Store } from '../src/index.js';
import { trustedSql } from '../src/sql.js';
import { readOnlyStatement } from '../src/statement.js';
import { createServer, connect, type AddressInfo, type Socket } from 'node:net';
import { ClickHouseServer, freePort } from '../../../test/support/servers.js';

const nasty = "quote ' backslash \\ newline \n tab \t unicode 你好 🙂";

function suite(name: string, open: () => Promise<{ store: Store; done: () => Promise<void> }>) {
  describe(name, () => {
    let store: Store;
    let done: () => Promise<void>;
    before(async () => {
      ({ store, done } = await open());
    });
    after(async () => {
      await done();
    });

    test('migrations apply once and are recorded', async () => {
      const first = await migrate(store);
      assert.deepEqual(first.applied, readMigrations().map((m) => `${String(m.version).padStart(3, '0')}_${m.name}`));
      const second = await migrate(store);
      assert.deepEqual(second.applied, []);
      assert.equal(second.skipped.length, first.applied.length);
      const tables = await store.query<{ name: string }>(sql`SELECT name FROM system.tables WHERE database = ${store.database} ORDER BY name`);
      assert.deepEqual(
        tables.map((t) => t.name),
        [
          'content',
          'ingest_batches',
          'requests',
          'requests_1m',
          'requests_agg_1d',
          'requests_agg_1h',
          'requests_agg_1m',
          'requests_team_agg_1d',
          'requests_team_agg_1h',
          'requests_team_agg_1m',
          'rollup_state',
          'schema_migrations',
          'spans',
          'stage_spans',
          'stage_spans_mv',
          'stages_agg_1d',
          'stages_agg_1h',
          'stages_agg_1m',
          'stages_team_agg_1d',
          'stages_team_agg_1h',
          'stages_team_agg_1m',
        ],
      );
    });

    test('an ALTER another runner already applied counts as done; other failures do not', async () => {
      const ms = readMigrations();
      const racing = { version: 900, name: 'race', checksum: 'x', statements: ['ALTER TABLE {database}.requests ADD COLUMN usage_partial UInt8'] };
      const r = await migrate(store, [...ms, racing]);
      assert.deepEqual(r.applied, ['900_race']);
      const broken = { version: 901, name: 'broken', checksum: 'y', statements: ['ALTER TABLE {database}.requests ADD COLUMN'] };
      await assert.rejects(migrate(store, [...ms, racing, broken]), StoreError);
    });

    test('an edited migration is refused', async () => {
      const ms = readMigrations();
      const changed = ms.map((m, i) => (i === 0 ? { ...m, checksum: 'different' } : m));
      await assert.rejects(migrate(store, changed), (e: unknown) => e instanceof StoreError && /changed after it was applied/.test(e.message));
    });

    test('rows round-trip with 64-bit nanoseconds and hostile strings', async () => {
      const ns = '1764441600123456789';
      await store.insert('spans', [
        {
          trace_id: 't'.repeat(32), span_id: 's'.repeat(16), parent_span_id: '', name: nasty, kind: 'server', is_root: 1,
          start_time: 1764441600, start_time_unix_nano: ns, duration_ns: '18446744073709551615', status_code: 'OK',
          status_message: '', model: 'gpt-4o', provider: 'openai', team: 'a', instance: 'gw1', attr_keys: ['k'], attr_values: [nasty],
        },
      ]);
      const rows = await store.query<{ name: string; start_time_unix_nano: string; duration_ns: string; attr_values: string[]; t: string }>(
        sql`SELECT name, start_time_unix_nano, duration_ns, attr_values, toString(start_time) AS t FROM ${table(store.database, 'spans')} WHERE name = ${nasty}`,
      );
      assert.equal(rows.length, 1);
      assert.equal(rows[0]?.name, nasty);
      assert.equal(String(rows[0]?.start_time_unix_nano), ns);
      assert.equal(String(rows[0]?.duration_ns), '18446744073709551615');
      assert.deepEqual(rows[0]?.attr_values, [nasty]);
      assert.equal(rows[0]?.t, '2025-11-29 18:40:00');
    });

    test('an insert of many rows, across chunks and with a row longer than a chunk, is written whole', async () => {
      // Rows in a mix of one-byte and two-byte strings (jsonEachRow writes each into chunks of
      // 256 KiB); one attribute of 300 KiB, which takes a chunk of its own.
      const long = 'x🙂'.repeat(100_000);
      const rows = Array.from({ length: 3000 }, (_, i) => ({
        trace_id: 'c'.repeat(32), span_id: i.toString(16).padStart(16, '0'), parent_span_id: '', name: i % 3 === 0 ? `${nasty} ${i}` : `plain ${i}`,
        kind: 'internal', is_root: 0, start_time: 1764441600, start_time_unix_nano: '1764441600000000000', duration_ns: String(i), status_code: 'UNSET',
        status_message: '', model: 'm', provider: 'p', team: 'chunks', instance: 'gw1', attr_keys: ['k'], attr_values: [i === 1500 ? long : `v${i}`],
      }));
      await store.insert('spans', rows);
      const got = await store.query<{ n: string; names: string; long: string }>(
        sql`SELECT count() AS n, toString(sum(length(name))) AS names, toString(max(length(attr_values[1]))) AS long FROM ${table(store.database, 'spans')} WHERE team = 'chunks'`,
      );
      assert.equal(Number(got[0]?.n), 3000);
      assert.equal(Number(got[0]?.names), rows.reduce((a, r) => a + Buffer.byteLength(r.name), 0));
      assert.equal(Number(got[0]?.long), Buffer.byteLength(long));
      const one = await store.query<{ name: string; v: string }>(sql`SELECT name, attr_values[1] AS v FROM ${table(store.database, 'spans')} WHERE team = 'chunks' AND span_id = ${(1500).toString(16).padStart(16, '0')}`);
      assert.deepEqual(one, [{ name: `${nasty} 1500`, v: long }]);
    });

    test('rows ClickHouse cannot take are a StoreError that says it refused them', async () => {
      await assert.rejects(store.insert('spans', [{ trace_id: 't'.repeat(32), start_time: 'not a time' }]), (e: unknown) => e instanceof StoreError && e.code === 'SL_STORE_INSERT' && e.rejected);
    });

    test('every example query in docs/schema.md runs and finds the fixture', async () => {
      const doc = readFileSync(new URL('../../../docs/schema.md', import.meta.url), 'utf8');
      const queries = [...doc.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1]!.replaceAll('sightline.', `${store.database}.`));
      assert.ok(queries.length >= 5, `found ${queries.length} queries`);
      const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
      const nowS = Math.floor(Date.now() / 1000);
      const ns = `${nowS}000000000`;
      await store.insert('spans', [
        { trace_id: traceId, span_id: 'a'.repeat(16), parent_span_id: '', name: 'chat gpt-4o', kind: 'server', is_root: 1, start_time: nowS, start_time_unix_nano: ns, duration_ns: '2000', status_code: 'UNSET', status_message: '', model: 'gpt-4o', provider: 'openai', team: 't', instance: 'gw', attr_keys: [], attr_values: [] },
        { trace_id: traceId, span_id: 'b'.repeat(16), parent_span_id: 'a'.repeat(16), name: 'parse', kind: 'internal', is_root: 0, start_time: nowS, start_time_unix_nano: ns, duration_ns: '2000', status_code: 'UNSET', status_message: '', model: 'gpt-4o', provider: 'openai', team: 't', instance: 'gw', attr_keys: [], attr_values: [] },
      ]);
      await store.insert('requests', [
        { trace_id: traceId, span_id: 'a'.repeat(16), instance: 'gw', seq: '1', start_time: nowS, start_time_unix_nano: ns, method: 'POST', route: '/v1/chat/completions', dialect: 'openai', model: 'gpt-4o', response_model: 'gpt-4o', provider: 'openai', upstream_model: 'gpt-4o', team: 't', stream: 0, http_status: 200, upstream_status: 200, error_type: '', aborted: 0, total_ns: '2000', gateway_ns: '1000', upstream_ns: '1000', ttfb_ns: '0', ttft_ns: '0', input_tokens: 3, output_tokens: 4, cache_read_tokens: 0, cache_write_tokens: 0, request_bytes: 1, response_bytes: 2, usage_partial: 0, end_user: 'user-1', session_id: 's-1', tag_keys: ['feature'], tag_values: ['search'] },
        { trace_id: 'c'.repeat(32), span_id: 'c'.repeat(16), instance: 'gw', seq: '2', start_time: nowS, start_time_unix_nano: ns, method: 'POST', route: '/v1/chat/completions', dialect: 'openai', model: 'nope', response_model: '', provider: '', upstream_model: '', team: 't', stream: 0, http_status: 404, upstream_status: 0, error_type: 'model_not_found', aborted: 0, total_ns: '2000', gateway_ns: '2000', upstream_ns: '0', ttfb_ns: '0', ttft_ns: '0', input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0, request_bytes: 1, response_bytes: 2, usage_partial: 0 },
      ]);
      await store.insert('content', [
        {
          trace_id: traceId, span_id: 'a'.repeat(16), team: 't', key_id: '', start_time: nowS, start_time_unix_nano: ns, model: 'gpt-4o', route: '/v1/chat/completions', dialect: 'openai', stream: 0, policy: 'redacted',
          request: '{"messages":[{"role":"user","content":"What is your Refund Policy? I am [EMAIL]"}]}', response: '{"choices":[]}', request_bytes: 80, response_bytes: 14,
          request_truncated: 0, response_truncated: 0, response_partial: 0, redaction_keys: ['email'], redaction_counts: [1],
        },
      ]);
      await store.insert('ingest_batches', [
        { instance: 'gw', batch: '1', ingester: 'i', published_at_unix_nano: String(BigInt(nowS) * 1_000_000_000n - 5_000_000n), written_at_unix_nano: ns, written_at: nowS, requests: 2, spans: 4 },
      ]);
      await store.insert('requests_1m', [
        { minute: nowS - (nowS % 60), team: 't', model: 'gpt-4o', provider: 'openai', dialect: 'openai', status_class: 200, requests: 1, errors: 0, aborted: 0, streams: 0, input_tokens: 3, output_tokens: 4, cache_read_tokens: 0, cache_write_tokens: 0, total_ns_sum: 2000, gateway_ns_sum: 1000, upstream_ns_sum: 1000, gateway_ns_max: 1000, version: 1 },
      ]);
      // The rollups of migration 005, computed from the rows above as the ingester does
      // (its spans reached stage_spans through the materialized view).
      const db = store.database;
      await store.command(sql`INSERT INTO ${table(db, 'requests_agg_1m')} (minute, team, key_id, model, provider, dialect, status_class, requests, errors, input_tokens, output_tokens, total_ns_q, gateway_ns_q, version)
SELECT toStartOfMinute(start_time) AS minute, team, key_id, model, provider, dialect, toUInt16(intDiv(http_status, 100) * 100) AS status_class, count(), countIf(http_status >= 400), sum(input_tokens), sum(output_tokens),
  quantilesTDigestState(0.5, 0.95, 0.99)(total_ns), quantilesTDigestState(0.5, 0.95, 0.99)(gateway_ns), 1
FROM ${table(db, 'requests')} FINAL WHERE team = 't' GROUP BY minute, team, key_id, model, provider, dialect, status_class`);
      await store.command(sql`INSERT INTO ${table(db, 'stages_agg_1m')} (minute, team, key_id, model, provider, stage, spans, duration_ns_sum, duration_ns_q, version)
SELECT minute, team, key_id, model, provider, stage, count(), sum(duration_ns), quantilesTDigestState(0.5, 0.95, 0.99)(duration_ns), 1
FROM ${table(db, 'stage_spans')} FINAL WHERE trace_id = ${traceId} GROUP BY minute, team, key_id, model, provider, stage`);
      await store.command(sql`INSERT INTO ${table(db, 'stages_agg_1h')} (hour, team, key_id, model, provider, stage, spans, duration_ns_q, version)
SELECT toStartOfHour(minute) AS hour, team, key_id, model, provider, stage, sum(spans), quantilesTDigestMergeState(0.5, 0.95, 0.99)(duration_ns_q), 1
FROM ${table(db, 'stages_agg_1m')} FINAL GROUP BY hour, team, key_id, model, provider, stage`);
      await store.command(sql`INSERT INTO ${table(db, 'requests_agg_1d')} (day, team, key_id, model, provider, dialect, status_class, requests, errors, version)
SELECT toStartOfDay(minute) AS day, team, key_id, model, provider, dialect, status_class, sum(requests), sum(errors), 1
FROM ${table(db, 'requests_agg_1m')} FINAL GROUP BY day, team, key_id, model, provider, dialect, status_class`);
      // Their key-less twins (migration 008), each from the same period of the per-key rollup.
      await store.command(sql`INSERT INTO ${table(db, 'stages_team_agg_1h')} (hour, team, model, provider, stage, spans, duration_ns_q, version)
SELECT hour, team, model, provider, stage, sum(spans), quantilesTDigestMergeState(0.5, 0.95, 0.99)(duration_ns_q), 1
FROM ${table(db, 'stages_agg_1h')} FINAL GROUP BY hour, team, model, provider, stage`);
      await store.command(sql`INSERT INTO ${table(db, 'requests_team_agg_1d')} (day, team, model, provider, dialect, status_class, requests, errors, version)
SELECT day, team, model, provider, dialect, status_class, sum(requests), sum(errors), 1
FROM ${table(db, 'requests_agg_1d')} FINAL GROUP BY day, team, model, provider, dialect, status_class`);
      for (const q of queries) {
        // The docs are ours, checked in like the migrations: trusted text.
        const rows = await store.query<Record<string, unknown>>(trustedSql(q));
        assert.ok(rows.length >= 1, `no rows from:\n${q}`);
      }
    });

    test('a bad query is a StoreError, not a crash', async () => {
      await assert.rejects(store.query(sql`SELECT no_such_column FROM system.one`), (e: unknown) => e instanceof StoreError && e.clickhouseCode === 47 && e.limit === null);
    });

    const roomy: ReadLimits = { maxExecutionTimeS: 30, maxMemoryBytes: 1024 ** 3, maxResultRows: 1000 };
    const stoppedBy = (limit: 'time' | 'memory' | 'result', code: number) => (e: unknown) => {
      assert.ok(e instanceof StoreError, String(e));
      assert.equal(e.limit, limit, e.message);
      assert.equal(e.clickhouseCode, code, e.message);
      return true;
    };

    test('a limited read: within the limits it answers; past one it is a StoreError naming the limit', async () => {
      const rows = await store.query<{ n: string }>(sql`SELECT toString(number) AS n FROM system.numbers LIMIT 1000`, roomy);
      assert.equal(rows.length, 1000);
      // Result rows: an error, never a silently cut answer (result_overflow_mode = 'throw').
      await assert.rejects(store.query(sql`SELECT number FROM system.numbers LIMIT 1001`, roomy), stoppedBy('result', 396));
      await assert.rejects(
        store.query(sql`SELECT quantilesExact(0.5)(number) AS q FROM numbers(50000000)`, { ...roomy, maxMemoryBytes: 10 * 1024 ** 2 }),
        stoppedBy('memory', 241),
      );
      const t0 = Date.now();
      await assert.rejects(
        store.query(sql`SELECT count() AS n FROM numbers(100000000000) WHERE sleepEachRow(0) = 0`, { ...roomy, maxExecutionTimeS: 1 }),
        stoppedBy('time', 159),
      );
      assert.ok(Date.now() - t0 < 10_000, `stopped after ${Date.now() - t0} ms`);
      // The session's own settings are untouched: an unlimited query may return more rows.
      assert.equal((await store.query(sql`SELECT number FROM system.numbers LIMIT 1001`)).length, 1001);
    });

    test('a limited read is read-only, and a store with read limits writes nothing', async () => {
      await assert.rejects(store.query(sql`CREATE TABLE ${table(store.database, 'nope')} (x UInt8) ENGINE = Memory`, roomy), (e: unknown) => e instanceof StoreError && e.clickhouseCode === 164);
      const reader = withReadLimits(store, { ...roomy, maxResultRows: 5 });
      await assert.rejects(reader.query(sql`SELECT number FROM system.numbers LIMIT 6`), stoppedBy('result', 396));
      await assert.rejects(reader.command(sql`CREATE TABLE ${table(store.database, 'nope')} (x UInt8) ENGINE = Memory`), StoreError);
      await assert.rejects(reader.insert('spans', [{}]), StoreError);
      const tables = await store.query<{ name: string }>(sql`SELECT name FROM system.tables WHERE database = ${store.database} AND name = 'nope'`);
      assert.deepEqual(tables, []);
      assert.throws(() => withReadLimits(store, { ...roomy, maxResultRows: 0 }), TypeError);
      assert.throws(() => withReadLimits(store, { ...roomy, maxMemoryBytes: 1.5 }), TypeError);
    });
  });
}

suite('clickhouse-server', async () => {
  const server = await ClickHouseServer.start();
  const store = new ClickHouseServerStore({ url: server.url, database: 'sl_test' });
  return {
    store,
    done: async () => {
      await store.close();
      await server.dispose();
    },
  };
});

suite('chdb', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sightline-chdb-'));
  const store = await ChdbStore.open({ path: dir, database: 'sl_test' });
  return {
    store,
    done: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

test('readMigrations orders files and rejects duplicate versions', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sightline-mig-'));
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, '002_b.sql'), 'SELECT 2;\n');
  writeFileSync(join(dir, '001_a.sql'), '-- comment\nSELECT 1;\nSELECT 11;\n');
  writeFileSync(join(dir, 'notes.txt'), 'ignored');
  const ms = readMigrations(dir);
  assert.deepEqual(ms.map((m) => [m.version, m.name, m.statements]), [[1, 'a', ['SELECT 1', 'SELECT 11']], [2, 'b', ['SELECT 2']]]);
  writeFileSync(join(dir, '002_c.sql'), 'SELECT 3;\n');
  assert.throws(() => readMigrations(dir), StoreError);
  rmSync(dir, { recursive: true, force: true });
});

/**
 * A TCP relay in front of a real server. `dropNext()`: the next request's first bytes, on a
 * new or a kept-alive connection, reset that connection (a keep-alive connection the server
 * had closed); every other byte is relayed. `requests`: requests relayed (first chunks that
 * start with an HTTP method).
 */
async function dropRelay(target: number): Promise<{ url: string; dropNext(): void; requests: number; close(): void }> {
  let drop = false;
  const state = {
    url: '',
    requests: 0,
    dropNext(): void {
      drop = true;
    },
    close(): void {
      relay.close();
      for (const c of open) c.destroy();
    },
  };
  const open = new Set<Socket>();
  const relay = createServer((client) => {
    const upstream = connect(target, '127.0.0.1');
    open.add(client);
    open.add(upstream);
    const close = (): void => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('data', (chunk: Buffer) => {
      if (drop) {
        drop = false;
        client.resetAndDestroy();
        close();
        return;
      }
      if (/^(POST|GET) /.test(chunk.toString('latin1', 0, 5))) state.requests++;
      upstream.write(chunk);
    });
    upstream.pipe(client);
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
  state.url = `http://127.0.0.1:${(relay.address() as AddressInfo).port}`;
  return state;
}

test('an insert or a read whose connection the server drops is sent once more on a new one, on the same replica: rows there once, the replica not passed over', async () => {
  const server = await ClickHouseServer.start();
  const a = await dropRelay(server.httpPort);
  const b = await dropRelay(server.httpPort);
  const direct = new ClickHouseServerStore({ url: server.url, database: 'default' });
  const relayed = new ClickHouseServerStore({ url: a.url, database: 'default' });
  const replicas = new ClickHouseServerStore({ url: `${a.url},${b.url}`, database: 'default' });
  try {
    await direct.command(sql`CREATE TABLE default.dropped (id UInt32, s String) ENGINE = MergeTree ORDER BY id`);
    a.dropNext();
    await relayed.insert('dropped', [{ id: 1, s: nasty }, { id: 2, s: 'two' }]);
    assert.equal(relayed.insertsResent, 1);
    assert.deepEqual(await direct.query(sql`SELECT id, s FROM default.dropped ORDER BY id`), [{ id: 1, s: nasty }, { id: 2, s: 'two' }]);
    // Reads: the query API's own (query) and users' SQL (select), on a kept-alive connection.
    a.dropNext();
    assert.deepEqual(await relayed.query(sql`SELECT count() AS n FROM default.dropped`), [{ n: '2' }]);
    a.dropNext();
    const answer = await relayed.select(readOnlyStatement('SELECT id FROM default.dropped ORDER BY id'), { maxExecutionTimeS: 10, maxMemoryBytes: 1024 ** 3, maxResultRows: 100 });
    assert.deepEqual(answer.rows, [[1], [2]]);
    assert.equal(relayed.queriesResent, 2);
    assert.equal(relayed.insertsResent, 1);
    // Two replicas: the first is not passed over for a broken connection (it was marked down
    // for failoverMs, and every read went to the second meanwhile).
    await replicas.query(sql`SELECT 1`);
    const before = { a: a.requests, b: b.requests };
    a.dropNext();
    await replicas.query(sql`SELECT 2`);
    await replicas.query(sql`SELECT 3`);
    assert.deepEqual([a.requests - before.a, b.requests - before.b], [2, 0]);
    assert.equal(replicas.queriesResent, 1);
    // A command (DDL) is not sent twice: it may have run before the connection broke.
    a.dropNext();
    await assert.rejects(relayed.command(sql`CREATE TABLE IF NOT EXISTS default.dropped2 (id UInt32) ENGINE = MergeTree ORDER BY id`), StoreError);
    // A refused connection is not sent again: the server is not there at all.
    const closedPort = await freePort();
    const nowhere = new ClickHouseServerStore({ url: `http://127.0.0.1:${closedPort}`, database: 'default' });
    await assert.rejects(nowhere.insert('dropped', [{ id: 3, s: '' }]), (e: unknown) => e instanceof StoreError && !e.rejected);
    await assert.rejects(nowhere.query(sql`SELECT 1`), StoreError);
    assert.deepEqual([nowhere.insertsResent, nowhere.queriesResent], [0, 0]);
    await nowhere.close();
  } finally {
    await direct.close();
    await relayed.close();
    await replicas.close();
    a.close();
    b.close();
    await server.dispose();
  }
});
