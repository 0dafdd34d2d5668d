export { Ingester } from './ingester.js';
export type { IngesterOptions, IngesterStats } from './ingester.js';
export { startIngester, migrateWithRetry } from './start.js';
export type { StartIngesterOptions, IngesterHandle } from './start.js';
export { renderIngesterMetrics } from './metrics.js';
export { Rollup } from './rollup.js';
export { Retention } from './retention.js';
export { OtlpExport, otlpOptionsFromEnv, OTLP_PROTOCOLS } from './otlp.js';
export type { OtlpExportOptions, OtlpExportStats, OtlpProtocol } from './otlp.js';
