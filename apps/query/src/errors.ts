/** Query API errors: stable codes, one HTTP status each, body `{"error":{"code","message"}}`. */
export type QueryErrorCode = 'bad_parameter' | 'unauthorized' | 'forbidden' | 'not_found' | 'query_too_large' | 'store_unavailable' | 'internal_error' | 'not_implemented';

/**
 * `query_too_large`: the query was stopped by a limit (limits.ts); the caller can narrow it.
 * `not_implemented`: a request this deployment cannot answer safely (SQL with a team key).
 */
const STATUS: Record<QueryErrorCode, number> = { bad_parameter: 400, unauthorized: 401, forbidden: 403, not_found: 404, query_too_large: 422, store_unavailable: 503, internal_error: 500, not_implemented: 501 };

export class QueryError extends Error {
  readonly status: number;
  /** The request field at fault (`scopes[1]`, `filters.model`), when one is. */
  readonly field: string | null;
  constructor(
    readonly code: QueryErrorCode,
    message: string,
    options?: { cause?: unknown; field?: string | null },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.field = options?.field ?? null;
    this.name = 'QueryError';
    this.status = STATUS[code];
  }
  toJSON(): { error: { code: QueryErrorCode; message: string; field?: string } } {
    return this.field === null ? { error: { code: this.code, message: this.message } } : { error: { code: this.code, message: this.message, field: this.field } };
  }
}
