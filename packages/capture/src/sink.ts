/**
 * What the gateway hands finished requests to: Capture (capture.ts), or a test's own.
 * The interface and its counters live here, apart from the implementation, so that
 * code holding a sink does not import the queue (and the queue imports this file, not
 * the other way round).
 */
import type { RequestRecord } from './record.js';

export interface CaptureStats {
  /** Records handed to capture. */
  recorded: number;
  /** Requests in batches JetStream acknowledged (directly or replayed from the spool). */
  published: number;
  /** Batches JetStream acknowledged. */
  publishedBatches: number;
  /** Publish attempts that failed or timed out (each is retried). */
  publishFailures: number;
  /** Requests written to the disk spool. */
  spooled: number;
  /** Requests published from the disk spool. */
  replayed: number;
  /** Requests whose capture was dropped (queue and spool full, or unbuildable). */
  dropped: number;
  /** Requests waiting in memory: not yet built, or built and not yet acknowledged or spooled. */
  queued: number;
  /** Batches NATS refused for good (over its max payload), dropped. */
  refused: number;
  /** Batches in the disk spool. */
  spoolBatches: number;
  spoolBytes: number;
  /**
   * Batches whose usage and content this thread made itself, not the content preparer: it
   * failed, answered nothing for its stuck bound, or was given up on at shutdown.
   */
  contentMadeHere: number;
  /**
   * Requests whose usage and content this thread made itself although there is a content
   * preparer: those of the batches above, and those made one by one as they were handed over
   * while the preparer held `preparingMaxBytes` of unanswered jobs.
   */
  contentMadeHereRequests: number;
}

export interface CaptureSink {
  /** Hands a finished request to capture. Never throws, never waits. */
  record(rec: RequestRecord): void;
  /** Counters. */
  readonly stats: CaptureStats;
  /** Flushes within the deadline and stops. Returns requests neither published nor spooled. */
  close(timeoutMs: number): Promise<number>;
}
