/**
 * At shutdown, what the store process did not write by the deadline (it was behind, frozen,
 * or dying) leaves the in-process bus for the gateway's disk spool, which the gateway
 * replays at its next start (packages/capture spool.ts): a slow store process costs time at
 * the next start, not data. Only when the spool is off or full is a batch lost, and each
 * one is counted in the log.
 */
import { Spool } from '@sightline/capture';
import type { MemoryBus } from '@sightline/bus';

/** Spools every batch the bus still holds; call once no consumer is left. */
export async function spoolLeftovers(bus: MemoryBus, dir: string | null, maxBytes: number, log: (msg: string) => void): Promise<{ spooled: number; lost: number }> {
  let spooled = 0;
  let lost = 0;
  if (bus.pending === 0) return { spooled, lost };
  if (dir === null) {
    lost = bus.pending;
    log(`${lost} capture batch(es) not written by the deadline and no spool (capture.spool_dir): lost`);
    return { spooled, lost };
  }
  // The gateway released the spool when it closed; this is the same process.
  Spool.claim(dir);
  try {
    const spool = new Spool(dir, maxBytes);
    // Handed-back messages become ready on the next turn of the loop; a few empty
    // fetches in a row mean nothing more is coming.
    let empty = 0;
    for (let i = 0; i < 100_000 && bus.pending > 0 && empty < 5; i++) {
      const msgs = await bus.fetch(256, 20);
      empty = msgs.length === 0 ? empty + 1 : 0;
      for (const m of msgs) {
        if (await spool.append(m.msgId, m.data)) spooled++;
        else lost++;
        await m.ack();
      }
    }
    lost += bus.pending;
  } finally {
    Spool.release(dir);
  }
  log(`${spooled} capture batch(es) not written by the deadline moved to the spool (${dir}), replayed at the next start${lost > 0 ? `; ${lost} lost (spool full)` : ''}`);
  return { spooled, lost };
}
