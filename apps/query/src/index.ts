export { buildQueryServer } from './server.js';
export type { QueryServerOptions } from './server.js';
export { startQuery } from './start.js';
export type { StartQueryOptions, QueryHandle } from './start.js';
export { QueryError } from './errors.js';
export { requestsByTrace, stageStats, captureHealth } from './queries.js';
export type { RequestView, WaterfallEntry, StageStats, StageFilter, AttemptView, CaptureInstance, CaptureMinute, CaptureLag } from './queries.js';
export { timeParam, traceIdParam } from './params.js';
