export { buildQueryServer } from './server.js';
export type { QueryServerOptions } from './server.js';
export { startQuery } from './start.js';
export type { StartQueryOptions, QueryHandle } from './start.js';
export { QueryError } from './errors.js';
export { requestsByTrace, stageStats } from './queries.js';
export type { RequestView, WaterfallEntry, StageStats, StageFilter } from './queries.js';
export { timeParam, traceIdParam } from './params.js';
