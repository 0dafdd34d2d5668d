/** Errors of the ingester's side of capture: one class per failure, with a stable code. */

/** Why a bus message cannot be written: the ingester dead-letters it with this message. */
export class BadBatchError extends Error {
  readonly code = 'SL_BAD_BATCH';
  constructor(message: string) {
    super(message);
    this.name = 'BadBatchError';
  }
}
