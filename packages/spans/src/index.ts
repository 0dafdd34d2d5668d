export { SpanBuilder, stageIntervals } from './spans.js';
export type { BuiltRequest, StageInterval, StageMarks, SpanBuilderOptions } from './spans.js';
export { decodeBatch, checkWireRecord } from './decode.js';
export type { DecodedBatch } from './decode.js';
export { BadBatchError } from './errors.js';
