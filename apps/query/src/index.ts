export { buildQueryServer } from './server.js';
export type { QueryServerOptions } from './server.js';
export { startQuery } from './start.js';
export type { StartQueryOptions, QueryHandle } from './start.js';
export { QueryError } from './errors.js';
export { requestsByTrace, stageStats, captureHealth, usage, USAGE_KEYS } from './queries.js';
export type { RequestView, WaterfallEntry, StageStats, StageFilter, AttemptView, CaptureInstance, CaptureMinute, CaptureLag, UsageRow, UsageFilter, UsageKey, PriceOf } from './queries.js';
export { timeParam, traceIdParam } from './params.js';
export { priceLookup } from './pricing.js';
