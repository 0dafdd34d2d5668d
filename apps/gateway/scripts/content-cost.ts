// Issue 15 measurement aid: what the content part of a record costs in the content thread as escaped JSON (capture format v3, as it was written) against its texts as they are after the record's line (format v4, contentWire as the capture writes it now). Decoding, base64 placeholders and secret redaction are in both. usage: KIB=1 node --import tsx apps/gateway/scripts/content-cost.ts
import { RequestRecord, keepContent, keepResponseChunk, contentWire, contentOf } from '@sightline/capture';
import type { WireContent } from '@sightline/core';
import { redactSecrets } from '@sightline/redact';
import { servedRecord } from '../../../test/support/records.js';
const N = 200;
// Format v3's content member, as capture wrote it until v4: the texts as JSON strings.
const v3Parts = (c: WireContent): string[] => [
  `{"policy":${JSON.stringify(c.policy)},"request":`,
  JSON.stringify(c.request),
  `,"requestBytes":${c.requestBytes},"requestTruncated":${c.requestTruncated},"response":`,
  JSON.stringify(c.response),
  `,"responseBytes":${c.responseBytes},"responseTruncated":${c.responseTruncated},"redactions":${JSON.stringify(c.redactions)}}`,
];
const prose = (head: string, tail: string, bytes: number) => head + 'the quick brown fox jumps over the lazy dog. '.repeat(Math.ceil(bytes / 45)).slice(0, Math.max(0, bytes - head.length - tail.length)) + tail;
const kib = Number(process.env.KIB ?? 1);
const body = Buffer.from(prose('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"', '"}]}', 1024 * kib));
const resp = Buffer.from(JSON.stringify({ id: 'chatcmpl-abc123', object: 'chat.completion', created: 1733100000, model: 'gpt-4o-mini-2024-07-18', choices: [{ index: 0, message: { role: 'assistant', content: 'Hello! "quoted" '.repeat(30) }, finish_reason: 'stop' }], usage: { prompt_tokens: 250, completion_tokens: 80, total_tokens: 330 } }));
const o = { maxBytes: 256 * 1024, keepBase64: false, redactSecrets };
const recs: RequestRecord[] = Array.from({ length: N }, (_, i) => { const r = servedRecord({ seq: i }); r.contentPolicy = 'full'; r.requestBody = body; r.requestBytes = body.length; keepResponseChunk(r, resp); keepContent(r, resp, o.maxBytes); return r; });
const out = Buffer.alloc(8 * 1024 * 1024);
const median = (a: number[]) => a.sort((x, y) => x - y)[a.length >> 1]!;
const time = (f: () => void) => { const t = process.hrtime.bigint(); f(); return Number(process.hrtime.bigint() - t) / 1e3 / N; };
const a: number[] = [], b: number[] = [], c: number[] = [];
for (let k = 0; k < 400; k++) {
  // v3: content as JSON text parts, measured, then written
  const ta = time(() => { let at = 0; for (const r of recs) { const parts = v3Parts(contentOf(r, o)!); let n = 0; for (const p of parts) n += Buffer.byteLength(p); if (at + n > out.length) at = 0; for (const p of parts) at += out.write(p, at); } });
  // v4: the same content (decoded, placeholders, redacted), its member with the texts' lengths, then the texts as they are
  const tb = time(() => { let at = 0; for (const r of recs) { const w = contentWire(contentOf(r, o)!); const n = Buffer.byteLength(w.json) + w.textBytes; if (at + n > out.length) at = 0; at += out.write(w.json, at); at += out.write(w.request, at); at += out.write(w.response, at); } });
  // the decode, placeholder and redaction alone
  const tc = time(() => { for (const r of recs) contentOf(r, o); });
  if (k >= 100) { a.push(ta); b.push(tb); c.push(tc); }
}
console.log(`${kib} KiB prompt, µs/record (median of 300 batches of ${N}): content as JSON (v3) ${median(a).toFixed(2)}; texts as they are (v4) ${median(b).toFixed(2)}; of which decode+placeholder+redaction ${median(c).toFixed(2)}`);
