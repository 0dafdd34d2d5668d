/**
 * Content capture on the gateway's side (issue 11): what a request asked and what the client
 * received, kept as references while the request is served and turned into bounded text only
 * after the response (toWire).
 *
 * While serving: `keepContent` adds a reference to a chunk already written to the client
 * (no copy) until the bound; nothing is decoded or scanned. After the response: the request
 * body has its long base64 strings (images, audio, files) replaced by a placeholder naming
 * their media type and size, both sides are cut at the bound and decoded as UTF-8, and
 * secrets are replaced (the injected `redactSecrets`), so neither the bus nor the spool
 * holds a key in clear. Personal data is the ingester's to replace (policy `redacted`).
 */
import type { WireContent } from '@sightline/core';
import type { RequestRecord } from './record.js';

/** Replaces secrets in a text; returns the counts by placeholder type. */
export type SecretRedactor = (text: string) => { text: string; counts: Record<string, number> };

export interface ContentOptions {
  /** Bytes kept of each side (request, response). Default 256 KiB. */
  maxBytes: number;
  /** Keep base64 payloads instead of a placeholder. Default false. */
  keepBase64: boolean;
  redactSecrets: SecretRedactor;
}

/** Keeps a reference to what was written to the client, up to `maxBytes`; counts all of it. */
export function keepContent(rec: RequestRecord, chunk: Buffer | string, maxBytes: number): void {
  const n = typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
  rec.contentOutBytes += n;
  if (rec.contentPolicy === 'none' || rec.contentOutKept >= maxBytes) return;
  if (rec.contentOut === null) rec.contentOut = [chunk];
  else rec.contentOut.push(chunk);
  rec.contentOutKept += n;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
/** JSON strings at least this long are checked for base64 data. */
const LONG = 1024;
/** Bytes looked at, at each end of a long string, to tell base64 from text. */
const SAMPLE = 256;

function isBase64Byte(c: number): boolean {
  return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x2b || c === 0x2f || c === 0x3d || c === BACKSLASH || c === 0x2d || c === 0x5f;
}

function looksBase64(b: Buffer, from: number, to: number): boolean {
  const n = Math.min(SAMPLE, to - from);
  for (let i = 0; i < n; i++) if (!isBase64Byte(b[from + i]!) || !isBase64Byte(b[to - 1 - i]!)) return false;
  return true;
}

/** Media types told by the first characters of their base64 (file signatures). */
const SIGNATURES: readonly [string, string][] = [
  ['iVBORw0KGgo', 'image/png'],
  ['/9j/', 'image/jpeg'],
  ['R0lGOD', 'image/gif'],
  ['UklGR', 'image/webp'],
  ['JVBERi0', 'application/pdf'],
  ['SUQz', 'audio/mpeg'],
  ['//uQ', 'audio/mpeg'],
  ['T2dnUw', 'audio/ogg'],
];

function mediaTypeOf(b: Buffer, from: number, to: number): { type: string; dataFrom: number } {
  // data:<type>;base64,<data>
  if (to - from > 5 && b.toString('latin1', from, from + 5) === 'data:') {
    const comma = b.indexOf(0x2c, from);
    if (comma !== -1 && comma < to && comma - from < 256) {
      const head = b.toString('latin1', from + 5, comma);
      return { type: head.split(';', 1)[0] || 'application/octet-stream', dataFrom: comma + 1 };
    }
  }
  const start = b.toString('latin1', from, Math.min(to, from + 12)).replace(/\\\//g, '/');
  for (const [sig, type] of SIGNATURES) if (start.startsWith(sig)) return { type, dataFrom: from };
  return { type: 'application/octet-stream', dataFrom: from };
}

/**
 * JSON text with each long base64 string replaced by `[base64 <media type> <n> bytes]`
 * (n: the decoded size). One pass: strings are found with memchr (indexOf) and only long
 * ones are looked at. Returns the input itself when nothing was replaced.
 */
export function placeholderBase64(b: Buffer): { bytes: Buffer; replaced: number } {
  const parts: Buffer[] = [];
  let copied = 0;
  let replaced = 0;
  let i = b.indexOf(QUOTE);
  while (i !== -1) {
    let j = b.indexOf(QUOTE, i + 1);
    while (j !== -1) {
      let k = j - 1;
      while (b[k] === BACKSLASH) k--;
      if ((j - 1 - k) % 2 === 0) break;
      j = b.indexOf(QUOTE, j + 1);
    }
    if (j === -1) break;
    const from = i + 1;
    if (j - from >= LONG) {
      const { type, dataFrom } = mediaTypeOf(b, from, j);
      if (looksBase64(b, dataFrom, j)) {
        const encoded = j - dataFrom;
        const decoded = Math.floor((encoded * 3) / 4);
        parts.push(b.subarray(copied, from), Buffer.from(`[base64 ${type} ${decoded} bytes]`, 'latin1'));
        copied = j;
        replaced++;
      }
    }
    i = b.indexOf(QUOTE, j + 1);
  }
  if (replaced === 0) return { bytes: b, replaced };
  parts.push(b.subarray(copied));
  return { bytes: Buffer.concat(parts), replaced };
}

function merge(into: Record<string, number>, counts: Record<string, number>): void {
  for (const k in counts) into[k] = (into[k] ?? 0) + counts[k]!;
}

/**
 * What content is made of, as plain data: what a record holds, or a copy of it sent to a
 * worker thread (ContentJob) so the work is done off the thread that serves requests.
 */
export interface ContentInput {
  policy: 'full' | 'redacted';
  requestBody: Uint8Array | null;
  contentOut: readonly (Uint8Array | string)[] | null;
  contentOutKept: number;
  contentOutBytes: number;
}

/** The record's content input, or null (policy `none`). */
export function contentInputOf(rec: RequestRecord): ContentInput | null {
  if (rec.contentPolicy === 'none') return null;
  return { policy: rec.contentPolicy, requestBody: rec.requestBody, contentOut: rec.contentOut, contentOutKept: rec.contentOutKept, contentOutBytes: rec.contentOutBytes };
}

/**
 * The record's content as it travels, or null (policy `none`). Runs after the response;
 * costs a scan and a decode of at most 2 × maxBytes, plus the secret scan.
 */
export function contentOf(rec: RequestRecord, opts: ContentOptions): WireContent | null {
  const input = contentInputOf(rec);
  return input === null ? null : contentFrom(input, opts);
}

const asBuffer = (b: Uint8Array): Buffer => (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength));

export function contentFrom(rec: ContentInput, opts: ContentOptions): WireContent {
  const redactions: Record<string, number> = {};
  let request = '';
  let requestTruncated = false;
  const body = rec.requestBody === null ? null : asBuffer(rec.requestBody);
  if (body !== null && body.length > 0) {
    const bytes = opts.keepBase64 ? body : placeholderBase64(body).bytes;
    requestTruncated = bytes.length > opts.maxBytes;
    const r = opts.redactSecrets((requestTruncated ? bytes.subarray(0, opts.maxBytes) : bytes).toString('utf8'));
    request = r.text;
    merge(redactions, r.counts);
  }
  let response = '';
  const out = rec.contentOut;
  if (out !== null) {
    let text = '';
    for (const c of out) text += typeof c === 'string' ? c : asBuffer(c).toString('utf8');
    const responseCut = rec.contentOutKept > opts.maxBytes;
    if (responseCut) text = Buffer.from(text).subarray(0, opts.maxBytes).toString('utf8');
    const r = opts.redactSecrets(text);
    response = r.text;
    merge(redactions, r.counts);
  }
  return {
    policy: rec.policy,
    request,
    requestBytes: body?.length ?? 0,
    requestTruncated,
    response,
    responseBytes: rec.contentOutBytes,
    responseTruncated: rec.contentOutBytes > opts.maxBytes,
    redactions,
  };
}

/**
 * The content as a v4 record carries it (core wire.ts): its JSON member, in which the request
 * and response texts are their UTF-8 byte lengths, and the two texts themselves, which follow
 * the record's JSON line as they are. Nothing is escaped: as JSON strings (format v3) the texts
 * cost ~2.5 times as much to write (a prompt's quotes, its non-ASCII), and the ingester's
 * JSON.parse read them back escape by escape.
 *
 * The texts stay separate strings, never concatenated. A response with one character past
 * Latin-1 (any emoji, CJK, a typographic dash: common in model output) is a two-byte string in
 * V8; joined with a one-byte prompt, V8 widened every character of the prompt into fresh
 * memory first: about 1 ms for a 64 KiB prompt here, much of it page faults (loop rig, perf, 2
 * December). Written one by one (job.ts writeParts), each keeps its own encoding.
 */
export interface ContentWire {
  json: string;
  request: string;
  response: string;
  /** UTF-8 bytes of the two texts. */
  textBytes: number;
}

export function contentWire(c: WireContent): ContentWire {
  const requestLength = Buffer.byteLength(c.request);
  const responseLength = Buffer.byteLength(c.response);
  return {
    json: `{"policy":${JSON.stringify(c.policy)},"request":${requestLength},"requestBytes":${c.requestBytes},"requestTruncated":${c.requestTruncated},"response":${responseLength},"responseBytes":${c.responseBytes},"responseTruncated":${c.responseTruncated},"redactions":${JSON.stringify(c.redactions)}}`,
    request: c.request,
    response: c.response,
    textBytes: requestLength + responseLength,
  };
}

// The job types of job.ts live here, beside ContentPreparer that carries them (job.ts imports
// this module, so the types cannot live there without an import cycle).

/** The kept response of a request whose usage was not read yet, as one owned buffer. */
export interface UsageInput {
  bytes: Uint8Array | null;
  stream: boolean;
  partial: boolean;
}

/** One record's part of a job, as jobsOf (job.ts) reads it from a JobsMessage: views of its shared pages. */
export interface RecordJob {
  /** The usage read already (budgets settle with it): its JSON members; else null and `usage` is set. */
  usageJson: string | null;
  usage: UsageInput | null;
  /** null: no content is captured (policy `none`, or no content options). */
  content: ContentInput | null;
}

/** What a job becomes: the usage members, and the content as a v4 record carries it (null: none). */
export interface PreparedTail {
  usageJson: string;
  content: ContentWire | null;
}

/**
 * A batch's jobs as the worker thread gets them (issue 15): four values, whatever the number
 * of records. Posting an object graph per record (a few objects and two or three buffers
 * each) cost the serving thread a structured clone of p50 75–117 µs, p90 0.3–0.6 ms for 40
 * records here; this costs p50 17–25 µs, p90 50–80 µs. The pages are shared, not copied or
 * moved: if the worker dies holding them, the serving thread still reads every byte.
 */
export interface JobsMessage {
  /** Per record, its strings as one JSON array (job.ts, JobBatch.add), one per line: JSON text has no raw newline. */
  strings: string;
  /** Per record, its usage members when read already (budgets settle with it), else an empty line. */
  usage: string;
  /**
   * Per record, META numbers: flags, then (page, offset, length) of the kept response, request
   * body and answer (length −1: none; the answer may be the response's own bytes), the answer's
   * kept and total bytes, then the record's numbers (job.ts).
   */
  meta: Float64Array;
  pages: SharedArrayBuffer[];
  /** The bytes `recordsBytes` expects its records to take (jobEstimate per job, summed). */
  estimate: number;
}

/**
 * A batch's records made whole, as `recordsBytes` (job.ts) lays them out: one buffer that is
 * the capture's from then on (it writes batch headers into its free room; it may run on past
 * the last record, as it is sized ahead), per record its
 * offset and length in it (length −1: not made; the capture makes that one itself), and the
 * offsets of the records with free room before them.
 */
export interface PreparedRecords {
  /** The worker's own buffer (moved), or the shared answer area it was given (job.ts, "The answer area"). */
  buffer: ArrayBuffer | SharedArrayBuffer;
  spans: Int32Array;
  starts: Int32Array;
  /**
   * For an answer area that can take a later batch: gives it back. The capture calls it once no
   * record in it is needed any more (every batch made of them copied, or published, spooled or
   * dropped without a failed publish), and only with a publisher that `releasesData`; else the
   * area is left to the garbage collector.
   */
  release?: () => void;
}

/** The capture's batch bounds (`capture.batch_max_bytes`, `batch_max_requests`): where it will cut. */
export interface BatchCut {
  maxBytes: number;
  maxRequests: number;
}

/**
 * Makes records whole off the serving thread (a worker thread in the gateway, issue 15).
 * Rejects when it cannot: the capture then makes them in this thread.
 */
export interface ContentPreparer {
  /**
   * The records of a batch made whole in one message (job.ts): their JSON as UTF-8 bytes in
   * one buffer the worker hands over. One hand-off per batch instead of one per request, and
   * the serving thread neither encodes nor measures strings: it publishes the bytes.
   */
  prepareJobs(jobs: JobsMessage, maxBytes: number, keepBase64: boolean, cut: BatchCut): Promise<PreparedRecords>;
  /** Jobs sent and not answered yet. */
  readonly pending: number;
  /** Gives up on every job not answered yet: each rejects, and the capture makes its records itself. */
  reclaim(): void;
  close(): Promise<void>;
}
