/**
 * One upstream attempt over undici's dispatch API: a handler object whose methods
 * undici calls as the exchange progresses (onConnect … onComplete, including
 * onRequestSent, the `upstream.send` mark). No promise, no stream object per request.
 *
 * Connection reuse: undici reports the request it puts on a socket on
 * `undici:client:sendHeaders`, in the same tick as the handler's onConnect
 * (client-h1.js writeH1), so a module variable links the two without a map; a socket
 * never seen before means this attempt waited for a new connection.
 */
import { subscribe } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';
import type { Dispatcher } from 'undici';

/** What an attempt reports to the request it belongs to. */
export interface AttemptOwner {
  attemptConnected(a: UpstreamAttempt): void;
  attemptSent(a: UpstreamAttempt): void;
  /** Response headers; return false to stop reading (the attempt is being dropped). */
  attemptHeaders(a: UpstreamAttempt, status: number, rawHeaders: Buffer[]): void;
  /** A body chunk; return false to pause reading until `resume` is called. */
  attemptData(a: UpstreamAttempt, chunk: Buffer): boolean;
  attemptComplete(a: UpstreamAttempt): void;
  attemptError(a: UpstreamAttempt, err: Error): void;
}

let handing: UpstreamAttempt | null = null;
const seenSockets = new WeakSet<Socket>();

subscribe('undici:client:sendHeaders', (msg) => {
  const { socket } = msg as { socket: Socket };
  const a = handing;
  handing = null;
  if (a !== null && !seenSockets.has(socket)) {
    seenSockets.add(socket);
    a.newConnection = true;
  }
});

export class UpstreamAttempt implements Dispatcher.DispatchHandler {
  #abort: ((err?: Error) => void) | null = null;
  #resume: (() => void) | null = null;
  /** Finished: completed, failed or aborted. No callback reaches the owner after this. */
  done = false;
  /** Gives the connection back to its free list once undici is done with the request. */
  release: (() => void) | null = null;
  newConnection = false;
  status = 0;

  constructor(readonly owner: AttemptOwner) {}

  /** Aborts the upstream request; the owner hears nothing more from this attempt. */
  abort(reason: Error): void {
    if (this.done) return;
    this.done = true;
    const a = this.#abort;
    if (a !== null) a(reason);
  }

  resume(): void {
    const r = this.#resume;
    if (r !== null && !this.done) r();
  }

  onConnect(abort: (err?: Error) => void): void {
    this.#abort = abort;
    if (this.done) {
      abort(new Error('aborted'));
      return;
    }
    handing = this;
    this.owner.attemptConnected(this);
  }

  onRequestSent(): void {
    if (!this.done) this.owner.attemptSent(this);
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (statusCode < 200) return true; // 1xx informational
    if (this.done) return false;
    this.status = statusCode;
    this.#resume = resume;
    this.owner.attemptHeaders(this, statusCode, rawHeaders);
    return !this.done;
  }

  onData(chunk: Buffer): boolean {
    if (this.done) return false;
    return this.owner.attemptData(this, chunk);
  }

  #released(): void {
    const r = this.release;
    this.release = null;
    if (r !== null) r();
  }

  onComplete(): void {
    this.#released();
    if (this.done) return;
    this.done = true;
    this.owner.attemptComplete(this);
  }

  onError(err: Error): void {
    this.#released();
    if (this.done) return;
    this.done = true;
    this.owner.attemptError(this, err);
  }
}

export function errorCode(err: Error): string {
  return (err as { code?: string }).code ?? '';
}
