/**
 * The end-to-end check shared by both setups: requests through the gateway with the
 * official OpenAI client, then each one found through the query API with its stages.
 */
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { waitFor } from './servers.js';

export interface SentRequest {
  traceId: string;
  stream: boolean;
  outputTokens: number;
}

/** Sends `n` JSON and `n` streamed requests; returns their trace ids and usage. */
export async function sendMixed(gatewayUrl: string, n: number): Promise<SentRequest[]> {
  const client = new OpenAI({ apiKey: 'sk-e2e', baseURL: `${gatewayUrl}/v1`, maxRetries: 0 });
  const sent: SentRequest[] = [];
  for (let i = 0; i < n; i++) {
    const { data, response } = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `json ${i}` }] }).withResponse();
    assert.ok((data.choices[0]?.message.content ?? '').length > 0);
    sent.push({ traceId: response.headers.get('x-sightline-trace-id') ?? '', stream: false, outputTokens: data.usage?.completion_tokens ?? -1 });

    const s = await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: `stream ${i}` }], stream: true, stream_options: { include_usage: true } }).withResponse();
    let text = '';
    let usage = -1;
    for await (const c of s.data) {
      text += c.choices[0]?.delta.content ?? '';
      if (c.usage) usage = c.usage.completion_tokens;
    }
    assert.ok(text.length > 0);
    sent.push({ traceId: s.response.headers.get('x-sightline-trace-id') ?? '', stream: true, outputTokens: usage });
  }
  for (const r of sent) assert.match(r.traceId, /^[0-9a-f]{32}$/);
  return sent;
}

interface Waterfall {
  stage: string;
  offset_ns: number;
  duration_ns: number;
}
interface RequestView {
  trace_id: string;
  stream: boolean;
  http_status: number;
  total_ns: number;
  gateway_ns: number;
  upstream_ns: number;
  usage: { output_tokens: number };
  waterfall: Waterfall[];
}

/** Finds every request through the query API and checks its waterfall. */
export async function checkCaptured(queryUrl: string, sent: SentRequest[]): Promise<void> {
  for (const s of sent) {
    let view: RequestView | undefined;
    await waitFor(
      `request ${s.traceId} in the query API`,
      async () => {
        const res = await fetch(`${queryUrl}/v1/requests/${s.traceId}`);
        if (res.status === 404) return false;
        assert.equal(res.status, 200);
        const body = (await res.json()) as { requests: RequestView[] };
        assert.equal(body.requests.length, 1, 'each request is stored exactly once');
        view = body.requests[0];
        return true;
      },
      30_000,
      100,
    );
    const v = view!;
    assert.equal(v.http_status, 200);
    assert.equal(v.stream, s.stream);
    assert.equal(v.usage.output_tokens, s.outputTokens);
    const stages = v.waterfall.map((w) => w.stage);
    for (const st of ['ingress.read', 'parse', 'auth', 'route', 'translate.request', 'upstream.send', 'upstream.wait', 'upstream.stream', 'translate.response', 'egress.write']) {
      assert.ok(stages.includes(st), `${s.traceId}: stage ${st} missing (${stages.join(', ')})`);
    }
    // The stages and the provider wait add up to the total, within 5 %.
    const sum = v.waterfall.reduce((a, w) => a + w.duration_ns, 0);
    assert.ok(Math.abs(sum - v.total_ns) <= v.total_ns * 0.05, `${s.traceId}: stages sum to ${sum} ns, total ${v.total_ns} ns`);
    assert.ok(Math.abs(v.gateway_ns + v.upstream_ns - v.total_ns) <= v.total_ns * 0.05);
    // Offsets follow one another: a waterfall, not a bag of spans.
    for (let i = 1; i < v.waterfall.length; i++) {
      const prev = v.waterfall[i - 1]!;
      assert.ok(Math.abs(v.waterfall[i]!.offset_ns - (prev.offset_ns + prev.duration_ns)) <= 1, `${s.traceId}: gap before ${v.waterfall[i]!.stage}`);
    }
  }
}

/** Checks the per-stage view counts every request sent in this run. */
export async function checkStages(queryUrl: string, sentCount: number, sinceMs: number): Promise<void> {
  const from = new Date(sinceMs - 1000).toISOString();
  const res = await fetch(`${queryUrl}/v1/stages?from=${encodeURIComponent(from)}`);
  assert.equal(res.status, 200);
  const body = (await res.json()) as { stages: { stage: string; count: number; p50_ns: number; p99_ns: number }[] };
  const byStage = new Map(body.stages.map((s) => [s.stage, s]));
  for (const st of ['ingress.read', 'parse', 'upstream.wait', 'egress.write']) {
    const s = byStage.get(st);
    assert.ok(s !== undefined, `stage ${st} missing from /v1/stages`);
    assert.equal(s.count, sentCount, `${st} count`);
    assert.ok(s.p50_ns > 0 && s.p99_ns >= s.p50_ns);
  }
  const bad = await fetch(`${queryUrl}/v1/stages?from=yesterday`);
  assert.equal(bad.status, 400);
  const missing = await fetch(`${queryUrl}/v1/requests/${'0'.repeat(31)}1`);
  assert.equal(missing.status, 404);
}
