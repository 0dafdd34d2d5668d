/**
 * The bounds across replicas (docs/governance.md), with real nats-servers: four governors —
 * two gateways × two workers — share one key-value bucket.
 *
 * - requests_per_minute 60 and a burst of 240 → exactly 60 admitted, all shapes of burst;
 * - tokens_per_minute and budgets: what is reserved plus what settled never exceeds the limit,
 *   at any admission; the shared entry ends equal to the sum of the real amounts;
 * - a governor SIGKILLed while holding leases: the others never use its lease; it expires
 *   and is counted as spent; the next period starts whole;
 * - an idle governor gives its lease back; the next window's lease is taken before it starts;
 * - NATS down: admitting from the leases held, then fail open / fail closed per policy, and
 *   the fail-open admissions reported once NATS is back.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { connectNats } from '@sightline/bus';
import {
  LIMITS_BUCKET,
  NatsGovernor,
  admitOrWait,
  decodeEntry,
  kvKey,
  nanoUp,
  windowStart,
  type Admission,
  type Admitted,
  type GovernorOptions,
  type LimitEntry,
  type Refused,
  type ScopeUsage,
  type UsageQuery,
} from '@sightline/controls';
import { NatsServer, waitFor } from '../../../test/support/servers.js';
import { TestClock, admission, perDay, rpm, seeded, tpm, uid } from './support/governors.js';

let nats: NatsServer;
const open: NatsGovernor[] = [];
const children: ChildProcess[] = [];
before(async () => {
  nats = await NatsServer.start();
});
after(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const g of open) await g.close();
  await nats.dispose();
});

async function governors(n: number, clock: TestClock, opts: Partial<GovernorOptions> & { url?: string } = {}): Promise<NatsGovernor[]> {
  const gs = Array.from({ length: n }, () => new NatsGovernor({ url: opts.url ?? nats.url, clock: clock.now, ...opts }));
  open.push(...gs);
  await Promise.all(gs.map((g) => g.ready));
  for (const g of gs) assert.equal(g.status().synced, true);
  return gs;
}

async function usageOf(g: NatsGovernor, q: UsageQuery, clock: TestClock, kind: ScopeUsage['kind']): Promise<ScopeUsage> {
  const u = (await g.usage(q, clock.now())).find((x) => x.kind === kind);
  assert.ok(u !== undefined);
  return u;
}

async function entryOf(key: string, url = nats.url): Promise<LimitEntry | null> {
  const nc = await connectNats(url, 'test-reader');
  try {
    const kv = await nc.jetstream().views.kv(LIMITS_BUCKET);
    const e = await kv.get(key);
    return e === null ? null : decodeEntry(e.value);
  } finally {
    await nc.close();
  }
}

const tick = () => new Promise<void>((r) => setImmediate(r));

test('requests_per_minute 60, 4 governors (2 gateways × 2 workers), 240 requests at once in one window: exactly 60 admitted', async () => {
  const clock = new TestClock(1);
  const gs = await governors(4, clock);
  const keyId = uid('key');
  const a = admission({ keyId, keyLimits: rpm(60) });
  const results = await Promise.all(Array.from({ length: 240 }, (_, i) => admitOrWait(gs[i % 4]!, a, clock.now)));
  const ok = results.filter((v) => v.ok);
  const perGovernor = [0, 1, 2, 3].map((g) => results.filter((v, i) => v.ok && i % 4 === g).length);
  assert.equal(ok.length, 60, `admitted per governor: ${perGovernor.join(', ')}`);
  for (const v of results) if (!v.ok) assert.equal((v as Refused).reason, 'exhausted');
  for (const g of gs) assert.equal(g.status().failedOpen, 0);
  // Every instance reports within flushMs: the shared entry shows the 60.
  await waitFor('the entry to count 60', async () => (await usageOf(gs[0]!, { key: { id: keyId, limits: rpm(60), budget: null } }, clock, 'requests')).used === 60, 5000);
  const e = await entryOf(kvKey('requests', 'key', keyId, ((windowStart('minute', clock.now()) / 60_000) % 2) as 0 | 1));
  assert.equal(e?.used, 60);
  assert.equal(e?.limit, 60);
});

test('requests_per_minute 60, 4 governors × 8 workers sending one request after another (240 in all): exactly 60 admitted', async () => {
  const clock = new TestClock(1);
  const gs = await governors(4, clock);
  const keyId = uid('key');
  const a = admission({ keyId, keyLimits: rpm(60) });
  let sent = 0;
  let ok = 0;
  const worker = async (g: NatsGovernor): Promise<void> => {
    while (sent < 240) {
      sent++;
      const v = await admitOrWait(g, a, clock.now);
      if (v.ok) ok++;
      await tick();
    }
  };
  await Promise.all(gs.flatMap((g) => Array.from({ length: 8 }, () => worker(g))));
  assert.equal(sent, 240);
  assert.equal(ok, 60);
});

interface Tally {
  inflight: number;
  settled: number;
  peak: number;
}

/**
 * `n` requests across the governors, all at once: each reserves `bound()`, "runs" a few ms,
 * and settles at `actual(bound)`. Checks at every admission that reserved + settled ≤ limit.
 */
async function run(
  gs: NatsGovernor[],
  clock: TestClock,
  n: number,
  a: (i: number, units: number) => Admission,
  bound: () => number,
  actual: (b: number) => number,
  settle: (g: NatsGovernor, v: Admitted, units: number) => void,
  limit: number,
): Promise<Tally & { admitted: number; refused: Record<string, number> }> {
  const t: Tally = { inflight: 0, settled: 0, peak: 0 };
  let admitted = 0;
  const refused: Record<string, number> = {};
  const random = seeded(7);
  await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const b = bound();
      const g = gs[i % gs.length]!;
      const v = await admitOrWait(g, a(i, b), clock.now);
      if (!v.ok) {
        refused[v.reason] = (refused[v.reason] ?? 0) + 1;
        return;
      }
      admitted++;
      t.inflight += b;
      t.peak = Math.max(t.peak, t.inflight + t.settled);
      assert.ok(t.inflight + t.settled <= limit, `reserved ${t.inflight} + settled ${t.settled} > ${limit}`);
      await new Promise((r) => setTimeout(r, 2 + Math.floor(random() * 20))); // the upstream call
      const used = actual(b);
      t.inflight -= b;
      t.settled += used;
      settle(g, v, used);
    }),
  );
  return { ...t, admitted, refused };
}

test('tokens_per_minute 10 000, 4 governors, 200 requests at once with mixed reservations: reserved + used never exceeds the limit; the entry ends at the real count', async () => {
  const clock = new TestClock(1);
  const gs = await governors(4, clock, { idleMs: 300 });
  const keyId = uid('key');
  const limits = tpm(10_000);
  const random = seeded(11);
  const r = await run(
    gs,
    clock,
    200,
    (_, units) => admission({ keyId, keyLimits: limits, tokens: units }),
    () => 100 + Math.floor(random() * 500),
    (b) => Math.max(1, Math.floor(b * (0.2 + 0.8 * random()))),
    (g, v, used) => g.settle(v.ticket, { tokens: used, costUsd: null }, clock.now()),
    10_000,
  );
  assert.ok(r.admitted > 20 && r.admitted < 200, `${r.admitted} admitted`);
  assert.ok(r.settled <= 10_000);
  await waitFor('reports and idle returns', async () => {
    const u = await usageOf(gs[0]!, { key: { id: keyId, limits, budget: null } }, clock, 'tokens');
    return u.used === r.settled && u.reserved === 0 && u.holders === 0;
  }, 5000);
});

test('a budget of $0.05, 4 governors, 200 requests at once reserving $0.001 and costing less: spend never exceeds it; the entry ends at the real spend', async (t) => {
  const clock = new TestClock(1);
  const gs = await governors(4, clock, { idleMs: 300 });
  const keyId = uid('key');
  const budget = perDay(0.05);
  const random = seeded(5);
  const r = await run(
    gs,
    clock,
    200,
    (_, nano) => admission({ keyId, keyBudget: budget, costUsd: nano / 1e9 }),
    () => 1_000_000,
    (b) => Math.floor(b * (0.3 + 0.7 * random())),
    (g, v, nano) => g.settle(v.ticket, { tokens: 0, costUsd: nano / 1e9 }, clock.now()),
    50_000_000,
  );
  assert.ok(r.settled <= 50_000_000, `spent ${r.settled / 1e9}`);
  // Demand is four times the budget: the budget itself must have refused requests, and most
  // of it must have been used. Not all of it is, with the budget leased out over four
  // governors: on 3 December the peak was $0.0387–0.0431 in four runs (one a clean-clone CI
  // run, which failed the former bound of $0.04), every refusal `exhausted`.
  const seen = `peak reserved + spent $${r.peak / 1e9}, refused ${JSON.stringify(r.refused)}`;
  t.diagnostic(seen);
  assert.ok((r.refused.exhausted ?? 0) > 0, `the budget refused requests (${seen})`);
  assert.ok(r.peak > 30_000_000, `the budget was used (${seen})`);
  await waitFor('reports and idle returns', async () => {
    const u = await usageOf(gs[0]!, { key: { id: keyId, limits: null, budget } }, clock, 'budget');
    return Math.round(u.used * 1e9) === r.settled && u.reserved === 0 && u.holders === 0;
  }, 5000);
});

async function holder(cfg: { holderId: string; offsetMs: number; leaseTtlMs: number; admission: Admission; count: number }): Promise<{ child: ChildProcess; admitted: number }> {
  const script = fileURLToPath(new URL('./support/holder.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script, JSON.stringify({ url: nats.url, ...cfg })], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let err = '';
  child.stderr!.on('data', (b: Buffer) => (err += b.toString()));
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`holder exited (${code}): ${err}`)));
  });
  return { child, admitted: (JSON.parse(line) as { admitted: number }).admitted };
}

async function kill(child: ChildProcess): Promise<void> {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
}

test('a governor SIGKILLed holding budget leases: the others never spend its lease, it is counted as spent once expired, and the next day starts whole', async () => {
  const clock = new TestClock(1);
  const offsetMs = clock.now() - Date.now();
  const leaseTtlMs = 1500;
  const keyId = uid('key');
  const budget = perDay(0.05);
  const a = admission({ keyId, keyBudget: budget, costUsd: 0.001 });
  const key = kvKey('budget', 'key', keyId, ((windowStart('day', clock.now()) / 86_400_000) % 2) as 0 | 1);

  const crashed = await holder({ holderId: 'crashed-holder', offsetMs, leaseTtlMs, admission: a, count: 10 });
  assert.equal(crashed.admitted, 10);
  const before = await entryOf(key);
  const lease = before?.holders['crashed-holder']?.lease ?? 0;
  assert.ok(lease >= 10 * 1_000_000, `the holder leases at least its 10 reservations (${lease})`);
  await kill(crashed.child);

  const gs = await governors(3, clock, { leaseTtlMs, idleMs: 300 });
  const random = seeded(3);
  const r = await run(
    gs,
    clock,
    150,
    () => a,
    () => 1_000_000,
    (b) => Math.floor(b * (0.3 + 0.7 * random())),
    (g, v, nano) => g.settle(v.ticket, { tokens: 0, costUsd: nano / 1e9 }, clock.now()),
    50_000_000 - lease,
  );
  // The dead instance's requests may have cost up to their reservations; with them, still within the budget.
  assert.ok(r.settled + 10 * 1_000_000 <= 50_000_000);
  assert.ok(r.settled + lease <= 50_000_000, 'the survivors never spent the dead lease');

  // Expired: counted as spent (presumed) — by the views at once, and in the entry at the next write.
  await waitFor('the dead lease to be presumed spent', async () => (await usageOf(gs[0]!, { key: { id: keyId, limits: null, budget } }, clock, 'budget')).presumed * 1e9 >= lease - 1, 10_000);
  const v = await admitOrWait(gs[0]!, { ...a, costUsd: 0.05 }, clock.now); // any exchange sweeps it
  assert.equal(v.ok, false);
  await waitFor('the entry to drop the dead holder', async () => {
    const e = await entryOf(key);
    return e !== null && e.holders['crashed-holder'] === undefined && e.presumed === lease;
  }, 5000);

  clock.toNext('day');
  const next = await admitOrWait(gs[1]!, a, clock.now);
  assert.equal(next.ok, true, 'a new day, a whole budget');
  const u = await usageOf(gs[1]!, { key: { id: keyId, limits: null, budget } }, clock, 'budget');
  assert.equal(u.presumed, 0);
  assert.equal(u.used, 0);
  assert.ok(Math.abs(u.reserved - 0.001) < 1e-12);
});

test('a governor SIGKILLed holding a requests_per_minute lease: its lease is unusable for the rest of the window, and the next window has the whole limit', async () => {
  const clock = new TestClock(1);
  const offsetMs = clock.now() - Date.now();
  const keyId = uid('key');
  const a = admission({ keyId, keyLimits: rpm(40) });
  const crashed = await holder({ holderId: 'crashed-rpm', offsetMs, leaseTtlMs: 30_000, admission: a, count: 5 });
  assert.equal(crashed.admitted, 5);
  const key = kvKey('requests', 'key', keyId, ((windowStart('minute', clock.now()) / 60_000) % 2) as 0 | 1);
  const e = await entryOf(key);
  const stranded = (e?.holders['crashed-rpm']?.lease ?? 0) + (e?.used ?? 0);
  assert.ok(stranded >= 5);
  await kill(crashed.child);
  const gs = await governors(2, clock);
  const first = await Promise.all(Array.from({ length: 80 }, (_, i) => admitOrWait(gs[i % 2]!, a, clock.now)));
  assert.equal(first.filter((v) => v.ok).length, 40 - stranded);
  clock.toNext('minute');
  const second = await Promise.all(Array.from({ length: 80 }, (_, i) => admitOrWait(gs[i % 2]!, a, clock.now)));
  assert.equal(second.filter((v) => v.ok).length, 40);
});

test('an idle governor gives its unused lease back, and another can then spend the whole remainder', async () => {
  const clock = new TestClock(1);
  const [ga, gb] = await governors(2, clock, { idleMs: 300 });
  const keyId = uid('key');
  const budget = perDay(0.01);
  const q = { key: { id: keyId, limits: null, budget } };
  const v = await admitOrWait(ga!, admission({ keyId, keyBudget: budget, costUsd: 0.001 }), clock.now);
  assert.equal(v.ok, true);
  ga!.settle((v as Admitted).ticket, { tokens: 1, costUsd: 0.0001 }, clock.now());
  // A holds at least the 0.0009 its request did not use: B cannot reserve all that remains.
  const rest = admission({ keyId, keyBudget: budget, costUsd: 0.0099 });
  const early = await admitOrWait(gb!, rest, clock.now);
  assert.equal(early.ok, false);
  await waitFor('A to give its lease back', async () => (await entryOf(kvKey('budget', 'key', keyId, ((windowStart('day', clock.now()) / 86_400_000) % 2) as 0 | 1)))?.holders[ga!.holderId] === undefined, 5000);
  // B refuses from its own fresh view for up to viewFreshMs, looking again every 250 ms meanwhile.
  let late: Admitted | Refused | null = null;
  await waitFor('B to be admitted', async () => (late = await admitOrWait(gb!, rest, clock.now)).ok, 3000, 20);
  assert.equal(late!.ok, true);
  const u = await usageOf(gb!, q, clock, 'budget');
  assert.ok(Math.abs(u.used - 0.0001) < 1e-12);
  assert.ok(Math.abs(u.reserved - 0.0099) < 1e-12);
  assert.equal(u.remaining, 0);
});

test('a limit in use gets the next window\'s lease before the window starts: its first request there does not wait', async () => {
  const clock = new TestClock(58.5);
  const [g] = await governors(1, clock);
  const keyId = uid('key');
  const a = admission({ keyId, keyLimits: rpm(1000) });
  const q = { key: { id: keyId, limits: rpm(1000), budget: null } };
  const nextStart = windowStart('minute', clock.now()) + 60_000;
  await waitFor(
    'a lease on the next window',
    async () => {
      const v = await admitOrWait(g!, a, clock.now);
      assert.equal(v.ok, true);
      const u = (await g!.usage(q, nextStart + 1))[0]!;
      return u.holders === 1;
    },
    1400,
    20,
  );
  const waits = g!.status().waits;
  clock.toNext('minute', 5);
  const v = g!.admit(a, clock.now());
  assert.equal(v.ok, true, 'admitted from the lease taken ahead');
  assert.equal(g!.status().waits, waits);
});

test('NATS down: admitting from the leases held, then rate limits fail open and budgets fail closed (per team policy); status says so; fail-open admissions are reported when NATS is back', async () => {
  const own = await NatsServer.start();
  try {
    const clock = new TestClock(1);
    const [g] = await governors(1, clock, { url: own.url });
    const keyId = uid('key');
    const both = admission({ keyId, keyLimits: rpm(1000), keyBudget: perDay(1), costUsd: 0.001 });
    const warm = await Promise.all(Array.from({ length: 40 }, () => admitOrWait(g!, both, clock.now)));
    assert.equal(warm.filter((v) => v.ok).length, 40);
    assert.ok(g!.status().leases >= 2);

    await own.stop();
    await waitFor('the governor to notice', () => !g!.status().synced, 10_000);
    const st = g!.status();
    assert.ok(st.error !== null && st.leases >= 2, JSON.stringify(st));

    // From the leases held: admitted without NATS, until the budget's lease runs out (fail closed).
    let fromLeases = 0;
    let v = g!.admit(both, clock.now());
    while (v.ok === true) {
      fromLeases++;
      v = g!.admit(both, clock.now());
    }
    assert.ok(fromLeases > 0, 'admitted from the leases it holds');
    assert.equal(v.ok, false);
    assert.equal((v as Refused).reason, 'unavailable');
    assert.equal((v as Refused).kind, 'budget');
    assert.ok(g!.status().failedClosed >= 1);
    // A team that chose fail_open for budgets is admitted.
    const lenient = g!.admit({ ...both, whenUnavailable: { limits: 'fail_open', budget: 'fail_open' } }, clock.now());
    assert.equal(lenient.ok, true);

    // A rate limit with no lease: fail open by default, fail closed if the team says so.
    const other = uid('key');
    const rl = admission({ keyId: other, keyLimits: rpm(2) });
    const opened = [g!.admit(rl, clock.now()), g!.admit(rl, clock.now()), g!.admit(rl, clock.now())];
    assert.deepEqual(opened.map((x) => x.ok), [true, true, true]);
    assert.ok(g!.status().failedOpen >= 4);
    const strict = g!.admit({ ...rl, whenUnavailable: { limits: 'fail_closed', budget: 'fail_closed' } }, clock.now());
    assert.equal(strict.ok, false);
    assert.equal((strict as Refused).kind, 'requests');

    await own.start();
    await waitFor('the governor to sync again', () => g!.status().synced, 15_000);
    await waitFor('the fail-open admissions to be reported', async () => {
      const u = (await g!.usage({ key: { id: other, limits: rpm(2), budget: null } }, clock.now()))[0]!;
      const e = await entryOf(kvKey('requests', 'key', other, ((windowStart('minute', clock.now()) / 60_000) % 2) as 0 | 1), own.url);
      return u.used === 3 && e?.used === 3;
    }, 10_000);
    const after = g!.admit(rl, clock.now());
    assert.equal(after.ok === true, false, 'over its limit once NATS is back');
  } finally {
    await own.dispose();
  }
});

void nanoUp;
