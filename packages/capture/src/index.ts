export { RequestRecord, keepResponseChunk, RESPONSE_KEEP_BYTES } from './record.js';
export type { Dialect, AttemptInfo } from './record.js';
export { SpanBuilder, stageIntervals } from './spans.js';
export type { BuiltRequest, StageInterval, SpanBuilderOptions } from './spans.js';
export { extractUsage, hasTokenDelta } from './usage.js';
export type { Usage } from './usage.js';
export { Capture } from './capture.js';
export type { CaptureOptions, CaptureStats } from './capture.js';
