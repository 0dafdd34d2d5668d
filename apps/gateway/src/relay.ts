/**
 * How an upstream response reaches the client. A relay sees the provider's status,
 * headers and body chunks and says what to write. Same-dialect traffic uses the
 * passthrough relay (bytes out as they came in); translating relays live beside it.
 */
import type { OutgoingHttpHeaders } from 'node:http';

export interface Relay {
  /**
   * The client's status and headers for a provider response that is being relayed.
   * `headers` holds the provider's headers that may pass (lower-case names).
   */
  head(status: number, headers: OutgoingHttpHeaders): { status: number; headers: OutgoingHttpHeaders };
  /** What to write to the client for one provider chunk; null writes nothing. */
  data(chunk: Buffer): Buffer | string | null;
  /** What to write when the provider's response is complete; null writes nothing. */
  end(): Buffer | string | null;
}

export const passthroughRelay: Relay = {
  head: (status, headers) => ({ status, headers }),
  data: (chunk) => chunk,
  end: () => null,
};
