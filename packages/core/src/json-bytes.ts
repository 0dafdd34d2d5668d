/**
 * Reading JSON bytes without parsing them: used where only one key matters (the usage
 * a response carries) and parsing a whole body would cost more than the answer is worth.
 */

function isSpace(c: number | undefined): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
}

/**
 * Where the value of a key starts: `keyEnd` is the index just after the key's closing
 * quote. Skips whitespace, the colon and whitespace. Returns the index of the value's
 * first byte, `buf.length` when the bytes end first, or -1 when no colon follows the key
 * (the quoted text was a value, not a key).
 */
export function valueAfterKey(buf: Uint8Array, keyEnd: number): number {
  let i = keyEnd;
  while (i < buf.length && isSpace(buf[i])) i++;
  if (i >= buf.length) return buf.length;
  if (buf[i] !== 0x3a /* : */) return -1;
  i++;
  while (i < buf.length && isSpace(buf[i])) i++;
  return i;
}
