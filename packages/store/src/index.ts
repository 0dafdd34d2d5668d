export { sql, literal, ident, table, SqlFragment } from './sql.js';
export type { SqlValue } from './sql.js';
export { ClickHouseServerStore, ChdbStore } from './store.js';
export type { Store, ClickHouseServerOptions, ChdbOptions } from './store.js';
export { migrate, readMigrations, splitStatements, MIGRATIONS_DIR } from './migrate.js';
export type { Migration, MigrationResult } from './migrate.js';
export { StoreError } from './errors.js';
export { storeFromEnv } from './env.js';
