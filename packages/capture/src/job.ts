/**
 * What the serving thread hands off about a finished request (issue 15): its fields — numbers
 * as numbers, strings as one JSON array — and copies of the bytes the rest is made from: the
 * kept response for the usage, the request and answer for the content. The record's v3 head
 * (wire.ts headOfParts), reading the usage from a stream (~20–120 µs for a few KiB of SSE here) and
 * preparing content are done from these, in a worker thread when there is one (apps/gateway
 * content-worker.ts), for all the records of a batch in one flat message (JobBatch).
 */
import { RECORD_V3_NUMBER_BYTES } from '@sightline/core';
import type { RequestRecord } from './record.js';
import { contentFrom, contentWire, type BatchCut, type ContentInput, type ContentWire, type JobsMessage, type PreparedRecords, type PreparedTail, type RecordJob, type SecretRedactor } from './content.js';
import { headFlags, headNumbers, headOfParts, headStrings, usageMembers, usageOfKept } from './wire.js';

/** Under NATS's default max_payload with room for the rest of the record (capture.ts MAX_RECORD_BYTES). */
const MAX_CONTENT_BYTES = 900 * 1024;

/** Shared pages the jobs' bytes are copied into; a part larger than half a page gets its own buffer. */
const PAGE_BYTES = 256 * 1024;
/** Pages kept for reuse once their batch is answered: 4 MiB. */
const FREE_PAGES = 16;

/**
 * Numbers per job in `JobsMessage.meta` (content.ts): flags; (page, offset, length) of the kept
 * response, the request body and the answer; the answer's kept and total bytes; then the
 * record's 23 numbers from M_SEQ, in the order of a v3 record (wire.ts headNumbers), so that
 * jobsOf puts their bytes into the head as they are.
 */
const META = 35;
const M_SEQ = 12;
const F_USAGE_READ = 1;
const F_STREAM = 2;
const F_PARTIAL = 4;
const F_CONTENT = 8;
const F_REDACTED = 16;
// The record's own flags (its head: wire.ts headFlags, five bits from H_SHIFT), apart from
// F_STREAM and F_PARTIAL, which say how to read the kept response and are set only when it
// is to be read.
const H_SHIFT = 5;
const H_FLAGS = 31 << H_SHIFT;
/** Bytes of a head beyond its strings' JSON: its keys, numbers and flags (about 270), with room to spare. */
const HEAD_OWN_BYTES = 1024;

/** Shared pages kept between batches, so a batch normally allocates nothing. */
export class PagePool {
  readonly #free: SharedArrayBuffer[] = [];
  take(): SharedArrayBuffer {
    return this.#free.pop() ?? new SharedArrayBuffer(PAGE_BYTES);
  }
  give(pages: readonly SharedArrayBuffer[]): void {
    for (const p of pages) if (p.byteLength === PAGE_BYTES && this.#free.length < FREE_PAGES) this.#free.push(p);
  }
}

/**
 * The records handed over since the last flush, on the serving thread: each record's numbers
 * and strings, and copies of the bytes the rest is made from — the kept response for the usage,
 * the request and answer for the content — in shared pages (a memcpy each; no scanning,
 * decoding or parsing here).
 */
export class JobBatch {
  /** Per record, its strings as one JSON array (wire.ts headStrings). */
  readonly #strings: string[] = [];
  readonly #usage: string[] = [];
  #meta = new Float64Array(META * 16);
  readonly #pages: SharedArrayBuffer[] = [];
  #page: Buffer | null = null;
  /** The index of #page in #pages. */
  #pageIndex = -1;
  #at = 0;
  /** Bytes copied into pages. */
  bytes = 0;
  /** What the records are expected to take (jobEstimate). */
  #estimate = 0;

  constructor(readonly pool: PagePool) {}

  get length(): number {
    return this.#strings.length;
  }

  /** Room for `n` bytes: the page index and offset to write them at. */
  #room(n: number): [number, number, Buffer] {
    if (n > PAGE_BYTES / 2) {
      const own = new SharedArrayBuffer(n);
      this.#pages.push(own);
      return [this.#pages.length - 1, 0, Buffer.from(own)];
    }
    if (this.#page === null || this.#at + n > PAGE_BYTES) {
      const page = this.pool.take();
      this.#pages.push(page);
      this.#page = Buffer.from(page);
      this.#pageIndex = this.#pages.length - 1;
      this.#at = 0;
    }
    const at = this.#at;
    this.#at += n;
    return [this.#pageIndex, at, this.#page];
  }

  /** Copies at most `limit` bytes of the parts, contiguous; writes (page, offset, length) at meta[i]. */
  #copy(parts: readonly (Uint8Array | string)[], limit: number, meta: Float64Array, i: number): void {
    let n = 0;
    for (const p of parts) n += typeof p === 'string' ? Buffer.byteLength(p) : p.length;
    n = Math.min(n, limit);
    const [page, off, buf] = this.#room(n);
    let at = off;
    const end = off + n;
    for (const p of parts) {
      if (at >= end) break;
      if (typeof p === 'string') {
        const b = Buffer.byteLength(p) <= end - at ? null : Buffer.from(p);
        if (b === null) at += buf.write(p, at);
        else at += b.copy(buf, at, 0, end - at);
      } else {
        const k = Math.min(p.length, end - at);
        buf.set(k === p.length ? p : p.subarray(0, k), at);
        at += k;
      }
    }
    meta[i] = page;
    meta[i + 1] = off;
    meta[i + 2] = n;
    this.bytes += n;
  }

  /** Adds a finished record; `maxOut`: answer bytes kept (the content bound). */
  add(rec: RequestRecord, maxOut: number): void {
    // The head's strings as the v3 record carries them (wire.ts headStrings); its numbers go in
    // meta below, in the record's order, and travel as their bytes (jobsOf).
    const strings = headStrings(rec);
    const k = this.#strings.length;
    if ((k + 1) * META > this.#meta.length) {
      const grown = new Float64Array(this.#meta.length * 2);
      grown.set(this.#meta);
      this.#meta = grown;
    }
    const meta = this.#meta;
    const m = k * META;
    meta.fill(-1, m + 1, m + M_SEQ);
    headNumbers(rec, meta, m + M_SEQ);
    let flags = headFlags(rec) << H_SHIFT;
    let usage = '';
    if (rec.usage !== null) {
      usage = usageMembers(rec.usage);
      flags |= F_USAGE_READ;
    } else {
      if (rec.stream) flags |= F_STREAM;
      if (rec.partial) flags |= F_PARTIAL;
      const chunks = rec.responseChunks;
      if (chunks !== null && chunks.length > 0) this.#copy(chunks, Infinity, meta, m + 1);
    }
    const response = rec.responseChunks;
    if (rec.contentPolicy !== 'none') {
      flags |= F_CONTENT;
      if (rec.contentPolicy === 'redacted') flags |= F_REDACTED;
      if (rec.requestBody !== null) this.#copy([rec.requestBody], Infinity, meta, m + 4);
      // A few bytes past the bound: contentFrom cuts the answer at a character boundary, and
      // sees that it was cut.
      const out = rec.contentOut;
      if (out !== null) {
        // An answer relayed as it came (same dialect) is the kept response, chunk for chunk:
        // its bytes are copied once, for both.
        if ((flags & F_USAGE_READ) === 0 && meta[m + 3]! >= 0 && meta[m + 3]! <= maxOut + 4 && sameParts(out, response)) {
          meta[m + 7] = meta[m + 1]!;
          meta[m + 8] = meta[m + 2]!;
          meta[m + 9] = meta[m + 3]!;
        } else this.#copy(out, maxOut + 4, meta, m + 7);
      }
      meta[m + 10] = rec.contentOutKept;
      meta[m + 11] = rec.contentOutBytes;
    }
    this.#estimate += jobEstimate(Buffer.byteLength(strings) + HEAD_OWN_BYTES, rec.contentPolicy === 'none' ? 0 : (rec.requestBody?.byteLength ?? 0) + rec.contentOutKept);
    meta[m] = flags;
    this.#strings.push(strings);
    this.#usage.push(usage);
  }

  message(): JobsMessage {
    return { strings: this.#strings.join('\n'), usage: this.#usage.join('\n'), meta: this.#meta.subarray(0, this.#strings.length * META), pages: this.#pages, estimate: this.#estimate };
  }

  /** The pages back to the pool: once the worker has answered, or the jobs were made here. */
  release(): void {
    this.pool.give(this.#pages);
    this.#pages.length = 0;
    this.#page = null;
    this.#pageIndex = -1;
  }
}

/** Whether the answer's parts are the kept response's chunks, the same objects in the same order. */
function sameParts(out: readonly (Buffer | string)[], response: readonly Buffer[] | null): boolean {
  if (response === null || out.length !== response.length) return false;
  for (let i = 0; i < out.length; i++) if (out[i] !== response[i]) return false;
  return true;
}

/**
 * The bytes a record is expected to take, from its head's bytes and its request and kept answer
 * bytes: a v4 record carries the texts as they are (core wire.ts), so about their bytes; an
 * eighth more for placeholders longer than what they replace (and invalid UTF-8, each byte of
 * which becomes three). The usage and the content's other fields are well under 1 KiB. A batch
 * past its estimate comes back by message instead of in the area (recordsBytes).
 */
function jobEstimate(headBytes: number, contentBytes: number): number {
  return headBytes + 1024 + 1.125 * contentBytes;
}

/**
 * The answer area (issue 15): shared memory the serving thread gives the thread with a batch's
 * jobs, for the thread to write the records into and mark done, in place of a message back.
 * A message back held the serving thread's port mutex while it woke that thread
 * (MessagePortData::AddToIncomingQueue calls uv_async_send under it): the woken serving
 * thread took the core from the nice-19 thread at once, then slept on the mutex the starved
 * thread still held, up to 373 ms in the loop rig. The serving thread polls the area instead.
 *
 * Layout: Int32 [state, number of starts, spans (2 per job), starts (up to 1 per job)], then
 * the records from `answerRecordsAt(n)`. Records that do not fit are answered by message.
 * Areas are reused (the gateway's ContentWorker keeps a few) once the capture no longer needs
 * the records in them (PreparedRecords.release).
 */
const ANSWER_DONE = 1;
const ANSWER_HEAD_INTS = 2;

/** Where the records start in an answer area for `n` jobs: after its numbers, 8-byte aligned. */
export function answerRecordsAt(n: number): number {
  return Math.ceil((4 * (ANSWER_HEAD_INTS + 3 * n)) / 8) * 8;
}

/** The bytes an answer area for a message's jobs needs, as recordsBytes expects them to take. */
export function answerAreaBytes(m: JobsMessage): number {
  return answerRecordsAt(jobCount(m)) + Math.ceil(m.estimate) + BATCH_HEAD_ROOM;
}

/** Marks an area not answered, before it is given to the thread (again). */
export function resetAnswerArea(area: SharedArrayBuffer): void {
  Atomics.store(new Int32Array(area, 0, 1), 0, 0);
}

/** In the thread: writes the records' places into `area` (their bytes are there already) and marks it done. */
export function answerInArea(area: SharedArrayBuffer, p: PreparedRecords): void {
  const n = p.spans.length / 2;
  const ints = new Int32Array(area, 0, ANSWER_HEAD_INTS + 3 * n);
  ints.set(p.spans, ANSWER_HEAD_INTS);
  ints.set(p.starts, ANSWER_HEAD_INTS + 2 * n);
  ints[1] = p.starts.length;
  // Seq-cst: whoever loads DONE sees every byte written before it.
  Atomics.store(ints, 0, ANSWER_DONE);
}

/**
 * On the serving thread: the records of a done area for `n` jobs, where they lie (their places
 * copied out, so that the area's numbers may be written again); null while the thread is at it.
 */
export function answerFromArea(area: SharedArrayBuffer, n: number): PreparedRecords | null {
  const ints = new Int32Array(area, 0, ANSWER_HEAD_INTS + 3 * n);
  if (Atomics.load(ints, 0) !== ANSWER_DONE) return null;
  const h = ANSWER_HEAD_INTS;
  return { buffer: area, spans: ints.slice(h, h + 2 * n), starts: ints.slice(h + 2 * n, h + 2 * n + ints[1]!) };
}

/** The number of records in a message. */
export function jobCount(m: JobsMessage): number {
  return m.meta.length / META;
}

/** The records' heads and jobs from a message (views of its pages, no copy): in the worker, or here when it failed. */
export function jobsOf(m: JobsMessage): { heads: string[]; jobs: RecordJob[] } {
  const meta = m.meta;
  const n = jobCount(m);
  const strings = n === 0 ? [] : m.strings.split('\n', n);
  const usage = n === 0 ? [] : m.usage.split('\n', n);
  const heads: string[] = [];
  const view = (i: number): Buffer | null => (meta[i + 2]! < 0 ? null : Buffer.from(m.pages[meta[i]!]!, meta[i + 1]!, meta[i + 2]!));
  const jobs: RecordJob[] = [];
  for (let k = 0; k < strings.length; k++) {
    const i = k * META;
    const flags = meta[i]!;
    // The v3 head as it travels: the strings' JSON as JobBatch made it, the numbers' bytes.
    heads.push(headOfParts(strings[k]!, new Uint8Array(meta.buffer, meta.byteOffset + (i + M_SEQ) * 8, RECORD_V3_NUMBER_BYTES), (flags & H_FLAGS) >> H_SHIFT));
    const read = (flags & F_USAGE_READ) !== 0;
    let content: ContentInput | null = null;
    if ((flags & F_CONTENT) !== 0) {
      const out = view(i + 7);
      content = { policy: (flags & F_REDACTED) !== 0 ? 'redacted' : 'full', requestBody: view(i + 4), contentOut: out === null ? null : [out], contentOutKept: meta[i + 10]!, contentOutBytes: meta[i + 11]! };
    }
    jobs.push({ usageJson: read ? usage[k]! : null, usage: read ? null : { bytes: view(i + 1), stream: (flags & F_STREAM) !== 0, partial: (flags & F_PARTIAL) !== 0 }, content });
  }
  return { heads, jobs };
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
  let content: ContentWire | null = null;
  if (job.content !== null) {
    for (const max of [maxBytes, Math.floor(maxBytes / 4), Math.floor(maxBytes / 16)]) {
      const w = contentWire(contentFrom(job.content, { maxBytes: max, keepBase64, redactSecrets }));
      if (Buffer.byteLength(w.json) + w.textBytes <= MAX_CONTENT_BYTES) {
        content = w;
        break;
      }
    }
  }
  return { usageJson, content };
}

/**
 * A v4 record in parts (core wire.ts), from its head and its prepared tail: its JSON line, then
 * its content's texts as they are (contentWire). `bytes`: their UTF-8 bytes, counted once.
 */
export function recordParts(head: string, tail: PreparedTail): { parts: string[]; bytes: number } {
  return recordPartsOf(`${head},${tail.usageJson},"content":`, tail.content);
}

/** A v4 record in parts from its JSON up to its content (`…,"content":`) and its content. */
export function recordPartsOf(upToContent: string, content: ContentWire | null): { parts: string[]; bytes: number } {
  if (content === null) {
    const line = `${upToContent}null}\n`;
    return { parts: [line], bytes: Buffer.byteLength(line) };
  }
  const line = `${upToContent}${content.json}}\n`;
  return { parts: [line, content.request, content.response], bytes: Buffer.byteLength(line) + content.textBytes };
}

/** The v4 record as one string, from its head and its prepared tail (it stands for toWire(…): core wire.ts). */
export function recordText(head: string, tail: PreparedTail): string {
  return recordParts(head, tail).parts.join('');
}

/** UTF-8 bytes of the parts. */
export function partsBytes(parts: readonly string[]): number {
  let n = 0;
  for (const p of parts) n += Buffer.byteLength(p);
  return n;
}

/** Writes the parts one after the other as UTF-8 (each as it is: no string is joined); returns the bytes written. */
export function writeParts(parts: readonly string[], out: Buffer, at: number): number {
  let n = 0;
  for (const p of parts) n += out.write(p, at + n);
  return n;
}

/** The parts as one UTF-8 buffer of exactly their bytes (`bytes`, when the caller has counted them). */
export function partsBuffer(parts: readonly string[], bytes = partsBytes(parts)): Buffer {
  const out = Buffer.allocUnsafe(bytes);
  writeParts(parts, out, 0);
  return out;
}

/**
 * Bytes left free before a batch's first record in `recordsBytes`'s buffer: room for the batch
 * header (wire.ts batchHead, ~200 bytes with its instance name), so that a batch of those
 * records is written there and published without a copy (capture.ts).
 */
export const BATCH_HEAD_ROOM = 512;
/** After each record: `, ` between records, or room for the `]}` that ends a batch. */
const RECORD_GAP = Buffer.from(', ');
export const RECORD_GAP_BYTES = RECORD_GAP.length;

/**
 * Where the capture cuts its queue into batches, record by record: a batch ends when it holds
 * `maxRequests` records or when the next record would take it past `maxBytes` (counting 256
 * bytes for the header and one separator per record). The capture and `recordsBytes` use the
 * same rule, so a worker's answer has room for a header at every cut the capture will make.
 */
export class BatchCutter {
  #bytes = 256;
  #count = 0;
  constructor(
    readonly maxBytes: number,
    readonly maxRequests: number,
  ) {}

  /** Adds a record of `length` bytes; true when it starts a new batch (never the first record). */
  add(length: number): boolean {
    const size = length + 1;
    const cut = this.#count > 0 && (this.#bytes + size > this.maxBytes || this.#count >= this.maxRequests);
    if (cut) {
      this.#bytes = 256;
      this.#count = 0;
    }
    this.#bytes += size;
    this.#count++;
    return cut;
  }
}

/**
 * Records made whole from their heads and jobs, each as UTF-8 bytes in one buffer that moves to
 * the serving thread (its transfer list). Each record is followed by `, `, and BATCH_HEAD_ROOM
 * free bytes come before the first and before each record where `cut` starts a new batch.
 * `spans` holds each record's offset and length (a job that cannot be made has length −1 and
 * no bytes); `starts`, the offsets of the records with room before them. `into`: an answer
 * area (above), where the records are written while they fit it, past it into a buffer of the
 * thread's own, which the answer then is (with the area's bytes so far copied in); or the
 * bytes the records are expected to take (JobsMessage.estimate), for a buffer of its own.
 */
export function recordsBytes(heads: readonly string[], jobs: readonly RecordJob[], maxBytes: number, keepBase64: boolean, redactSecrets: SecretRedactor, cut: BatchCut, into: SharedArrayBuffer | number): PreparedRecords {
  const cutter = new BatchCutter(cut.maxBytes, cut.maxRequests);
  // Each record is written as soon as it is made, so its JSON string dies young: keeping a
  // batch's strings until the end (to size the buffer exactly) had the young generation copy
  // them at every scavenge (16 KiB prompts: p50 207 µs a record against a best of 49).
  // The buffer starts at an estimate (jobEstimate) and doubles
  // when a record does not fit; what is left at its end goes with it.
  let out: Buffer;
  let at = 0;
  if (typeof into === 'number') out = Buffer.from(new ArrayBuffer(Math.ceil(into) + BATCH_HEAD_ROOM));
  else {
    out = Buffer.from(into);
    at = answerRecordsAt(jobs.length);
  }
  const spans = new Int32Array(jobs.length * 2);
  const starts: number[] = [];
  let first = true;
  for (let i = 0; i < jobs.length; i++) {
    let j: { parts: string[]; bytes: number } | null = null;
    try {
      j = recordParts(heads[i]!, prepareJob(jobs[i]!, maxBytes, keepBase64, redactSecrets));
    } catch {
      // −1: the capture makes this one itself
    }
    if (j === null) {
      spans[2 * i] = at;
      spans[2 * i + 1] = -1;
      continue;
    }
    const n = j.bytes;
    const room = cutter.add(n) || first;
    first = false;
    const need = (room ? BATCH_HEAD_ROOM : 0) + n + RECORD_GAP.length;
    if (at + need > out.length) {
      const grown = Buffer.from(new ArrayBuffer(Math.max(out.length * 2, at + need)));
      out.copy(grown, 0, 0, at);
      out = grown;
    }
    if (room) {
      at += BATCH_HEAD_ROOM;
      starts.push(at);
    }
    spans[2 * i] = at;
    spans[2 * i + 1] = n;
    at += writeParts(j.parts, out, at);
    at += RECORD_GAP.copy(out, at);
  }
  return { buffer: out.buffer, spans, starts: Int32Array.from(starts) };
}

/** The records of a PreparedRecords as views of its buffer; null where a job was not made. */
export function preparedViews(p: PreparedRecords): (Uint8Array | null)[] {
  const out: (Uint8Array | null)[] = [];
  for (let i = 0; i + 1 < p.spans.length; i += 2) out.push(p.spans[i + 1]! < 0 ? null : new Uint8Array(p.buffer, p.spans[i]!, p.spans[i + 1]!));
  return out;
}
