/** Store errors: stable codes for the ways ClickHouse (server or chdb) can fail us. */
export class StoreError extends Error {
  constructor(
    readonly code: 'SL_STORE_QUERY' | 'SL_STORE_INSERT' | 'SL_STORE_MIGRATION',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'StoreError';
    this.clickhouseCode = clickhouseCodeOf(options?.cause) ?? codeInText(message);
  }

  /** ClickHouse's error code when ClickHouse (server or chdb) answered with an exception. */
  readonly clickhouseCode: number | null;

  /**
   * Whether ClickHouse refused the data itself (it answered, with an exception about the
   * rows or the query), as opposed to being unreachable, overloaded or timing out.
   * Retrying a refusal cannot succeed; retrying anything else can.
   */
  get rejected(): boolean {
    return this.clickhouseCode !== null && !TRANSIENT_CODES.has(this.clickhouseCode);
  }

  /** Which limit of a limited read (store.ts `ReadLimits`) stopped the query, if one did. */
  get limit(): 'time' | 'memory' | 'result' | null {
    return this.clickhouseCode === null ? null : (LIMIT_CODES.get(this.clickhouseCode) ?? null);
  }
}

function codeInText(text: string): number | null {
  const m = /\bCode: (\d+)/.exec(text);
  return m === null ? null : Number(m[1]);
}

/**
 * The code of an exception from either engine: @clickhouse/client's ClickHouseError has it
 * as a string `code` (its message is then without "Code: N"), chdb's errors as
 * `clickhouseCode`; ClickHouse 18.16's text is not parsed by the client, so the code is
 * only in the message ("Code: 159, e.displayText() = …").
 */
function clickhouseCodeOf(e: unknown): number | null {
  if (typeof e !== 'object' || e === null) return null;
  const { code, clickhouseCode } = e as { code?: unknown; clickhouseCode?: unknown };
  if (typeof clickhouseCode === 'number' && Number.isInteger(clickhouseCode)) return clickhouseCode;
  if (typeof code === 'string' && /^\d+$/.test(code)) return Number(code);
  return e instanceof Error ? codeInText(e.message) : null;
}

/** ClickHouse error codes of a query stopped by a limit, by the limit. */
const LIMIT_CODES = new Map<number, 'time' | 'memory' | 'result'>([
  [158, 'result'], // TOO_MANY_ROWS (older servers)
  [159, 'time'], // TIMEOUT_EXCEEDED
  [160, 'time'], // TOO_SLOW
  [241, 'memory'], // MEMORY_LIMIT_EXCEEDED
  [307, 'result'], // TOO_MANY_BYTES
  [396, 'result'], // TOO_MANY_ROWS_OR_BYTES (18.16 and later, for max_result_rows)
]);

/**
 * ClickHouse error codes that mean "try again later", not "this data is bad"
 * (https://github.com/ClickHouse/ClickHouse/blob/master/src/Common/ErrorCodes.cpp).
 */
const TRANSIENT_CODES = new Set([
  3, // UNEXPECTED_END_OF_FILE (connection cut mid-request)
  159, // TIMEOUT_EXCEEDED
  164, // READONLY
  202, // TOO_MANY_SIMULTANEOUS_QUERIES
  203, // NO_FREE_CONNECTION
  209, // SOCKET_TIMEOUT
  210, // NETWORK_ERROR
  241, // MEMORY_LIMIT_EXCEEDED
  242, // TABLE_IS_READ_ONLY
  252, // TOO_MANY_PARTS
  285, // TOO_FEW_LIVE_REPLICAS
  319, // UNKNOWN_STATUS_OF_INSERT
  394, // QUERY_WAS_CANCELLED
  999, // KEEPER_EXCEPTION
]);

/**
 * A statement someone wrote was refused before it ran (statement.ts): not a single
 * read-only SELECT, or something in it this check cannot vouch for. The message says what.
 */
export class StatementRefusedError extends Error {
  readonly code = 'SL_STORE_STATEMENT_REFUSED' as const;
  constructor(message: string) {
    super(message);
    this.name = 'StatementRefusedError';
  }
}
