import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SseParser, formatSse } from '../src/index.js';
import type { SseEvent } from '../src/index.js';

function parseAll(chunks: Buffer[], keepRaw = false): SseEvent[] {
  const p = new SseParser({ keepRaw });
  const out: SseEvent[] = [];
  for (const c of chunks) out.push(...p.push(c));
  out.push(...p.end());
  return out;
}

function plain(events: SseEvent[]): Array<{ event: string | null; data: string }> {
  return events.map((e) => ({ event: e.event, data: e.data }));
}

// Both dialects' grammars, multibyte text (é: 2 bytes, 你好: 3 bytes each, 🙂: 4 bytes),
// the three line terminators, comments, a multi-line data field and an id/retry field.
const STREAM = Buffer.from(
  [
    ': keep-alive comment\n\n',
    'event: message_start\n',
    'data: {"type":"message_start","message":{"id":"msg_1","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}\n\n',
    'event: content_block_delta\r\n',
    'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"é 你好 🙂"}}\r\n\r\n',
    'event: ping\r',
    'data: {"type": "ping"}\r\r',
    'data: {"choices":[{"index":0,"delta":{"content":"Ça va 🙂 你好"}}]}\n\n',
    'id: 42\nretry: 1000\n',
    'data:no-space-after-colon é\n',
    'data:  two spaces, one kept\n',
    'data\n',
    ': a comment inside an event 🙂\n',
    'data: 🙂last line\n\n',
    'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    'data: [DONE]\n\n',
  ].join(''),
  'utf8',
);

const EXPECTED = [
  { event: 'message_start', data: '{"type":"message_start","message":{"id":"msg_1","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}' },
  { event: 'content_block_delta', data: '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"é 你好 🙂"}}' },
  { event: 'ping', data: '{"type": "ping"}' },
  { event: null, data: '{"choices":[{"index":0,"delta":{"content":"Ça va 🙂 你好"}}]}' },
  { event: null, data: 'no-space-after-colon é\n two spaces, one kept\n\n🙂last line' },
  { event: 'message_stop', data: '{"type":"message_stop"}' },
  { event: null, data: '[DONE]' },
];

describe('SseParser', () => {
  test('parses the reference stream in one chunk', () => {
    assert.deepEqual(plain(parseAll([STREAM])), EXPECTED);
  });

  test('every two-chunk split yields the same events', () => {
    for (let k = 0; k <= STREAM.length; k++) {
      const got = plain(parseAll([STREAM.subarray(0, k), STREAM.subarray(k)]));
      assert.deepEqual(got, EXPECTED, `split at byte ${k}`);
    }
  });

  test('three-chunk splits around every multibyte character yield the same events', () => {
    // Offsets inside or next to a multibyte sequence (lead byte >= 0xc0 or continuation 0x80..0xbf).
    const near: number[] = [];
    for (let i = 0; i < STREAM.length; i++) if (STREAM[i]! >= 0x80) near.push(i);
    let runs = 0;
    for (const i of near) {
      for (const j of [i + 1, i + 2, i + 3, i + 7]) {
        if (j > STREAM.length) continue;
        const got = plain(parseAll([STREAM.subarray(0, i), STREAM.subarray(i, j), STREAM.subarray(j)]));
        assert.deepEqual(got, EXPECTED, `split at ${i} and ${j}`);
        runs++;
      }
    }
    assert.ok(runs > 100, `ran ${runs} three-way splits`);
  });

  test('one byte at a time yields the same events', () => {
    const chunks: Buffer[] = [];
    for (let i = 0; i < STREAM.length; i++) chunks.push(STREAM.subarray(i, i + 1));
    assert.deepEqual(plain(parseAll(chunks)), EXPECTED);
  });

  test('accepts Uint8Array chunks', () => {
    const u8 = new Uint8Array(STREAM.buffer.slice(STREAM.byteOffset, STREAM.byteOffset + STREAM.length));
    const p = new SseParser();
    assert.deepEqual(plain([...p.push(u8.subarray(0, 50)), ...p.push(u8.subarray(50)), ...p.end()]), EXPECTED);
  });

  test('events are returned by the push that completes them', () => {
    const p = new SseParser();
    assert.deepEqual(p.push(Buffer.from('event: a\ndata: 1')), []);
    assert.deepEqual(p.push(Buffer.from('\n')), []);
    assert.deepEqual(plain(p.push(Buffer.from('\ndata: 2\n'))), [{ event: 'a', data: '1' }]);
    assert.deepEqual(plain(p.push(Buffer.from('\n'))), [{ event: null, data: '2' }]);
  });

  test('CRLF split between chunks is one line ending, not two', () => {
    const p = new SseParser();
    const out = [...p.push(Buffer.from('data: x\r')), ...p.push(Buffer.from('\ndata: y\r')), ...p.push(Buffer.from('\n\r\n'))];
    assert.deepEqual(plain(out), [{ event: null, data: 'x\ny' }]);
  });

  test('an event without data is not dispatched, and resets the event type', () => {
    const out = plain(parseAll([Buffer.from('event: lonely\n\ndata: after\n\n')]));
    assert.deepEqual(out, [{ event: null, data: 'after' }]);
  });

  test('empty event name means null; empty data line dispatches empty data', () => {
    assert.deepEqual(plain(parseAll([Buffer.from('event:\ndata:\n\n')])), [{ event: null, data: '' }]);
  });

  test('field names must match exactly', () => {
    const out = plain(parseAll([Buffer.from('datax: no\nevents: no\ndata: yes\n\n')]));
    assert.deepEqual(out, [{ event: null, data: 'yes' }]);
  });

  test('a leading UTF-8 BOM is ignored', () => {
    const out = plain(parseAll([Buffer.from([0xef, 0xbb]), Buffer.from([0xbf]), Buffer.from('data: é\n\n')]));
    assert.deepEqual(out, [{ event: null, data: 'é' }]);
  });

  test('end(): dispatches an event missing only its blank line, drops an unterminated line', () => {
    assert.deepEqual(plain(parseAll([Buffer.from('data: complete\n')])), [{ event: null, data: 'complete' }]);
    assert.deepEqual(plain(parseAll([Buffer.from('data: complete\ndata: cut')])), []);
    assert.deepEqual(plain(parseAll([Buffer.from('data: cut')])), []);
  });

  test('end() resets the parser for reuse', () => {
    const p = new SseParser();
    p.push(Buffer.from('event: x\ndata: partial'));
    p.end();
    assert.deepEqual(plain(p.push(Buffer.from('data: fresh\n\n'))), [{ event: null, data: 'fresh' }]);
  });

  test('does not retain the caller buffer for a pending line', () => {
    const p = new SseParser();
    const chunk = Buffer.from('data: abc');
    p.push(chunk);
    chunk.fill(0x7a); // caller reuses its buffer
    assert.deepEqual(plain(p.push(Buffer.from('\n\n'))), [{ event: null, data: 'abc' }]);
  });

  test('keepRaw does not retain caller buffers of an event still open', () => {
    const p = new SseParser({ keepRaw: true });
    const c1 = Buffer.from('event: e\ndata: 1\n');
    p.push(c1);
    c1.fill(0x7a);
    const out = p.push(Buffer.from('\n'));
    assert.equal(out[0]!.raw!.toString(), 'event: e\ndata: 1\n\n');
  });

  test('keepRaw: raw bytes of each event, at any split', () => {
    const text = ': c\nevent: e\ndata: é🙂\n\ndata: 你好\r\n\r\n';
    const bytes = Buffer.from(text);
    const rawOf = (events: SseEvent[]): string[] => events.map((e) => (e.raw === undefined ? '<none>' : e.raw.toString('utf8')));
    const want = [': c\nevent: e\ndata: é🙂\n\n', 'data: 你好\r\n\r\n'];
    const lastCR = bytes.length - 1; // split between the final CR and LF
    for (let k = 0; k <= bytes.length; k++) {
      const events = parseAll([bytes.subarray(0, k), bytes.subarray(k)], true);
      if (k === lastCR) {
        // Documented: the event is dispatched at the CR, so its raw ends there.
        assert.deepEqual(rawOf(events), [want[0], 'data: 你好\r\n\r']);
      } else assert.deepEqual(rawOf(events), want, `split at ${k}`);
    }
    assert.equal(parseAll([bytes])[0]!.raw, undefined, 'raw is off by default');
  });
});

describe('formatSse', () => {
  test('event and single-line data', () => {
    assert.equal(formatSse('ping', '{"type":"ping"}'), 'event: ping\ndata: {"type":"ping"}\n\n');
    assert.equal(formatSse(null, '[DONE]'), 'data: [DONE]\n\n');
  });

  test('multi-line data becomes several data lines and round-trips', () => {
    const data = 'a\nb\r\nc\rd é';
    const text = formatSse('x', data);
    assert.equal(text, 'event: x\ndata: a\ndata: b\ndata: c\ndata: d é\n\n');
    assert.deepEqual(plain(parseAll([Buffer.from(text)])), [{ event: 'x', data: 'a\nb\nc\nd é' }]);
  });

  test('round-trips data with a leading space', () => {
    const text = formatSse(null, ' lead');
    assert.deepEqual(plain(parseAll([Buffer.from(text)])), [{ event: null, data: ' lead' }]);
  });

  test('rejects an event name with a line break', () => {
    assert.throws(() => formatSse('a\nb', 'x'), RangeError);
  });
});
