/**
 * Fixtures of the controls tests: admissions, a clock the tests move, and the ways of making
 * the governors under test (in process, or over a real nats-server).
 */
import type { Admission, Budget, Limits } from '@sightline/controls';
import { windowStart } from '@sightline/controls';
export { seeded } from '../../../../test/support/seeded.js';

let seq = 0;
/** A fresh id per test, so tests sharing a NATS server never share an entry. */
export function uid(prefix: string): string {
  return `${prefix}_${process.pid}_${++seq}_${Math.random().toString(36).slice(2, 8)}`;
}

export function admission(over: Partial<Admission> & { keyId: string; team?: string }): Admission {
  return {
    team: 'team_none',
    keyLimits: null,
    teamLimits: null,
    keyBudget: null,
    teamBudget: null,
    tokens: 0,
    costUsd: 0,
    ...over,
  };
}

export const rpm = (n: number): Limits => ({ requests_per_minute: n });
export const tpm = (n: number): Limits => ({ tokens_per_minute: n });
export const perDay = (usd: number): Budget => ({ usd, period: 'day' });

/**
 * Wall time shifted to a chosen instant: the tests start at second `atSecond` of a UTC minute
 * (so a burst stays in one window whatever the real time is) and move it forward.
 */
export class TestClock {
  #offset: number;
  constructor(atSecond = 1) {
    const real = Date.now();
    this.#offset = windowStart('minute', real) + 60_000 + atSecond * 1000 - real;
  }
  readonly now = (): number => Date.now() + this.#offset;
  advance(ms: number): void {
    this.#offset += ms;
  }
  /** Moves to `ms` after the start of the next UTC window of `period`. */
  toNext(period: 'minute' | 'day' | 'month', ms = 1000): void {
    const t = this.now();
    const start = windowStart(period, t);
    const next = period === 'minute' ? start + 60_000 : period === 'day' ? start + 86_400_000 : Date.UTC(new Date(start).getUTCFullYear(), new Date(start).getUTCMonth() + 1, 1);
    this.#offset += next + ms - t;
  }
}

