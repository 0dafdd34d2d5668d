/**
 * The content thread's place in the scheduler (issue 15). It must get only the CPU the
 * serving thread (and, on a shared core, the provider or anything else) leaves, and give the
 * core back at once when they wake.
 *
 * Nice 19 does the first, not the second, on this kernel (Linux 6.18, EEVDF): a woken nice-0
 * thread does not always preempt a running nice-19 one, which keeps the core for the rest of
 * its slice. Measured with apps/gateway/scripts/wake-lateness.mjs (a thread that wakes every
 * 1 ms beside a thread that spins, both on one core; four runs each, 2 December): lateness p99
 * 2.2–2.7 ms beside a nice-19 spinner, 0.19–0.20 ms beside a `SCHED_IDLE` one and 0.24–0.33 ms
 * with no spinner. A `SCHED_IDLE` thread is preempted by any other thread that wakes
 * (kernel/sched/fair.c, check_preempt_wakeup_fair), so a woken serving thread does not wait out
 * this one's slice. (It can still wait for a lock this thread holds, as at nice 19.)
 *
 * Node has no call for a thread's scheduling policy: util-linux's `chrt` sets it, for this
 * thread's id (`/proc/thread-self`), once when the thread starts. Where that fails (no `chrt`,
 * not Linux) the thread stays at nice 19, as before. What the thread got is read back from
 * `/proc/thread-self/stat`, not assumed from chrt's exit code.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';

/** `idle`: SCHED_IDLE. `nice`: the normal policy at nice 19. `normal`: neither could be set. */
export type ThreadPolicy = 'idle' | 'nice' | 'normal';

/** Linux's number for SCHED_IDLE (include/uapi/linux/sched.h). */
const SCHED_IDLE = 5;

/** The calling thread's id (its entry under /proc/PID/task). */
export function threadId(): number {
  // "PID/task/TID"
  const link = readlinkSync('/proc/thread-self');
  return Number(link.slice(link.lastIndexOf('/') + 1));
}

/** The scheduling policy and nice value of thread `tid` of this process (proc(5), /proc/PID/stat fields 19 and 41). */
export function threadScheduling(tid: number): { policy: number; nice: number } {
  const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
  // The command name (field 2) is in parentheses and may hold spaces: count from after it.
  const f = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
  return { policy: Number(f[41 - 3]), nice: Number(f[19 - 3]) };
}

/**
 * Puts the calling thread at the lowest priority it can get: SCHED_IDLE by `chrt`, else nice
 * 19. On Linux only: elsewhere `os.setPriority(19)` would lower the whole process, serving
 * thread included. `chrt` names the program (tests give one that is not there).
 */
export function lowerThisThread(chrt = 'chrt'): { policy: ThreadPolicy; tid: number } {
  if (process.platform !== 'linux') return { policy: 'normal', tid: 0 };
  let tid = 0;
  try {
    tid = threadId();
  } catch {
    // No /proc: nice only.
  }
  let policy: ThreadPolicy = 'normal';
  try {
    // On Linux, the calling thread's own (pid 0 means the caller, a thread here).
    setPriority(19);
    policy = 'nice';
  } catch {
    // Not permitted here.
  }
  if (tid > 0) {
    try {
      execFileSync(chrt, ['--idle', '--pid', '0', String(tid)], { stdio: 'ignore', timeout: 5_000 });
    } catch {
      // No chrt, or not permitted: what the thread has is read back below.
    }
    try {
      const s = threadScheduling(tid);
      policy = s.policy === SCHED_IDLE ? 'idle' : s.nice >= 19 ? 'nice' : 'normal';
    } catch {
      // Keep what setPriority gave.
    }
  }
  return { policy, tid };
}
