/**
 * One interface over the two ClickHouse engines Sightline runs on: a ClickHouse server
 * over HTTP (@clickhouse/client) and the in-process engine of npm `chdb`. Everything
 * above this file writes SQL that both accept (ClickHouse 18.16 to 26.x).
 */
import { createClient, ClickHouseLogLevel, type ClickHouseClient } from '@clickhouse/client';
import { StoreError } from './errors.js';
import type { Sql } from './sql.js';

export interface Store {
  readonly kind: 'clickhouse' | 'chdb';
  /** Database holding Sightline's tables. */
  readonly database: string;
  /** Runs a statement that returns no rows (DDL). Only `Sql` built by sql.ts is accepted. */
  command(sql: Sql): Promise<void>;
  /** Runs a SELECT and returns its rows (JSONEachRow; 64-bit integers may be strings). */
  query<T>(sql: Sql): Promise<T[]>;
  /** Inserts rows as JSONEachRow into `database.table`; resolves once the engine confirmed. */
  insert(table: string, rows: readonly object[]): Promise<void>;
  close(): Promise<void>;
}

export interface ClickHouseServerOptions {
  /** e.g. `http://127.0.0.1:8123`. Credentials may be in the URL or below. */
  url: string;
  username?: string;
  password?: string;
  /** Default `sightline`. */
  database?: string;
  /** Milliseconds before a request to ClickHouse is abandoned. Default 30 000. */
  requestTimeoutMs?: number;
}

export class ClickHouseServerStore implements Store {
  readonly kind = 'clickhouse' as const;
  readonly database: string;
  readonly #client: ClickHouseClient;

  constructor(opts: ClickHouseServerOptions) {
    const url = new URL(opts.url);
    const username = opts.username ?? (url.username !== '' ? decodeURIComponent(url.username) : 'default');
    const password = opts.password ?? decodeURIComponent(url.password);
    url.username = '';
    url.password = '';
    this.database = opts.database ?? 'sightline';
    this.#client = createClient({
      url: url.toString().replace(/\/$/, ''),
      username,
      password,
      request_timeout: opts.requestTimeoutMs ?? 30_000,
      // Keep 64-bit integers as strings in JSON on every version (18.16 does by default,
      // newer servers do not), so nanosecond values never pass through a double.
      clickhouse_settings: { output_format_json_quote_64bit_integers: 1 },
      // Failures reach the caller as StoreErrors; the client's own logger would repeat them.
      log: { level: ClickHouseLogLevel.OFF },
    });
  }

  async command(sql: Sql): Promise<void> {
    try {
      await this.#client.command({ query: sql.text });
    } catch (e) {
      throw new StoreError('SL_STORE_QUERY', `ClickHouse command failed: ${(e as Error).message}`, { cause: e });
    }
  }

  async query<T>(sql: Sql): Promise<T[]> {
    try {
      const rs = await this.#client.query({ query: sql.text, format: 'JSONEachRow' });
      return await rs.json<T>();
    } catch (e) {
      throw new StoreError('SL_STORE_QUERY', `ClickHouse query failed: ${(e as Error).message}`, { cause: e });
    }
  }

  async insert(table: string, rows: readonly object[]): Promise<void> {
    if (rows.length === 0) return;
    try {
      await this.#client.insert({ table: `${this.database}.${table}`, values: rows as object[], format: 'JSONEachRow' });
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      const prefix = typeof code === 'string' && /^\d+$/.test(code) ? `Code: ${code}. ` : '';
      throw new StoreError('SL_STORE_INSERT', `ClickHouse insert into ${table} failed: ${prefix}${(e as Error).message}`, { cause: e });
    }
  }

  async close(): Promise<void> {
    await this.#client.close();
  }
}

/** The subset of chdb's Session this store uses (chdb ships its own types). */
interface ChdbSession {
  queryAsync(query: string, opts?: { format?: string }): Promise<{ text(): string }>;
  insert(params: { table: string; values: Buffer; format: 'JSONEachRow' }): Promise<unknown>;
  close?(): void;
  cleanup?(): void;
}

export interface ChdbOptions {
  /** Directory for the engine's data, e.g. `./data/clickhouse`. */
  path: string;
  /** Default `sightline`. */
  database?: string;
}

/**
 * The in-process engine. chdb is loaded in the main thread and used only through
 * `queryAsync`/`insert`, which run off the event loop: a worker thread that loaded chdb
 * crashes the process when it exits (../shared/BRIEF.md, environment facts).
 */
export class ChdbStore implements Store {
  readonly kind = 'chdb' as const;
  readonly database: string;
  readonly #session: ChdbSession;

  private constructor(session: ChdbSession, database: string) {
    this.#session = session;
    this.database = database;
  }

  static async open(opts: ChdbOptions): Promise<ChdbStore> {
    const mod = (await import('chdb')) as unknown as { Session: new (path: string) => ChdbSession };
    return new ChdbStore(new mod.Session(opts.path), opts.database ?? 'sightline');
  }

  async command(sql: Sql): Promise<void> {
    try {
      await this.#session.queryAsync(sql.text);
    } catch (e) {
      throw new StoreError('SL_STORE_QUERY', `chdb command failed: ${(e as Error).message}`, { cause: e });
    }
  }

  async query<T>(sql: Sql): Promise<T[]> {
    let text: string;
    try {
      // Same 64-bit integer quoting as the server store; a SETTINGS clause on the query
      // itself keeps the session's defaults untouched.
      const res = await this.#session.queryAsync(`${sql.text}\nSETTINGS output_format_json_quote_64bit_integers = 1`, { format: 'JSONEachRow' });
      text = res.text();
    } catch (e) {
      throw new StoreError('SL_STORE_QUERY', `chdb query failed: ${(e as Error).message}`, { cause: e });
    }
    const rows: T[] = [];
    for (const line of text.split('\n')) if (line !== '') rows.push(JSON.parse(line) as T);
    return rows;
  }

  async insert(table: string, rows: readonly object[]): Promise<void> {
    if (rows.length === 0) return;
    let body = '';
    for (const r of rows) body += JSON.stringify(r) + '\n';
    try {
      await this.#session.insert({ table: `${this.database}.${table}`, values: Buffer.from(body), format: 'JSONEachRow' });
    } catch (e) {
      throw new StoreError('SL_STORE_INSERT', `chdb insert into ${table} failed: ${(e as Error).message}`, { cause: e });
    }
  }

  async close(): Promise<void> {
    this.#session.close?.();
  }
}
