export { buildGateway } from './server.js';
export { GatewayError, errorBody } from './errors.js';
export { GatewayCore } from './server.js';
export type { GatewayErrorCode } from './errors.js';
export { startGateway } from './start.js';
export type { GatewayHandle, StartGatewayOptions } from './start.js';
export type { GatewayLogger } from './log.js';
