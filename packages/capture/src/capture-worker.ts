/**
 * The capture worker thread (thread.ts): builds spans and publishes batches with the
 * same Capture as in-thread capture, with its own NATS connection and spool.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ResilientNatsPublisher } from '@sightline/bus';
import type { CaptureConfig } from '@sightline/config';
import { Capture } from './capture.js';
import { RequestRecord } from './record.js';
import type { FromWorker, ToWorker } from './thread.js';

const data = workerData as { instance: string; config: CaptureConfig; natsUrl: string; version: string };
const port = parentPort!;
const send = (m: FromWorker) => port.postMessage(m);

const publisher = new ResilientNatsPublisher(data.natsUrl, data.instance);
const capture = new Capture({
  instance: data.instance,
  config: data.config,
  publisher,
  spoolDir: data.config.spoolDir,
  spoolMaxBytes: data.config.spoolMaxBytes,
  version: data.version,
  onError: (e) => send({ type: 'error', message: `capture: ${e instanceof Error ? e.message : String(e)}` }),
});

const statsTimer = setInterval(() => send({ type: 'stats', stats: { ...capture.stats } }), 250);

port.on('message', (m: ToWorker) => {
  if (m.type === 'records') {
    for (const plain of m.records) {
      // Structured clone drops the class; give records their shape back before use.
      capture.record(Object.assign(new RequestRecord(), plain));
    }
    send({ type: 'took', n: m.records.length });
    return;
  }
  if (m.type === 'close') {
    clearInterval(statsTimer);
    void (async () => {
      const left = await capture.close(m.timeoutMs);
      await publisher.close().catch(() => {});
      send({ type: 'closed', left, stats: { ...capture.stats } });
    })();
  }
});
