/**
 * Faults injected into a running in-process gateway, for the paths no input reaches: the
 * gateway's own code has no request that makes its router throw. Each returns its undo.
 */
import type { GatewayHandle } from '@sightline/app-gateway';

/** The gateway's router throws `message` for `model` (and matches every other model as before). */
export function routerFault(gw: GatewayHandle, model: string, message: string): () => void {
  const router = gw.core.router;
  const match = router.match;
  router.match = function (m: string) {
    if (m === model) throw new Error(message);
    return match.call(this, m);
  };
  return () => {
    router.match = match;
  };
}
