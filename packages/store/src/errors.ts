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
}
