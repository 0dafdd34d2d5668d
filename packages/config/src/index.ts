export { loadConfigFile, parseConfig, loadConfigFromEnv, DEFAULT_CONFIG_PATH } from './load.js';
export type { LoadOptions } from './load.js';
export { ConfigError } from './errors.js';
export { expandEnv, MissingEnvError } from './env.js';
export type { EnvLookup } from './env.js';
export { Router, globToRegExp } from './router.js';
export type { RouteMatch } from './router.js';
export type { Config, ProviderConfig, ProviderType, RouteConfig, TargetConfig, BreakerConfig, CaptureConfig, PriceConfig } from './types.js';
