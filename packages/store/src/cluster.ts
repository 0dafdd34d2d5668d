/**
 * The schema on a ClickHouse cluster (CLICKHOUSE_CLUSTER, issue 14): the migration files are
 * written for one server, and this file rewrites each of their statements for a cluster, in
 * one place, instead of a second copy of every migration.
 *
 * For a table `t` of a migration, the cluster gets
 * - `t_local` on every node (`ON CLUSTER`): the same columns and keys with the engine made
 *   replicated — `ReplacingMergeTree(v)` becomes
 *   `ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/<db>/t_local', '{replica}', v)`,
 *   the `{shard}`/`{replica}` macros coming from each server's configuration;
 * - `t` on every node: a `Distributed` table over `t_local` with the sharding key of
 *   `shardingKey`. Every reader and writer keeps using `t`, the name of the single-server
 *   schema, so the query API and the ingester are the same code in both layouts.
 * ALTERs go to `t_local` (replicated tables pass them to their replicas), and `t` is then
 * recreated from `t_local` to take the new columns: 18.16 refuses `ALTER … ON CLUSTER` of a
 * Distributed table over replicated shards. Materialized views attach to the local tables
 * (`FROM spans_local` `TO stage_spans_local`): an INSERT fires a view on the replica that
 * received the block, once, and its output then replicates like any insert (replication
 * itself never fires views).
 *
 * Statements of any other shape are refused, so a migration the rewrite does not know is
 * found by the cluster tests rather than applied to one node.
 */
import { StoreError } from './errors.js';
import { ident, sql, trustedSql, type Sql } from './sql.js';

/** Suffix of the replicated table under each Distributed table. */
export const LOCAL_SUFFIX = '_local';

/** The table that holds the rows on each node: `name_local` in a cluster, `name` otherwise. */
export function localTable(cluster: string | null | undefined, name: string): string {
  return cluster === null || cluster === undefined || cluster === '' ? name : `${name}${LOCAL_SUFFIX}`;
}

/** ` ON CLUSTER c` in a cluster (e.g. for DROP PARTITION of a local table), nothing otherwise. */
export function onCluster(cluster: string | null | undefined): Sql {
  return cluster === null || cluster === undefined || cluster === '' ? sql`` : sql` ON CLUSTER ${ident(cluster)}`;
}

const ENGINES = /ENGINE\s*=\s*(MergeTree|ReplacingMergeTree|SummingMergeTree|AggregatingMergeTree|CollapsingMergeTree|VersionedCollapsingMergeTree)(?:\(([^)]*)\))?/;
const CREATE_TABLE = /^CREATE TABLE IF NOT EXISTS ([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)(\s*\([\s\S]*)$/;
const ALTER_TABLE = /^ALTER TABLE ([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)(\s[\s\S]*)$/;
const CREATE_VIEW = /^CREATE MATERIALIZED VIEW IF NOT EXISTS ([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*) TO ([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*) AS([\s\S]*)$/;
const INSERT = /^INSERT INTO /;

/**
 * The sharding key of a table: `cityHash64(trace_id)` for every table with a `trace_id`
 * column, so that a request's row, its spans, its stage spans and its content live on one
 * shard, and a batch redelivered to another ingester lands on the shard that already holds
 * it — where ReplacingMergeTree (read with FINAL) collapses it. Other tables (rollups, the
 * ledger) hash their whole sorting key, so the rows that replace one another (same key,
 * newer version) always meet on one shard.
 */
export function shardingKey(columns: string, orderBy: string): string {
  if (/^\s*trace_id\s/m.test(columns)) return 'cityHash64(trace_id)';
  const inner = orderBy.trim().replace(/^\((.*)\)$/s, '$1');
  return `cityHash64(${inner})`;
}

/**
 * Rewrites migration statements for a cluster. Feed it every statement of every migration in
 * order (`learn` for those applied before, `rewrite` for those to apply): it remembers each
 * table's sharding key, which an ALTER needs to recreate the Distributed table.
 */
export class ClusterRewriter {
  readonly #keys = new Map<string, string>();
  readonly cluster: string;

  constructor(cluster: string) {
    this.cluster = ident(cluster).text;
  }

  /** Records what a statement already applied created (its table's sharding key). */
  learn(stmt: Sql): void {
    this.rewrite(stmt);
  }

  /** The statements to run on the cluster for one statement of a migration file. */
  rewrite(stmt: Sql): Sql[] {
    const text = stmt.text.trim();
    const c = this.cluster;
    let m = CREATE_TABLE.exec(text);
    if (m !== null) {
      const [, db, name, rest] = m as unknown as [string, string, string, string];
      const engine = ENGINES.exec(rest);
      if (engine === null) throw new StoreError('SL_STORE_MIGRATION', `cluster: no MergeTree engine in CREATE TABLE ${db}.${name}`);
      const columns = rest.slice(0, engine.index);
      const orderBy = /ORDER BY\s+(\([^)]*\)|[A-Za-z_][A-Za-z0-9_]*)/.exec(rest.slice(engine.index))?.[1];
      if (orderBy === undefined) throw new StoreError('SL_STORE_MIGRATION', `cluster: no ORDER BY in CREATE TABLE ${db}.${name}`);
      const local = `${name}${LOCAL_SUFFIX}`;
      const args = [`'/clickhouse/tables/{shard}/${db}/${local}'`, `'{replica}'`, ...(engine[2] !== undefined && engine[2].trim() !== '' ? [engine[2].trim()] : [])];
      const replicated = `${rest.slice(0, engine.index)}ENGINE = Replicated${engine[1]}(${args.join(', ')})${rest.slice(engine.index + engine[0].length)}`;
      const key = shardingKey(columns, orderBy);
      this.#keys.set(`${db}.${name}`, key);
      return [trustedSql(`CREATE TABLE IF NOT EXISTS ${db}.${local} ON CLUSTER ${c}${replicated}`), this.#distributed(db, name, key)];
    }
    m = ALTER_TABLE.exec(text);
    if (m !== null) {
      const [, db, name, rest] = m as unknown as [string, string, string, string];
      const key = this.#keys.get(`${db}.${name}`);
      if (key === undefined) throw new StoreError('SL_STORE_MIGRATION', `cluster: ALTER of ${db}.${name}, which no earlier migration created`);
      return [
        trustedSql(`ALTER TABLE ${db}.${name}${LOCAL_SUFFIX} ON CLUSTER ${c}${rest}`),
        trustedSql(`DROP TABLE IF EXISTS ${db}.${name} ON CLUSTER ${c}`),
        this.#distributed(db, name, key),
      ];
    }
    m = CREATE_VIEW.exec(text);
    if (m !== null) {
      const [, db, view, toDb, to, select] = m as unknown as [string, string, string, string, string, string];
      // The view reads the local table a block is inserted into, and writes the local table.
      const local = select.replace(new RegExp(`\\bFROM ${db}\\.([A-Za-z_][A-Za-z0-9_]*)\\b`, 'g'), (_s, t: string) => {
        if (!this.#keys.has(`${db}.${t}`)) throw new StoreError('SL_STORE_MIGRATION', `cluster: view ${view} reads ${db}.${t}, which no earlier migration created`);
        return `FROM ${db}.${t}${LOCAL_SUFFIX}`;
      });
      return [trustedSql(`CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.${view} ON CLUSTER ${c} TO ${toDb}.${to}${LOCAL_SUFFIX} AS${local}`)];
    }
    // Rows a migration inserts go through the Distributed table, to their shard (once: the
    // migration is recorded once for the cluster).
    if (INSERT.test(text)) return [stmt];
    throw new StoreError('SL_STORE_MIGRATION', `cluster: no rewrite for statement: ${text.slice(0, 80)}`);
  }

  #distributed(db: string, name: string, key: string): Sql {
    return trustedSql(`CREATE TABLE IF NOT EXISTS ${db}.${name} ON CLUSTER ${this.cluster} AS ${db}.${name}${LOCAL_SUFFIX} ENGINE = Distributed(${this.cluster}, ${db}, ${name}${LOCAL_SUFFIX}, ${key})`);
  }
}
