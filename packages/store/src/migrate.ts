/**
 * The migration runner: applies `migrations/NNN_name.sql` in order and records each in
 * `{database}.schema_migrations` with a checksum, so a run applies only what is new and a
 * file edited after it was applied is refused rather than silently skipped.
 *
 * Statements are idempotent (`IF NOT EXISTS`), so two runners starting together (two
 * ingesters) both succeed; the record table is read with DISTINCT for the same reason.
 *
 * On a cluster (`store.cluster`, CLICKHOUSE_CLUSTER) each statement is rewritten by
 * cluster.ts (replicated local tables and Distributed tables, `ON CLUSTER`), and the record
 * table is one replicated table shared by every node of every shard (its ZooKeeper path has
 * no `{shard}`): a migration is recorded once for the cluster, and a runner on any node sees it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { StoreError } from './errors.js';
import { ident, sql, table, trustedSql } from './sql.js';
import type { Store } from './store.js';
import { ClusterRewriter } from './cluster.js';

/** The repository's `migrations/` folder. */
export const MIGRATIONS_DIR = fileURLToPath(new URL('../../../migrations/', import.meta.url));

export interface Migration {
  version: number;
  name: string;
  checksum: string;
  statements: string[];
}

const FILE = /^(\d+)_([A-Za-z0-9_]+)\.sql$/;

/** Reads and splits the migration files of a folder, in version order. */
export function readMigrations(dir: string = MIGRATIONS_DIR): Migration[] {
  const out: Migration[] = [];
  for (const f of readdirSync(dir).sort()) {
    const m = FILE.exec(f);
    if (m === null) continue;
    const text = readFileSync(join(dir, f), 'utf8');
    out.push({
      version: Number(m[1]),
      name: m[2]!,
      checksum: createHash('sha256').update(text).digest('hex'),
      statements: splitStatements(text),
    });
  }
  for (let i = 1; i < out.length; i++) {
    if (out[i]!.version === out[i - 1]!.version) {
      throw new StoreError('SL_STORE_MIGRATION', `two migrations have version ${out[i]!.version}`);
    }
  }
  return out;
}

/** Splits on `;` at the end of a line, dropping `--` comment lines. */
export function splitStatements(text: string): string[] {
  const body = text
    .split('\n')
    .filter((l) => !l.trimStart().startsWith('--'))
    .join('\n');
  return body
    .split(/;\s*(?:\n|$)/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

export interface MigrationResult {
  applied: string[];
  skipped: string[];
}

export async function migrate(store: Store, migrations: Migration[] = readMigrations()): Promise<MigrationResult> {
  const db = ident(store.database);
  const record = table(store.database, 'schema_migrations');
  const cluster = store.cluster === undefined || store.cluster === null ? null : new ClusterRewriter(store.cluster);
  if (cluster === null) {
    await store.command(sql`CREATE DATABASE IF NOT EXISTS ${db}`);
    await store.command(
      sql`CREATE TABLE IF NOT EXISTS ${record} (version UInt32, name String, checksum String, applied_at DateTime('UTC')) ENGINE = MergeTree ORDER BY version`,
    );
  } else {
    // ON CLUSTER statements wait for every server: skipped when the record table is there
    // (it was created on every server), as at every start of an ingester after the first.
    const [have] = await store.query<{ engine: string }>(sql`SELECT engine FROM system.tables WHERE database = ${store.database} AND name = 'schema_migrations'`);
    if (have !== undefined && !have.engine.startsWith('Replicated')) {
      // Its tables are local ones: taking them for a cluster's would skip every migration.
      throw new StoreError('SL_STORE_MIGRATION', `database ${store.database} was created for a single server (schema_migrations is ${have.engine}); CLICKHOUSE_CLUSTER needs a database created on the cluster (docs/scaling.md)`);
    }
    if (have === undefined) {
      const c = ident(cluster.cluster);
      const path = `/clickhouse/tables/all/${db.text}/schema_migrations`;
      await store.command(sql`CREATE DATABASE IF NOT EXISTS ${db} ON CLUSTER ${c}`);
      await store.command(
        sql`CREATE TABLE IF NOT EXISTS ${record} ON CLUSTER ${c} (version UInt32, name String, checksum String, applied_at DateTime('UTC')) ENGINE = ReplicatedMergeTree(${path}, '{shard}-{replica}') ORDER BY version`,
      );
    }
  }
  const done = new Map<number, string>();
  const rows = await store.query<{ version: number | string; checksum: string }>(
    sql`SELECT DISTINCT version, checksum FROM ${record}`,
  );
  for (const r of rows) done.set(Number(r.version), r.checksum);

  const result: MigrationResult = { applied: [], skipped: [] };
  for (const m of migrations) {
    const label = `${String(m.version).padStart(3, '0')}_${m.name}`;
    const prior = done.get(m.version);
    // The statements are the migration files' own text (trusted like code), with the
    // database name put in: the one use of trustedSql.
    const statements = m.statements.map((stmt) => trustedSql(stmt.replaceAll('{database}', db.text)));
    if (prior !== undefined) {
      if (prior !== m.checksum) {
        throw new StoreError('SL_STORE_MIGRATION', `migration ${label} was changed after it was applied (checksum differs); add a new migration instead`);
      }
      for (const stmt of statements) cluster?.learn(stmt);
      result.skipped.push(label);
      continue;
    }
    for (const stmt of statements) {
      for (const run of cluster === null ? [stmt] : cluster.rewrite(stmt)) {
        try {
          await store.command(run);
        } catch (e) {
          // ClickHouse 18.16 has no ADD COLUMN IF NOT EXISTS: a column another runner (a
          // second ingester starting at the same time) already added counts as done.
          if (/^ALTER TABLE/i.test(run.text) && /already exists|DUPLICATE_COLUMN|Code: 44\b/i.test((e as Error).message)) continue;
          throw e;
        }
      }
    }
    await store.command(
      sql`INSERT INTO ${record} (version, name, checksum, applied_at) VALUES (${m.version}, ${m.name}, ${m.checksum}, ${new Date()})`,
    );
    result.applied.push(label);
  }
  return result;
}
