/**
 * Cache errors: one class, stable codes. Only construction throws (a malformed option); the
 * request path never sees a cache error — `get` answers from memory and `put` counts what
 * it refuses or cannot publish (`status()`).
 *
 * | code               | when                                                   |
 * | ------------------ | ------------------------------------------------------ |
 * | `SL_CACHE_OPTION`  | an option is out of range (`field` names it)           |
 */
export type CacheErrorCode = 'SL_CACHE_OPTION';

export class CacheError extends Error {
  override readonly name = 'CacheError';
  constructor(
    readonly code: CacheErrorCode,
    message: string,
    /** The offending option (`maxBytes`, `url`). */
    readonly field: string | null = null,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
