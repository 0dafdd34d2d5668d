/** What the gateway hands finished requests to (Capture; a test may pass its own). */
import type { CaptureStats } from './capture.js';
import type { RequestRecord } from './record.js';

export interface CaptureSink {
  /** Hands a finished request to capture. Never throws, never waits. */
  record(rec: RequestRecord): void;
  /** Counters. */
  readonly stats: CaptureStats;
  /** Flushes within the deadline and stops. Returns requests neither published nor spooled. */
  close(timeoutMs: number): Promise<number>;
}
