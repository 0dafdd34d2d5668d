/**
 * The one error type thrown by this package.
 *
 * `code` is stable and meant for programs; `message` is for humans; `param` names the
 * offending input field as a JSON path (`messages[2].tool_calls[0].function.arguments`),
 * or is null when no single field is at fault.
 *
 * | code                     | thrown when                                                          |
 * | ------------------------ | -------------------------------------------------------------------- |
 * | `invalid_request`        | the input is structurally wrong (missing messages, unknown role ...) |
 * | `invalid_tool_arguments` | tool-call arguments are not a JSON object                            |
 * | `unsupported_parameter`  | the field has no faithful mapping in the target dialect              |
 * | `invalid_stream_event`   | an upstream stream event cannot be parsed or breaks its grammar      |
 * | `upstream_too_large`     | an upstream event or body is larger than the bound it is read under |
 *
 * Requests that fail translation are the client's fault (but `invalid_stream_event` and
 * `upstream_too_large`, which are the provider's): answer them with HTTP 400
 * (see `translationErrorToOpenAI` / `translationErrorToAnthropic` in errors-map.ts).
 */
export type TranslationErrorCode =
  | 'invalid_request'
  | 'invalid_tool_arguments'
  | 'unsupported_parameter'
  | 'invalid_stream_event'
  | 'upstream_too_large';

export class TranslationError extends Error {
  override readonly name = 'TranslationError';
  readonly code: TranslationErrorCode;
  readonly param: string | null;

  constructor(code: TranslationErrorCode, message: string, param: string | null = null) {
    super(message);
    this.code = code;
    this.param = param;
  }
}

export function isTranslationError(e: unknown): e is TranslationError {
  return e instanceof TranslationError;
}
