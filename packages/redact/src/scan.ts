/** Small helpers shared by the detectors. */

import { note } from './types.js';
import type { RedactionCounts, RedactionType } from './types.js';

/** `text[start, end)` is to be replaced by the placeholder of `type`. */
export interface Hit {
  start: number;
  end: number;
  type: RedactionType;
}

/**
 * Reads the candidate an anchor points at (it may start before the anchor). `null` keeps it; a
 * number keeps it too and says where the scan may resume (no candidate starts before there).
 * Counting is left to the caller, which may still drop a hit that overlaps an earlier one.
 */
export type AnchorResolver = (text: string, anchor: RegExpExecArray) => Hit | number | null;

/**
 * Scans `text` for anchors (`re`, global) and applies the hits the resolver returns, left to
 * right, never overlapping. After a miss the scan resumes one character after the anchor.
 * Returns `text` itself when nothing was replaced.
 */
export function replaceAnchored(text: string, re: RegExp, resolve: AnchorResolver, counts: RedactionCounts): string {
  re.lastIndex = 0;
  let out = '';
  let last = 0;
  let changed = false;
  let a: RegExpExecArray | null;
  while ((a = re.exec(text)) !== null) {
    const hit = a.index >= last ? resolve(text, a) : null;
    if (hit === null || typeof hit === 'number' || hit.start < last) {
      re.lastIndex = typeof hit === 'number' ? Math.max(hit, a.index + 1) : a.index + 1;
      continue;
    }
    out += text.slice(last, hit.start) + note(counts, hit.type);
    last = hit.end;
    changed = true;
    re.lastIndex = Math.max(hit.end, a.index + 1);
  }
  re.lastIndex = 0;
  return changed ? out + text.slice(last) : text;
}

/**
 * `replaceAnchored` for an anchor that starts with one fixed character: `indexOf` finds that
 * character several times faster than a regex scan can, and the sticky `re` is tried only there.
 */
export function replaceAtChar(text: string, char: string, re: RegExp, resolve: AnchorResolver, counts: RedactionCounts): string {
  let out = '';
  let last = 0;
  let changed = false;
  for (let i = text.indexOf(char); i >= 0; ) {
    const a = i >= last ? stickyAt(re, text, i) : null;
    const hit = a === null ? null : resolve(text, a);
    if (hit === null || typeof hit === 'number' || hit.start < last) {
      i = text.indexOf(char, typeof hit === 'number' ? Math.max(hit, i + 1) : i + 1);
      continue;
    }
    out += text.slice(last, hit.start) + note(counts, hit.type);
    last = hit.end;
    changed = true;
    i = text.indexOf(char, Math.max(hit.end, i + 1));
  }
  return changed ? out + text.slice(last) : text;
}

/** Runs a sticky regex at `at`. */
export function stickyAt(re: RegExp, text: string, at: number): RegExpExecArray | null {
  re.lastIndex = at;
  const m = re.exec(text);
  re.lastIndex = 0;
  return m;
}

/** Character classes by code, for boundary checks done outside the regexes (see secrets.ts). */
export function isAlnum(c: number): boolean {
  return (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57);
}

export function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

/** `\w`: letters, digits, `_`. */
export function isWord(c: number): boolean {
  return isAlnum(c) || c === 95;
}

export function isHex(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102);
}

/** The code of the character at `i`, or -1 outside the text (a boundary). */
export function codeAt(text: string, i: number): number {
  return i >= 0 && i < text.length ? text.charCodeAt(i) : -1;
}

/** A regex source matching `word` in any letter case; `~` stands for an optional `_` or `-`. */
export function anyCase(word: string): string {
  let s = '';
  for (const c of word) {
    if (c === '~') s += '[_-]?';
    else if (/[a-z]/.test(c)) s += `[${c}${c.toUpperCase()}]`;
    else s += c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  }
  return s;
}

/**
 * Whether a token looks generated rather than written: it has a digit, or both letter cases in
 * a run of 16 characters without `-`/`_`. Random base62 of 40+ characters passes (a key without
 * any digit is ~2e-4 likely, and then it is mixed-case); `sk-learn`, `sk-learn-compatible`,
 * `Bearer tokenization-strategy` do not.
 */
export function looksGenerated(token: string): boolean {
  let upper = false;
  let lower = false;
  let run = 0;
  let longest = 0;
  for (let i = 0; i < token.length; i++) {
    const c = token.charCodeAt(i);
    if (c >= 48 && c <= 57) return true;
    if (c === 45 || c === 95) {
      run = 0;
      continue;
    }
    if (c >= 65 && c <= 90) upper = true;
    else if (c >= 97 && c <= 122) lower = true;
    run++;
    if (run > longest) longest = run;
  }
  return upper && lower && longest >= 16;
}
