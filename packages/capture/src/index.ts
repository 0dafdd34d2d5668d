export { RequestRecord, keepResponseChunk, RESPONSE_KEEP_BYTES } from './record.js';
export { toWire, batchHead } from './wire.js';
export { extractUsage, hasTokenDelta } from './usage.js';
export type { Usage } from './usage.js';
export { Capture } from './capture.js';
export type { CaptureOptions } from './capture.js';
export type { CaptureSink, CaptureStats } from './sink.js';
export { Spool } from './spool.js';
