/**
 * Misbehaving provider answers, for the gateway's fault tests: what a broken or hostile
 * `openai-compatible` server can send. Each fault writes with backpressure and stops as soon
 * as the peer goes away, so a "1 GiB" body costs the mock only what the gateway reads.
 */
import type { ServerResponse } from 'node:http';

export type MockFault =
  /** `status` headers and the first bytes of an error body, then the connection is reset. */
  | { kind: 'reset-mid-error-body'; status: number }
  /** `status` with a body of `bytes` bytes (an HTML error page that never seems to end). */
  | { kind: 'huge-error-body'; status: number; bytes: number }
  /** 200 `text/event-stream`, then one `data:` line of `bytes` bytes with no line end. */
  | { kind: 'endless-sse-line'; bytes: number };

const PIECE = Buffer.alloc(64 * 1024, 'x');

/** Writes `total` bytes of PIECE with backpressure, then calls `done` (not if the peer left). */
function pump(res: ServerResponse, total: number, done: () => void): void {
  let left = total;
  const step = (): void => {
    while (left > 0 && !res.destroyed) {
      const n = Math.min(left, PIECE.length);
      left -= n;
      if (!res.write(n === PIECE.length ? PIECE : PIECE.subarray(0, n))) {
        res.once('drain', step);
        return;
      }
    }
    if (!res.destroyed) done();
  };
  step();
}

export function sendFault(res: ServerResponse, fault: MockFault): void {
  switch (fault.kind) {
    case 'reset-mid-error-body':
      res.writeHead(fault.status, { 'content-type': 'application/json', 'content-length': '1000' });
      res.write('{"error":{"message":"mock: failing');
      // Give the head and the first bytes time to leave before the reset.
      setTimeout(() => res.destroy(), 20);
      return;
    case 'huge-error-body':
      res.writeHead(fault.status, { 'content-type': 'text/html', 'content-length': String(fault.bytes) });
      pump(res, fault.bytes, () => res.end());
      return;
    case 'endless-sse-line':
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write('data: ');
      pump(res, fault.bytes, () => res.end());
      return;
  }
}
