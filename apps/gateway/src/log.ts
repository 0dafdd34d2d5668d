/**
 * The gateway's logger for failures of its own. The request path logs nothing (fastify's
 * per-request logger is off: a child logger per request costs the hot path); an internal
 * error is rare and is reported here, without the request body or any header.
 */
import { pino } from 'pino';

/** What the gateway needs of a logger; a pino Logger fits. */
export interface GatewayLogger {
  error(fields: Record<string, unknown>, msg: string): void;
}

/** JSON lines on stderr (pino), tagged with the gateway instance. */
export function stderrLogger(instance: string): GatewayLogger {
  return pino({ base: { app: 'sightline-gateway', instance } }, pino.destination({ fd: 2, sync: true }));
}
