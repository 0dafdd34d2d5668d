/**
 * The in-process bus for the one-machine setup: one publisher side and one consumer side
 * in the same process, with JetStream's delivery semantics where they matter to the
 * pipeline (message-id dedup window, explicit ack, redelivery after ack wait or nak).
 * Like a JetStream stream with `discard: new` (nats.ts), it is bounded in messages and
 * in bytes, and refuses what does not fit; the publisher (capture) then keeps the batch
 * and retries, or spools it.
 */
import { BusFullError, BusPayloadTooLargeError } from './errors.js';
import type { BusConsumer, BusMessage, BusPublisher } from './types.js';

export interface MemoryBusOptions {
  /** Milliseconds a message id is remembered for dedup. Default 120 000 (JetStream's default). */
  duplicateWindowMs?: number;
  /** Milliseconds a delivered, unacknowledged message waits before redelivery. Default 30 000. */
  ackWaitMs?: number;
  /** Messages held at most; publishing beyond rejects. Default 100 000. */
  maxMessages?: number;
  /**
   * Bytes of message data held at most (published and not yet acknowledged); publishing
   * beyond rejects. Capture batches are up to 512 KiB each (capture.batch_max_bytes), so
   * the message bound alone would allow tens of GiB. Default 256 MiB.
   */
  maxBytes?: number;
}

interface Entry {
  data: Uint8Array;
  msgId: string;
  deliveries: number;
  timer: NodeJS.Timeout | null;
}

export class MemoryBus implements BusPublisher, BusConsumer {
  readonly #ready: Entry[] = [];
  readonly #inFlight = new Set<Entry>();
  readonly #seen = new Map<string, number>();
  readonly #waiters: (() => void)[] = [];
  /** Messages moved aside by deadLetter(), with their reasons. */
  readonly deadLetters: { msgId: string; reason: string; data: Uint8Array }[] = [];
  readonly #dupWindow: number;
  readonly #ackWait: number;
  readonly #max: number;
  readonly #maxBytes: number;
  #bytes = 0;
  #refused = 0;
  #closed = false;

  constructor(opts: MemoryBusOptions = {}) {
    this.#dupWindow = opts.duplicateWindowMs ?? 120_000;
    this.#ackWait = opts.ackWaitMs ?? 30_000;
    this.#max = opts.maxMessages ?? 100_000;
    this.#maxBytes = opts.maxBytes ?? 256 * 1024 * 1024;
  }

  /** Messages stored and not yet acknowledged. */
  get pending(): number {
    return this.#ready.length + this.#inFlight.size;
  }

  /** Bytes of the messages stored and not yet acknowledged. */
  get pendingBytes(): number {
    return this.#bytes;
  }

  /** Publishes refused because a bound (messages or bytes) was reached, or the message could never fit. */
  get refused(): number {
    return this.#refused;
  }

  async publish(data: Uint8Array, msgId: string): Promise<void> {
    if (this.#closed) throw new Error('bus closed');
    const now = Date.now();
    const seenAt = this.#seen.get(msgId);
    if (seenAt !== undefined && now - seenAt < this.#dupWindow) return;
    const size = data.byteLength;
    if (size > this.#maxBytes) {
      this.#refused++;
      throw new BusPayloadTooLargeError(`a message of ${size} bytes exceeds the in-process bus's maximum payload of ${this.#maxBytes} bytes`);
    }
    if (this.pending >= this.#max) {
      this.#refused++;
      throw new BusFullError(`in-process bus is full: ${this.pending} messages`);
    }
    if (this.#bytes + size > this.#maxBytes) {
      this.#refused++;
      throw new BusFullError(`in-process bus is full: ${this.#bytes} bytes held, ${size} more would exceed ${this.#maxBytes}`);
    }
    this.#seen.set(msgId, now);
    if (this.#seen.size > 10_000) this.#pruneSeen(now);
    this.#bytes += size;
    this.#ready.push({ data, msgId, deliveries: 0, timer: null });
    this.#wake();
  }

  /**
   * Up to `max` messages, waiting at most `expiresMs` for the first one. With `maxBytes`,
   * stops adding messages once their data reaches it (the first one is always taken): the
   * embedded launcher copies each fetch across a process boundary on the gateway's thread.
   */
  async fetch(max: number, expiresMs: number, maxBytes = Number.POSITIVE_INFINITY): Promise<BusMessage[]> {
    if (this.#ready.length === 0 && !this.#closed) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, expiresMs);
        const waiters = this.#waiters;
        function done() {
          clearTimeout(t);
          const i = waiters.indexOf(done);
          if (i >= 0) waiters.splice(i, 1);
          resolve();
        }
        waiters.push(done);
      });
    }
    const out: BusMessage[] = [];
    let bytes = 0;
    while (out.length < max && this.#ready.length > 0) {
      if (out.length > 0 && bytes + this.#ready[0]!.data.byteLength > maxBytes) break;
      const e = this.#ready.shift()!;
      bytes += e.data.byteLength;
      e.deliveries++;
      this.#inFlight.add(e);
      e.timer = setTimeout(() => this.#redeliver(e), this.#ackWait);
      e.timer.unref();
      out.push(this.#message(e));
    }
    return out;
  }

  #message(e: Entry): BusMessage {
    const deliveries = e.deliveries;
    return {
      data: e.data,
      msgId: e.msgId,
      deliveries,
      ack: async () => {
        if (e.deliveries !== deliveries || !this.#inFlight.has(e)) return;
        if (e.timer !== null) clearTimeout(e.timer);
        this.#inFlight.delete(e);
        this.#bytes -= e.data.byteLength;
      },
      nak: (delayMs = 0) => {
        if (e.deliveries !== deliveries || !this.#inFlight.has(e)) return;
        if (e.timer !== null) clearTimeout(e.timer);
        e.timer = setTimeout(() => this.#redeliver(e), delayMs);
        e.timer.unref();
      },
    };
  }

  async deadLetter(m: BusMessage, reason: string): Promise<void> {
    this.deadLetters.push({ msgId: m.msgId, reason, data: m.data });
    await m.ack();
  }

  #redeliver(e: Entry): void {
    if (!this.#inFlight.delete(e)) return;
    e.timer = null;
    this.#ready.unshift(e);
    this.#wake();
  }

  #wake(): void {
    const w = this.#waiters.shift();
    if (w !== undefined) w();
  }

  #pruneSeen(now: number): void {
    for (const [id, at] of this.#seen) {
      if (now - at >= this.#dupWindow) this.#seen.delete(id);
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const e of this.#inFlight) if (e.timer !== null) clearTimeout(e.timer);
    while (this.#waiters.length > 0) this.#wake();
  }
}
