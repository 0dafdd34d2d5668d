/**
 * Personal data: redacted under the `redacted` policy only.
 *
 * One pass per type, in a fixed order (e-mail, IBAN, card, SSN, IPv4, phone, IPv6), each over
 * the previous pass's output; placeholders contain no digit, `@` or `:`, so a later pass never
 * matches inside an earlier placeholder. Every candidate is checked (Luhn, mod-97, SSN ranges,
 * octets, NANP rules, digit counts) so that numbers that only share a shape stay: years, token
 * counts, prices, timestamps, UUIDs, hashes, version strings, order numbers.
 */

import { cardPrefixValid, ibanLength, ibanValid, ipv4Valid, ipv6Valid, luhnValid, ssnValid } from './checks.js';
import { codeAt, isAlnum, isDigit, isHex, isWord, replaceAnchored, replaceAtChar, stickyAt } from './scan.js';
import type { Hit } from './scan.js';
import { note } from './types.js';
import type { RedactionCounts, TextRedaction } from './types.js';

// ---------------------------------------------------------------------------------------
// E-mail: found from its `@` (or `%40` when URL-encoded) outwards, not by a regex that would
// try a local part at every word of the text.

const MAX_LOCAL = 64; // RFC 5321 4.5.3.1.1
const MAX_DOMAIN = 255;
// URL-encoded delimiters that end a local part when met inside it: `email%3Djohn%40x.com`.
const ENCODED_DELIMITER = /%(?:2[02C7]|3[ACDE]|5[BD]|7[BD])/gi;
const TLD = /^\p{L}{2,24}$/u;
const LABEL = /^[\p{L}\p{N}](?:[\p{L}\p{N}-]{0,61}[\p{L}\p{N}])?$/u;
// `icon@2x.png`, `logo@1.5x.webp`: retina asset names, not addresses.
const RETINA = /^[0-9]+(?:\.[0-9]+)?x\.[A-Za-z]+$/;

// Letters and digits of any script (RFC 6531 addresses, IDN domains: `jörg@exämple.de`).
const UNICODE_ALNUM = /[\p{L}\p{N}]/u;

function isUnicodeAlnum(c: number): boolean {
  return c >= 0x80 && UNICODE_ALNUM.test(String.fromCharCode(c));
}

function isLocalChar(c: number): boolean {
  // A-Z a-z 0-9 . _ % + -
  return (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 46 || c === 95 || c === 37 || c === 43 || c === 45 || isUnicodeAlnum(c);
}

function isDomainChar(c: number): boolean {
  return (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 46 || c === 45 || isUnicodeAlnum(c);
}

/** Length of the longest prefix of `domain` that is a host name ending in an alphabetic TLD. */
function domainLength(domain: string): number {
  const labels = domain.split('.');
  for (let k = labels.length; k >= 2; k--) {
    if (!TLD.test(labels[k - 1] ?? '')) continue;
    let ok = true;
    for (let i = 0; i < k - 1; i++) {
      if (!LABEL.test(labels[i] ?? '')) {
        ok = false;
        break;
      }
    }
    if (ok) {
      const host = labels.slice(0, k).join('.');
      return RETINA.test(host) ? 0 : host.length;
    }
  }
  return 0;
}

/** The next `@` or `%40` at or after `from`, as [index, length], or null. */
function nextAt(text: string, from: number, encoded: boolean): [number, number] | null {
  const at = text.indexOf('@', from);
  const pct = encoded ? text.indexOf('%40', from) : -1;
  if (at < 0 && pct < 0) return null;
  return pct >= 0 && (at < 0 || pct < at) ? [pct, 3] : [at, 1];
}

function redactEmails(text: string, counts: RedactionCounts): string {
  const encoded = text.includes('%40');
  let out = '';
  let last = 0;
  for (let next = nextAt(text, 0, encoded); next !== null; next = nextAt(text, next[0] + next[1], encoded)) {
    const [at, atLength] = next;
    const after = at + atLength;
    // Cheap refusals first: `@` needs a local-part character before it and a domain one after.
    if (at <= last || !isLocalChar(text.charCodeAt(at - 1)) || !isDomainChar(codeAt(text, after))) continue;
    const floor = Math.max(last, at - MAX_LOCAL);
    let start = at;
    while (start > floor && isLocalChar(text.charCodeAt(start - 1))) start--;
    if (start === at - MAX_LOCAL && start > last && isLocalChar(text.charCodeAt(start - 1))) continue; // local part too long
    let local = text.slice(start, at);
    if (encoded) {
      ENCODED_DELIMITER.lastIndex = 0;
      let cut = -1;
      for (let d = ENCODED_DELIMITER.exec(local); d !== null; d = ENCODED_DELIMITER.exec(local)) cut = d.index + 3;
      if (cut > 0) {
        start += cut;
        local = local.slice(cut);
      }
    }
    while (local.startsWith('.')) {
      start++;
      local = local.slice(1);
    }
    if (local === '' || local.endsWith('.')) continue;
    // `scheme://user@host` is a URL's user, `git@github.com:org/repo` an SSH remote.
    if (text.startsWith('://', start - 3) || local === 'git') continue;
    let end = after;
    while (end < text.length && end - after < MAX_DOMAIN && isDomainChar(text.charCodeAt(end))) end++;
    const length = domainLength(text.slice(after, end));
    if (length === 0) continue;
    out += text.slice(last, start) + note(counts, 'email');
    last = after + length;
  }
  return last === 0 ? text : out + text.slice(last);
}

// ---------------------------------------------------------------------------------------
// Numbers with separators: the regex finds a candidate as long as possible, the handler keeps
// the longest prefix (ending at a group boundary) that passes the check, so a valid number
// followed by an unrelated one (`4111 1111 1111 1111 2024`) is still found.

/** Digits in `s[0, end)`. */
function digitCount(s: string, end: number): number {
  let n = 0;
  for (let i = 0; i < end; i++) if (isDigit(s.charCodeAt(i))) n++;
  return n;
}

/** The digits of `s[0, end)`. */
function digitsOf(s: string, end: number): string {
  let d = '';
  for (let i = 0; i < end; i++) if (isDigit(s.charCodeAt(i))) d += s[i];
  return d;
}

/**
 * The end of the next shorter prefix of `s` that stops at a group boundary (a digit followed
 * by a separator), or 0. Loops over candidates run `for (end = s.length; end > 0; end = …)`.
 */
function previousGroupEnd(s: string, end: number): number {
  for (let i = end - 1; i > 0; i--) if (!isDigit(s.charCodeAt(i)) && isDigit(s.charCodeAt(i - 1))) return i;
  return 0;
}

// Each detector scans for an anchor that V8 can search quickly (narrow first characters, no
// lookbehind in first position: see secrets.ts), then reads the candidate with a sticky regex
// and checks the characters around it in code.

/** Whether the candidate `text[start, end)` is not glued to a neighbouring word or number. */
function bounded(text: string, start: number, end: number, beforeAlso: string, afterAlso: string): boolean {
  const b = codeAt(text, start - 1);
  if (isWord(b) || (b >= 0 && beforeAlso.includes(text[start - 1] ?? ''))) return false;
  const c = codeAt(text, end);
  if (isWord(c)) return false;
  // `1.5`, `1-2`, `1,000` go on: the candidate is part of a longer number.
  return !(c >= 0 && afterAlso.includes(text[end] ?? '') && isDigit(codeAt(text, end + 1)));
}

// 13–19 digits, unbroken or in groups after a first group of four (every scheme prints 4 first).
// The lookbehind sits after the first character so that V8 still skips ahead on it, and drops
// starts inside a longer number in the engine rather than in code.
const CARD_ANCHOR = String.raw`[2-6](?<![\w.,+-][2-6])\d{3}[ -]?\d{4}`;
const IBAN_HEAD = /[A-Z]{2}\d{2} ?$/;
const CARD_AT = /\d{13,19}|\d{4}(?:[ -]\d{2,6}){1,6}/y;

function card(text: string, a: RegExpExecArray): Hit | null {
  const start = a.index;
  const m = stickyAt(CARD_AT, text, start);
  if (m === null) return null;
  const s = m[0];
  if (s.includes(' ') && s.includes('-')) return null; // one kind of separator, as printed
  // The digits of an IBAN (`DE89 3704 0044 …`) whose check failed are not a card either.
  if (IBAN_HEAD.test(text.slice(Math.max(0, start - 5), start))) return null;
  // Groups are split by one separator each: group k ends at separator k, with k separators
  // before it. Longest prefix first.
  const separators: number[] = [];
  let digits = '';
  for (let i = 0; i < s.length; i++) {
    if (isDigit(s.charCodeAt(i))) digits += s[i];
    else separators.push(i);
  }
  for (let k = separators.length; k >= 0; k--) {
    const end = k === separators.length ? s.length : (separators[k] as number);
    const n = end - k;
    if (n < 13) break;
    if (n > 19) continue;
    const d = digits.slice(0, n);
    if (cardPrefixValid(d) && luhnValid(d) && bounded(text, start, start + end, '.,+-', '.,-')) return { start, end: start + end, type: 'card' };
  }
  return null;
}

// Country, check digits, then up to 30 letters or digits, optionally in groups.
const IBAN_ANCHOR = String.raw`[A-Z]{2}\d{2}`;
const IBAN_AT = /[A-Z]{2}\d{2}(?: ?[A-Z0-9]){10,30}/y;

function iban(text: string, a: RegExpExecArray): Hit | null {
  const start = a.index;
  if (isAlnum(codeAt(text, start - 1))) return null;
  const length = ibanLength(text.slice(start, start + 2));
  if (length === undefined) return null;
  const m = stickyAt(IBAN_AT, text, start);
  if (m === null) return null;
  const s = m[0];
  let seen = 0;
  let end = 0;
  while (end < s.length && seen < length) {
    if (s[end] !== ' ') seen++;
    end++;
  }
  // The number must end there: `DE89…3000X` or a longer run of digits is something else.
  if (seen < length || isAlnum(codeAt(text, start + end))) return null;
  return ibanValid(s.slice(0, end).replaceAll(' ', '')) ? { start, end: start + end, type: 'iban' } : null;
}

const SSN_ANCHOR = String.raw`(\d(?<![\w-]\d)\d{2})-(\d{2})-(\d{4})(?![\w-])`;

function ssn(text: string, a: RegExpExecArray): Hit | null {
  const start = a.index;
  const end = start + a[0].length;
  if (!bounded(text, start, end, '-', '') || codeAt(text, end) === 45) return null;
  return ssnValid(a[1] ?? '', a[2] ?? '', a[3] ?? '') ? { start, end, type: 'ssn' } : null;
}

// The middle of a dotted quad (`.168.1.`): the rarest part to search for.
const IPV4_ANCHOR = String.raw`\.\d{1,3}\.\d{1,3}\.\d`;
const IPV4_AT = /(?:\d{1,3}\.){3}\d{1,3}/y;
// `version 1.2.3.4`, `v1.0.0.1`, `Chrome/120.0.0.0`: versions with four parts.
const VERSION_BEFORE = /(?:\bv|\bversion|\bver\.?|\brelease|\bbuild)[\s:=]*$|[A-Za-z0-9]\/$/i;

function ipv4(text: string, a: RegExpExecArray): Hit | null {
  let start = a.index;
  while (start > 0 && a.index - start < 3 && isDigit(text.charCodeAt(start - 1))) start--;
  if (start === a.index) return null;
  const m = stickyAt(IPV4_AT, text, start);
  if (m === null) return null;
  const s = m[0];
  const end = start + s.length;
  if (!bounded(text, start, end, '.', '.') || !ipv4Valid(s)) return null;
  // The unspecified, loopback and broadcast addresses say nothing about anyone.
  if (s === '0.0.0.0' || s === '255.255.255.255' || s.startsWith('127.')) return null;
  if (VERSION_BEFORE.test(text.slice(Math.max(0, start - 12), start))) return null;
  return { start, end, type: 'ip' };
}

// Two colons with at most four hex digits between them: every IPv6 text form has that
// (`::` or a full `:0db8:`); times (`12:30:45`) do too, and fail the check.
const IPV6_ANCHOR = String.raw`:[0-9A-Fa-f]{0,4}:`;
const IPV6_AT = new RegExp(IPV6_ANCHOR, 'y');
const MAX_IPV6 = 45;

function isIpv6Char(c: number): boolean {
  return isHex(c) || c === 58 /* : */ || c === 46 /* . */;
}

function ipv6(text: string, a: RegExpExecArray): Hit | number {
  // The whole run of hex digits, colons and dots around the anchor: every colon in it gives the
  // same candidate, so the scan resumes after it (`1:1:1:…` costs one look, not one per colon).
  let start = a.index;
  while (start > 0 && isIpv6Char(text.charCodeAt(start - 1))) start--;
  let end = a.index;
  while (end < text.length && isIpv6Char(text.charCodeAt(end))) end++;
  const runEnd = end;
  while (end > start && (text.charCodeAt(end - 1) === 46 || (text.charCodeAt(end - 1) === 58 && text.charCodeAt(end - 2) !== 58))) end--;
  while (start < a.index && text.charCodeAt(start) === 46) start++;
  // `ip:2001:db8::1`, `addr:fe80::1`: a label's colon is not part of the address.
  const labelled = text.charCodeAt(start) === 58 && text.charCodeAt(start + 1) !== 58 && isWord(codeAt(text, start - 1));
  if (labelled) start++;
  if (end - start > MAX_IPV6) return runEnd;
  const before = codeAt(text, start - 1);
  if ((!labelled && (isWord(before) || before === 58)) || before === 46 || isWord(codeAt(text, end))) return runEnd;
  const s = text.slice(start, end);
  // A digit is required: `Add::abc` and `cafe::face` are code, every real address has one.
  if (s.length < 6 || !/\d/.test(s) || s === '::1' || !ipv6Valid(s)) return runEnd;
  return { start, end, type: 'ip' };
}

// International (`+` and 8–15 digits, E.164), North American (NANP: area and exchange codes
// start 2–9), and national trunk-prefix forms (`0` then area code: UK, DE, FR, …), the last
// two only with separators so that bare numbers (timestamps, ids, counts) never match.
const NOT_AFTER = String.raw`[\w+(.-]`;
const PHONE_ANCHOR = [
  String.raw`(?<intl>(?:\+(?<![\w+]\+)|%2[Bb])\d[\d ().-]{6,24}\d)`,
  String.raw`(?<nanp>(?:\((?<!${NOT_AFTER}\()\d{3}\)[ .-]?|1(?<!${NOT_AFTER}1)[ .-]?(?:\(\d{3}\)[ .-]?|\d{3}[ .-])|[2-9](?<!${NOT_AFTER}[2-9])\d{2}[ .-])\d{3}[ .-]\d{4}(?![\w]|[.-]\d))`,
  String.raw`(?<trunk>(?:\((?<!${NOT_AFTER}\()0\d{1,4}\)|0(?<!${NOT_AFTER}0)\d{1,4})[ -]\d{2,8}(?:[ -]\d{2,4}){0,3})`,
].join('|');

const CONTINUES_NUMBER = /\d[ .-]$/;

function wellFormedPhone(s: string): boolean {
  if (/[ .-]{2,}/.test(s)) return false;
  const open = s.indexOf('(');
  const close = s.indexOf(')');
  if (open !== s.lastIndexOf('(') || close !== s.lastIndexOf(')') || (open < 0) !== (close < 0) || close < open) return false;
  return true;
}

function phone(text: string, a: RegExpExecArray): Hit | null {
  const s = a[0];
  const start = a.index;
  const g = a.groups ?? {};
  const hit = (end: number): Hit => ({ start, end: start + end, type: 'phone' });
  if (g.intl !== undefined) {
    // `%2B` is a URL-encoded `+` (`?to=%2B14155552671`).
    const plus = s[0] === '+' ? 1 : 3;
    if (plus === 1 && isWord(codeAt(text, start - 1))) return null;
    for (let end = s.length; end > plus; end = previousGroupEnd(s, end)) {
      const digits = digitCount(s, end) - (plus === 3 ? 1 : 0);
      const grouped = digits + plus !== end;
      if (digits < 8) break;
      if (digits <= 15 && (grouped || digits >= 10) && wellFormedPhone(s.slice(0, end)) && !isDigit(codeAt(text, start + end))) return hit(end);
    }
    return null;
  }
  if (!wellFormedPhone(s)) return null;
  // `3704 0044 0532 …`: a group that follows another group of digits is the rest of a number.
  if (CONTINUES_NUMBER.test(text.slice(Math.max(0, start - 2), start))) return null;
  if (g.trunk !== undefined) {
    // `00` is the international prefix (`0044 20 …`, then up to 15 digits); `000` starts nothing.
    const international = /^\(?00/.test(s);
    if (/^\(?000/.test(s)) return null;
    const [min, max] = international ? [10, 15] : [9, 12];
    // A longer candidate may end with an unrelated number: keep the longest well-sized prefix,
    // with one kind of separator after the area code (`01-02-2024 10` is a date and an hour).
    const afterArea = s.indexOf(')') + 1;
    for (let end = s.length; end > 0; end = previousGroupEnd(s, end)) {
      const n = digitCount(s, end);
      if (n < min) break;
      const rest = s.slice(afterArea, end);
      if (n <= max && !(rest.includes(' ', 1) && rest.includes('-', 1)) && bounded(text, start, start + end, '+(.-', '.-')) return hit(end);
    }
    return null;
  }
  if (!bounded(text, start, start + s.length, '+(.-', '.-')) return null;
  const digits = digitsOf(s, s.length);
  const national = digits.length === 11 ? digits.slice(1) : digits;
  if (national.length !== 10) return null;
  const area = national.charCodeAt(0) - 48;
  const exchange = national.charCodeAt(3) - 48;
  return area >= 2 && exchange >= 2 ? hit(s.length) : null;
}

type Resolver = (text: string, m: RegExpExecArray) => Hit | number | null;

// One pass per detector, in priority order. (One pass over the union of the anchors was
// measured at twice the cost: with digits, capitals, `.`, `:`, `+` and `(` all possible first
// characters, V8 can no longer skip ahead, while each anchor alone lets it.)
const PASSES: ReadonlyArray<readonly [RegExp, Resolver]> = [
  [new RegExp(IBAN_ANCHOR, 'g'), iban],
  [new RegExp(CARD_ANCHOR, 'g'), card],
  [new RegExp(SSN_ANCHOR, 'g'), ssn],
  [new RegExp(IPV4_ANCHOR, 'g'), ipv4],
  [new RegExp(PHONE_ANCHOR, 'g'), phone],
];

const HAS_DIGIT = /[0-9]/;

/** Redacts personal data into `counts`; returns the new text (the same string when nothing matched). */
export function redactPersonalInto(text: string, counts: RedactionCounts): string {
  let t = redactEmails(text, counts);
  // Every detector but e-mail needs a digit (an IPv6 address without one is not taken).
  if (!HAS_DIGIT.test(t)) return t;
  for (const [anchor, resolve] of PASSES) t = replaceAnchored(t, anchor, resolve, counts);
  return replaceAtChar(t, ':', IPV6_AT, ipv6, counts);
}

/**
 * Replaces e-mail addresses (`[EMAIL]`), payment card numbers (`[CARD]`), IBANs (`[IBAN]`),
 * US SSNs (`[SSN]`), IPv4 and IPv6 addresses (`[IP]`) and phone numbers (`[PHONE]`).
 * Applied under the `redacted` policy, after `redactSecrets`.
 */
export function redactPersonal(text: string): TextRedaction {
  const counts: RedactionCounts = {};
  return { text: redactPersonalInto(text, counts), counts };
}
