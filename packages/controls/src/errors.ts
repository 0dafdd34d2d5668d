/**
 * Controls errors: one class, stable codes. Admission never throws (a refusal is a `Verdict`);
 * these come from construction and from `usage`.
 *
 * | code                 | when                                                          |
 * | -------------------- | ------------------------------------------------------------- |
 * | `SL_CTL_INVALID`     | an option is out of range (`field` names it)                  |
 * | `SL_CTL_UNAVAILABLE` | `usage` needs the shared store (NATS) and it cannot be reached |
 * | `SL_CTL_CONFLICT`    | a compare-and-set lost the race too many times in a row       |
 * | `SL_CTL_CLOSED`      | the governor is closed                                        |
 */
export type ControlsErrorCode = 'SL_CTL_INVALID' | 'SL_CTL_UNAVAILABLE' | 'SL_CTL_CONFLICT' | 'SL_CTL_CLOSED';

export class ControlsError extends Error {
  override readonly name = 'ControlsError';
  constructor(
    readonly code: ControlsErrorCode,
    message: string,
    readonly field: string | null = null,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
