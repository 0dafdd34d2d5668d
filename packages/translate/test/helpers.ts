/** Shared test helpers (not a test file itself). */

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { SseParser, formatSse } from '../src/index.js';
import type { SseEvent } from '../src/index.js';

export interface Golden {
  description: string;
  options: Record<string, unknown>;
  input: unknown;
  expected: unknown;
}

export function loadGolden(name: string): Golden {
  const text = readFileSync(new URL(`./golden/${name}.json`, import.meta.url), 'utf8');
  return JSON.parse(text) as Golden;
}

export interface InputEvent {
  event?: string | null;
  data: unknown;
}

/** Input events as the SSE text an upstream would send. */
export function toSseText(events: readonly InputEvent[]): string {
  let out = '';
  for (const e of events) out += formatSse(e.event ?? null, typeof e.data === 'string' ? e.data : JSON.stringify(e.data));
  return out;
}

export interface OutputEvent {
  event: string | null;
  data: unknown;
}

/** Parses SSE text written by a translator into events with JSON data (or the raw string, e.g. [DONE]). */
export function parseSseText(text: string): OutputEvent[] {
  const p = new SseParser();
  const events = [...p.push(Buffer.from(text, 'utf8')), ...p.end()];
  return events.map((e) => {
    let data: unknown = e.data;
    try {
      data = JSON.parse(e.data) as unknown;
    } catch {
      // not JSON: keep the string
    }
    return { event: e.event, data };
  });
}

export interface StreamTranslator {
  push(ev: SseEvent): string;
  end(): string;
}

/**
 * Feeds SSE bytes through SseParser into a translator. Returns the output text of each
 * input event (to check that nothing is held back) and the whole output.
 */
export function runStream(t: StreamTranslator, sseText: string, chunkSize = 0): { perEvent: string[]; output: string } {
  const parser = new SseParser();
  const perEvent: string[] = [];
  const bytes = Buffer.from(sseText, 'utf8');
  const feed = (events: SseEvent[]): void => {
    for (const ev of events) perEvent.push(t.push(ev));
  };
  if (chunkSize <= 0) feed(parser.push(bytes));
  else for (let i = 0; i < bytes.length; i += chunkSize) feed(parser.push(bytes.subarray(i, i + chunkSize)));
  feed(parser.end());
  const tail = t.end();
  return { perEvent, output: perEvent.join('') + tail };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export interface AccumulatedOpenAI {
  role: string | null;
  content: string;
  toolCalls: Array<{ id: string; name: string; arguments: string }>;
  finishReason: string | null;
  usage: unknown;
  done: boolean;
  error: unknown;
}

/** Rebuilds the message an OpenAI client would see from translated chunks (checks chunk shapes on the way). */
export function accumulateOpenAI(events: readonly OutputEvent[]): AccumulatedOpenAI {
  const acc: AccumulatedOpenAI = { role: null, content: '', toolCalls: [], finishReason: null, usage: null, done: false, error: null };
  for (const e of events) {
    assert.equal(acc.done, false, 'nothing after [DONE]');
    assert.equal(e.event, null, 'OpenAI chunks have no event: field');
    if (e.data === '[DONE]') {
      acc.done = true;
      continue;
    }
    assert.ok(isRecord(e.data));
    if ('error' in e.data) {
      acc.error = e.data.error;
      continue;
    }
    assert.equal(e.data.object, 'chat.completion.chunk');
    assert.ok(Array.isArray(e.data.choices));
    if (e.data.usage != null) acc.usage = e.data.usage;
    for (const c of e.data.choices as unknown[]) {
      assert.ok(isRecord(c) && isRecord(c.delta));
      const d = c.delta;
      if (typeof d.role === 'string') acc.role = d.role;
      if (typeof d.content === 'string') acc.content += d.content;
      if (Array.isArray(d.tool_calls)) {
        for (const tc of d.tool_calls as unknown[]) {
          assert.ok(isRecord(tc) && typeof tc.index === 'number');
          const fn = isRecord(tc.function) ? tc.function : {};
          let slot = acc.toolCalls[tc.index];
          if (slot === undefined) {
            assert.equal(tc.index, acc.toolCalls.length, 'tool indexes count up from 0');
            assert.equal(typeof tc.id, 'string', 'first delta of a tool call has its id');
            assert.equal(tc.type, 'function');
            assert.equal(typeof fn.name, 'string', 'first delta of a tool call has its name');
            slot = { id: tc.id as string, name: fn.name as string, arguments: '' };
            acc.toolCalls[tc.index] = slot;
          }
          if (typeof fn.arguments === 'string') slot.arguments += fn.arguments;
        }
      }
      if (c.finish_reason !== null && c.finish_reason !== undefined) {
        assert.equal(acc.finishReason, null, 'one finish_reason');
        acc.finishReason = c.finish_reason as string;
      }
    }
  }
  return acc;
}

export interface AccumulatedAnthropic {
  message: Record<string, unknown> | null;
  blocks: Array<{ type: string; text?: string; id?: string; name?: string; json?: string }>;
  stopReason: unknown;
  deltaUsage: unknown;
  stopped: boolean;
  error: unknown;
}

/**
 * Rebuilds the message an Anthropic client would see and enforces the event grammar:
 * message_start, (content_block_start delta* content_block_stop)*, message_delta, message_stop,
 * block indexes counting up from 0, `event:` equal to data.type.
 */
export function accumulateAnthropic(events: readonly OutputEvent[]): AccumulatedAnthropic {
  const acc: AccumulatedAnthropic = { message: null, blocks: [], stopReason: undefined, deltaUsage: undefined, stopped: false, error: null };
  let open = -1;
  let sawDelta = false;
  for (const e of events) {
    assert.equal(acc.stopped, false, 'nothing after message_stop / error');
    assert.ok(isRecord(e.data), 'Anthropic event data is a JSON object');
    const d = e.data;
    assert.equal(e.event, d.type, 'event: field equals data.type');
    switch (d.type) {
      case 'message_start':
        assert.equal(acc.message, null, 'one message_start');
        assert.ok(isRecord(d.message));
        acc.message = d.message;
        break;
      case 'content_block_start': {
        assert.ok(acc.message !== null && !sawDelta);
        assert.equal(open, -1, 'previous block closed before a new one starts');
        assert.equal(d.index, acc.blocks.length, 'block indexes count up from 0');
        assert.ok(isRecord(d.content_block));
        const cb = d.content_block;
        if (cb.type === 'text') acc.blocks.push({ type: 'text', text: cb.text as string });
        else if (cb.type === 'tool_use') {
          assert.deepEqual(cb.input, {});
          acc.blocks.push({ type: 'tool_use', id: cb.id as string, name: cb.name as string, json: '' });
        } else assert.fail(`unexpected block ${String(cb.type)}`);
        open = d.index as number;
        break;
      }
      case 'content_block_delta': {
        assert.equal(d.index, open, 'delta for the open block');
        const block = acc.blocks[open]!;
        assert.ok(isRecord(d.delta));
        if (d.delta.type === 'text_delta') {
          assert.equal(block.type, 'text');
          block.text += d.delta.text as string;
        } else if (d.delta.type === 'input_json_delta') {
          assert.equal(block.type, 'tool_use');
          block.json += d.delta.partial_json as string;
        } else assert.fail('unexpected delta');
        break;
      }
      case 'content_block_stop':
        assert.equal(d.index, open, 'stop for the open block');
        open = -1;
        break;
      case 'message_delta':
        assert.equal(open, -1, 'blocks closed before message_delta');
        assert.equal(sawDelta, false, 'one message_delta');
        sawDelta = true;
        assert.ok(isRecord(d.delta));
        acc.stopReason = d.delta.stop_reason;
        acc.deltaUsage = d.usage;
        break;
      case 'message_stop':
        assert.ok(sawDelta, 'message_delta before message_stop');
        acc.stopped = true;
        break;
      case 'error':
        acc.error = d.error;
        acc.stopped = true;
        break;
      default:
        assert.fail(`unexpected event ${String(d.type)}`);
    }
  }
  return acc;
}

export interface AccumulatedResponses {
  /** The response object of response.created. */
  created: Record<string, unknown> | null;
  /** Output items as rebuilt from the item events, in output order. */
  items: Array<Record<string, unknown>>;
  /** The response object of the terminal lifecycle event. */
  final: Record<string, unknown> | null;
  /** response.completed / response.incomplete / error, or null when the stream has no end. */
  terminal: string | null;
  error: Record<string, unknown> | null;
}

/**
 * Rebuilds what a Responses client sees and enforces the event grammar: `event:` equal to
 * data.type, sequence_number counting from 0, response.created then response.in_progress,
 * items added at the next output index and closed with output_item.done before the terminal
 * event, deltas only for the open item of the right type, done events repeating the
 * accumulated text, and the terminal response carrying exactly the items that were done.
 */
export function accumulateResponses(events: readonly OutputEvent[]): AccumulatedResponses {
  const acc: AccumulatedResponses = { created: null, items: [], final: null, terminal: null, error: null };
  /** Rebuilt item state: accumulated text per output index, and whether it is done. */
  const text: string[] = [];
  const done: boolean[] = [];
  events.forEach((e, i) => {
    assert.equal(acc.terminal, null, 'nothing after the terminal event');
    assert.ok(isRecord(e.data), 'event data is a JSON object');
    const d = e.data;
    assert.equal(e.event, d.type, 'event: field equals data.type');
    assert.equal(d.sequence_number, i, 'sequence_number counts events from 0');
    if (i === 0) assert.ok(d.type === 'response.created' || d.type === 'error', 'the stream opens with response.created');
    if (i === 1 && d.type !== 'error') assert.equal(d.type, 'response.in_progress');
    const at = typeof d.output_index === 'number' ? d.output_index : -1;
    const item = at >= 0 ? acc.items[at] : undefined;
    const open = (type: string): Record<string, unknown> => {
      assert.ok(item !== undefined, `${String(d.type)}: output ${at} was added`);
      assert.equal(done[at], false, `${String(d.type)}: output ${at} is still open`);
      assert.equal(item.type, type, `${String(d.type)} is for a ${type} item`);
      assert.equal(d.item_id, item.id, `${String(d.type)}: item_id matches`);
      return item;
    };
    switch (d.type) {
      case 'response.created':
      case 'response.in_progress': {
        assert.ok(isRecord(d.response));
        assert.equal(d.response.object, 'response');
        assert.equal(d.response.status, 'in_progress');
        assert.deepEqual(d.response.output, []);
        if (d.type === 'response.created') acc.created = d.response;
        else assert.equal(d.response.id, acc.created?.id, 'one response id');
        break;
      }
      case 'response.output_item.added': {
        assert.equal(at, acc.items.length, 'items are added at the next output index');
        assert.ok(isRecord(d.item) && typeof d.item.id === 'string' && d.item.id !== '');
        const it = d.item;
        if (it.type === 'message') assert.deepEqual([it.status, it.content], ['in_progress', []]);
        else if (it.type === 'function_call') {
          assert.deepEqual([it.status, it.arguments], ['in_progress', '']);
          assert.ok(typeof it.call_id === 'string' && typeof it.name === 'string');
        } else if (it.type === 'reasoning') assert.deepEqual(it.summary, []);
        else assert.fail(`unexpected item type ${String(it.type)}`);
        acc.items.push(structuredClone(it));
        text.push('');
        done.push(false);
        break;
      }
      case 'response.content_part.added':
      case 'response.content_part.done': {
        const it = open('message');
        assert.equal(d.content_index, 0);
        assert.ok(isRecord(d.part) && d.part.type === 'output_text');
        if (d.type === 'response.content_part.added') assert.equal(d.part.text, '');
        else assert.equal(d.part.text, text[at]);
        it.content = [d.part];
        break;
      }
      case 'response.output_text.delta':
        open('message');
        assert.equal(typeof d.delta, 'string');
        text[at] += d.delta as string;
        break;
      case 'response.output_text.done':
        open('message');
        assert.equal(d.text, text[at], 'output_text.done repeats the text');
        break;
      case 'response.function_call_arguments.delta':
        open('function_call');
        text[at] += d.delta as string;
        break;
      case 'response.function_call_arguments.done':
        open('function_call').arguments = d.arguments;
        assert.equal(d.arguments, text[at], 'arguments.done repeats the arguments');
        break;
      case 'response.reasoning_summary_part.added':
      case 'response.reasoning_summary_part.done': {
        const it = open('reasoning');
        assert.equal(d.summary_index, 0);
        assert.ok(isRecord(d.part) && d.part.type === 'summary_text');
        assert.equal(d.part.text, d.type === 'response.reasoning_summary_part.added' ? '' : text[at]);
        it.summary = [d.part];
        break;
      }
      case 'response.reasoning_summary_text.delta':
        open('reasoning');
        text[at] += d.delta as string;
        break;
      case 'response.reasoning_summary_text.done':
        open('reasoning');
        assert.equal(d.text, text[at]);
        break;
      case 'response.output_item.done': {
        assert.ok(item !== undefined && done[at] === false, `output ${at} is open`);
        assert.ok(isRecord(d.item));
        assert.equal(d.item.id, item.id);
        assert.equal(d.item.type, item.type);
        if (item.type === 'function_call') assert.equal(d.item.arguments, text[at]);
        if (item.type === 'message') assert.deepEqual(d.item.content, item.content);
        if (item.type === 'reasoning') assert.deepEqual(d.item.summary, item.summary);
        assert.notEqual(d.item.status, 'in_progress');
        acc.items[at] = structuredClone(d.item);
        done[at] = true;
        break;
      }
      case 'response.completed':
      case 'response.incomplete': {
        assert.ok(isRecord(d.response));
        assert.equal(d.response.id, acc.created?.id, 'one response id');
        assert.equal(d.response.status, d.type === 'response.completed' ? 'completed' : 'incomplete');
        assert.ok(done.every(Boolean), 'every item is done before the response ends');
        assert.deepEqual(d.response.output, acc.items, 'the final response holds the items as they were done');
        assert.ok(isRecord(d.response.usage), 'the final response has usage');
        acc.final = d.response;
        acc.terminal = d.type;
        break;
      }
      case 'error':
        assert.equal(typeof d.message, 'string');
        acc.error = d;
        acc.terminal = 'error';
        break;
      default:
        assert.fail(`unexpected event ${String(d.type)}`);
    }
  });
  return acc;
}
