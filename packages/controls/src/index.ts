export { ControlsError } from './errors.js';
export type { ControlsErrorCode } from './errors.js';
export { DEFAULT_UNAVAILABLE_POLICY } from './types.js';
export type {
  Actual,
  Admission,
  Admitted,
  Budget,
  FailMode,
  Governor,
  GovernorStatus,
  Limits,
  RateHeaders,
  RefusalKind,
  RefusalReason,
  Refused,
  ScopeUsage,
  Ticket,
  UnavailablePolicy,
  UsageQuery,
  Verdict,
  Wait,
} from './types.js';
export { admitOrWait } from './engine.js';
export type { GovernorOptions } from './engine.js';
export { windowEnd, windowStart } from './windows.js';
export type { Period } from './windows.js';
export { decodeEntry, kvKey, nanoDown, nanoUp } from './entry.js';
export type { LimitEntry, Holder } from './entry.js';
export { MemoryGovernor } from './memory.js';
export type { MemoryGovernorOptions } from './memory.js';
export { LIMITS_BUCKET, NatsGovernor } from './nats.js';
export type { NatsGovernorOptions } from './nats.js';
