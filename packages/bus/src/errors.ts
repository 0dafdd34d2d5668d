/** Bus errors: one class per failure, with a stable code. */

/** The in-process bus holds as many messages or bytes as it may: try again once the ingester caught up. */
export class BusFullError extends Error {
  readonly code = 'SL_BUS_FULL';
  constructor(message: string) {
    super(message);
    this.name = 'BusFullError';
  }
}

/**
 * A message larger than the in-process bus could ever hold. Its code is the one nats.js
 * gives a message over NATS's max_payload, so that capture treats both alike: the batch
 * is refused for good, dropped and counted, not retried forever.
 */
export class BusPayloadTooLargeError extends Error {
  readonly code = 'MAX_PAYLOAD_EXCEEDED';
  constructor(message: string) {
    super(message);
    this.name = 'BusPayloadTooLargeError';
  }
}
