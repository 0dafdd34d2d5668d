/**
 * Finds the first streamed token in a response body that arrives in arbitrary TCP reads.
 *
 * Pure and dependency-free (tested in bench/test/bench-pure.test.ts). The driver feeds it every
 * body chunk until it reports the first token, then stops scanning, so the cost is paid only
 * for the head of each stream.
 *
 * What counts as the first token (issue 5):
 * - OpenAI chat completion chunks: the first `"content":"` followed by anything but `"`, i.e. a
 *   non-empty content delta. The role chunk (`"content":""`) does not count.
 * - Anthropic Messages events: the first `text_delta`.
 * A marker split across two reads is found: the scanner keeps the last bytes of a read that
 * could be the start of a marker and prepends them to the next read.
 */

export type StreamDialect = 'openai' | 'anthropic';

const OPENAI_MARKER = Buffer.from('"content":"');
const ANTHROPIC_MARKER = Buffer.from('text_delta');
const QUOTE = 0x22;

export class FirstTokenScanner {
  private readonly marker: Buffer;
  /** OpenAI needs one byte after the marker to tell an empty content from a token. */
  private readonly needsNext: boolean;
  /** Bytes carried over from the previous read: at most marker.length bytes. */
  private carry: Buffer = Buffer.alloc(0);
  found = false;

  constructor(dialect: StreamDialect) {
    this.marker = dialect === 'openai' ? OPENAI_MARKER : ANTHROPIC_MARKER;
    this.needsNext = dialect === 'openai';
  }

  /** Feeds one read; returns true when this read completed the first token. */
  push(chunk: Buffer): boolean {
    if (this.found) return false;
    const buf = this.carry.length === 0 ? chunk : Buffer.concat([this.carry, chunk]);
    let from = 0;
    for (;;) {
      const at = buf.indexOf(this.marker, from);
      if (at === -1) break;
      const after = at + this.marker.length;
      if (!this.needsNext) {
        this.found = true;
        return true;
      }
      if (after >= buf.length) {
        // The byte that decides is in the next read: keep the marker.
        this.carry = Buffer.from(buf.subarray(at));
        return false;
      }
      if (buf[after] !== QUOTE) {
        this.found = true;
        return true;
      }
      from = after;
    }
    // Keep a tail that may hold the start of a marker cut by the read boundary.
    const keep = Math.min(buf.length, this.marker.length - 1);
    this.carry = Buffer.from(buf.subarray(buf.length - keep));
    return false;
  }
}
