/**
 * A governor in a process of its own, for the crash tests: it takes leases by admitting
 * requests it never settles (they are "in flight"), says what it holds on stdout, and keeps
 * running — renewing its leases — until the test SIGKILLs it.
 *
 *   node --import tsx holder.ts '{"url":…,"holderId":…,"offsetMs":…,"leaseTtlMs":…,"admission":{…},"count":10}'
 */
import { NatsGovernor, admitOrWait, type Admission } from '@sightline/controls';

interface Config {
  url: string;
  holderId: string;
  /** The parent's test clock: wall time plus this. */
  offsetMs: number;
  leaseTtlMs: number;
  admission: Admission;
  count: number;
}

const cfg = JSON.parse(process.argv[2] ?? '{}') as Config;
const now = (): number => Date.now() + cfg.offsetMs;
const g = new NatsGovernor({ url: cfg.url, holderId: cfg.holderId, clock: now, leaseTtlMs: cfg.leaseTtlMs, idleMs: 3_600_000 });
await g.ready;
let admitted = 0;
for (let i = 0; i < cfg.count; i++) {
  const v = await admitOrWait(g, cfg.admission, now);
  if (v.ok) admitted++;
}
process.stdout.write(`${JSON.stringify({ admitted, status: g.status() })}\n`);
setInterval(() => {}, 60_000);
