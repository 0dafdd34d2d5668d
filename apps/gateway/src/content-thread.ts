/**
 * The content worker thread (content-worker.ts), away from the thread that serves requests
 * (issue 15):
 * - makes a batch's records whole — the usage read from kept responses, captured content
 *   prepared (long base64 replaced, both sides cut at the bound and decoded, secrets
 *   replaced), serialised;
 * - publishes batches to JetStream on a NATS connection of its own, when the gateway gives
 *   it one (`ContentBus`): a 512 KiB publish (nats.js copies it whole, then the socket write
 *   runs the loopback TCP stack) cost the serving thread p50 ~190 µs and ms-long tails.
 */
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { ResilientNatsPublisher, type StreamOptions } from '@sightline/bus';
import { jobsOf, recordsBytes, type BatchCut, type JobsMessage, type PreparedRecords } from '@sightline/capture';
import { redactSecrets } from '@sightline/redact';

/** Where the thread publishes: the gateway's NATS server and capture stream (workerData.bus). */
export interface ContentBus {
  url: string;
  /** The connection's name (the gateway instance's, with a suffix). */
  name: string;
  stream: StreamOptions;
}

/** What the thread is started with. */
export interface ContentThreadData {
  bus: ContentBus | null;
  /**
   * A shared Int32Array(2): [0] the id of the last publish this thread took up, [1] the highest
   * id the serving thread stopped waiting for (ContentWorker). Messages are taken in the order
   * they were posted, with one timeout: one still queued with an id at or below [1] has been
   * given up too, and is skipped rather than done for nothing.
   */
  shared: SharedArrayBuffer;
}

/** A batch to publish (ContentWorker.publish); `data` is shared memory, so the serving thread keeps it too. */
export interface PublishMessage {
  type: 'publish';
  id: number;
  data: Uint8Array;
  msgId: string;
  timeoutMs: number;
}

/**
 * The outcome of a publish: stored (JetStream ack); or not, with the error — `retry` when the
 * thread could not try (no connection yet or any more), so the serving thread publishes it.
 */
export type PublishAnswer = { id: number; published: true } | { id: number; published: false; retry: boolean; error: string; code: string };

/** Closes the thread's NATS connection (drained) before the thread is stopped. */
export interface CloseMessage {
  type: 'close';
  id: number;
}

/** A batch's records (ContentWorker.prepareJobs). */
export interface RecordJobsMessage {
  type: 'jobs';
  id: number;
  jobs: JobsMessage;
  maxBytes: number;
  keepBase64: boolean;
  cut: BatchCut;
}

/**
 * The records as UTF-8 JSON in `buffer` (shared with the serving thread, not copied), laid out by
 * recordsBytes: `spans` holds each one's offset and length, −1 for a job the worker could not make.
 */
export type ContentJobAnswer = ({ id: number } & PreparedRecords) | { id: number; error: string };

/**
 * On Linux this thread runs at the lowest priority (nice 19: there a thread's own, pid 0 being
 * the calling thread; elsewhere it would be the whole process's, so it is left alone): it gets
 * the CPU the serving thread leaves. At its default priority, on a gateway pinned to one core
 * (the bench's layout, or a one-CPU container), posting a batch woke it and the kernel ran it
 * at once: the serving thread lost the core for the worker's whole batch, p50 1.4–1.5 ms per
 * flush measured around postMessage, against 44–78 µs at nice 19 (nice 5 and 10: p90 still
 * 1.7 ms). With a core to spare nothing changes. Under full load on one core it gets ~1.5 % of
 * it; a batch it leaves unanswered for 1 s is made on the serving thread (content-worker.ts).
 */
try {
  if (process.platform === 'linux') setPriority(19);
} catch {
  // Not permitted here: the thread keeps the process's priority.
}

const data = workerData as ContentThreadData | null;
const shared = data === null ? null : new Int32Array(data.shared);
/** Given up by the serving thread, which made it itself. */
const abandoned = (id: number): boolean => shared !== null && id <= Atomics.load(shared, 1);
/** Made at start, so it is connected by the first flush; until it is, batches go back to the serving thread. */
const publisher = data?.bus == null ? null : new ResilientNatsPublisher(data.bus.url, data.bus.name, data.bus.stream);

function publish(m: PublishMessage): void {
  const answer = (a: PublishAnswer): void => parentPort!.postMessage(a);
  if (publisher === null || !publisher.isConnected()) {
    answer({ id: m.id, published: false, retry: true, error: 'the content thread is not connected to NATS', code: '' });
    return;
  }
  // Taken up: from here the serving thread waits for this answer rather than publish it too.
  Atomics.store(shared!, 0, m.id);
  publisher.publish(m.data, m.msgId, m.timeoutMs).then(
    () => answer({ id: m.id, published: true }),
    (e: unknown) => {
      const err = e as { message?: unknown; code?: unknown };
      answer({ id: m.id, published: false, retry: false, error: String(err.message ?? e), code: typeof err.code === 'string' ? err.code : '' });
    },
  );
}

parentPort?.on('message', (m: RecordJobsMessage | PublishMessage | CloseMessage) => {
  if (m.type !== 'close' && abandoned(m.id)) return;
  if (m.type === 'publish') {
    publish(m);
    return;
  }
  if (m.type === 'close') {
    const done = (): void => parentPort!.postMessage({ id: m.id, closed: true });
    if (publisher === null) done();
    else publisher.close().then(done, done);
    return;
  }
  try {
    // Each job alone (one that fails answers −1: the serving thread then makes it itself).
    const { heads, jobs } = jobsOf(m.jobs);
    const { buffer, spans, starts } = recordsBytes(heads, jobs, m.maxBytes, m.keepBase64, redactSecrets, m.cut);
    // The buffer is shared memory (recordsBytes): a batch published from it is read by this
    // thread again, and kept by the serving thread for its spool should the publish fail.
    parentPort!.postMessage({ id: m.id, buffer, spans, starts } satisfies ContentJobAnswer);
  } catch (e) {
    parentPort!.postMessage({ id: m.id, error: e instanceof Error ? e.message : String(e) } satisfies ContentJobAnswer);
  }
});
