/**
 * One interface over the two ClickHouse engines Sightline runs on: a ClickHouse server
 * over HTTP (@clickhouse/client) and the in-process engine of npm `chdb`. Everything
 * above this file writes SQL that both accept (ClickHouse 18.16 to 26.x).
 */
import { createClient, ClickHouseLogLevel, type ClickHouseClient, type ClickHouseSettings } from '@clickhouse/client';
import { StoreError } from './errors.js';
import { Readable } from 'node:stream';
import { ident, table as qualified, type Sql } from './sql.js';
import { jsonEachRow } from './rows.js';
import type { ReadOnlyStatement } from './statement.js';

/**
 * Limits for one read, as ClickHouse settings
 * (https://clickhouse.com/docs/operations/settings/query-complexity), for queries run on a
 * caller's behalf (the query API), so that one request cannot take the server's time, its
 * memory or an answer of any size. A query past a limit fails with a StoreError whose
 * `limit` says which. A limited query also runs read-only: `readonly = 2` refuses writes
 * and DDL (code 164, READONLY) and still lets the other settings be set with it; statements
 * someone wrote (`Store.select`) run with `readonly = 1`, which forbids changing settings
 * and table functions too. Accepted by ClickHouse 18.16 and 26.x.
 */
export interface ReadLimits {
  /** `max_execution_time`: seconds before the query is stopped (`timeout_overflow_mode = 'throw'`). */
  maxExecutionTimeS: number;
  /** `max_memory_usage`: bytes of memory the query may use. */
  maxMemoryBytes: number;
  /** `max_result_rows`: rows in the answer (`result_overflow_mode = 'throw'`, never a silent cut). */
  maxResultRows: number;
  /**
   * `max_bytes_to_read`: uncompressed bytes the query may read from tables
   * (`read_overflow_mode = 'throw'`: code 307, TOO_MANY_BYTES); unset: no bound. For scans
   * whose cost is the bytes they read, such as a phrase searched in prompts. ClickHouse
   * 18.16 applies it to the main query's reads, not to those of an `IN (SELECT …)`.
   */
  maxBytesToRead?: number;
  /**
   * `max_result_bytes`: bytes (uncompressed, in ClickHouse's blocks) of the answer
   * (`result_overflow_mode = 'throw'`); unset: no bound. For statements someone wrote, whose
   * rows may be wide (`Store.select`).
   */
  maxResultBytes?: number;
}

/**
 * The settings of `limits`, checked to be positive integers (they are written into SQL for
 * chdb). `readonly` 2 lets the query API's own queries set settings beside it; 1, for
 * statements someone wrote (`select`), forbids any change of settings as well.
 */
function limitSettings(limits: ReadLimits, readonly: 1 | 2 = 2): { name: string; value: number | string }[] {
  for (const [k, v] of Object.entries(limits)) {
    if (v === undefined) continue;
    if (!Number.isSafeInteger(v) || v < 1) throw new TypeError(`read limit ${k} must be a positive integer, got ${String(v)}`);
  }
  const settings: { name: string; value: number | string }[] = [
    { name: 'max_execution_time', value: limits.maxExecutionTimeS },
    { name: 'timeout_overflow_mode', value: 'throw' },
    { name: 'max_memory_usage', value: limits.maxMemoryBytes },
    { name: 'max_result_rows', value: limits.maxResultRows },
    { name: 'result_overflow_mode', value: 'throw' },
  ];
  if (limits.maxBytesToRead !== undefined) settings.push({ name: 'max_bytes_to_read', value: limits.maxBytesToRead }, { name: 'read_overflow_mode', value: 'throw' });
  if (limits.maxResultBytes !== undefined) settings.push({ name: 'max_result_bytes', value: limits.maxResultBytes });
  // Last: in a query's SETTINGS clause (chdb) each setting is checked against those before it.
  settings.push({ name: 'readonly', value: readonly });
  return settings;
}

/** The answer to a statement someone wrote: its columns in order, and its rows as arrays. */
export interface SqlAnswer {
  columns: { name: string; type: string }[];
  /** One array per row, in column order; 64-bit integers as strings, as in every answer. */
  rows: unknown[][];
}

/** ClickHouse's JSONCompact output (the same on 18.16 and 26.x for what we read). */
interface JsonCompact {
  meta: { name: string; type: string }[];
  data: unknown[][];
}

function compactAnswer(text: string): SqlAnswer {
  const body = JSON.parse(text) as JsonCompact;
  return { columns: body.meta.map((m) => ({ name: m.name, type: m.type })), rows: body.data };
}

/**
 * Bytes of JSON read from the engine for one `select`, at most: `maxResultBytes` (64 MiB when
 * unset). ClickHouse's own `max_result_bytes` counts its blocks, in which a constant column
 * (`range(1000)` on every row) weighs almost nothing on 18.16; this bounds what we hold.
 */
function answerCap(limits: ReadLimits): number {
  return limits.maxResultBytes ?? 64 * 1024 ** 2;
}

/** An answer past its bound, as the limit error ClickHouse gives for max_result_bytes (code 396), so `limit` says `result`. */
function answerTooLarge(cap: number): StoreError {
  return new StoreError('SL_STORE_QUERY', `Code: 396. the answer is larger than ${cap} bytes of JSON`);
}

export interface Store {
  readonly kind: 'clickhouse' | 'chdb';
  /** Database holding Sightline's tables. */
  readonly database: string;
  /**
   * CLICKHOUSE_CLUSTER: the cluster (remote_servers) the tables live on, or null/absent for a
   * single server. In a cluster each table is a `Distributed` table over a replicated
   * `<name>_local` table (cluster.ts), so reads and writes keep the names of the single-server
   * schema.
   */
  readonly cluster?: string | null;
  /** Runs a statement that returns no rows (DDL). Only `Sql` built by sql.ts is accepted. */
  command(sql: Sql): Promise<void>;
  /**
   * Runs a SELECT and returns its rows (JSONEachRow; 64-bit integers may be strings).
   * With `limits`, read-only and within them.
   */
  query<T>(sql: Sql, limits?: ReadLimits): Promise<T[]>;
  /**
   * Runs a statement someone wrote, checked by `readOnlyStatement` (statement.ts), with
   * `readonly = 1` and `limits`.
   */
  select(statement: ReadOnlyStatement, limits: ReadLimits): Promise<SqlAnswer>;
  /** Inserts rows as JSONEachRow into `database.table`; resolves once the engine confirmed. */
  insert(table: string, rows: readonly object[]): Promise<void>;
  /**
   * Inserts sent a second time, at once, because the connection broke under the first (a
   * server over HTTP only; absent elsewhere).
   */
  readonly insertsResent?: number;
  /** Reads (query, select) sent a second time, at once, for the same reason (a server over HTTP only). */
  readonly queriesResent?: number;
  close(): Promise<void>;
}

export interface ClickHouseServerOptions {
  /**
   * e.g. `http://127.0.0.1:8123`. Credentials may be in the URL or below. In a cluster, a
   * comma-separated list of replicas: each request goes to the first one not seen failing in
   * the last `failoverMs`, so every app talks to the same replica while it is healthy.
   */
  url: string;
  username?: string;
  password?: string;
  /** Default `sightline`. */
  database?: string;
  /** Milliseconds before a request to ClickHouse is abandoned. Default 30 000. */
  requestTimeoutMs?: number;
  /** CLICKHOUSE_CLUSTER (Store.cluster); unset: a single server. */
  cluster?: string | null;
  /** Milliseconds a replica that refused a connection is passed over (a list of URLs). Default 5 000. */
  failoverMs?: number;
  /**
   * On a cluster, milliseconds before a command (DDL) is abandoned: `ON CLUSTER` statements
   * wait for every server to run them, up to the server's `distributed_ddl_task_timeout`
   * (180 s by default). Default 200 000.
   */
  ddlTimeoutMs?: number;
}

/**
 * How long an idle connection to ClickHouse is kept for reuse: well under the server's
 * `keep_alive_timeout` (3 s by default on older servers, 10 s on newer), so that a connection the
 * server may already have closed is not written to.
 */
const IDLE_SOCKET_TTL_MS = 1_500;

/**
 * Settings of every request to a cluster (https://clickhouse.com/docs/en/engines/table-engines/special/distributed):
 * - `insert_distributed_sync = 1`: an INSERT into a Distributed table returns once the shard's
 *   replica has the block (not once it is queued on the entry node's disk), so the ingester's
 *   ack still means "in ClickHouse", and a retried block reaches the same replicated table,
 *   whose block deduplication (`insert_deduplicate`, default on) drops it.
 * - `prefer_localhost_replica = 0` and `load_balancing = 'in_order'`: reads and writes of every
 *   app go to the first healthy replica of each shard in remote_servers order, whichever node
 *   they entered by, so a rollup recomputed right after a write reads that write (replication
 *   to the other replicas is asynchronous).
 * - `max_replica_delay_for_distributed_queries = 2`: a read skips a replica more than 2 s
 *   behind (one back from an outage, still fetching) for an up-to-date one.
 */
const CLUSTER_SETTINGS: ClickHouseSettings = { insert_distributed_sync: 1, prefer_localhost_replica: 0, load_balancing: 'in_order', max_replica_delay_for_distributed_queries: '2' };

/** A failure to reach the server at all (nothing was executed), as opposed to an error it answered. */
function unreachable(e: unknown): boolean {
  const err = e as { code?: unknown; message?: unknown };
  if (typeof err.code === 'string' && /^(ECONNREFUSED|ECONNRESET|EHOSTUNREACH|ENOTFOUND|EPIPE|ETIMEDOUT|UND_ERR_SOCKET|UND_ERR_CONNECT_TIMEOUT)$/.test(err.code)) return true;
  return typeof err.message === 'string' && /ECONNREFUSED|socket hang up|ECONNRESET/.test(err.message);
}

/**
 * The connection broke under the request: the server closed it (a reused keep-alive socket it
 * had dropped, a restart) before it answered. Not a refused connection: the server may be up.
 */
function connectionLost(e: unknown): boolean {
  const err = e as { code?: unknown; message?: unknown };
  if (typeof err.code === 'string' && /^(ECONNRESET|EPIPE|UND_ERR_SOCKET)$/.test(err.code)) return true;
  return typeof err.message === 'string' && /socket hang up|ECONNRESET|EPIPE/.test(err.message);
}

/** `limits` as the settings of one HTTP request. */
function serverSettings(limits: ReadLimits, readonly: 1 | 2): ClickHouseSettings {
  const settings = Object.fromEntries(limitSettings(limits, readonly).map((s) => [s.name, typeof s.value === 'number' ? String(s.value) : s.value])) as ClickHouseSettings;
  // The server answers only once the query is done, so a limit hit after the first rows
  // were produced is an HTTP error with its code, not an exception inside a 200 body.
  // The answer it buffers is bounded by max_result_rows.
  settings.wait_end_of_query = 1;
  return settings;
}

export class ClickHouseServerStore implements Store {
  readonly kind = 'clickhouse' as const;
  insertsResent = 0;
  /** Reads (query, select) sent once more because their connection broke under them (#run). */
  queriesResent = 0;
  readonly database: string;
  readonly cluster: string | null;
  /** One client per replica URL, in the order given. */
  readonly #clients: ClickHouseClient[];
  /** The same for commands (DDL), with the longer timeout of a cluster; `#clients` on one server. */
  readonly #ddlClients: ClickHouseClient[];
  /** Per client: until when it is passed over after refusing a connection. */
  readonly #downUntil: number[];
  readonly #failoverMs: number;

  constructor(opts: ClickHouseServerOptions) {
    this.database = opts.database ?? 'sightline';
    this.cluster = opts.cluster === undefined || opts.cluster === null || opts.cluster === '' ? null : ident(opts.cluster).text;
    this.#failoverMs = opts.failoverMs ?? 5_000;
    const urls = opts.url
      .split(',')
      .map((u) => u.trim())
      .filter((u) => u !== '');
    const make = (requestTimeoutMs: number) =>
      urls.map((raw) => {
        const url = new URL(raw);
        const username = opts.username ?? (url.username !== '' ? decodeURIComponent(url.username) : 'default');
        const password = opts.password ?? decodeURIComponent(url.password);
        url.username = '';
        url.password = '';
        return createClient({
          url: url.toString().replace(/\/$/, ''),
          username,
          password,
          request_timeout: requestTimeoutMs,
          // Keep 64-bit integers as strings in JSON on every version (18.16 does by default,
          // newer servers do not), so nanosecond values never pass through a double.
          clickhouse_settings: { output_format_json_quote_64bit_integers: 1, ...(this.cluster === null ? {} : CLUSTER_SETTINGS) },
          // Failures reach the caller as StoreErrors; the client's own logger would repeat them.
          log: { level: ClickHouseLogLevel.OFF },
          // An idle connection is not reused once the server may have closed it: ClickHouse closes
          // keep-alive connections after `keep_alive_timeout` (3 s on 18.16, Debian's), and a write on
          // one it closed fails with EPIPE or "socket hang up" (17 ingester inserts in the full bench
          // run of 2 December 10:59, retried and redelivered; 3 in the next run, with this check).
          // The client's default TTL (2.5 s) leaves half a second, which a busy event loop overruns;
          // the stale check at each request, by timestamp, does not wait for the loop to run the
          // TTL's timer (clickhouse-js's advice for CPU-starved processes).
          keep_alive: { enabled: true, idle_socket_ttl: IDLE_SOCKET_TTL_MS, eagerly_destroy_stale_sockets: true },
        });
      });
    this.#clients = make(opts.requestTimeoutMs ?? 30_000);
    this.#ddlClients = this.cluster === null ? this.#clients : make(opts.ddlTimeoutMs ?? 200_000);
    if (this.#clients.length === 0) throw new StoreError('SL_STORE_QUERY', 'CLICKHOUSE_URL: no server URL given');
    this.#downUntil = this.#clients.map(() => 0);
  }

  /**
   * Runs `op` on the first replica not recently unreachable, moving to the next one when a
   * replica cannot be reached (nothing ran there, so trying another is safe; an insert that
   * reached a replica and failed after is retried by its caller, and deduplicated).
   *
   * `resend`: `op` may run again. When the connection breaks under it (connectionLost: a
   * keep-alive connection the server had closed), it is sent once more at once on a new
   * connection to the same replica, and `resend` is called; only if that fails too is the
   * replica passed over. Without it, a stale connection failed the read it carried (one
   * server) or marked a healthy replica down for `failoverMs` (several). Not for commands:
   * DDL that ran before the connection broke may not run twice.
   */
  async #run<T>(op: (c: ClickHouseClient) => Promise<T>, clients: ClickHouseClient[] = this.#clients, resend?: () => void): Promise<T> {
    const n = clients.length;
    const now = Date.now();
    let first = this.#downUntil.findIndex((t) => t <= now);
    if (first === -1) first = 0;
    let last: unknown;
    for (let k = 0; k < n; k++) {
      const i = (first + k) % n;
      try {
        try {
          return await op(clients[i]!);
        } catch (e) {
          if (resend === undefined || !connectionLost(e)) throw e;
          resend();
          return await op(clients[i]!);
        }
      } catch (e) {
        if (n === 1 || !unreachable(e)) throw e;
        this.#downUntil[i] = Date.now() + this.#failoverMs;
        last = e;
      }
    }
    throw last;
  }

  readonly #queryResent = (): void => {
    this.queriesResent++;
  };

  async command(sql: Sql): Promise<void> {
    try {
      await this.#run((c) => c.command({ query: sql.text }), this.#ddlClients);
    } catch (e) {
      throw new StoreError('SL_STORE_QUERY', `ClickHouse command failed: ${(e as Error).message}`, { cause: e });
    }
  }

  async query<T>(sql: Sql, limits?: ReadLimits): Promise<T[]> {
    const clickhouse_settings = limits === undefined ? undefined : serverSettings(limits, 2);
    try {
      return await this.#run(async (c) => (await c.query({ query: sql.text, format: 'JSONEachRow', clickhouse_settings })).json<T>(), this.#clients, this.#queryResent);
    } catch (e) {
      throw new StoreError('SL_STORE_QUERY', `ClickHouse query failed: ${(e as Error).message}`, { cause: e });
    }
  }

  async select(statement: ReadOnlyStatement, limits: ReadLimits): Promise<SqlAnswer> {
    // Settings travel as URL parameters, applied before the statement is parsed: its own
    // SETTINGS (refused by statement.ts anyway) would then fail under readonly = 1.
    const clickhouse_settings = serverSettings(limits, 1);
    const cap = answerCap(limits);
    const abort = new AbortController();
    let text: string;
    try {
      // exec, not query: the answer is read as a stream and abandoned past its bound.
      const r = await this.#run((c) => c.exec({ query: `${statement.text}\nFORMAT JSONCompact`, clickhouse_settings, abort_signal: abort.signal }), this.#clients, this.#queryResent);
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of r.stream) {
        const b = chunk as Buffer;
        size += b.length;
        if (size > cap) {
          abort.abort();
          r.stream.destroy();
          throw answerTooLarge(cap);
        }
        chunks.push(b);
      }
      text = Buffer.concat(chunks).toString('utf8');
    } catch (e) {
      if (e instanceof StoreError) throw e;
      throw new StoreError('SL_STORE_QUERY', `ClickHouse query failed: ${(e as Error).message}`, { cause: e });
    }
    return compactAnswer(text);
  }

  async insert(table: string, rows: readonly object[]): Promise<void> {
    if (rows.length === 0) return;
    try {
      const body = jsonEachRow(rows);
      const query = `INSERT INTO ${qualified(this.database, table).text} FORMAT JSONEachRow`;
      // exec with the body as bytes (rows.ts), not insert with the rows: a body made anew for
      // each replica tried. The answer is read to its end, as insert does.
      // A broken connection sends it once more, at once, on a new connection (#run), where
      // the ingester's own retry waits a backoff and has JetStream deliver the whole set
      // again. Rows the broken insert may have written are repeated as under redelivery:
      // the tables keep one row per span or request (ReplacingMergeTree, read with FINAL)
      // and the rollups are recomputed (docs/architecture.md, "The ingester").
      await this.#run(
        async (c) => {
          const r = await c.exec({ query, values: Readable.from(body, { objectMode: false }) });
          for await (const _ of r.stream);
        },
        this.#clients,
        () => {
          this.insertsResent++;
        },
      );
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      const prefix = typeof code === 'string' && /^\d+$/.test(code) ? `Code: ${code}. ` : '';
      throw new StoreError('SL_STORE_INSERT', `ClickHouse insert into ${table} failed: ${prefix}${(e as Error).message}`, { cause: e });
    }
  }

  async close(): Promise<void> {
    await Promise.all([...new Set([...this.#clients, ...this.#ddlClients])].map((c) => c.close()));
  }
}

/** The SETTINGS clause of a chdb query: 64-bit integers quoted like the server store's, and `limits`. */
function chdbSettings(limits: ReadLimits | undefined, readonly: 1 | 2): string {
  let settings = 'output_format_json_quote_64bit_integers = 1';
  if (limits !== undefined) {
    for (const s of limitSettings(limits, readonly)) settings += `, ${s.name} = ${typeof s.value === 'number' ? s.value : `'${s.value}'`}`;
  }
  return settings;
}

/** The subset of chdb's Session this store uses (chdb ships its own types). */
interface ChdbSession {
  queryAsync(query: string, opts?: { format?: string }): Promise<{ text(): string; bytes(): Uint8Array }>;
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
 * crashes the whole process with a segfault when the thread exits, even after `close()`
 * (seen on this project's machines with chdb on Node 20).
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

  async query<T>(sql: Sql, limits?: ReadLimits): Promise<T[]> {
    let text: string;
    // Same 64-bit integer quoting as the server store, and the limits: a SETTINGS clause on
    // the query itself applies to this query only and keeps the shared session's defaults
    // (the embedded ingester writes through the same session).
    try {
      const res = await this.#session.queryAsync(`${sql.text}\nSETTINGS ${chdbSettings(limits, 2)}`, { format: 'JSONEachRow' });
      text = res.text();
    } catch (e) {
      throw new StoreError('SL_STORE_QUERY', `chdb query failed: ${(e as Error).message}`, { cause: e });
    }
    const rows: T[] = [];
    for (const line of text.split('\n')) if (line !== '') rows.push(JSON.parse(line) as T);
    return rows;
  }

  async select(statement: ReadOnlyStatement, limits: ReadLimits): Promise<SqlAnswer> {
    // The session is shared with the embedded ingester, so `readonly = 1` and the limits are
    // a SETTINGS clause of this query, not of the session. On chdb a subquery's own SETTINGS
    // could lower them for that subquery: statement.ts refuses SETTINGS anywhere. The
    // statement ends at its last token (no trailing comment), so this clause is never
    // commented out.
    let text: string;
    try {
      const res = await this.#session.queryAsync(`${statement.text}\nSETTINGS ${chdbSettings(limits, 1)}`, { format: 'JSONCompact' });
      const cap = answerCap(limits);
      if (res.bytes().byteLength > cap) throw answerTooLarge(cap);
      text = res.text();
    } catch (e) {
      if (e instanceof StoreError) throw e;
      throw new StoreError('SL_STORE_QUERY', `chdb query failed: ${(e as Error).message}`, { cause: e });
    }
    return compactAnswer(text);
  }

  async insert(table: string, rows: readonly object[]): Promise<void> {
    if (rows.length === 0) return;
    const body = Buffer.concat(jsonEachRow(rows));
    try {
      await this.#session.insert({ table: `${this.database}.${table}`, values: body, format: 'JSONEachRow' });
    } catch (e) {
      throw new StoreError('SL_STORE_INSERT', `chdb insert into ${table} failed: ${(e as Error).message}`, { cause: e });
    }
  }

  async close(): Promise<void> {
    this.#session.close?.();
  }
}

/**
 * The store as the query API uses it: every query runs with `limits` (and so read-only),
 * and nothing can be written through it.
 */
export function withReadLimits(store: Store, limits: ReadLimits): Store {
  limitSettings(limits); // refuse bad limits at start, not on the first query
  const refuse = async (): Promise<never> => {
    throw new StoreError('SL_STORE_QUERY', 'this store is read-only (withReadLimits)');
  };
  return {
    kind: store.kind,
    database: store.database,
    cluster: store.cluster ?? null,
    query: <T>(sql: Sql, l: ReadLimits = limits) => store.query<T>(sql, l),
    select: (statement: ReadOnlyStatement, l: ReadLimits = limits) => store.select(statement, l),
    command: refuse,
    insert: refuse,
    close: () => store.close(),
  };
}
