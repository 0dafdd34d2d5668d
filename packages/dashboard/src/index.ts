export { loadAssets, PUBLIC_DIR, SECURITY_HEADERS } from './assets.js';
export type { Asset } from './assets.js';
export { DashboardError } from './errors.js';
export type { DashboardErrorCode } from './errors.js';
