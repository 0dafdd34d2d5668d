/**
 * A governor in a process of its own, for the crash tests: it takes leases by admitting
 * requests it never settles (they are "in flight"), says what it holds on stdout, and keeps
 * running — renewing its leases — until the test SIGKILLs it.
 *
 *   node --import tsx holder.ts '{"url":…|null,"file":…,"holderId":…,"offsetMs":…,"leaseTtlMs":…,"admission":{…},"count":10}'
 */
import { MemoryGovernor, NatsGovernor, admitOrWait, type Admission, type Governor } from '@sightline/controls';

interface Config {
  /** NATS_URL, or null for the in-process governor over `file`. */
  url: string | null;
  file?: string;
  holderId: string;
  /** The parent's test clock: wall time plus this. */
  offsetMs: number;
  leaseTtlMs: number;
  admission: Admission;
  count: number;
}

const cfg = JSON.parse(process.argv[2] ?? '{}') as Config;
const now = (): number => Date.now() + cfg.offsetMs;
const opts = { holderId: cfg.holderId, clock: now, leaseTtlMs: cfg.leaseTtlMs, idleMs: 3_600_000 };
const g: Governor = cfg.url === null ? new MemoryGovernor({ ...opts, file: cfg.file! }) : new NatsGovernor({ ...opts, url: cfg.url });
await g.ready;
let admitted = 0;
for (let i = 0; i < cfg.count; i++) {
  const v = await admitOrWait(g, cfg.admission, now);
  if (v.ok) admitted++;
}
process.stdout.write(`${JSON.stringify({ admitted, status: g.status() })}\n`);
setInterval(() => {}, 60_000);
