/**
 * The dashboard's pure modules, run in Node: what the URL says (routes, time ranges,
 * buckets), series for the charts, the stage that moved, the waterfall's layout, and the
 * reading of stored prompts and answers in both APIs.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chooseInterval, hashOf, mostMoved, parseHash, pivot, rangeOnly, resolveRange } from '../public/lib/state.js';
import { layout, ticks } from '../public/lib/waterfall.js';
import { answer, conversation } from '../public/lib/content.js';
import { change, duration, money, percent } from '../public/lib/format.js';

const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);

test('a view is its URL: page, argument and parameters survive a round trip', () => {
  const r = parseHash('#/request/0123abcd?range=6h&model=gpt-4o');
  assert.equal(r.page, 'request');
  assert.equal(r.arg, '0123abcd');
  assert.equal(r.params.get('range'), '6h');
  assert.equal(hashOf(r.page, r.arg, r.params), '#/request/0123abcd?range=6h&model=gpt-4o');
  assert.deepEqual({ ...parseHash(''), params: null }, { page: 'overview', arg: null, params: null });
  assert.equal(parseHash('#/requests').arg, null);
  // Empty parameters are left out; an argument is encoded.
  assert.equal(hashOf('requests', null, { model: '', status: '5xx', q: 'a b&c' }), '#/requests?status=5xx&q=a+b%26c');
  assert.equal(parseHash(hashOf('x', 'a/b c', {})).arg, 'a/b c');
  assert.deepEqual(rangeOnly(new URLSearchParams('range=15m&model=m&cursor=c')), { range: '15m' });
});

test('the time range: a preset ending now, or from/to when both are valid', () => {
  const def = resolveRange(new URLSearchParams(''), NOW);
  assert.deepEqual([def.fromMs, def.toMs, def.preset?.id], [NOW - 3_600_000, NOW, '1h']);
  assert.equal(resolveRange(new URLSearchParams('range=7d'), NOW).fromMs, NOW - 7 * 86_400_000);
  assert.equal(resolveRange(new URLSearchParams('range=nonsense'), NOW).preset?.id, '1h');
  const abs = resolveRange(new URLSearchParams('from=2026-11-29T10:00:00Z&to=2026-11-29T11:30:00Z&range=15m'), NOW);
  assert.deepEqual([abs.fromMs, abs.toMs, abs.preset], [Date.UTC(2026, 10, 29, 10), Date.UTC(2026, 10, 29, 11, 30), null]);
  assert.equal(resolveRange(new URLSearchParams(`from=${NOW - 1000}&to=${NOW}`), NOW).fromMs, NOW - 1000, 'milliseconds too');
  // Backwards or half a range: the preset.
  assert.equal(resolveRange(new URLSearchParams('from=2026-11-29T11:00:00Z&to=2026-11-29T10:00:00Z'), NOW).preset?.id, '1h');
  assert.equal(resolveRange(new URLSearchParams('from=2026-11-29T11:00:00Z'), NOW).preset?.id, '1h');
});

test('buckets: the finest interval that keeps a chart at most 750 points wide', () => {
  const h = 3_600_000;
  assert.equal(chooseInterval(h).id, '1m');
  assert.equal(chooseInterval(12.5 * h).id, '1m');
  assert.equal(chooseInterval(12.5 * h + 60_000).id, '5m');
  assert.equal(chooseInterval(24 * h).id, '5m');
  assert.equal(chooseInterval(7 * 24 * h).id, '1h');
  assert.equal(chooseInterval(30 * 24 * h).id, '1h');
  assert.equal(chooseInterval(90 * 24 * h).id, '1d');
  assert.equal(chooseInterval(5000 * 24 * h).id, '1d', 'the coarsest when nothing fits');
});

test('chart series: metric rows pivoted to one aligned column per group, gaps as null', () => {
  const rows = [
    { time: '2026-11-30T10:01:00.000Z', model: 'b', requests: 3 },
    { time: '2026-11-30T10:00:00.000Z', model: 'a', requests: 1 },
    { time: '2026-11-30T10:01:00.000Z', model: 'a', requests: 2 },
    { time: '2026-11-30T10:00:00.000Z', model: 'b', requests: null },
  ];
  const p = pivot(rows, (r) => String(r.model), 'requests');
  const t0 = Date.UTC(2026, 10, 30, 10) / 1000;
  assert.deepEqual(p.x, [t0, t0 + 60]);
  assert.deepEqual(p.groups, [
    { name: 'b', values: [null, 3] },
    { name: 'a', values: [1, 2] },
  ]);
});

test('the stage that moved most: the largest change of p95, weighted by the share of requests through it, among stages seen in both periods', () => {
  const now = [
    { stage: 'auth', p95_ms: 0.2, requests: 100 },
    { stage: 'upstream.wait', p95_ms: 90, requests: 100 },
    { stage: 'parse', p95_ms: 3, requests: 100 },
    { stage: 'cache', p95_ms: 500, requests: 100 },
    // +40 ms, but for 5 % of the requests only: 2 ms on the whole.
    { stage: 'upstream.retry', p95_ms: 240, requests: 5 },
  ];
  const before = [
    { stage: 'auth', p95_ms: 0.1, requests: 100 },
    { stage: 'upstream.wait', p95_ms: 100, requests: 90 },
    { stage: 'parse', p95_ms: 1, requests: 100 },
    { stage: 'upstream.retry', p95_ms: 200, requests: 3 },
  ];
  assert.deepEqual(mostMoved(now, before), { stage: 'upstream.wait', deltaMs: -10 });
  assert.deepEqual(mostMoved(now.filter((n) => n.stage !== 'upstream.wait'), before), { stage: 'parse', deltaMs: 2 });
  assert.deepEqual(mostMoved([{ stage: 'upstream.retry', p95_ms: 240, requests: 5 }], before), { stage: 'upstream.retry', deltaMs: 40 });
  assert.equal(mostMoved(now, []), null);
});

test('the waterfall to scale: bars as shares of the total, attempts under the stage they start with, round ticks', () => {
  const ms = 1_000_000;
  const r = {
    total_ns: 100 * ms,
    http_status: 200,
    waterfall: [
      { stage: 'ingress.read', span_id: 'a', offset_ns: 0, duration_ns: 1 * ms, offset_ms: 0, duration_ms: 1, status: /** @type {const} */ 'UNSET', status_message: '' },
      { stage: 'upstream.retry', span_id: 'b', offset_ns: 1 * ms, duration_ns: 40 * ms, offset_ms: 1, duration_ms: 40, status: 'UNSET', status_message: '' },
      { stage: 'upstream.wait', span_id: 'c', offset_ns: 41 * ms, duration_ns: 50 * ms, offset_ms: 41, duration_ms: 50, status: 'UNSET', status_message: '' },
      { stage: 'egress.write', span_id: 'd', offset_ns: 91 * ms, duration_ns: 9 * ms, offset_ms: 91, duration_ms: 9, status: 'ERROR', status_message: 'client left' },
    ] as const,
    attempts: [
      { attempt: 1, span_id: 'e', provider: 'openai', model: 'gpt-4o', status: 500, error_type: 'upstream_error', offset_ns: 1 * ms, duration_ns: 20 * ms, offset_ms: 1, duration_ms: 20, ok: false },
      { attempt: 2, span_id: 'f', provider: 'openai', model: 'gpt-4o', status: 200, error_type: '', offset_ns: 41 * ms, duration_ns: 59 * ms, offset_ms: 41, duration_ms: 59, ok: true },
    ],
  };
  const l = layout({ ...r, waterfall: [...r.waterfall] });
  assert.equal(l.totalMs, 100);
  assert.deepEqual(
    l.bars.map((b) => [b.kind, b.label, b.left, b.width, b.tone, b.error]),
    [
      ['request', 'request', 0, 1, 'total', false],
      ['stage', 'ingress.read', 0, 0.01, 'gateway', false],
      ['stage', 'upstream.retry', 0.01, 0.4, 'retry', false],
      ['attempt', 'attempt 1', 0.01, 0.2, 'attempt-failed', true],
      ['stage', 'upstream.wait', 0.41, 0.5, 'provider', false],
      ['attempt', 'attempt 2', 0.41, 0.59, 'attempt-ok', false],
      ['stage', 'egress.write', 0.91, 0.09, 'gateway', true],
    ],
  );
  assert.equal(l.bars[3]?.detail, 'openai gpt-4o → 500 upstream_error');
  assert.equal(l.bars[6]?.detail, 'client left');
  assert.deepEqual(l.ticks.map((t) => t.label), [0, 20, 40, 60, 80, 100]);
  // A stage that ends past the total (clock granularity) still fits: the scale stretches.
  const over = layout({ total_ns: 10 * ms, http_status: 200, waterfall: [{ ...r.waterfall[0], duration_ns: 12 * ms }], attempts: [] });
  assert.equal(over.totalMs, 12);
  assert.ok(over.bars.every((b) => b.left + b.width <= 1 + 1e-12));
  assert.deepEqual(ticks(0.37).map((t) => t.label), [0, 0.1, 0.2, 0.3]);
  assert.deepEqual(ticks(0), [{ left: 0, label: 0 }]);
});

test('prompts and answers of both APIs as a conversation and an answer; anything else as raw text', () => {
  const openaiReq = JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url: 'data:…' } }] }, { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'look', arguments: '{"q":1}' } }] }, { role: 'tool', tool_call_id: 'c1', content: 'a cat' }] });
  assert.deepEqual(conversation(openaiReq), [
    { role: 'system', text: 'Be brief.' },
    { role: 'user', text: 'What is this?\n[image_url]' },
    { role: 'assistant', text: '[tool call look {"q":1}]' },
    { role: 'tool', text: 'a cat' },
  ]);
  const anthropicReq = JSON.stringify({ model: 'claude', max_tokens: 9, system: [{ type: 'text', text: 'Sys' }], messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: [{ type: 'tool_use', id: 't', name: 'f', input: { a: 1 } }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'done' }] }] });
  assert.deepEqual(conversation(anthropicReq), [
    { role: 'system', text: 'Sys' },
    { role: 'user', text: 'Hi' },
    { role: 'assistant', text: '[tool call f {"a":1}]' },
    { role: 'user', text: '[tool result] done' },
  ]);
  assert.equal(conversation('not json'), null);
  assert.equal(conversation('{"input":"a responses body"}'), null);

  assert.deepEqual(answer(JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', content: 'Hello' }, finish_reason: 'stop' }] })), { text: 'Hello', finish: 'stop' });
  assert.deepEqual(answer(JSON.stringify({ type: 'message', content: [{ type: 'text', text: 'Hi ' }, { type: 'text', text: 'there' }], stop_reason: 'end_turn' })), { text: 'Hi \nthere', finish: 'end_turn' });
  assert.deepEqual(answer(JSON.stringify({ error: { message: 'over quota' } })), { text: '[error] over quota', finish: 'error' });
  assert.equal(answer('cut {"choi'), null);
});

test('numbers as people read them', () => {
  assert.deepEqual([0.000312, 0.0005, 1.9083, 121.32, 2400, 90_000].map(duration), ['0.31 µs', '0.50 µs', '1.91 ms', '121 ms', '2.40 s', '1.50 min']);
  assert.equal(duration(0.312), '312 µs');
  assert.equal(duration(null), '–');
  assert.deepEqual([0, 0.0004, 0.0123, 0.5].map(percent), ['0 %', '0.040 %', '1.23 %', '50.0 %']);
  assert.deepEqual([money(null), money(0), money(0.000726), money(12.5)], ['no price', '$0', '$0.00073', '$12.50']);
  assert.deepEqual([change(110, 100), change(95, 100), change(5, 0), change(0, 0)], ['+10 %', '−5.0 %', 'new', '0 %']);
});
