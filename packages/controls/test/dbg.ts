import { NatsGovernor, admitOrWait } from '@sightline/controls';
import { NatsServer } from '/work/wt/governor/test/support/servers.ts';
import { TestClock, admission, tpm, uid } from '/work/wt/governor/packages/controls/test/support/governors.ts';
const own = await NatsServer.start();
let bad = 0;
for (let round = 0; round < 30; round++) {
  const clock = new TestClock(1);
  const logs: string[] = [];
  const g = new NatsGovernor({ url: own.url, clock: clock.now, log: (m) => logs.push(`${clock.now() % 100000} ${m}`) });
  await g.ready;
  const keyId = uid('key');
  const limits = tpm(1000);
  const a = admission({ keyId, keyLimits: limits, tokens: 400 });
  const t1 = await admitOrWait(g, a, clock.now);
  const t2 = await admitOrWait(g, a, clock.now);
  const r = await admitOrWait(g, a, clock.now);
  const u0 = (await g.usage({ key: { id: keyId, limits, budget: null } }, clock.now()))[0]!;
  if (t1.ok) g.settle(t1.ticket, { tokens: 100, costUsd: null }, clock.now());
  if (t2.ok) g.settle(t2.ticket, { tokens: 100, costUsd: null }, clock.now());
  const u = (await g.usage({ key: { id: keyId, limits, budget: null } }, clock.now()))[0]!;
  if (r.ok || r.remaining !== 200 || u.used !== 200) { bad++; console.log(round, r.ok ? 'ok' : r.remaining, JSON.stringify(u0), JSON.stringify(u), logs); }
  await g.close();
}
console.log('bad', bad);
await own.dispose();
