/**
 * The content worker thread (content-worker.ts): reads the usage from kept responses and
 * prepares captured content — long base64 replaced, both sides cut at the bound and decoded,
 * secrets replaced, serialised — away from the thread that serves requests (issue 15). Pure
 * work; no I/O.
 */
import { parentPort } from 'node:worker_threads';
import { contentFrom, recordsBytes, type ContentInput, type RecordJob } from '@sightline/capture';
import { redactSecrets } from '@sightline/redact';

/** Under NATS's default max_payload with room for the rest of the record (capture.ts MAX_RECORD_BYTES). */
const MAX_CONTENT_BYTES = 900 * 1024;

/** One record's content (ContentWorker.prepare). */
export interface ContentJobMessage {
  kind: 'content';
  id: number;
  input: ContentInput;
  maxBytes: number;
  keepBase64: boolean;
}

/** A batch's records: their heads and jobs, made whole here (ContentWorker.prepareJobs). */
export interface RecordJobsMessage {
  kind: 'jobs';
  id: number;
  heads: string[];
  jobs: RecordJob[];
  maxBytes: number;
  keepBase64: boolean;
}

export type ContentJobAnswer = { id: number; json: string; bytes: number } | { id: number; records: (Uint8Array | null)[] } | { id: number; error: string };

function prepare(m: ContentJobMessage): { json: string; bytes: number } {
  // Content escaped to many times its size is cut harder, so the record still fits a NATS message.
  for (const maxBytes of [m.maxBytes, Math.floor(m.maxBytes / 4), Math.floor(m.maxBytes / 16)]) {
    const json = JSON.stringify(contentFrom(m.input, { maxBytes, keepBase64: m.keepBase64, redactSecrets }));
    const bytes = Buffer.byteLength(json);
    if (bytes <= MAX_CONTENT_BYTES) return { json, bytes };
  }
  return { json: 'null', bytes: 4 };
}

parentPort?.on('message', (m: ContentJobMessage | RecordJobsMessage) => {
  try {
    if (m.kind === 'jobs') {
      // Each job alone (one that fails answers null: the serving thread then prepares it
      // itself); the records' bytes move to the serving thread with their buffer, uncopied.
      const { records, buffer } = recordsBytes(m.heads, m.jobs, m.maxBytes, m.keepBase64, redactSecrets);
      parentPort!.postMessage({ id: m.id, records } satisfies ContentJobAnswer, [buffer]);
    } else parentPort!.postMessage({ id: m.id, ...prepare(m) } satisfies ContentJobAnswer);
  } catch (e) {
    parentPort!.postMessage({ id: m.id, error: e instanceof Error ? e.message : String(e) } satisfies ContentJobAnswer);
  }
});
