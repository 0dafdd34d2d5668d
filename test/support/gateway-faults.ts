/**
 * Faults injected into a running in-process gateway, for the paths no input reaches (the
 * gateway's own code has no request that makes its router throw), and the error log a test
 * reads them back from.
 */
import type { GatewayHandle, GatewayLogger } from '@sightline/app-gateway';

/** The gateway's router throws `message` for `model` (and matches every other model as before). Returns the undo. */
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

/** The gateway's error log as a test keeps it: pass `logger` to startGateway. */
export class LoggedErrors {
  readonly entries: { fields: Record<string, unknown>; msg: string }[] = [];
  readonly logger: GatewayLogger = {
    error: (fields, msg) => {
      this.entries.push({ fields, msg });
    },
  };

  /** The entry that reported a fault whose cause has this message (of this trace, when given). */
  fault(message: string, traceId?: string): { fields: Record<string, unknown>; msg: string } | undefined {
    return this.entries.find((e) => (traceId === undefined || e.fields.trace_id === traceId) && (e.fields.err as { message?: unknown } | undefined)?.message === message);
  }
}
