/** Dashboard errors: stable codes. */
export type DashboardErrorCode = 'SL_DASHBOARD_ASSETS';

/** The dashboard's files could not be read at start (a broken install: `npm ci` again). */
export class DashboardError extends Error {
  constructor(
    readonly code: DashboardErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'DashboardError';
  }
}
