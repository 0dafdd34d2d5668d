/**
 * The run's validity gates (docs/benchmarks.md): the checks that say whether a figure measured
 * the proxies or the rig. Pure: each builder takes what was measured and returns the gates, so
 * thresholds and wording are tested on their own (bench/test/bench-pure.test.ts); RunContext
 * records them in order and logs the failed ones.
 */
import type { Gate, LadderStep } from './report.js';
import { drift, errorRate } from './stats.js';
import type { BlockResult } from './types.js';

/** Error-rate gate: more than 0.1 % failed requests invalidates an arm's figures (issue 5). */
export const MAX_ERROR_RATE = 0.001;
/**
 * Drift gate: the two direct control blocks of a scenario may differ by at most 25 % at p50.
 * The floor subtracted from every arm is their mean, so a drift d shifts any added figure by
 * up to d/2 of the floor; at the 1 KiB floor (~100 µs here) 25 % bounds that error to ~12 µs,
 * well under the 250 µs target being checked. More drift means the machine changed speed
 * during the scenario (a noisy neighbour) and the scenario must be re-run.
 */
export const MAX_P50_DRIFT = 0.25;

/** What the block gates read of a measured block (context.ts `Measured` has it). */
export interface GatedBlock {
  result: Pick<BlockResult, 'id' | 'attempted' | 'errors' | 'prewarmErrors' | 'truncated'>;
  /** Requests the mock counted during the block. */
  mockRequests: number;
}

/** The p50 drift of the control blocks as reported (three decimals) and gated. */
export function controlDrift(beforeP50: number, afterP50: number): number {
  return Math.round(drift(beforeP50, afterP50) * 1000) / 1000;
}

/** The direct control blocks before and after a scenario's arms stayed within MAX_P50_DRIFT. */
export function driftGate(scenario: string, beforeP50: number, afterP50: number): Gate {
  const d = controlDrift(beforeP50, afterP50);
  return {
    name: 'direct p50 drift',
    scope: scenario,
    passed: d <= MAX_P50_DRIFT,
    detail: `before ${beforeP50} µs, after ${afterP50} µs: ${(d * 100).toFixed(1)} % (max ${MAX_P50_DRIFT * 100} %)`,
  };
}

/**
 * Error-rate and mock-count gates over an arm's blocks in one scenario, plus a failed
 * "block finished in time" gate when a block hit its time bound. `mock` says what the mock
 * must have seen: every request the driver sent (`all`, a proxy), or none (`none`: the
 * exact-cache hit arm, whose answers all come from the cache its probe filled).
 */
export function blockGates(scenario: string, arm: string, measured: readonly GatedBlock[], mock: 'all' | 'none' = 'all'): Gate[] {
  const scope = `${scenario}/${arm}`;
  const attempted = measured.reduce((a, m) => a + m.result.attempted, 0);
  const errors = measured.reduce((a, m) => a + m.result.errors + m.result.prewarmErrors, 0);
  const rate = errorRate(errors, attempted);
  const gates: Gate[] = [{ name: 'error rate', scope, passed: rate <= MAX_ERROR_RATE, detail: `${errors} of ${attempted} requests failed (${(rate * 100).toFixed(3)} %, max ${MAX_ERROR_RATE * 100} %)` }];
  if (mock === 'none') {
    const reached = measured.filter((m) => m.mockRequests !== 0);
    gates.push({
      name: 'cache hits only',
      scope,
      passed: reached.length === 0,
      detail: reached.length === 0 ? `every one of ${attempted} requests in ${measured.length} blocks answered from the cache (the mock saw none)` : reached.map((m) => `${m.result.id}: ${m.mockRequests} of ${m.result.attempted} requests reached the mock`).join('; '),
    });
  } else {
    const off = measured.filter((m) => m.mockRequests !== m.result.attempted);
    gates.push({
      name: 'mock request count',
      scope,
      passed: off.length === 0,
      detail: off.length === 0 ? `mock counted every request of ${measured.length} blocks (${attempted})` : off.map((m) => `${m.result.id}: driver sent ${m.result.attempted}, mock saw ${m.mockRequests}`).join('; '),
    });
  }
  const truncated = measured.filter((m) => m.result.truncated);
  if (truncated.length > 0) gates.push({ name: 'block finished in time', scope, passed: false, detail: `${truncated.map((m) => m.result.id).join(', ')} hit the block time bound` });
  return gates;
}

/**
 * Sightline's ladder figures are only meaningful against a direct floor that kept up: one
 * failed gate per direct step that did not answer every request.
 */
export function ladderFloorGates(directSteps: readonly LadderStep[]): Gate[] {
  return directSteps
    .filter((st) => !st.answered_all)
    .map((st) => ({
      name: 'ladder direct floor answered every request',
      scope: `ladder-${st.rate}/direct`,
      passed: false,
      detail: `${st.ok}/${st.sent} answered: the driver or the mock could not sustain the rate, so this step measures the rig, not the proxies`,
    }));
}

export const REDELIVERY_GATE = 'ingester: no batch redelivered that it did not give back';

/**
 * The ingester gives messages back on purpose (nak, then a retry after its backoff) when a
 * ClickHouse write or a dead-lettering fails, and each comes back as a redelivery. Redeliveries
 * beyond what it gave back are deliveries it never saw or acknowledgements that were lost:
 * capture waited out the bus's ack wait. `counters` are the ingester's (RunContext
 * `ingesterCounters()`); a missing counter fails the gate, as an ingester that cannot say.
 * A comparison of counts: a message given back that has not come back yet leaves room for one
 * unexplained redelivery.
 */
export function redeliveryGate(counters: ReadonlyMap<string, number>): Gate {
  const again = counters.get('redelivered_total');
  const given = counters.get('given_back_total');
  const shown = (name: string): string => String(counters.get(name) ?? '?');
  return {
    name: REDELIVERY_GATE,
    scope: 'ingester',
    passed: again !== undefined && given !== undefined && again <= given,
    detail: `redelivered ${shown('redelivered_total')}, given back ${shown('given_back_total')}, write failures ${shown('write_failures_total')}, dead-lettered ${shown('dead_lettered_total')}, batches ${shown('batches_total')}, requests ${shown('requests_total')}`,
  };
}
