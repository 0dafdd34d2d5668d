/**
 * Outbound NATS bytes written as they are, without the client's copy (issue 15).
 *
 * nats.js (2.29) queues a message as four buffers (the `HPUB` line, the headers, the payload
 * and CRLF) in its outbound `DataBuffer`, and `ProtocolHandler.flushPending` packs them into
 * one new `Uint8Array` before the socket write. For a capture batch that is a fresh allocation
 * of up to 512 KiB, zero-filled and then copied into, on the gateway's serving thread: in the
 * loop rig's profile the pack alone took 1.4 ms per publish at the median and up to 5.4 ms
 * (fresh pages cost about 15 µs each on this machine), and it held up the requests in flight.
 *
 * `writeWithoutCopy` replaces that one method on a connection's protocol handler: the queued
 * buffers go to the socket in one corked write (a single `writev`), so the kernel copies
 * them straight from the caller's memory. Everything else is the client's own: what is
 * queued, when it flushes (a microtask, or at once past 32 KiB pending), and what it does
 * while disconnected (the buffers wait in the outbound queue, sent on reconnection).
 *
 * The caller's bytes must stay unchanged until the write is done. A capture batch does: its
 * buffer is reused only after JetStream acknowledged it, which the server sends after it read
 * the whole message, and never after a failed publish (capture.ts #keep).
 *
 * It relies on three internals of nats.js: `protocol.outbound.buffers`, `protocol.transport
 * .socket` and `flushPending`'s conditions. It checks them and leaves the client as it is
 * when they are not there (a later version), so the effect is only ever the copy saved;
 * the bus tests check that it is installed with the version we ship.
 */
import type { Socket } from 'node:net';
import type { NatsConnection } from 'nats';

interface OutboundLike {
  buffers: Uint8Array[];
  byteLength: number;
  reset(): void;
}

interface ProtocolLike {
  infoReceived: boolean;
  connected: boolean;
  outbound: OutboundLike;
  transport: { socket?: Socket; isClosed?: boolean } | undefined;
  flushPending(): void;
}

const INSTALLED = Symbol('sightline.writeWithoutCopy');
const WRITTEN = Symbol('sightline.writtenWithoutCopy');

/** The client's protocol handler (not in its typings), if it has one. */
function protocolOf(nc: NatsConnection): (Partial<ProtocolLike> & Record<symbol, unknown>) | null {
  const p = (nc as unknown as { protocol?: unknown }).protocol;
  return typeof p === 'object' && p !== null ? (p as Partial<ProtocolLike> & Record<symbol, unknown>) : null;
}

/** Whether the connection writes its outbound buffers without the copy: true once installed. */
export function writesWithoutCopy(nc: NatsConnection): boolean {
  return protocolOf(nc)?.[INSTALLED] === true;
}

/** Bytes the connection has written without the copy so far (0 when not installed). */
export function writtenWithoutCopy(nc: NatsConnection): number {
  const n = protocolOf(nc)?.[WRITTEN];
  return typeof n === 'number' ? n : 0;
}

/** Installs the copy-free flush on `nc`; false (and `nc` unchanged) when the client's internals differ. */
export function writeWithoutCopy(nc: NatsConnection): boolean {
  const p = protocolOf(nc);
  if (p === null || typeof p.flushPending !== 'function') return false;
  if (p[INSTALLED] === true) return true;
  const ob = p.outbound;
  // What the flush below uses of the outbound queue: its buffers, its byte count and reset.
  if (ob === undefined || !Array.isArray(ob.buffers) || typeof ob.byteLength !== 'number' || typeof ob.reset !== 'function') return false;
  if (!('infoReceived' in p) || !('connected' in p) || !('transport' in p)) return false;
  const packing = p.flushPending;
  p[WRITTEN] = 0;
  p.flushPending = function flushPending(this: ProtocolLike & Record<symbol, unknown>): void {
    if (!this.infoReceived || !this.connected) return;
    const out = this.outbound;
    const t = this.transport;
    const socket = t?.socket;
    // One buffer needs no pack; a transport without a plain socket (a later version) keeps the client's way.
    if (out.buffers.length < 2 || socket === undefined || typeof socket.cork !== 'function' || t!.isClosed === true) {
      packing.call(this);
      return;
    }
    const bufs = out.buffers.slice();
    this[WRITTEN] = (this[WRITTEN] as number) + out.byteLength;
    out.reset();
    // As the client's transport does: a failed write surfaces as a closed socket, which the
    // client handles (reconnects); the callback only keeps the error from being unhandled.
    socket.cork();
    try {
      for (const b of bufs) socket.write(b, ignore);
    } catch {
      // A destroyed socket: the client is reconnecting, and the publishes of these bytes time out.
    } finally {
      socket.uncork();
    }
  };
  p[INSTALLED] = true;
  return true;
}

function ignore(): void {}
