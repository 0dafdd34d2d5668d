/**
 * Imported first by child.ts, so it runs before anything else of the store process: lowers
 * the process's scheduling priority (niceness +5, no privilege needed), before chdb is
 * loaded, so the threads chdb starts inherit it. On a small machine chdb's inserts and
 * merges then give way to the gateway process when both want a core (the gateway's tail),
 * and take every core the gateway leaves idle; the bus and the spool absorb a lag.
 *
 * Why not more: niceness weighs against every other process of the machine too. At +10 on
 * a shared 2-core machine under a load average of 25, the store process got so little CPU
 * that it fell hundreds of batches behind (1 December); +5 gives it three times that share
 * (Linux CFS weights 335 vs 110, against 1024 at niceness 0).
 */
import { setPriority } from 'node:os';

/** Niceness of the store process (Linux: -20 highest … 19 lowest; 0 is the default). */
export const STORE_NICENESS = 5;

try {
  setPriority(STORE_NICENESS);
} catch {
  // Not permitted or not supported here: the store process runs at its parent's priority.
}
