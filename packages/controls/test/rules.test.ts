/**
 * The rules every governor keeps (docs/governance.md), run against both: the in-process
 * MemoryGovernor and a NatsGovernor over a real nats-server. One instance each here; the
 * cross-replica bounds are in replicas.test.ts.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryGovernor, NatsGovernor, admitOrWait, type Admission, type Admitted, type Governor, type GovernorOptions, type Refused, type ScopeUsage } from '@sightline/controls';
import { NatsServer } from '../../../test/support/servers.js';
import { TestClock, admission, perDay, rpm, tpm, uid } from './support/governors.js';

let nats: NatsServer | null = null;
const open: Governor[] = [];
before(async () => {
  nats = await NatsServer.start();
});
after(async () => {
  for (const g of open) await g.close();
  await nats?.dispose();
});

interface Subject {
  name: string;
  make(clock: TestClock, opts?: GovernorOptions): Promise<Governor>;
}

const subjects: Subject[] = [
  {
    name: 'MemoryGovernor',
    async make(clock, opts = {}) {
      const g = new MemoryGovernor({ clock: clock.now, ...opts });
      open.push(g);
      return g;
    },
  },
  {
    name: 'NatsGovernor',
    async make(clock, opts = {}) {
      const g = new NatsGovernor({ url: nats!.url, clock: clock.now, ...opts });
      open.push(g);
      await g.ready;
      assert.equal(g.status().synced, true);
      return g;
    },
  },
];

async function admit(g: Governor, a: Admission, clock: TestClock): Promise<Admitted | Refused> {
  return admitOrWait(g, a, clock.now);
}

function refused(v: Admitted | Refused): Refused {
  assert.equal(v.ok, false, 'expected a refusal');
  return v as Refused;
}
function admitted(v: Admitted | Refused): Admitted {
  assert.equal(v.ok, true, v.ok ? '' : `refused: ${(v as Refused).message}`);
  return v as Admitted;
}

function one(u: ScopeUsage[], kind: ScopeUsage['kind'], scope: ScopeUsage['scope'] = 'key'): ScopeUsage {
  const x = u.find((e) => e.kind === kind && e.scope === scope);
  assert.ok(x !== undefined, `no ${scope} ${kind} usage in ${JSON.stringify(u)}`);
  return x;
}

for (const s of subjects) {
  describe(s.name, () => {
    test('requests_per_minute: exactly the limit in a UTC minute, the headers count down, the next minute starts afresh', async () => {
      const clock = new TestClock(1);
      const g = await s.make(clock);
      const keyId = uid('key');
      const a = admission({ keyId, keyLimits: rpm(5) });
      const left: number[] = [];
      for (let i = 0; i < 5; i++) {
        const v = admitted(await admit(g, a, clock));
        left.push(v.ticket.headers.remainingRequests!);
        assert.equal(v.ticket.headers.limitRequests, 5);
        assert.equal(v.ticket.headers.resetRequestsAtMs! % 60_000, 0, 'the reset is the next UTC minute');
        assert.ok(v.ticket.headers.resetRequestsAtMs! > clock.now());
      }
      assert.deepEqual(left, [4, 3, 2, 1, 0]);
      for (let i = 0; i < 3; i++) {
        const r = refused(await admit(g, a, clock));
        assert.equal(r.kind, 'requests');
        assert.equal(r.reason, 'exhausted');
        assert.equal(r.scope, 'key');
        assert.equal(r.limit, 5);
        assert.equal(r.remaining, 0);
        assert.equal(r.resetAtMs, Math.floor(clock.now() / 60_000) * 60_000 + 60_000);
        assert.equal(r.headers.remainingRequests, 0);
        assert.match(r.message, new RegExp(`key ${keyId}`));
      }
      const u = one(await g.usage({ key: { id: keyId, limits: rpm(5), budget: null } }, clock.now()), 'requests');
      assert.equal(u.used, 5);
      assert.equal(u.remaining, 0);

      clock.toNext('minute', 10);
      const v = admitted(await admit(g, a, clock));
      assert.equal(v.ticket.headers.remainingRequests, 4, 'a new window has the whole limit');
      const u2 = one(await g.usage({ key: { id: keyId, limits: rpm(5), budget: null } }, clock.now()), 'requests');
      assert.equal(u2.used, 1);
    });

    test('tokens_per_minute: reserved at the upper bound, corrected to the real count at settle', async () => {
      const clock = new TestClock(1);
      const g = await s.make(clock);
      const keyId = uid('key');
      const limits = tpm(1000);
      const a = admission({ keyId, keyLimits: limits, tokens: 400 });
      const t1 = admitted(await admit(g, a, clock)).ticket;
      const t2 = admitted(await admit(g, a, clock)).ticket;
      assert.equal(t2.headers.remainingTokens, 200);
      const r = refused(await admit(g, a, clock));
      assert.equal(r.kind, 'tokens');
      assert.equal(r.reason, 'exhausted');
      assert.equal(r.remaining, 200, '1000 − two reservations of 400');
      g.settle(t1, { tokens: 100, costUsd: null }, clock.now());
      g.settle(t2, { tokens: 100, costUsd: null }, clock.now());
      g.settle(t2, { tokens: 100, costUsd: null }, clock.now()); // a second settle is ignored
      // 200 used: two more reservations of 400 fit (1000), a third does not.
      const t3 = admitted(await admit(g, a, clock)).ticket;
      const t4 = admitted(await admit(g, a, clock)).ticket;
      refused(await admit(g, a, clock));
      const u = one(await g.usage({ key: { id: keyId, limits, budget: null } }, clock.now()), 'tokens');
      assert.equal(u.used, 200);
      assert.equal(u.reserved, 800);
      assert.equal(u.remaining, 0);
      g.settle(t3, { tokens: 400, costUsd: null }, clock.now());
      g.settle(t4, { tokens: 50, costUsd: null }, clock.now());
      const u2 = one(await g.usage({ key: { id: keyId, limits, budget: null } }, clock.now()), 'tokens');
      assert.equal(u2.used, 650);
      assert.equal(u2.reserved, 0);
      assert.equal(u2.remaining, 350, 'what a request did not use is free again');
      // A request larger than the whole limit can never pass.
      const big = refused(await admit(g, { ...a, tokens: 1001 }, clock));
      assert.equal(big.reason, 'too_large');
    });

    test('budget: reserved at the upper bound cost, charged the real cost; the refusal names scope, limit, spent and reset; the next day restores it', async () => {
      const clock = new TestClock(1);
      const g = await s.make(clock);
      const keyId = uid('key');
      const budget = perDay(0.01);
      const a = admission({ keyId, keyBudget: budget, costUsd: 0.004 });
      const t1 = admitted(await admit(g, a, clock)).ticket;
      const t2 = admitted(await admit(g, a, clock)).ticket;
      const r = refused(await admit(g, a, clock));
      assert.equal(r.kind, 'budget');
      assert.equal(r.reason, 'exhausted');
      assert.equal(r.scope, 'key');
      assert.equal(r.limit, 0.01);
      assert.ok(Math.abs(r.remaining - 0.002) < 1e-12, `remaining ${r.remaining}`);
      const dayEnd = Math.floor(clock.now() / 86_400_000) * 86_400_000 + 86_400_000;
      assert.equal(r.resetAtMs, dayEnd);
      assert.equal(typeof r.spentUsd, 'number');
      assert.match(r.message, /budget of key .* used up: \$0\.01 per day/);

      g.settle(t1, { tokens: 10, costUsd: 0.001 }, clock.now());
      g.settle(t2, { tokens: 10, costUsd: 0.001 }, clock.now());
      admitted(await admit(g, a, clock));
      const t4 = admitted(await admit(g, a, clock)).ticket;
      const r2 = refused(await admit(g, a, clock));
      assert.ok(Math.abs(r2.spentUsd! - 0.002) < 1e-12, `spent ${r2.spentUsd}`);
      g.settle(t4, { tokens: 10, costUsd: null }, clock.now()); // unknown cost: charged at its reservation
      const u = one(await g.usage({ key: { id: keyId, limits: null, budget } }, clock.now()), 'budget');
      assert.ok(Math.abs(u.used - 0.006) < 1e-12, `used ${u.used}`);
      assert.ok(Math.abs(u.reserved - 0.004) < 1e-12, `reserved ${u.reserved} (one request in flight)`);
      assert.equal(u.remaining, 0);
      assert.equal(u.period, 'day');
      assert.equal(u.resetAtMs, dayEnd);

      clock.toNext('day');
      admitted(await admit(g, a, clock));
      const u2 = one(await g.usage({ key: { id: keyId, limits: null, budget } }, clock.now()), 'budget');
      assert.equal(u2.used, 0);
      assert.ok(Math.abs(u2.remaining - 0.006) < 1e-12, `remaining ${u2.remaining}`);
      const big = refused(await admit(g, { ...a, costUsd: 0.02 }, clock));
      assert.equal(big.reason, 'too_large');
    });

    test('a model without a price is refused under a budget, and passes without one', async () => {
      const clock = new TestClock(1);
      const g = await s.make(clock);
      const keyId = uid('key');
      const r = refused(await admit(g, admission({ keyId, keyLimits: rpm(10), teamBudget: perDay(1), team: uid('team'), costUsd: null }), clock));
      assert.equal(r.reason, 'unpriced');
      assert.equal(r.scope, 'team');
      assert.equal(r.headers.limitRequests, 10);
      admitted(await admit(g, admission({ keyId, keyLimits: rpm(10), costUsd: null }), clock));
    });

    test('key and team limits both apply, all or nothing: a refused request charges neither', async () => {
      const clock = new TestClock(1);
      const g = await s.make(clock);
      const team = uid('team');
      const k1 = uid('key');
      const k2 = uid('key');
      const a1 = admission({ keyId: k1, team, keyLimits: rpm(1), teamLimits: rpm(3) });
      const a2 = admission({ keyId: k2, team, teamLimits: rpm(3) });
      admitted(await admit(g, a1, clock));
      const r = refused(await admit(g, a1, clock));
      assert.equal(r.scope, 'key');
      assert.equal(r.headers.remainingRequests, 0, 'the headers show the most constraining limit');
      const v = admitted(await admit(g, a2, clock));
      assert.equal(v.ticket.headers.remainingRequests, 1);
      admitted(await admit(g, a2, clock));
      const r2 = refused(await admit(g, a2, clock));
      assert.equal(r2.scope, 'team');
      const u = await g.usage({ key: { id: k1, limits: rpm(1), budget: null }, team: { name: team, limits: rpm(3), budget: null } }, clock.now());
      assert.equal(one(u, 'requests', 'key').used, 1);
      assert.equal(one(u, 'requests', 'team').used, 3, 'the key-refused request did not count for the team');
    });

    test('no limit: one shared admission that costs nothing and settles as a no-op', async () => {
      const clock = new TestClock(1);
      const g = await s.make(clock);
      const a = admission({ keyId: uid('key') });
      const v1 = admitted(g.admit(a, clock.now()) as Admitted);
      const v2 = g.admit(a, clock.now());
      assert.equal(v1, v2);
      assert.deepEqual({ ...v1.ticket.headers }.limitRequests, undefined);
      g.settle(v1.ticket, { tokens: 1, costUsd: 1 }, clock.now());
      assert.equal(g.status().leases, 0);
    });
  });
}
