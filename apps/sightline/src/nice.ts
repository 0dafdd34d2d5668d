/**
 * The store process's scheduling priority: once it is serving, child.ts lowers it to
 * niceness +5 (no privilege needed) for every thread it has — Node's and chdb's (Linux
 * applies niceness per thread; threads started later inherit their creator's). On a small
 * machine chdb's inserts and merges then give way to the gateway process when both want a
 * core (the gateway's tail), and take every core the gateway leaves idle; the bus and the
 * spool absorb a lag. Start-up (opening chdb, migrations) runs at the normal priority, so a
 * busy machine does not hold the query API back.
 *
 * Why not more: niceness weighs against every other process of the machine too. At +10 on
 * a shared 2-core machine under a load average of 25, the store process got so little CPU
 * that it fell hundreds of batches behind (1 December); +5 gives it three times that share
 * (Linux CFS weights 335 vs 110, against 1024 at niceness 0).
 */
import { readdirSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

/** Niceness of the store process (Linux: -20 highest … 19 lowest; 0 is the default). */
export const STORE_NICENESS = 5;

/** Lowers every thread of this process to STORE_NICENESS (never raises one); returns how many were changed. */
export function lowerPriority(): number {
  let tids: number[];
  try {
    tids = readdirSync('/proc/self/task').map(Number).filter((n) => Number.isInteger(n) && n > 0);
  } catch {
    tids = [0]; // no /proc: this thread only (0: the calling thread)
  }
  let changed = 0;
  for (const tid of tids) {
    try {
      if (getPriority(tid) < STORE_NICENESS) {
        setPriority(tid, STORE_NICENESS);
        changed++;
      }
    } catch {
      // The thread ended meanwhile, or this is not permitted here: it keeps its priority.
    }
  }
  return changed;
}
