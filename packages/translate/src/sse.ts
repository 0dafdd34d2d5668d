/**
 * Incremental Server-Sent Events framer (WHATWG HTML "event stream interpretation").
 *
 * - Lines end in LF, CRLF or CR; a CRLF split across two chunks counts once.
 * - `data:` lines are joined with "\n"; one space after the colon is dropped.
 * - Lines starting with ':' are comments; `id` and `retry` are parsed and ignored.
 * - A blank line dispatches; an event with no `data` line is not dispatched.
 * - A leading UTF-8 BOM is ignored.
 * - Bytes are decoded only once a line is complete, so a chunk may split anywhere,
 *   including inside a multibyte UTF-8 character. Every byte is scanned once: an
 *   incomplete line is kept as chunk slices and joined when its terminator arrives.
 *
 * - Bounded: the bytes of one event (its lines so far, including an unterminated one) may
 *   not exceed `maxEventBytes`; past it `push` throws a TranslationError
 *   `upstream_too_large`, so a provider line that never ends cannot grow the process.
 *
 * Deliberate deviation at end of stream (`end()`): the spec discards a pending event
 * that lacks its final blank line. Some upstreams close the connection right after the
 * last `data:` line, so `end()` dispatches a pending event whose lines were all
 * terminated; a final line without terminator is still dropped (it is most likely cut).
 */

import { TranslationError } from './errors.js';

export interface SseEvent {
  /** The `event:` field, or null when absent or empty (the spec's default "message"). */
  event: string | null;
  data: string;
  /**
   * The event's bytes as received (its lines, comments and terminators, through the
   * dispatching blank line). Only set when the parser was built with `keepRaw: true`.
   * Exception: when the CRLF of the dispatching blank line is split between two chunks,
   * the event is dispatched at the CR and its raw bytes end in CR (the LF is skipped).
   */
  raw?: Buffer;
}

export interface SseParserOptions {
  /** Keep each event's raw bytes in `SseEvent.raw` (one extra allocation per event). Default false. */
  keepRaw?: boolean;
  /** Largest event, in bytes of its lines (terminators excluded). Default 1 MiB. */
  maxEventBytes?: number;
}

export const DEFAULT_MAX_SSE_EVENT_BYTES = 1024 * 1024;

const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;
const SPACE = 0x20;

// "data" / "event" as bytes, to match field names without decoding the line.
const D = 0x64, A = 0x61, T = 0x74, E = 0x65, V = 0x76, N = 0x6e;

export class SseParser {
  readonly #keepRaw: boolean;
  readonly #maxEventBytes: number;
  /** Slices of the current, not yet terminated line. */
  #partial: Buffer[] = [];
  /** Bytes in #partial. */
  #partialBytes = 0;
  /** Bytes of the terminated lines of the event being built. */
  #eventBytes = 0;
  /** The previous chunk ended with CR: drop an LF at the start of the next one. */
  #skipLF = false;
  #firstLine = true;
  #eventType: string | null = null;
  #data = '';
  #hasData = false;
  /** Raw slices of the event being built (only with keepRaw). */
  #raw: Buffer[] = [];
  /** Leading entries of #raw that are copies owned by the parser. */
  #rawOwned = 0;

  constructor(options: SseParserOptions = {}) {
    this.#keepRaw = options.keepRaw === true;
    this.#maxEventBytes = options.maxEventBytes ?? DEFAULT_MAX_SSE_EVENT_BYTES;
  }

  #tooLarge(): never {
    throw new TranslationError('upstream_too_large', `the provider sent a stream event larger than ${this.#maxEventBytes} bytes`);
  }

  /**
   * Feed bytes; returns the events completed by this chunk (often none or one).
   * The chunk is not retained: the unterminated tail is copied.
   */
  push(input: Buffer | Uint8Array): SseEvent[] {
    const chunk = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
    const out: SseEvent[] = [];
    const n = chunk.length;
    if (n === 0) return out;
    let start = 0;
    if (this.#skipLF) {
      this.#skipLF = false;
      if (chunk[0] === LF) {
        start = 1;
        if (this.#keepRaw && this.#raw.length > 0) this.#raw.push(chunk.subarray(0, 1));
      }
    }
    let nextLF = -2;
    let nextCR = -2;
    while (start < n) {
      if (nextLF !== -1 && nextLF < start) nextLF = chunk.indexOf(LF, start);
      if (nextCR !== -1 && nextCR < start) nextCR = chunk.indexOf(CR, start);
      let end: number;
      if (nextLF === -1 && nextCR === -1) break;
      if (nextLF === -1) end = nextCR;
      else if (nextCR === -1) end = nextLF;
      else end = nextLF < nextCR ? nextLF : nextCR;
      let next = end + 1;
      if (chunk[end] === CR) {
        if (next < n) {
          if (chunk[next] === LF) next++;
        } else {
          this.#skipLF = true;
        }
      }
      this.#line(chunk, start, end, next, out);
      start = next;
    }
    if (start < n) {
      this.#partialBytes += n - start;
      if (this.#partialBytes + this.#eventBytes > this.#maxEventBytes) this.#tooLarge();
      this.#partial.push(Buffer.from(chunk.subarray(start)));
    }
    // Raw slices of an event still open may point into `chunk`: copy each one once, here.
    for (let i = this.#rawOwned; i < this.#raw.length; i++) this.#raw[i] = Buffer.from(this.#raw[i]!);
    this.#rawOwned = this.#raw.length;
    return out;
  }

  /**
   * Whether `chunk` can go by without being parsed: the parser is between events and
   * the chunk holds whole events only (it ends with a blank line: LF LF or CRLF CRLF),
   * so parsing it would leave the parser exactly as it is now. A caller that only looks
   * for some events (UsageStripRelay) relays such chunks as they came, after checking
   * their bytes for what it looks for. Counts as having parsed the chunk's first line.
   */
  passOver(chunk: Buffer): boolean {
    if (this.#partial.length > 0 || this.#skipLF || this.#hasData || this.#eventType !== null || this.#raw.length > 0) return false;
    const n = chunk.length;
    if (n < 2 || chunk[n - 1] !== LF) return false;
    if (chunk[n - 2] !== LF && !(n >= 4 && chunk[n - 2] === CR && chunk[n - 3] === LF && chunk[n - 4] === CR)) return false;
    if (this.#firstLine) {
      if (n >= 3 && chunk[0] === 0xef && chunk[1] === 0xbb && chunk[2] === 0xbf) return false;
      this.#firstLine = false;
    }
    return true;
  }

  /**
   * End of stream: dispatch a pending event whose lines were all terminated (see the
   * module comment), drop an unterminated last line, and reset for reuse.
   */
  end(): SseEvent[] {
    const out: SseEvent[] = [];
    if (this.#partial.length === 0 && this.#hasData) this.#dispatch(out);
    this.#partial = [];
    this.#partialBytes = 0;
    this.#eventBytes = 0;
    this.#skipLF = false;
    this.#firstLine = true;
    this.#eventType = null;
    this.#data = '';
    this.#hasData = false;
    this.#raw = [];
    this.#rawOwned = 0;
    return out;
  }

  #line(chunk: Buffer, start: number, end: number, next: number, out: SseEvent[]): void {
    let line: Buffer;
    if (this.#partial.length === 0) {
      line = chunk.subarray(start, end);
      if (this.#keepRaw) this.#raw.push(chunk.subarray(start, next));
    } else {
      this.#partial.push(chunk.subarray(start, end));
      line = Buffer.concat(this.#partial);
      if (this.#keepRaw) {
        this.#raw.push(line);
        if (next > end) this.#raw.push(chunk.subarray(end, next));
      }
      this.#partial = [];
      this.#partialBytes = 0;
    }
    if (this.#firstLine) {
      this.#firstLine = false;
      if (line.length >= 3 && line[0] === 0xef && line[1] === 0xbb && line[2] === 0xbf) line = line.subarray(3);
    }
    const len = line.length;
    if (len === 0) {
      this.#dispatch(out);
      return;
    }
    if (line[0] === COLON) return; // comment
    this.#eventBytes += len;
    if (this.#eventBytes > this.#maxEventBytes) this.#tooLarge();
    // Fast paths for the two fields that matter, without decoding the field name.
    if (len >= 4 && line[0] === D && line[1] === A && line[2] === T && line[3] === A && (len === 4 || line[4] === COLON)) {
      this.#appendData(line, 4);
      return;
    }
    if (len >= 5 && line[0] === E && line[1] === V && line[2] === E && line[3] === N && line[4] === T && (len === 5 || line[5] === COLON)) {
      const value = this.#value(line, 5);
      this.#eventType = value === '' ? null : value;
      return;
    }
    // Other fields (id, retry, unknown) carry nothing this framer reports.
  }

  #value(line: Buffer, nameLen: number): string {
    if (line.length === nameLen) return '';
    let from = nameLen + 1; // past the colon
    if (from < line.length && line[from] === SPACE) from++;
    return line.toString('utf8', from);
  }

  #appendData(line: Buffer, nameLen: number): void {
    const value = this.#value(line, nameLen);
    if (this.#hasData) this.#data += '\n' + value;
    else {
      this.#data = value;
      this.#hasData = true;
    }
  }

  #dispatch(out: SseEvent[]): void {
    if (this.#hasData) {
      const ev: SseEvent = { event: this.#eventType, data: this.#data };
      if (this.#keepRaw) ev.raw = this.#raw.length === 1 ? Buffer.from(this.#raw[0]!) : Buffer.concat(this.#raw);
      out.push(ev);
    }
    this.#eventType = null;
    this.#data = '';
    this.#hasData = false;
    this.#eventBytes = 0;
    if (this.#raw.length > 0) this.#raw = [];
    this.#rawOwned = 0;
  }
}

const LINE_BREAK = /\r\n|\r|\n/;

/**
 * One SSE event as text: `event: <event>\n` (when not null), one `data:` line per line of
 * `data`, then the blank line. JSON from JSON.stringify has no raw line breaks, so the
 * common case is a single `data:` line.
 */
export function formatSse(event: string | null, data: string): string {
  let head = '';
  if (event !== null) {
    if (event.includes('\n') || event.includes('\r')) throw new RangeError('SSE event name must not contain a line break');
    head = 'event: ' + event + '\n';
  }
  if (!data.includes('\n') && !data.includes('\r')) return head + 'data: ' + data + '\n\n';
  const lines = data.split(LINE_BREAK);
  let body = '';
  for (const l of lines) body += 'data: ' + l + '\n';
  return head + body + '\n';
}
