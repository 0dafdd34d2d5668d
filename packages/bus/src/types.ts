/**
 * The bus: how capture batches (finished request records, @sightline/core wire.ts) travel
 * from gateways to ingesters. In production it is NATS JetStream; in the one-machine
 * setup an in-process stand-in with the same semantics (message-id dedup, explicit ack,
 * redelivery of what was not acked).
 */

export interface BusMessage {
  readonly data: Uint8Array;
  /** The publisher's message id (`Nats-Msg-Id`): the batch's identity. */
  readonly msgId: string;
  /** 1 on first delivery, more on redelivery. */
  readonly deliveries: number;
  /** Acknowledges, resolving once the bus confirmed (the message will not be redelivered). */
  ack(): Promise<void>;
  /** Gives the message back for redelivery after `delayMs`. */
  nak(delayMs?: number): void;
}

export interface BusPublisher {
  /**
   * Publishes one batch; resolves when the bus has stored it (JetStream ack), rejects on
   * timeout or when the bus is unreachable. Republishing the same `msgId` within the
   * dedup window stores nothing new.
   */
  publish(data: Uint8Array, msgId: string, timeoutMs: number): Promise<void>;
  /**
   * true when, once `publish` has resolved, the bus holds no reference to `data` (it was sent
   * and acknowledged): capture may then reuse that memory for later batches. The in-process bus
   * keeps the bytes themselves until they are consumed, so it does not say so.
   */
  readonly releasesData?: boolean;
  /** false while the bus is known to be unreachable (capture then spools at once). */
  isConnected?(): boolean;
  close(): Promise<void>;
}

export interface BusConsumer {
  /** Up to `max` messages; waits at most `expiresMs` for the first one. */
  fetch(max: number, expiresMs: number): Promise<BusMessage[]>;
  /**
   * Moves a message that cannot be processed to the dead-letter subject (with the
   * reason), then acknowledges it. Resolves once the dead letter is stored.
   */
  deadLetter(m: BusMessage, reason: string): Promise<void>;
  close(): Promise<void>;
}
