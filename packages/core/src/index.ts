export { newTraceId, newSpanId, parseTraceparent } from './ids.js';
export type { TraceParent } from './ids.js';
export { now, markToUnixNano, markDiffNs, unixNanoNow } from './clock.js';
export { STAGES, ATTEMPT_SPAN } from './rows.js';
export type { StageName, SpanStatus, SpanRow, RequestRow, CaptureBatchV1, IngestBatchRow } from './rows.js';
export type { Dialect, AttemptInfo, WireRecord, CaptureBatchV2 } from './wire.js';
export { instanceId, onShutdown, envInt, dataDir } from './process.js';
export { valueAfterKey } from './json-bytes.js';
export { redactUrlCredentials } from './redact.js';
