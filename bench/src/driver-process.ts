/**
 * Entry of the driver process, forked by the orchestrator (driver-client.ts) with an IPC
 * channel. It runs one block at a time on request and answers with the block's result; its
 * keep-alive pools live as long as the process, so each arm's connections stay warm between
 * its blocks. It exits when told to, or when the orchestrator goes away.
 */
import { closeAll, releaseOrigin, runBlock } from './driver.js';
import type { FromDriver, ToDriver } from './types.js';

function reply(msg: FromDriver): void {
  process.send?.(msg);
}

if (process.send === undefined) {
  process.stderr.write('driver-process: must be started by the benchmark orchestrator (needs an IPC channel)\n');
  process.exit(2);
}

// Blocks run strictly one after another: a second request while one runs is a bug upstream.
let busy = false;

process.on('message', (raw: unknown) => {
  const msg = raw as ToDriver;
  if (msg.type === 'exit') {
    void closeAll().finally(() => process.exit(0));
    return;
  }
  if (busy) {
    reply({ type: 'error', seq: msg.seq, message: 'driver is busy with another block' });
    return;
  }
  busy = true;
  // A full collection before each block, so that one block's garbage (an open-loop step leaves
  // thousands of destroyed sockets) is not collected in the middle of the next one's timings.
  const gc = (globalThis as { gc?: () => void }).gc;
  if (msg.type === 'run') gc?.();
  const work: Promise<FromDriver> =
    msg.type === 'run'
      ? runBlock(msg.spec).then((result) => ({ type: 'result', seq: msg.seq, result }))
      : releaseOrigin(msg.origin).then(() => ({ type: 'released', seq: msg.seq }));
  work
    .catch((err: unknown): FromDriver => ({ type: 'error', seq: msg.seq, message: err instanceof Error ? (err.stack ?? err.message) : String(err) }))
    .then((out) => {
      busy = false;
      reply(out);
    });
});

// The orchestrator died or closed the channel: nothing left to measure for.
process.on('disconnect', () => {
  void closeAll().finally(() => process.exit(0));
});

reply({ type: 'ready' });
