/**
 * Rows as a JSONEachRow body: UTF-8 bytes in chunks, written row by row.
 *
 * @clickhouse/client's `insert` with an array of rows joins the rows' JSON into one string,
 * and the socket write then encodes that string to UTF-8 again. With the ingester's inserts
 * (tens of thousands of rows, tens of MB per insert) the rows' JSON, the join and the write's
 * encoding were about a third of the ingester's CPU (bench/src/capacity.ts under `--cpu-prof`,
 * 2 December). Here each row's JSON is written straight into a chunk of bytes, and the body
 * is sent as those chunks.
 */

/** Bytes per chunk of a body; a longer row gets a chunk of its own size. */
const CHUNK_BYTES = 256 * 1024;
const NEWLINE = 0x0a;
/**
 * encodeInto (documented, no argument handling per call). Buffer#write measured 0.9 against
 * 0.5 µs per 400-byte row in one microbenchmark here and about the same in another; most of
 * a row's cost is its JSON.stringify.
 */
const utf8 = new TextEncoder();

/** The rows as JSONEachRow (one JSON object and a newline each), in chunks of UTF-8. */
export function jsonEachRow(rows: readonly object[]): Buffer[] {
  const chunks: Buffer[] = [];
  let buf = Buffer.allocUnsafe(CHUNK_BYTES);
  let at = 0;
  for (const row of rows) {
    const json = JSON.stringify(row);
    // At most 3 bytes of UTF-8 per UTF-16 unit (a surrogate pair is 2 units and 4 bytes).
    const most = json.length * 3 + 1;
    if (at + most > buf.length) {
      if (at > 0) chunks.push(buf.subarray(0, at));
      buf = Buffer.allocUnsafe(Math.max(CHUNK_BYTES, most));
      at = 0;
    }
    at += utf8.encodeInto(json, buf.subarray(at)).written;
    buf[at++] = NEWLINE;
  }
  if (at > 0) chunks.push(buf.subarray(0, at));
  return chunks;
}
