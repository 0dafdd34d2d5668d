// Issue 15 measurement aid: what reading a capture batch costs the ingester, format v3 (all JSON, the texts as escaped strings) against v4 (the texts as they are after each record's line), for the same records as the capture publishes them. "read": the message into records (JSON.parse, or readCaptureMessage); "decode": decodeBatch, the ingester's whole work on a message before ClickHouse (rows, spans, content prepared). usage: KIB=1 node --import tsx apps/gateway/scripts/decode-cost.ts
import { Capture, keepContent, keepResponseChunk } from '@sightline/capture';
import { MemoryBus } from '@sightline/bus';
import { readCaptureMessage } from '@sightline/core';
import { decodeBatch, SpanBuilder } from '@sightline/spans';
import { redactSecrets } from '@sightline/redact';
import { captureConfig, servedRecord } from '../../../test/support/records.js';

const N = 100;
const kib = Number(process.env.KIB ?? 1);
const prose = (head: string, tail: string, bytes: number) => head + 'the quick brown fox jumps over the lazy dog. '.repeat(Math.ceil(bytes / 45)).slice(0, Math.max(0, bytes - head.length - tail.length)) + tail;
const body = Buffer.from(prose('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"', '"}]}', 1024 * kib));
const resp = Buffer.from(JSON.stringify({ id: 'chatcmpl-abc123', object: 'chat.completion', created: 1733100000, model: 'gpt-4o-mini-2024-07-18', choices: [{ index: 0, message: { role: 'assistant', content: 'Hello! "quoted" '.repeat(30) }, finish_reason: 'stop' }], usage: { prompt_tokens: 250, completion_tokens: 80, total_tokens: 330 } }));

const bus = new MemoryBus();
const content = { maxBytes: 256 * 1024, keepBase64: false, redactSecrets };
const capture = new Capture({ instance: 'decode-cost', config: captureConfig({ flushIntervalMs: 60_000 }), publisher: bus, content });
for (let i = 0; i < N; i++) {
  const r = servedRecord({ seq: i + 1 });
  r.contentPolicy = 'full';
  r.requestBody = body;
  r.requestBytes = body.length;
  keepResponseChunk(r, resp);
  keepContent(r, resp, content.maxBytes);
  capture.record(r);
}
await capture.close(5000);
const v4 = (await bus.fetch(1000, 100)).map((m) => m.data);
const v3 = v4.map((d) => Buffer.from(JSON.stringify({ ...(readCaptureMessage(d) as object), v: 3 })));
const bytes = (a: Uint8Array[]) => a.reduce((n, d) => n + d.length, 0);
const builder = new SpanBuilder();
for (const [a, b] of v4.map((d, i) => [decodeBatch(d, builder), decodeBatch(v3[i]!, builder)] as const)) {
  if (JSON.stringify(a.content) !== JSON.stringify(b.content) || JSON.stringify(a.requests) !== JSON.stringify(b.requests)) throw new Error('v3 and v4 decode differently');
}

const median = (a: number[]) => a.sort((x, y) => x - y)[a.length >> 1]!;
const time = (f: () => void) => {
  const t = process.hrtime.bigint();
  f();
  return Number(process.hrtime.bigint() - t) / 1e3 / N;
};
const r3: number[] = [], r4: number[] = [], d3: number[] = [], d4: number[] = [];
for (let k = 0; k < 200; k++) {
  const x3 = time(() => { for (const d of v3) JSON.parse(d.toString('utf8')); });
  const x4 = time(() => { for (const d of v4) readCaptureMessage(d); });
  const y3 = time(() => { for (const d of v3) decodeBatch(d, builder); });
  const y4 = time(() => { for (const d of v4) decodeBatch(d, builder); });
  if (k >= 50) { r3.push(x3); r4.push(x4); d3.push(y3); d4.push(y4); }
}
console.log(`${kib} KiB prompt, ${N} records in ${v4.length} message(s), ${bytes(v3)} bytes as v3, ${bytes(v4)} as v4; µs/record (median of 150 rounds): read v3 ${median(r3).toFixed(2)}, v4 ${median(r4).toFixed(2)}; decode v3 ${median(d3).toFixed(2)}, v4 ${median(d4).toFixed(2)}`);
