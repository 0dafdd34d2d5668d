/**
 * A circuit breaker per route target. It counts provider failures only — 5xx answers,
 * timeouts, connection errors and resets — never a client's 4xx, so a caller sending bad
 * requests cannot take a provider out of rotation. Closed → open after
 * `failureThreshold` consecutive failures; open → half-open after `cooldownMs`, letting
 * one probe through; the probe's outcome closes or reopens it.
 */
import type { BreakerConfig } from '@sightline/config';

export type BreakerState = 'closed' | 'open' | 'half-open';

export class Breaker {
  state: BreakerState = 'closed';
  failures = 0;
  openedAt = 0;
  #probing = false;
  /** Times the breaker opened. */
  opens = 0;

  constructor(
    readonly name: string,
    readonly cfg: BreakerConfig,
  ) {}

  /** Whether a request may go to this target now; in half-open, only one probe at a time. */
  allow(nowMs: number): boolean {
    if (this.state === 'closed') return true;
    if (this.state === 'open') {
      if (nowMs - this.openedAt < this.cfg.cooldownMs) return false;
      this.state = 'half-open';
      this.#probing = false;
    }
    if (this.#probing) return false;
    this.#probing = true;
    return true;
  }

  success(): void {
    this.failures = 0;
    this.#probing = false;
    this.state = 'closed';
  }

  failure(nowMs: number): void {
    this.#probing = false;
    this.failures++;
    if (this.state === 'half-open' || (this.state === 'closed' && this.failures >= this.cfg.failureThreshold)) {
      this.state = 'open';
      this.openedAt = nowMs;
      this.opens++;
    }
  }

  /** A request let through in half-open ended without a verdict (client left): allow another probe. */
  release(): void {
    this.#probing = false;
  }
}
