/**
 * Module resolution hooks (https://nodejs.org/docs/latest-v20.x/api/module.html#customization-hooks)
 * that report every URL an `import` resolves to, over the port given at registration.
 * Registered by module-log.ts; they run on Node's loader thread.
 */
import type { InitializeHook, ResolveHook } from 'node:module';
import type { MessagePort } from 'node:worker_threads';

let port: MessagePort | null = null;

export const initialize: InitializeHook<{ port: MessagePort }> = (data) => {
  port = data.port;
};

export const resolve: ResolveHook = async (specifier, context, nextResolve) => {
  const out = await nextResolve(specifier, context);
  port?.postMessage(out.url);
  return out;
};
