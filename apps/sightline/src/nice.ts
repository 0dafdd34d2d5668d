/**
 * Imported first by child.ts, so it runs before anything else of the store process: lowers
 * the process's scheduling priority (niceness +10, no privilege needed), before chdb is
 * loaded, so the threads chdb starts inherit it. On a small machine chdb's inserts and
 * merges then give way to the gateway process when both want a core (the gateway's tail),
 * and take every core the gateway leaves idle; the bus and the spool absorb a lag.
 */
import { setPriority } from 'node:os';

/** Niceness of the store process (Linux: -20 highest … 19 lowest; 0 is the default). */
export const STORE_NICENESS = 10;

try {
  setPriority(STORE_NICENESS);
} catch {
  // Not permitted or not supported here: the store process runs at its parent's priority.
}
