/** Store errors: stable codes for the ways ClickHouse (server or chdb) can fail us. */
export class StoreError extends Error {
  constructor(
    readonly code: 'SL_STORE_QUERY' | 'SL_STORE_INSERT' | 'SL_STORE_MIGRATION',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'StoreError';
  }

  /**
   * Whether ClickHouse refused the data itself (it answered, with an exception about the
   * rows or the query), as opposed to being unreachable, overloaded or timing out.
   * Retrying a refusal cannot succeed; retrying anything else can.
   */
  get rejected(): boolean {
    const m = /Code: (\d+)/.exec(this.message);
    if (m === null) return false;
    return !TRANSIENT_CODES.has(Number(m[1]));
  }
}

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
