/**
 * Directory errors: one class, stable codes. The query API maps them to HTTP statuses
 * (apps/query/src/errors.ts); the gateway never sees them (its lookups do not throw).
 *
 * | code                   | when                                                         |
 * | ---------------------- | ------------------------------------------------------------ |
 * | `SL_DIR_INVALID`       | a key or team definition is malformed (`field` names it)     |
 * | `SL_DIR_NOT_FOUND`     | no key with that id / no team with that name                 |
 * | `SL_DIR_CONFLICT`      | a concurrent write won (compare-and-set lost too many times) |
 * | `SL_DIR_UNAVAILABLE`   | the shared store (NATS) cannot be written now                |
 */
export type DirectoryErrorCode = 'SL_DIR_INVALID' | 'SL_DIR_NOT_FOUND' | 'SL_DIR_CONFLICT' | 'SL_DIR_UNAVAILABLE';

export class DirectoryError extends Error {
  override readonly name = 'DirectoryError';
  constructor(
    readonly code: DirectoryErrorCode,
    message: string,
    /** The offending input field (`scopes[1]`, `expires_at`), when one is at fault. */
    readonly field: string | null = null,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
