/**
 * What the serving thread hands off about a finished request (issue 15): its JSON up to the
 * usage (wireHead, cheap), and copies of the bytes the rest is made from — the kept response
 * for the usage, the request and answer for the content. Reading the usage from a stream
 * (~20–120 µs for a few KiB of SSE here) and preparing content are done from these copies,
 * in a worker thread when there is one (apps/gateway content-worker.ts), for all the records
 * of a batch in one message.
 */
import type { RequestRecord } from './record.js';
import { contentFrom, contentInputOf, detachedInput, type ContentInput, type PreparedTail, type RecordJob, type SecretRedactor, type UsageInput } from './content.js';
import { usageMembers, usageOfKept, wireHead } from './wire.js';

/** Under NATS's default max_payload with room for the rest of the record (capture.ts MAX_RECORD_BYTES). */
const MAX_CONTENT_BYTES = 900 * 1024;

/**
 * The serving thread's part: the record's head JSON and a job that owns copies of its bytes
 * (a memcpy each; no scanning, decoding or parsing). `maxOut`: content bytes kept per side.
 */
export function recordJob(rec: RequestRecord, withContent: boolean, maxOut: number): { head: string; job: RecordJob; bytes: number } {
  const head = wireHead(rec);
  let jobBytes = 0;
  let usage: UsageInput | null = null;
  let usageJson: string | null = null;
  if (rec.usage !== null) usageJson = usageMembers(rec.usage);
  else {
    const chunks = rec.responseChunks;
    let bytes: Uint8Array | null = null;
    if (chunks !== null && chunks.length > 0) {
      bytes = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
      let at = 0;
      for (const c of chunks) {
        bytes.set(c, at);
        at += c.length;
      }
      jobBytes += bytes.byteLength;
    }
    usage = { bytes, stream: rec.stream, partial: rec.partial };
  }
  let content: ContentInput | null = null;
  const input = withContent ? contentInputOf(rec) : null;
  if (input !== null) {
    const d = detachedInput(input, maxOut);
    content = d.input;
    jobBytes += d.bytes;
  }
  return { head, job: { usageJson, usage, content }, bytes: jobBytes };
}

const asBuffer = (b: Uint8Array): Buffer => (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength));

/**
 * The rest of a record from its job: in the worker thread, or in the serving thread when the
 * worker cannot. Content escaped to many times its size is cut harder, so the record still
 * fits a NATS message.
 */
export function prepareJob(job: RecordJob, maxBytes: number, keepBase64: boolean, redactSecrets: SecretRedactor): PreparedTail {
  let usageJson = job.usageJson;
  if (usageJson === null) {
    const u = job.usage;
    usageJson = usageMembers(usageOfKept(u === null || u.bytes === null ? null : [asBuffer(u.bytes)], u?.stream ?? false, u?.partial ?? false));
  }
  let contentJson = 'null';
  if (job.content !== null) {
    for (const max of [maxBytes, Math.floor(maxBytes / 4), Math.floor(maxBytes / 16)]) {
      const json = JSON.stringify(contentFrom(job.content, { maxBytes: max, keepBase64, redactSecrets }));
      if (Buffer.byteLength(json) <= MAX_CONTENT_BYTES) {
        contentJson = json;
        break;
      }
    }
  }
  return { usageJson, contentJson };
}

/** The record's JSON from its head and its prepared tail: the same as JSON.stringify(toWire(…)). */
export function recordJson(head: string, tail: PreparedTail): string {
  return `${head},${tail.usageJson},"content":${tail.contentJson}}`;
}

/**
 * Records made whole from their heads and jobs, each as UTF-8 bytes: views of one buffer, so
 * a worker thread hands them over by moving that buffer (`buffer` for its transfer list). A
 * job that cannot be prepared is null.
 */
export function recordsBytes(heads: readonly string[], jobs: readonly RecordJob[], maxBytes: number, keepBase64: boolean, redactSecrets: SecretRedactor): { records: (Uint8Array | null)[]; buffer: ArrayBuffer } {
  const json: (string | null)[] = [];
  let total = 0;
  for (let i = 0; i < jobs.length; i++) {
    try {
      const j = recordJson(heads[i]!, prepareJob(jobs[i]!, maxBytes, keepBase64, redactSecrets));
      json.push(j);
      total += Buffer.byteLength(j);
    } catch {
      json.push(null);
    }
  }
  const buffer = new ArrayBuffer(total);
  const out = Buffer.from(buffer);
  let at = 0;
  const records = json.map((j) => {
    if (j === null) return null;
    const n = out.write(j, at);
    const view = new Uint8Array(buffer, at, n);
    at += n;
    return view;
  });
  return { records, buffer };
}
