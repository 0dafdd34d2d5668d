/** Configuration errors: one class, with the file and the field path in the message. */
export class ConfigError extends Error {
  readonly code = 'SL_CONFIG_INVALID';
  constructor(
    readonly file: string,
    readonly field: string,
    readonly problem: string,
  ) {
    super(`${file}: ${field === '' ? '' : `${field}: `}${problem}`);
    this.name = 'ConfigError';
  }
}
