/**
 * The content worker thread (content-worker.ts): makes a batch's records whole — the usage
 * read from kept responses, captured content prepared (long base64 replaced, both sides cut
 * at the bound and decoded, secrets replaced), serialised — away from the thread that serves
 * requests (issue 15). Pure work; no I/O, but for setting its own priority when it starts.
 */
import { parentPort } from 'node:worker_threads';
import { answerInArea, jobsOf, recordsBytes, type BatchCut, type JobsMessage, type PreparedRecords } from '@sightline/capture';
import { redactSecrets } from '@sightline/redact';
import { lowerThisThread, type ThreadPolicy } from './thread-priority.js';

/** A batch's records (ContentWorker.prepareJobs). */
export interface RecordJobsMessage {
  id: number;
  jobs: JobsMessage;
  maxBytes: number;
  keepBase64: boolean;
  cut: BatchCut;
  /** Where the records are written and marked done (job.ts, "The answer area"), in place of a message back. */
  area: SharedArrayBuffer;
}

/**
 * A message back, only when the records did not fit their answer area: the records as UTF-8
 * JSON in `buffer` (moved to the serving thread, not copied), laid out by recordsBytes:
 * `spans` holds each one's offset and length, −1 for a job the worker could not make. Or what
 * went wrong.
 */
export type ContentJobAnswer = ({ id: number } & PreparedRecords) | { id: number; error: string };

/** The thread's first message: the scheduling it got (thread-priority.ts) and its thread id. */
export interface ContentThreadHello {
  hello: { policy: ThreadPolicy; tid: number };
}

/**
 * This thread runs at the lowest priority it can get (thread-priority.ts): SCHED_IDLE, else
 * nice 19. It gets the CPU the serving thread leaves and gives the core back as soon as the
 * serving thread wakes. At its default priority, on a gateway pinned to one core (the bench's
 * layout, or a one-CPU container), posting a batch woke it and the kernel ran it at once: the
 * serving thread lost the core for the worker's whole batch, p50 1.4–1.5 ms per flush measured
 * around postMessage, against 44–78 µs at nice 19 (nice 5 and 10: p90 still 1.7 ms). At nice 19
 * a woken serving thread could still wait for the rest of this thread's slice (thread-priority.ts
 * has the figures); at SCHED_IDLE it does not. With a core to spare nothing changes. Under full
 * load on one core it gets almost no CPU; its batches are waited for, and past the capture's
 * bound (4 MiB of unanswered jobs) the serving thread makes records itself as requests end
 * (capture.ts). The thread says once, at start, what it got (ContentThreadHello).
 */
parentPort?.postMessage({ hello: lowerThisThread() } satisfies ContentThreadHello);

parentPort?.on('message', (m: RecordJobsMessage) => {
  try {
    // Each job alone (one that fails answers −1: the serving thread then makes it itself).
    const { heads, jobs } = jobsOf(m.jobs);
    const p = recordsBytes(heads, jobs, m.maxBytes, m.keepBase64, redactSecrets, m.cut, m.area);
    // In the area: no message; the serving thread polls the area (job.ts, "The answer area", says why).
    if (p.buffer === m.area) answerInArea(m.area, p);
    else parentPort!.postMessage({ id: m.id, buffer: p.buffer as ArrayBuffer, spans: p.spans, starts: p.starts } satisfies ContentJobAnswer, [p.buffer as ArrayBuffer]);
  } catch (e) {
    parentPort!.postMessage({ id: m.id, error: e instanceof Error ? e.message : String(e) } satisfies ContentJobAnswer);
  }
});
