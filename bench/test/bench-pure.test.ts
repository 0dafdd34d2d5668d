/**
 * The benchmark's own logic that can be wrong without any server: first-token detection across
 * TCP reads, the added-latency arithmetic, the issue 5 ratios and issue 10's auth cost, exact
 * body sizes, the requests the authenticated arms are sent, and the nginx configuration. Imports nothing from bench/node_modules, so it runs in the root `npm test`
 * without `npm --prefix bench install`.
 */
import { describe, it } from 'node:test';
import { strict as assert } from 'node:assert';
import { FirstTokenScanner } from '../src/sse.js';
import { added, authCost, captureCost, drift, errorRate, meanPercentiles, neverConnected, padBody, portkeyRatio, rotate } from '../src/stats.js';
import { AUTH_COST_SCENARIO, LADDER_ARMS, PROXY_ARMS, benchScenarios, buildPlan, isControlArm, isControlsScenario, keyHeaders, teamOf, template } from '../src/scenarios.js';
import type { ArmName, ArmTarget } from '../src/scenarios.js';
import { nginxConfig } from '../src/peers/nginx.js';
import { threadTicks } from '../src/procs.js';
import { spawn } from 'node:child_process';
import { once } from 'node:events';

const ROLE = 'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n';
const TOKEN = 'data: {"choices":[{"index":0,"delta":{"content":"héllo"}}]}\n\n';

/** Feeds `text` cut at every given byte offset; returns the index of the read that found the token. */
function feed(scanner: FirstTokenScanner, text: string, cuts: number[]): number {
  const bytes = Buffer.from(text);
  let from = 0;
  const pieces: Buffer[] = [];
  for (const c of [...cuts, bytes.length]) {
    pieces.push(bytes.subarray(from, c));
    from = c;
  }
  return pieces.findIndex((p) => scanner.push(p));
}

describe('FirstTokenScanner', () => {
  it('skips the empty role delta and finds the first OpenAI content token', () => {
    const s = new FirstTokenScanner('openai');
    assert.equal(s.push(Buffer.from(ROLE)), false);
    assert.equal(s.push(Buffer.from(TOKEN)), true);
    assert.equal(s.found, true);
    assert.equal(s.push(Buffer.from(TOKEN)), false, 'reports the first token once');
  });

  it('finds a marker split at every possible byte boundary', () => {
    const text = ROLE + TOKEN;
    const marker = text.lastIndexOf('"content":"');
    // Cuts up to just before the first content byte: the token completes in the second read.
    for (let cut = marker - 1; cut <= marker + '"content":"'.length; cut++) {
      const s = new FirstTokenScanner('openai');
      assert.equal(feed(s, text, [cut]), 1, `cut at ${cut}`);
    }
    // One byte later, the first read already holds the token.
    assert.equal(feed(new FirstTokenScanner('openai'), text, [marker + '"content":"'.length + 1]), 0);
  });

  it('waits for the byte after the marker to tell empty from non-empty content', () => {
    const s = new FirstTokenScanner('openai');
    const text = ROLE;
    const end = text.indexOf('"content":"') + '"content":"'.length;
    assert.equal(feed(s, text, [end]), -1, 'the role chunk cut right after the marker is still empty');
  });

  it('finds the first Anthropic text_delta, even one cut in two', () => {
    const ev = 'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"日本語"}}\n\n';
    const head = 'event: message_start\ndata: {"type":"message_start"}\n\n';
    const at = (head + ev).indexOf('text_delta') + 4;
    const s = new FirstTokenScanner('anthropic');
    assert.equal(feed(s, head + ev, [head.length, at]), 2);
  });

  it('does not see a token in a stream that has none', () => {
    const s = new FirstTokenScanner('openai');
    assert.equal(feed(s, `${ROLE}data: [DONE]\n\n`, [7, 30, 61]), -1);
  });
});

describe('report arithmetic', () => {
  const p = (p50: number, p99: number) => ({ p50, p90: p50, p99, p999: p99, max: p99, mean: p50, count: 100 });

  it('takes the floor as the mean of the two control blocks, per percentile', () => {
    const floor = meanPercentiles(p(100, 300), p(120, 500));
    assert.equal(floor.p50, 110);
    assert.equal(floor.p99, 400);
    assert.equal(floor.count, 200);
    assert.equal(added(350, floor.p50), 240);
    assert.equal(added(90, floor.p50), -20, 'an arm under the floor shows as negative, not clamped');
  });

  it('measures drift relative to the mean of the control blocks', () => {
    assert.equal(drift(100, 125), 25 / 112.5);
    assert.equal(drift(0, 0), 0);
    assert.ok(drift(88, 51) > 0.25, 'the drift a noisy neighbour caused in a real run fails the 25 % gate');
  });

  it('computes the issue 5 ratios and their edge cases', () => {
    assert.equal(portkeyRatio(250, 1_000), 4);
    assert.equal(portkeyRatio(0, 1_000), Number.POSITIVE_INFINITY);
    assert.equal(portkeyRatio(undefined, 1_000), undefined);
    assert.equal(captureCost(200, 190), 0.05);
    assert.equal(captureCost(0, 10), undefined);
    assert.equal(errorRate(1, 1_000), 0.001);
    assert.equal(errorRate(0, 0), 0);
  });

  it('computes the auth cost as added p50 with authentication over without, and nothing from a floor-level figure', () => {
    assert.equal(authCost(105, 100), 1.05);
    assert.equal(authCost(98, 100), 0.98, 'an authenticated arm under the other shows as < 1, not clamped');
    assert.equal(authCost(100, 0), undefined, 'no ratio over an added p50 inside the noise of the floor');
    assert.equal(authCost(100, -3), undefined);
    assert.equal(authCost(undefined, 100), undefined);
    assert.equal(authCost(100, undefined), undefined);
  });

  it('counts as never connected only the failures that never reached the proxy', () => {
    // The 5,000 req/s step of 3 December: 406 connect timeouts, which the capture could not see.
    assert.equal(neverConnected({ 'not sent': 28_880, 'network UND_ERR_CONNECT_TIMEOUT': 406 }), 406);
    assert.equal(neverConnected({ 'network ECONNREFUSED': 2, 'network ECONNRESET': 5, timeout: 3 }), 2);
    assert.equal(neverConnected({}), 0);
  });

  it('rotates arms so each takes every position across rounds', () => {
    const arms = ['a', 'b', 'c'];
    assert.deepEqual(rotate(arms, 0), ['a', 'b', 'c']);
    assert.deepEqual(rotate(arms, 1), ['b', 'c', 'a']);
    assert.deepEqual(rotate(arms, 4), ['b', 'c', 'a']);
    assert.deepEqual(rotate([], 2), []);
  });

  it('pads request bodies to the exact size as valid JSON', () => {
    for (const size of [1024, 16 * 1024, 64 * 1024]) {
      const body = padBody('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"', '"}]}', size);
      assert.equal(Buffer.byteLength(body), size);
      const parsed = JSON.parse(body) as { messages: { content: string }[] };
      assert.ok((parsed.messages[0]?.content.length ?? 0) > size - 100);
    }
    assert.throws(() => padBody('x'.repeat(10), '', 5));
  });
});

describe('authenticated arms', () => {
  const KEY = 'sl-0123456789abcdefghijABCDEFGHIJ';
  const plan = buildPlan(true);
  const target: ArmTarget = {
    origin: 'http://127.0.0.1:1',
    // As stack.ts builds it for an authenticated Sightline gateway.
    extraHeaders: (scenario, _p, requestHeaders) => ({ 'x-sightline-team': teamOf(scenario), ...keyHeaders(KEY, requestHeaders) }),
  };
  const scenarioOf = (name: string) => {
    const s = plan.scenarios.find((x) => x.name === name);
    assert.ok(s !== undefined, name);
    return s;
  };

  it('sends the key as a bearer token in place of the OpenAI client dummy key', () => {
    const s = scenarioOf('json-1k-seq');
    const t = template('sightline', target, s.name, s.request, s.directRequest, s.portkeyProvider);
    assert.equal(t.headers.authorization, `Bearer ${KEY}`);
    assert.equal(t.headers['x-api-key'], undefined);
    assert.equal(t.headers['x-sightline-team'], 'bench-json-1k-seq');
    assert.equal(Object.values(t.headers).filter((v) => v.includes('not-a-real-key')).length, 0, 'no dummy provider key left beside the Sightline key');
  });

  it('sends the key as x-api-key in place of the Anthropic client dummy key', () => {
    const s = scenarioOf('sse-anthropic');
    const t = template('sightline', target, s.name, s.request, s.directRequest, s.portkeyProvider);
    assert.equal(t.headers['x-api-key'], KEY);
    assert.equal(t.headers.authorization, undefined);
    assert.equal(t.headers['anthropic-version'], '2023-06-01');
  });

  it('follows the client, not the provider: an OpenAI client asking for a Claude model sends a bearer token', () => {
    const s = scenarioOf('sse-cross');
    assert.equal(s.portkeyProvider, 'anthropic');
    const t = template('sightline', target, s.name, s.request, s.directRequest, s.portkeyProvider);
    assert.equal(t.headers.authorization, `Bearer ${KEY}`);
    assert.equal(t.headers['x-api-key'], undefined);
  });

  it('finds the client credential header whatever its case', () => {
    assert.deepEqual(keyHeaders(KEY, { 'X-Api-Key': 'x' }), { 'x-api-key': KEY });
    assert.deepEqual(keyHeaders(KEY, { Authorization: 'Bearer x', 'x-api-key': 'y' }), { authorization: `Bearer ${KEY}` });
    assert.deepEqual(keyHeaders(KEY, {}), { authorization: `Bearer ${KEY}` });
  });

  it('has a key for every name the Sightline arms are sent traffic under: warm-up, each scenario, each ladder step', () => {
    const names = benchScenarios({ scenarios: plan.scenarios, ladder: { ...plan.ladder, rates: [3_500, 5_000] } });
    assert.deepEqual(names, ['warmup', ...plan.scenarios.map((s) => s.name), 'ladder-3500', 'ladder-5000']);
    assert.equal(new Set(names.map((n) => teamOf(n))).size, names.length, 'one team per name: the completeness check counts by team');
  });

  it('measures the authentication-off arm in the 1 KiB sequential scenario only, and not in the ladder', () => {
    assert.ok(PROXY_ARMS.includes('sightline-noauth'), 'interleaved with the other proxy arms');
    for (const full of [true, false]) {
      for (const s of buildPlan(full).scenarios) {
        const na = s.notApplicable['sightline-noauth'];
        if (s.name === AUTH_COST_SCENARIO) assert.equal(na, undefined);
        else assert.match(na ?? '', /measured in json-1k-seq only/, s.name);
        if (isControlsScenario(s.name)) continue;
        // The other arms keep their own applicability (the embedded and control arms have
        // their own scenario: bench-matrix.test.ts).
        assert.deepEqual(
          Object.keys(s.notApplicable).filter((k) => k !== 'sightline-noauth' && k !== 'sightline-embedded' && !isControlArm(k as ArmName)),
          s.name === 'sse-cross' ? ['node-proxy', 'nginx'] : [],
        );
      }
    }
    assert.deepEqual(LADDER_ARMS, ['direct', 'sightline', 'sightline-nocapture', 'node-proxy', 'nginx', 'portkey']);
  });
});

describe('nginx configuration', () => {
  it('relays streams unbuffered over kept-alive upstream connections, on loopback only', () => {
    const conf = nginxConfig('/tmp/x', 8001, 9001);
    assert.match(conf, /listen 127\.0\.0\.1:8001/);
    assert.match(conf, /server 127\.0\.0\.1:9001;/);
    assert.match(conf, /keepalive 1024;/);
    assert.match(conf, /proxy_http_version 1\.1;/);
    assert.match(conf, /proxy_set_header Connection "";/);
    assert.match(conf, /proxy_buffering off;/);
    assert.match(conf, /client_body_buffer_size 128k;/);
    assert.doesNotMatch(conf, /daemon/, 'daemon off is given on the command line with -g');
  });
});

describe('threadTicks', () => {
  it("splits a process's CPU between its SCHED_IDLE threads and the rest", async () => {
    // A child whose worker thread puts itself at SCHED_IDLE (as the gateway's content thread
    // does) and spins until it has used 20 ticks of its own CPU, while the main thread spins
    // until it has used 20 ticks; then it says so and both wait to be killed (a thread that
    // ended is no longer under /proc/PID/task).
    const own = "(() => { const f = require('fs').readFileSync('/proc/thread-self/stat', 'utf8'); const r = f.slice(f.lastIndexOf(') ') + 2).split(' '); return Number(r[11]) + Number(r[12]); })()";
    const spin = `const end = Date.now() + 20000; while (${own} < 20 && Date.now() < end) for (let i = 0; i < 1e6; i++);`;
    const worker = `const tid = require('fs').readlinkSync('/proc/thread-self').split('/').pop(); require('child_process').execFileSync('chrt', ['--idle', '--pid', '0', tid]); ${spin} require('worker_threads').parentPort.postMessage(1); setInterval(() => {}, 1000);`;
    const main = `const { Worker } = require('worker_threads'); const w = new Worker(${JSON.stringify(worker)}, { eval: true }); ${spin} w.once('message', () => { process.stdout.write('done'); }); w.once('error', (e) => { process.stdout.write('worker failed: ' + e.message); }); setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ['-e', main], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const [chunk] = (await once(child.stdout!, 'data')) as [Buffer];
      assert.equal(chunk.toString(), 'done');
      const t = threadTicks(child.pid!);
      assert.ok(t.idle >= 20, `SCHED_IDLE thread ticks ${t.idle}`);
      assert.ok(t.other >= 20, `other threads' ticks ${t.other}`);
    } finally {
      child.kill();
    }
    assert.deepEqual(threadTicks(-1), { idle: 0, other: 0 });
  });
});
