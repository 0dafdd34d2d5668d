/**
 * Secrets: redacted under every policy (issue 11: "no provider key, no Sightline key ever
 * reaches ClickHouse or the spool in clear").
 *
 * One scan for anchors (see ANCHOR), then a sticky regex reads each candidate, and a check
 * decides (a key must look generated, a `Basic` credential must decode to `user:pass`, a
 * labelled value must not be code) before it is replaced. Key shapes follow the providers'
 * documented prefixes and the patterns of gitleaks
 * (https://github.com/gitleaks/gitleaks/tree/master/cmd/generate/config/rules).
 */

import { anyCase, isAlnum, isHex, isWord, looksGenerated, replaceAnchored, stickyAt } from './scan.js';
import type { Hit } from './scan.js';
import { isPlaceholder } from './types.js';
import type { RedactionCounts, SecretKind, SecretType, TextRedaction } from './types.js';

interface Provider {
  kind: SecretKind;
  /** The whole token, anchored. */
  exact: RegExp;
  source: string;
  /**
   * Length of the literal prefix when the body must look generated (`looksGenerated`), or
   * -1 when the shape alone is specific enough.
   */
  generatedAfter: number;
}

function provider(kind: SecretKind, source: string, generatedAfter = -1): Provider {
  return { kind, source, exact: new RegExp(`^(?:${source})$`), generatedAfter };
}

// Order matters: the first provider whose shape fits names the kind (`sk-ant-` before `sk-`).
const PROVIDERS: readonly Provider[] = [
  provider('anthropic', String.raw`sk-ant-[A-Za-z0-9_-]{20,300}`, 7),
  provider('openrouter', String.raw`sk-or-v1-[0-9a-f]{64}`),
  provider('langfuse', String.raw`sk-lf-[A-Za-z0-9-]{20,100}`, 6),
  // Legacy `sk-` + 48, `sk-proj-`, `sk-svcacct-`, `sk-admin-`; also DeepSeek and other
  // OpenAI-compatible providers that copied the prefix (counted as openai).
  provider('openai', String.raw`sk-[A-Za-z0-9_-]{20,300}`, 3),
  // @sightline/directory: `sl-` and 43 base64url characters (32 random bytes), nothing more.
  provider('sightline', String.raw`sl-[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])`),
  provider('google', String.raw`AIza[0-9A-Za-z_-]{35}`),
  provider('google', String.raw`ya29\.[0-9A-Za-z_-]{20,2048}`, 5),
  provider('aws', String.raw`(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}`),
  provider('github', String.raw`gh[pousr]_[A-Za-z0-9]{36,251}`),
  provider('github', String.raw`github_pat_[A-Za-z0-9_]{22,255}`),
  provider('gitlab', String.raw`glpat-[A-Za-z0-9_-]{20,100}`, 6),
  provider('slack', String.raw`xox[abposr]-[A-Za-z0-9-]{10,250}`, 5),
  provider('slack', String.raw`xapp-[0-9]-[A-Za-z0-9-]{10,250}`),
  provider('stripe', String.raw`(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,250}`),
  provider('stripe', String.raw`whsec_[A-Za-z0-9+/=]{24,100}`),
  provider('huggingface', String.raw`hf_[A-Za-z0-9]{30,100}`, 3),
  provider('groq', String.raw`gsk_[A-Za-z0-9]{40,100}`),
  provider('xai', String.raw`xai-[A-Za-z0-9]{60,150}`),
  provider('perplexity', String.raw`pplx-[A-Za-z0-9]{40,100}`),
  provider('replicate', String.raw`r8_[A-Za-z0-9]{30,100}`),
  provider('npm', String.raw`npm_[A-Za-z0-9]{36}`),
  provider('sendgrid', String.raw`SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64}`),
];

const JWT_SOURCE = String.raw`eyJ[A-Za-z0-9_-]{5,8192}\.eyJ[A-Za-z0-9_-]{5,8192}\.[A-Za-z0-9_-]{0,8192}`;
const JWT_EXACT = new RegExp(`^${JWT_SOURCE}$`);

const PASSWORD_LABELS = ['password', 'passwd', 'passphrase', 'passwort'];
const SECRET_LABELS = [
  'api~key',
  'api~token',
  'access~token',
  'refresh~token',
  'auth~token',
  'session~token',
  'client~secret',
  'secret~access~key',
  'secret~key',
  'private~token',
];
// `password_confirmation=`, `password2=` are passwords too; `password_hash=` is not a password.
const PASSWORD_SUFFIX = String.raw`(?:[_-]?(?:confirm(?:ation)?|again|repeat|[0-9]))?`;
const LABELS = `(?:${PASSWORD_LABELS.map(anyCase).join('|')})${PASSWORD_SUFFIX}|${SECRET_LABELS.map(anyCase).join('|')}`;
// A quoted value up to the same quote, or a bare value up to a delimiter; a bare value
// followed by `(`, `.`, `[` is code (`password = get_password()`), not a literal (and one
// followed by `)` is checked in code). Only spaces and tabs after the separator:
// `password:\n  file: x` is YAML nesting.
const LABEL_VALUE = String.raw`(?:=>|:=|==|=|:)[ \t]*(?:(?<q>\\?["'\x60])(?<qv>(?:(?!\k<q>)[^\n\\]){1,256})(?=\k<q>)|(?<uv>[^\s"'\x60\\,;&}()\[\]<>]{1,256})(?=[\s"'\x60\\,;&}<>)]|$))`;
// URL-encoded (`password%3Dhunter2%26next%3D…`, a whole query string encoded into another):
// the value runs to the next encoded `&`, space or quote.
const ENCODED_VALUE = String.raw`%3[DdAa](?<ev>(?:[A-Za-z0-9._~!*()-]|%(?!2[06Cc]|22|27)[0-9A-Fa-f]{2}){1,256})`;

// Scanning: per-character regex work is the whole cost of redaction, and V8 scans fastest for
// a pattern whose first characters are rare and literal (it can then skip ahead); a lookbehind
// or a broad class in first position costs 10–20 µs/KiB on its own. So one pass looks for
// anchors only — the separator after a key prefix (`sk-`, `ghp_`, `ya29.`), a JWT's first
// `.eyJ`, `-----BEGIN `, `AIza`/`AKIA`…, `://`, `Bearer `/`Basic `, and a `:`/`=` right after a
// credential label — and a sticky regex then reads the candidate from where it starts, with
// the boundary checks done in code.
//
// A lookbehind takes the first alternative that fits, so a prefix that ends another one comes
// after it (`gsk` before `sk`, or `gsk_…` would be read as `sk_…` glued to a `g`).
const KEY_PREFIXES = String.raw`gsk|sk|rk|sl|gh[pousr]|github|glpat|xox[abposr]|xapp|whsec|hf|xai|pplx|r8|npm`;
const DOT_PREFIXES = String.raw`ya29|SG|hooks|discord|discordapp`;
const ANCHOR = new RegExp(
  [
    String.raw`(?<sep>[-_])(?=[A-Za-z0-9_-]{8})(?<=(?<pfx>${KEY_PREFIXES})[-_])`,
    String.raw`(?<dot>\.)(?:(?<jwt>(?=eyJ))|(?<=(?<dpfx>${DOT_PREFIXES})\.))`,
    String.raw`(?<pem>-----BEGIN )`,
    String.raw`(?<upper>A(?:Iza|KIA|SIA|BIA|CCA))`,
    String.raw`(?<url>:\/\/)`,
    String.raw`(?<auth>[Bb](?:earer|asic)(?:[ \t]|%20|\+))`,
    String.raw`(?<assign>[:=]|%3[DdAa])(?<=(?<label>${LABELS})(?<lsep>\\?["'\x60]?[ \t]*)(?:[:=]|%3[DdAa]))`,
  ].join('|'),
  'g',
);

// Group 1 is a JWT, group i + 2 the provider PROVIDERS[i]: the match names its kind.
const TOKEN_AT = new RegExp(`(${JWT_SOURCE})|${PROVIDERS.map((p) => `(${p.source})`).join('|')}`, 'y');

/** The kind of a TOKEN_AT match, after the provider's own check; `null` keeps it. */
function tokenType(m: RegExpExecArray): SecretType | null {
  if (m[1] !== undefined) return 'jwt';
  for (let i = 0; i < PROVIDERS.length; i++) {
    const token = m[i + 2];
    if (token === undefined) continue;
    const p = PROVIDERS[i] as Provider;
    return p.generatedAfter < 0 || looksGenerated(token.slice(p.generatedAfter)) ? `secret:${p.kind}` : null;
  }
  return null;
}

const HOOK_AT = /(?<prefix>hooks\.slack\.com\/(?:services|workflows|triggers)\/)[A-Za-z0-9/_-]{20,300}|(?<dprefix>discord(?:app)?\.com\/api\/webhooks\/)[0-9]{5,30}\/[A-Za-z0-9_-]{20,200}/y;
// To its END line (looked for up to 16 KiB ahead, and not past another BEGIN, so that a text
// of repeated headers costs linear time); without one (content cut at the capture limit, a
// partial paste), over the
// header lines (`Proc-Type: …`), the full base64 lines (40+ characters: keys are written 64 or
// 70 to a line) and one last partial line, and no further. Line breaks may be real or
// JSON-escaped (`\n` in raw JSON text).
const PEM_AT = new RegExp(
  String.raw`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:(?:(?!-----BEGIN )[\s\S]){0,16384}?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|` +
    String.raw`(?:\s|\\[nr])*(?:[A-Za-z][A-Za-z-]{0,30}: [^\n\\]{0,200}(?:\r?\n|(?:\\r)?\\n)(?:\s|\\[nr])*){0,4}(?:[A-Za-z0-9+/=]{40,128}(?:\r?\n|(?:\\r)?\\n)){0,256}(?:[A-Za-z0-9+/=]{1,128}(?=$|[\s"'\x60\\<]))?)`,
  'y',
);
// `scheme://user:password@host`: the user and the host stay.
const URL_AT = /:\/\/(?<user>[^\s:/?#@"'<>\\[\]]{0,256}):(?<pw>[^\s/?#@"'<>\\]{1,256})@/y;
const AUTH_AT = /(?<bp>[Bb]earer(?:[ \t]+|%20|\+))(?<bearer>[A-Za-z0-9._~+/-]{16,4096}=*)|(?<basicp>[Bb]asic[ \t]+)(?<basic>[A-Za-z0-9+/]{8,2048}={0,2})(?![A-Za-z0-9+/=])/y;
const VALUE_AT = new RegExp(`${LABEL_VALUE}|${ENCODED_VALUE}`, 'y');

/**
 * What a credential-shaped token is: a JWT, a provider's key, or nothing known (`null`).
 * Used for tokens found by shape and for values found by context (`Bearer x`, `api_key=x`).
 */
export function classifyToken(token: string): SecretType | null {
  if (token.startsWith('eyJ') && JWT_EXACT.test(token)) return 'jwt';
  for (const p of PROVIDERS) {
    if (p.exact.test(token) && (p.generatedAfter < 0 || looksGenerated(token.slice(p.generatedAfter)))) return `secret:${p.kind}`;
  }
  return null;
}

function isTokenChar(c: number): boolean {
  return isWord(c) || c === 45;
}

/** Whether `text[i]` follows a URL-encoded character (`%3D`, `%20`). */
function afterEncoded(text: string, i: number): boolean {
  return i >= 3 && text.charCodeAt(i - 3) === 37 /* % */ && isHex(text.charCodeAt(i - 2)) && isHex(text.charCodeAt(i - 1));
}

/**
 * Whether a token may start at `i`: after a character that cannot be part of it, or right
 * after a URL-encoded character (`Bearer%20sk-…`, `key%3Dsk-…`) or a JSON escape (`\nsk-…` in
 * raw JSON text).
 */
function tokenStarts(text: string, i: number): boolean {
  if (i === 0 || !isTokenChar(text.charCodeAt(i - 1)) || afterEncoded(text, i)) return true;
  const c = text.charCodeAt(i - 1);
  return i >= 2 && text.charCodeAt(i - 2) === 92 /* \ */ && (c === 110 || c === 114 || c === 116);
}

// Bare values that are code or configuration syntax, not a password: types, null-ish
// literals, references to variables or templates, masks.
const CODE_VALUE = /^(?:str|string|none|null|nil|undefined|true|false|bool|boolean|int|number|any|bytes|text|optional|required|secretstr|password|hidden|redacted|\*+|x+|\?+)$/i;
const REFERENCE = /^(?:[$%{<*]|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$)/;
const TEMPLATE = /^(?:\$\{.*\}|\{\{.*\}\}|<[^>]*>|\*+|•+|%\(?\w+\)?s?)$/;

function keepValue(value: string, quoted: boolean): boolean {
  if (isPlaceholder(value) || value.trim() === '' || TEMPLATE.test(value)) return true;
  // `private_key: -----BEGIN …`: the key block is read whole by its own detector.
  if (value.startsWith('-----BEGIN')) return true;
  return !quoted && (CODE_VALUE.test(value) || REFERENCE.test(value));
}

function decodesToUserPass(b64: string): boolean {
  const decoded = Buffer.from(b64, 'base64').toString('latin1');
  return decoded.indexOf(':') > 0 && /^[\x20-\x7e]+$/.test(decoded);
}

/** Reads the candidate an anchor points at; `null` keeps the text as it is. */
function resolve(text: string, a: RegExpExecArray): Hit | null {
  const g = a.groups ?? {};
  const at = a.index;
  if (g.sep !== undefined || g.dot !== undefined) {
    let start = at - (g.pfx ?? g.dpfx ?? '').length;
    if (g.jwt !== undefined) {
      // Back to the start of the header (base64url, at most 8 KiB).
      start = at;
      while (start > 0 && at - start < 8192 && isTokenChar(text.charCodeAt(start - 1))) start--;
      if (!text.startsWith('eyJ', start)) return null;
    }
    if (!tokenStarts(text, start)) return null;
    if (g.dpfx === 'hooks' || g.dpfx?.startsWith('discord')) {
      const h = stickyAt(HOOK_AT, text, start);
      if (h === null) return null;
      const prefix = h.groups?.prefix ?? h.groups?.dprefix ?? '';
      return { start: start + prefix.length, end: start + h[0].length, type: h.groups?.prefix !== undefined ? 'secret:slack' : 'secret:discord' };
    }
    const t = stickyAt(TOKEN_AT, text, start);
    const type = t === null ? null : tokenType(t);
    return t === null || type === null ? null : { start, end: start + t[0].length, type: type };
  }
  if (g.upper !== undefined) {
    if (!tokenStarts(text, at)) return null;
    const t = stickyAt(TOKEN_AT, text, at);
    const type = t === null ? null : tokenType(t);
    return t === null || type === null ? null : { start: at, end: at + t[0].length, type: type };
  }
  if (g.assign !== undefined) {
    const label = g.label ?? '';
    const start = at - (g.lsep ?? '').length - label.length;
    const before = start > 0 ? text.charCodeAt(start - 1) : 32;
    // A label starts a word or a camelCase part (`dbPassword`, `clientSecret`), or follows a
    // URL-encoded character (`%26password%3D…`).
    const camel = before >= 97 && before <= 122 && label.charCodeAt(0) <= 90;
    if (isAlnum(before) && !camel && !afterEncoded(text, start)) return null;
    const v = stickyAt(VALUE_AT, text, at);
    if (v === null) return null;
    const quoted = v.groups?.qv !== undefined;
    const value = v.groups?.qv ?? v.groups?.uv ?? v.groups?.ev ?? '';
    if (keepValue(value, quoted)) return null;
    // `login(password=pw)`: a bare name closing a call is a variable; `…=hunter2)` is not.
    if (v.groups?.uv !== undefined && text.charCodeAt(at + v[0].length) === 41 /* ) */ && !looksGenerated(value)) return null;
    let type = classifyToken(value);
    if (type === null) {
      if (/^pas/i.test(label)) type = 'password';
      else if (/access[_-]?key$/i.test(label) && /^[A-Za-z0-9/+=]{40}$/.test(value)) type = 'secret:aws';
      else if (value.length >= 8 && looksGenerated(value)) type = 'secret';
      else return null;
    }
    const end = at + v[0].length;
    return { start: end - value.length, end, type: type };
  }
  if (g.pem !== undefined) {
    const p = stickyAt(PEM_AT, text, at);
    return p === null ? null : { start: at, end: at + p[0].length, type: 'private_key' };
  }
  if (g.url !== undefined) {
    const u = stickyAt(URL_AT, text, at);
    const pw = u?.groups?.pw;
    if (u === null || pw === undefined || isPlaceholder(pw)) return null;
    const end = at + u[0].length - 1; // the `@` stays
    return { start: end - pw.length, end, type: classifyToken(pw) ?? 'password' };
  }
  if (g.auth !== undefined) {
    if (at > 0 && isAlnum(text.charCodeAt(at - 1))) return null;
    const h = stickyAt(AUTH_AT, text, at);
    if (h === null) return null;
    const end = at + h[0].length;
    const bearer = h.groups?.bearer;
    if (bearer !== undefined) {
      const type = classifyToken(bearer) ?? (looksGenerated(bearer) ? 'secret' : null);
      return type === null ? null : { start: end - bearer.length, end, type: type };
    }
    const basic = h.groups?.basic;
    if (basic === undefined || !decodesToUserPass(basic)) return null;
    return { start: end - basic.length, end, type: 'secret' };
  }
  return null;
}

/** Redacts secrets into `counts`; returns the new text (the same string when nothing matched). */
export function redactSecretsInto(text: string, counts: RedactionCounts): string {
  return replaceAnchored(text, ANCHOR, resolve, counts);
}

/**
 * Replaces provider keys and tokens (`[SECRET:<kind>]`), bearer and basic credentials and
 * labelled secrets (`[SECRET]`), JWTs (`[JWT]`), PEM private keys (`[PRIVATE_KEY]`) and
 * passwords in URLs and assignments (`[PASSWORD]`). Applied under every policy.
 */
export function redactSecrets(text: string): TextRedaction {
  const counts: RedactionCounts = {};
  return { text: redactSecretsInto(text, counts), counts };
}
