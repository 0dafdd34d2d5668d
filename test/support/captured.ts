/**
 * What a gateway under test captured: an in-process bus whose batches are decoded into
 * request rows and span rows, looked up by trace id. Shared by the gateway's test files.
 */
import { MemoryBus } from '@sightline/bus';
import { messageRecords, type RequestRow, type SpanRow, type WireRecord } from '@sightline/core';
import { decodeBatch, SpanBuilder } from '@sightline/spans';
import { waitFor } from './servers.js';

export class CapturedBus {
  readonly bus = new MemoryBus();
  readonly requests: RequestRow[] = [];
  readonly spans: SpanRow[] = [];
  /** The records as they travelled (content and attribution included). */
  readonly records: WireRecord[] = [];
  /** The raw messages as they travelled, as text. */
  readonly messages: string[] = [];
  readonly #builder = new SpanBuilder();

  /** Reads every batch published so far. */
  async drain(): Promise<void> {
    for (const m of await this.bus.fetch(1000, 10)) {
      const text = Buffer.from(m.data).toString('utf8');
      this.messages.push(text);
      this.records.push(...messageRecords(m.data));
      const batch = decodeBatch(m.data, this.#builder);
      this.requests.push(...batch.requests);
      this.spans.push(...batch.spans);
      await m.ack();
    }
  }

  /** The record of this trace id as it travelled (waits for it). */
  async record(traceId: string, timeoutMs = 5000): Promise<WireRecord> {
    await waitFor(`record of ${traceId}`, async () => {
      await this.drain();
      return this.records.some((r) => r.traceId === traceId);
    }, timeoutMs);
    return this.records.find((r) => r.traceId === traceId)!;
  }

  /** The captured request with this trace id (waits for it) and its spans. */
  async captured(traceId: string, timeoutMs = 5000): Promise<{ request: RequestRow; spans: SpanRow[] }> {
    await waitFor(`capture of ${traceId}`, async () => {
      await this.drain();
      return this.requests.some((r) => r.trace_id === traceId);
    }, timeoutMs);
    return { request: this.requests.find((r) => r.trace_id === traceId)!, spans: this.spans.filter((s) => s.trace_id === traceId) };
  }
}

/** The value of a span attribute, or undefined. */
export function attr(s: SpanRow, key: string): string | undefined {
  const i = s.attr_keys.indexOf(key);
  return i === -1 ? undefined : s.attr_values[i];
}
