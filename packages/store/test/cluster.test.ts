/**
 * The cluster rewrite of the migrations (cluster.ts), checked on the repository's own
 * migration files; applying them on real replicas is test/cluster/clickhouse-cluster.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClusterRewriter, localTable, onCluster, readMigrations, shardingKey, sql } from '@sightline/store';

/**
 * A statement as Sql from its text. trustedSql is not exported, so the test builds one the
 * way a template with no values does: the same text.
 */
function sqlOf(t: string) {
  const strings = Object.assign([t], { raw: [t] }) as unknown as TemplateStringsArray;
  return sql(strings);
}
const texts = (rw: ClusterRewriter, stmt: string) => rw.rewrite(sqlOf(stmt)).map((s) => s.text);

test('every statement of every migration has a cluster rewrite', () => {
  const rw = new ClusterRewriter('sightline');
  let creates = 0;
  for (const m of readMigrations()) {
    for (const stmt of m.statements) {
      const out = rw.rewrite(sqlOf(stmt.replaceAll('{database}', 'db'))).map((s) => s.text);
      assert.ok(out.length >= 1);
      for (const o of out) if (!/^INSERT/.test(o)) assert.match(o, / ON CLUSTER sightline/, o.slice(0, 80));
      if (/^CREATE TABLE/.test(stmt)) creates++;
    }
  }
  assert.ok(creates >= 10);
});

test('a table becomes a replicated local table and a Distributed table under its own name', () => {
  const rw = new ClusterRewriter('c1');
  const out = texts(rw, `CREATE TABLE IF NOT EXISTS db.requests_agg_1m\n(\n    minute DateTime('UTC'),\n    team String,\n    version UInt64\n)\nENGINE = ReplacingMergeTree(version)\nPARTITION BY toYYYYMM(minute)\nORDER BY (minute, team)`);
  assert.equal(out.length, 2);
  assert.match(out[0]!, /^CREATE TABLE IF NOT EXISTS db\.requests_agg_1m_local ON CLUSTER c1\s*\(/);
  assert.match(out[0]!, /ENGINE = ReplicatedReplacingMergeTree\('\/clickhouse\/tables\/\{shard\}\/db\/requests_agg_1m_local', '\{replica\}', version\)\nPARTITION BY toYYYYMM\(minute\)\nORDER BY \(minute, team\)$/);
  assert.equal(out[1], 'CREATE TABLE IF NOT EXISTS db.requests_agg_1m ON CLUSTER c1 AS db.requests_agg_1m_local ENGINE = Distributed(c1, db, requests_agg_1m_local, cityHash64(minute, team))');
});

test('tables with a trace_id shard by it; others by their sorting key', () => {
  assert.equal(shardingKey('(\n    trace_id String,\n    span_id String\n)', '(trace_id, span_id)'), 'cityHash64(trace_id)');
  assert.equal(shardingKey('(\n    team String,\n    trace_id String\n)', '(team, start_time, trace_id)'), 'cityHash64(trace_id)');
  assert.equal(shardingKey('(\n    name String\n)', 'name'), 'cityHash64(name)');
});

test('an ALTER goes to the local table and the Distributed table is made again with the same key', () => {
  const rw = new ClusterRewriter('c1');
  rw.learn(sqlOf('CREATE TABLE IF NOT EXISTS db.requests\n(\n    trace_id String\n)\nENGINE = ReplacingMergeTree\nORDER BY trace_id'));
  assert.deepEqual(texts(rw, "ALTER TABLE db.requests ADD COLUMN cache_hit UInt8 DEFAULT 0"), [
    "ALTER TABLE db.requests_local ON CLUSTER c1 ADD COLUMN cache_hit UInt8 DEFAULT 0",
    'DROP TABLE IF EXISTS db.requests ON CLUSTER c1',
    'CREATE TABLE IF NOT EXISTS db.requests ON CLUSTER c1 AS db.requests_local ENGINE = Distributed(c1, db, requests_local, cityHash64(trace_id))',
  ]);
  assert.throws(() => rw.rewrite(sqlOf('ALTER TABLE db.unknown ADD COLUMN x UInt8')), /no earlier migration created/);
});

test('a materialized view reads and writes the local tables', () => {
  const rw = new ClusterRewriter('c1');
  rw.learn(sqlOf('CREATE TABLE IF NOT EXISTS db.spans\n(\n    trace_id String\n)\nENGINE = ReplacingMergeTree\nORDER BY trace_id'));
  const [v] = texts(rw, 'CREATE MATERIALIZED VIEW IF NOT EXISTS db.stage_spans_mv TO db.stage_spans AS\nSELECT trace_id FROM db.spans WHERE 1');
  assert.equal(v, 'CREATE MATERIALIZED VIEW IF NOT EXISTS db.stage_spans_mv ON CLUSTER c1 TO db.stage_spans_local AS\nSELECT trace_id FROM db.spans_local WHERE 1');
});

test('statements of other shapes are refused; helpers for the local names', () => {
  const rw = new ClusterRewriter('c1');
  assert.throws(() => rw.rewrite(sqlOf('DROP TABLE db.requests')), /no rewrite/);
  assert.throws(() => new ClusterRewriter('bad name'), /identifier/);
  assert.equal(localTable(null, 'requests'), 'requests');
  assert.equal(localTable('c1', 'requests'), 'requests_local');
  assert.equal(onCluster(null).text, '');
  assert.equal(onCluster('c1').text, ' ON CLUSTER c1');
});
