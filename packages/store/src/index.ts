// trustedSql is left out on purpose: only migrate.ts may take text as SQL (sql.ts).
export { sql, literal, ident, table, join } from './sql.js';
export type { Sql, SqlValue } from './sql.js';
export { ClickHouseServerStore, ChdbStore, withReadLimits } from './store.js';
export type { Store, ReadLimits, SqlAnswer, ClickHouseServerOptions, ChdbOptions } from './store.js';
export { readOnlyStatement, MAX_STATEMENT_LENGTH } from './statement.js';
export type { ReadOnlyStatement } from './statement.js';
export { migrate, readMigrations, splitStatements, MIGRATIONS_DIR } from './migrate.js';
export type { Migration, MigrationResult } from './migrate.js';
export { StoreError, StatementRefusedError } from './errors.js';
export { storeFromEnv } from './env.js';
export { ClusterRewriter, localTable, onCluster, shardingKey, LOCAL_SUFFIX } from './cluster.js';
