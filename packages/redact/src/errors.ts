/**
 * Redaction errors: one class, stable codes. Redaction itself never fails on text; only a
 * JSON value it cannot walk safely is refused, and the caller then stores no content.
 *
 * | code                 | when                                                             |
 * | -------------------- | ---------------------------------------------------------------- |
 * | `SL_REDACT_TOO_DEEP` | a JSON value nests deeper than `maxDepth` (or is cyclic: not JSON) |
 */
export type RedactErrorCode = 'SL_REDACT_TOO_DEEP';

export class RedactError extends Error {
  override readonly name = 'RedactError';
  constructor(
    readonly code: RedactErrorCode,
    message: string,
  ) {
    super(message);
  }
}
