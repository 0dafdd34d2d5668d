/** What the gateway hands finished requests to: capture in this thread, or in a worker thread. */
import type { CaptureStats } from './capture.js';
import type { RequestRecord } from './record.js';

export interface CaptureSink {
  /** Hands a finished request to capture. Never throws, never waits. */
  record(rec: RequestRecord): void;
  /** Counters; for the threaded sink, a snapshot at most a quarter of a second old. */
  readonly stats: CaptureStats;
  /** Flushes within the deadline and stops. Returns requests neither published nor spooled. */
  close(timeoutMs: number): Promise<number>;
}
